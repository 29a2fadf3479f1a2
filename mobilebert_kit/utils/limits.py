"""Every numeric option and recipe key, with its type and its lower and upper bound, declared once.

The command line (argparse ``type=`` factories :func:`int_option` /
:func:`float_option`) and the recipe reader (:func:`check_number`) use the
same :data:`LIMITS` record, so ``--count 0`` and ``count = 0`` in a recipe are
refused alike, each error naming what the user wrote (the flag or the key).
Floats must be finite: ``--min-time nan`` never stopped the profiler (issue 12),
``nan`` compares false with every bound.

Standard library only: ``mbk profile`` and the recipe reader never import TensorFlow.
"""

import argparse
import math
from dataclasses import dataclass

from mobilebert_kit.errors import ConfigError


@dataclass(frozen=True)
class Limit:
    """The valid values of one numeric setting.

    Args:
        kind: ``int`` or ``float``.
        lo: smallest valid value.
        hi: largest valid value.
        lo_open: ``lo`` itself is invalid (a rate or a time that must be > 0).
    """

    kind: type
    lo: float
    hi: float
    lo_open: bool = False

    def describe(self):
        what, show = ("an integer", lambda v: str(int(v))) if self.kind is int else ("a finite number", lambda v: f"{v:g}")
        low = f"> {show(self.lo)}" if self.lo_open else f">= {show(self.lo)}"
        return f"{what} {low} and <= {show(self.hi)}"


_DAY_S = 86400.0
_MANY = 10**9  # step and row counts: far above any run on one machine, far below what overflows int32/int64 maths

# Upper bounds refuse values no machine can run; the evidence for the tighter ones is in the comments.
LIMITS = {
    # static shapes: 8192 tokens is 16x BERT's 512 positions; larger builds an attention matrix of > 256 MiB per head
    "seq_len": Limit(int, 2, 8192),
    "batch_size": Limit(int, 1, 65536),
    # rows of calibration / validation data (each row is tokenized and run)
    "count": Limit(int, 1, 1_000_000),
    # tf2onnx 1.16 knows opsets up to 18 (tf2onnx.constants.OPSET_TO_IR_VERSION); per-axis Q/DQ needs 13
    "opset": Limit(int, 13, 18),
    "mask_value": Limit(float, -1e9, 0.0),
    "qat_steps": Limit(int, 0, _MANY),
    "qat_learning_rate": Limit(float, 0.0, 10.0, lo_open=True),
    "recover_steps": Limit(int, 0, _MANY),
    # FFN hidden units kept by `mbk substitute --intermediate-size` (BERT-large has 4,096; 65,536 is 16x that)
    "intermediate_size": Limit(int, 1, 65536),
    "learning_rate": Limit(float, 0.0, 10.0, lo_open=True),
    "pd_learning_rate": Limit(float, 0.0, 10.0, lo_open=True),
    "epochs": Limit(int, 1, 100_000),
    "warmup_proportion": Limit(float, 0.0, 1.0),
    "weight_decay": Limit(float, 0.0, 1.0),
    "doc_stride": Limit(int, 1, 8192),
    "max_query_length": Limit(int, 1, 8192),
    "dropout": Limit(float, 0.0, 0.99),
    "seed": Limit(int, 0, 2**32 - 1),  # numpy's legacy seeding and tf.random.set_seed accept 32-bit seeds
    "runs": Limit(int, 1, 1_000_000),
    "warmup": Limit(int, 1, 1_000_000),  # the profiler needs one untimed run (host.py)
    "threads": Limit(int, 1, 1024),
    "inter_op_threads": Limit(int, 1, 1024),
    "trials": Limit(int, 1, 1000),
    "min_time": Limit(float, 0.0, _DAY_S),
    "max_time": Limit(float, 0.0, _DAY_S, lo_open=True),
    "cooldown_timeout": Limit(int, 0, 86400),
    "cooldown_tolerance": Limit(float, 0.0, 100.0),
    "poll": Limit(int, 1, 3600),
    "vocab_size": Limit(int, 2, 10_000_000),
    "flops": Limit(float, 0.0, 1e18, lo_open=True),
    "max_predictions": Limit(int, 1, 8192),
    "masked_lm_prob": Limit(float, 0.0, 1.0, lo_open=True),
    "short_seq_prob": Limit(float, 0.0, 1.0),
    "dupe_factor": Limit(int, 1, 1000),
    "shards": Limit(int, 1, 100_000),
    "chunk_documents": Limit(int, 1, 10_000_000),
    "layer_steps": Limit(int, 1, _MANY),
    "pd_steps": Limit(int, 0, _MANY),
    "lower_layer_lr_multiplier": Limit(float, 0.0, 100.0),
    "clip_norm": Limit(float, 0.0, 1e6, lo_open=True),
    "alpha": Limit(float, 0.0, 1.0),
    "shuffle_buffer": Limit(int, 1, 10_000_000),
    "checkpoint_every": Limit(int, 1, _MANY),
    "keep_checkpoints": Limit(int, 1, 1000),
    "log_every": Limit(int, 1, _MANY),
    # validation thresholds (convert/validation/compare.py THRESHOLD_KEYS)
    "min_cosine": Limit(float, -1.0, 1.0),
    "min_snr_db": Limit(float, -1e12, 1e12),  # finite; a huge bar is a way to make validation fail on purpose
    "min_argmax_agreement": Limit(float, 0.0, 1.0),
    "max_abs_error": Limit(float, 0.0, 1e30),
    # mbk evaluate: rows scored (--limit) and the quantized/float ratio a file must keep (--min-ratio).
    "limit": Limit(int, 1, _MANY),
    "min_ratio": Limit(float, 0.0, 10.0),
    # --quantize auto's budget: a fraction of the float metric (0.5: half the accuracy lost is no budget)
    "max_drop": Limit(float, 0.0, 0.5),
}


def _problem(limit, value):
    """Why ``value`` (already a number) breaks ``limit``, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be {limit.describe()}, got {value!r}"
    if limit.kind is int and not isinstance(value, int):
        return f"must be {limit.describe()}, got {value!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be {limit.describe()}, got {value!r}"
    too_low = value <= limit.lo if limit.lo_open else value < limit.lo
    if too_low or value > limit.hi:
        return f"must be {limit.describe()}, got {value!r}"
    return None


def within(limit, value):
    """Whether ``value`` satisfies ``limit`` (type, finiteness, bounds): for values read from files, whose
    messages name the file's own fix.

    Example:
        >>> within(Limit(int, 0, 10), 3), within(Limit(int, 0, 10), True), within(Limit(float, 0, 1), float("nan"))
        (True, False, False)
    """
    return _problem(limit, value) is None


def check_number(name, value, key=None):
    """Returns ``value`` (an int as float for float settings) if :data:`LIMITS` allows it, else raises ConfigError.

    Args:
        name: what the user wrote, for the message (``--count`` or ``[validation] count``).
        value: the parsed value (from TOML, JSON or Python).
        key: the :data:`LIMITS` entry (default: ``name`` without dashes and brackets).

    Example:
        >>> check_number("[calibration] count", 200, "count")
        200
        >>> check_number("--min-time", float("nan"), "min_time")
        Traceback (most recent call last):
        ...
        mobilebert_kit.errors.ConfigError: --min-time must be a finite number >= 0 and <= 86400, got nan; pass a value in range
    """
    limit = LIMITS[key or name.lstrip("-").replace("-", "_")]
    if limit.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    problem = _problem(limit, value)
    if problem:
        raise ConfigError(f"{name} {problem}; pass a value in range")
    return value


def _parse(limit, text):
    text = str(text).strip()
    if limit.kind is int:
        try:
            return int(text, 10)
        except ValueError:
            return text
    try:
        return float(text)
    except ValueError:
        return text


def number_option(key, limit=None):
    """An argparse ``type=`` for the :data:`LIMITS` entry ``key``; argparse names the flag in its error.

    Args:
        key (str): the :data:`LIMITS` entry (tests enumerate every numeric flag by it).
        limit (Limit | None): bounds narrower than the entry's, where one consumer needs them
            (``pretraining-data --seq-len`` >= 5); default the entry's own.

    Example:
        >>> parser.add_argument("--count", type=number_option("count"), default=16)  # doctest: +SKIP
    """
    limit = LIMITS[key] if limit is None else limit

    def parse(text):
        value = _parse(limit, text)
        problem = _problem(limit, value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = "integer" if limit.kind is int else "number"
    parse.limit_key = key  # lets tests enumerate every numeric flag of every command
    return parse
