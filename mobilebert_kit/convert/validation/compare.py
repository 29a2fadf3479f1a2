"""Validation of an exported artifact against its Keras source.

Order of checks (huggingface/optimum's ``validate_model_outputs`` order):
input names, output names (the expected set, and the first output), then the
shape of each output present, then its values. Every problem is collected
before anything is raised; see :mod:`mobilebert_kit.convert.errors` for the
types.

Values are compared where they mean something: token-level outputs
(``sequence_output``, token logits) only at real tokens, because padded
positions depend on the attention-mask constant (an export option) and are
discarded by every consumer. Per output: max and mean absolute error, cosine
(mean and minimum over vectors: token vectors, or one row per example), SNR in
dB (``10 log10(sum ref^2 / sum err^2)``; a one-column output's ref taken about its mean) and, for
logits, argmax agreement (a multi-label output's: each label's side of its cut).

Thresholds depend on the quantization mode: each mode's record
(:data:`mobilebert_kit.convert.quantization.modes.MODES`) holds its defaults and
the measurements they were set from.
"""

from dataclasses import asdict, dataclass, field

import numpy as np

from mobilebert_kit.convert.errors import (
    InputNameError,
    OutputNameError,
    OutputShapeError,
    OutputValueError,
    raise_for_failures,
)
from mobilebert_kit.convert.plan.input_set import INPUT_NAMES
from mobilebert_kit.convert.quantization.modes import MODES, THRESHOLD_KEYS
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.structured import strict_json_values
from mobilebert_kit.utils.terminal import escape


@dataclass(frozen=True)
class Thresholds:
    """Pass/fail limits for one precision (``min_cosine`` bounds an output's mean cosine, ``min_argmax_agreement``
    only logits outputs); ``None`` disables a check."""

    min_cosine: float = None
    min_snr_db: float = None
    min_argmax_agreement: float = None
    max_abs_error: float = None

    def replace(self, **overrides):
        unknown = sorted(set(overrides) - set(THRESHOLD_KEYS))
        if unknown:
            raise ConfigError(f"unknown threshold(s) {', '.join(unknown)}; valid: {', '.join(THRESHOLD_KEYS)}")
        return Thresholds(**{**asdict(self), **overrides})


def thresholds_for(precision, **overrides):
    """Default thresholds of quantization mode ``precision`` (its record's) with ``overrides`` applied."""
    if precision not in MODES:
        raise ConfigError(f"unknown quantization {precision!r}; valid: {', '.join(MODES)}")
    return Thresholds(**MODES[precision].thresholds).replace(**{k: v for k, v in overrides.items() if v is not None})


@dataclass
class OutputMetrics:
    """Agreement of one output with the Keras source."""

    name: str
    shape: list
    max_abs_error: float
    mean_abs_error: float
    cosine: float
    cosine_min: float
    snr_db: float
    argmax_agreement: float = None
    answers: str = "argmax"  # what argmax_agreement counts: "argmax" per row, "label" per label (multi-label cut)

    def row(self):
        argmax = "" if self.argmax_agreement is None else f"  {self.answers} {self.argmax_agreement:.4f}"
        return (f"{self.name:<22} max|err| {self.max_abs_error:.3e}  mean|err| {self.mean_abs_error:.3e}  "
                f"cos {self.cosine:.6f} (min {self.cosine_min:.6f})  SNR {self.snr_db:6.1f} dB{argmax}")


@dataclass
class ValidationReport:
    """Everything validation measured, and what failed."""

    artifact: str
    precision: str
    thresholds: Thresholds
    inputs: str
    outputs: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    drift: list = field(default_factory=list)
    client_tokenization: object = None  # a convert.validation.client_fidelity.ClientFidelity: warns, never fails
    # A convert.validation.arch_validation.ArchComparison (--arch): the emulated run vs x86-64 and Keras; its failures
    # are in ``failures`` too.
    arch: object = None
    # What the file was compared with: the Keras model mbk built from the source, never the source's own framework
    # (its parity with transformers is proven per family by the tests, docs/models.md#supported-checkpoints).
    reference: str = "the Keras model mbk built from the source"

    @property
    def passed(self):
        return not self.failures

    def raise_for_failures(self):
        raise_for_failures(self.artifact, self.failures)

    def to_dict(self):
        """The report as JSON-ready data; an infinite SNR (exact agreement) is the string ``"inf"``."""
        return strict_json_values({
            "artifact": self.artifact, "precision": self.precision, "passed": self.passed,
            "thresholds": asdict(self.thresholds), "inputs": self.inputs, "reference": self.reference,
            "outputs": [asdict(m) for m in self.outputs], "failures": [str(f) for f in self.failures],
            "drift": self.drift,
            "client_tokenization": self.client_tokenization.to_dict() if self.client_tokenization else None,
            "arch": self.arch.to_dict() if self.arch is not None else None,
        })

    def summary_line(self):
        """The failures in one line (what a fallback note quotes)."""
        return "; ".join(str(f) for f in self.failures) or "passed"

    def format_text(self):
        lines = [f"validation of {escape(self.artifact)} ({self.precision}) on {escape(self.inputs)}:"]
        lines += ["  " + m.row() for m in self.outputs]
        if self.drift:
            lines.append("  per-layer drift (hidden state vs Keras, real tokens):")
            lines += [f"    {d['layer']:<22} cos {d['cosine']:.6f}  SNR {d['snr_db']:6.1f} dB  max|err| {d['max_abs_error']:.3e}"
                      for d in self.drift]
        if self.arch is not None:
            lines += self.arch.format_text()
        if self.client_tokenization is not None:
            lines += self.client_tokenization.format_text()
        lines.append("  PASSED" if self.passed else "  FAILED: " + "; ".join(str(f) for f in self.failures))
        if self.outputs:
            lines.append(f"  (compared with {self.reference}; its parity with transformers is tested per family: "
                         "docs/models.md#supported-checkpoints)")
        return "\n".join(lines)


def compare(name, ours, reference, mask=None, logits=False):
    """Metrics of ``ours`` against ``reference`` (float arrays of one shape); with a ``[batch, seq]`` 1/0 ``mask``
    only real tokens count; ``logits`` True adds argmax agreement over the last axis (the sequence for span
    logits), a number (a multi-label cut) the agreement of every value's side of it; ``"scores"`` (a regressor's
    ``[batch, targets]``) compares each target's values over the rows as one vector, as a single score's are."""
    ours = np.asarray(ours, np.float64)
    reference = np.asarray(reference, np.float64)
    if mask is not None:
        keep = np.asarray(mask).astype(bool)
        if ours.ndim == 2:
            # [batch, seq] logits: padded positions are removed from each row's argmax and cosine.
            ours = np.where(keep, ours, -np.inf if logits else 0.0)
            reference = np.where(keep, reference, -np.inf if logits else 0.0)
            vectors_o, vectors_r = np.where(keep, ours, 0.0), np.where(keep, reference, 0.0)
            err = (vectors_o - vectors_r)[keep]
            ref_flat = vectors_r[keep]
        else:
            vectors_o, vectors_r = ours[keep], reference[keep]
            err = (vectors_o - vectors_r).ravel()
            ref_flat = vectors_r.ravel()
    else:
        vectors_o = ours.reshape(ours.shape[0], -1) if ours.ndim > 1 else ours[None]
        vectors_r = reference.reshape(reference.shape[0], -1) if reference.ndim > 1 else reference[None]
        err, ref_flat = (ours - reference).ravel(), reference.ravel()
    width = vectors_o.shape[-1]
    scores = None  # a score output's raw values, where its SNR's signal is their spread about the mean
    if width == 1:
        # One value per row (a regression score): a row's cosine is its sign only, and a score near 0 that int8
        # moved across it read -1 (a dynamic-int8 regressor failed at "score cosine 0.875"); the rows' values
        # are compared as one vector. Its SNR counts as signal the values' spread around the reference's mean
        # only: the offset every row shares tells no text from another, and counted as signal it passed int8's
        # gate with one constant answered for every text (scores in [1, 5]: SNR 7.7 dB, Pearson 0).
        width = vectors_o.size
        if width > 1:
            scores = ref_flat
            ref_flat = ref_flat - np.mean(ref_flat)
    elif logits == "scores" and ours.ndim == 2:
        # Several targets: a row's vector mixes scales, and the offset they share kept a row's cosine near 1
        # whatever the file answered (each target's mean for every text: 0.995, 14.6 dB); each target is one
        # vector, with its SNR's signal again the spread about the reference's mean.
        vectors_o, vectors_r = ours.T, reference.T
        width = vectors_o.shape[-1]
        scores = ref_flat
        ref_flat = (vectors_r - vectors_r.mean(-1, keepdims=True)).ravel()
    cos = _cosine(vectors_o.reshape(-1, width), vectors_r.reshape(-1, width))
    noise = float(np.sum(err ** 2))
    signal = float(np.sum(ref_flat ** 2))
    if scores is not None:
        # Not below -60 dB of the scores themselves: a regressor that all but collapsed to one value has a spread
        # float32 rounding alone reaches, and its exact float file failed at 56.8 dB < 60 (one float32 step).
        signal = max(signal, 1e-6 * float(np.sum(scores ** 2)))
    snr = float("inf") if noise == 0 else (10.0 * np.log10(signal / noise) if signal > 0 else float("-inf"))
    agreement = None
    # Token logits [batch, seq, labels] count real tokens only: a text-in file's padding is zeros, not scores.
    o, r = (vectors_o, vectors_r) if mask is not None and ours.ndim > 2 else (ours, reference)
    if logits is True:
        agreement = float(np.mean(np.argmax(o, -1) == np.argmax(r, -1)))
    elif logits is not False and logits != "scores":
        agreement = float(np.mean((o > logits) == (r > logits)))
    return OutputMetrics(
        name=name, shape=list(np.shape(reference)),
        max_abs_error=float(np.max(np.abs(err))) if err.size else 0.0,
        mean_abs_error=float(np.mean(np.abs(err))) if err.size else 0.0,
        cosine=float(np.mean(cos)), cosine_min=float(np.min(cos)), snr_db=snr, argmax_agreement=agreement,
        answers="argmax" if isinstance(logits, bool) else "label",
    )


def _cosine(a, b):
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    both_zero = (na == 0) & (nb == 0)
    cos = np.sum(a * b, -1) / np.maximum(na * nb, 1e-30)
    return np.where(both_zero, 1.0, cos)


def check_values(metrics, thresholds):
    """The OutputValueErrors of ``metrics`` under ``thresholds`` (empty when within)."""
    t = thresholds
    problems = []
    if t.min_cosine is not None and not metrics.cosine >= t.min_cosine:
        problems.append(f"{metrics.name} cosine {metrics.cosine:.6f} < {t.min_cosine}")
    if t.min_snr_db is not None and not metrics.snr_db >= t.min_snr_db:
        problems.append(f"{metrics.name} SNR {metrics.snr_db:.1f} dB < {t.min_snr_db} dB")
    if t.max_abs_error is not None and not metrics.max_abs_error <= t.max_abs_error:
        problems.append(f"{metrics.name} max abs error {metrics.max_abs_error:.3e} > {t.max_abs_error}")
    if (t.min_argmax_agreement is not None and metrics.argmax_agreement is not None
            and not metrics.argmax_agreement >= t.min_argmax_agreement):
        problems.append(f"{metrics.name} {metrics.answers} agreement {metrics.argmax_agreement:.4f} "
                        f"< {t.min_argmax_agreement}")
    return [OutputValueError(p) for p in problems]


def validate_outputs(artifact, runner, reference_outputs, inputs, expected_outputs, token_outputs, logit_outputs,
                     precision="none", thresholds=None, expected_inputs=INPUT_NAMES):
    """Checks names, shapes and values of ``runner``'s outputs against the Keras source's ``reference_outputs``
    on ``inputs``; returns a :class:`ValidationReport` (``raise_for_failures()`` raises).

    ``token_outputs`` are compared at real tokens only, ``logit_outputs`` (``{name: logits}`` of
    :func:`compare`) also by their answers; ``thresholds``
    default to the ``precision``'s; ``expected_inputs`` are the graph's inputs in order.
    """
    thresholds = thresholds or thresholds_for(precision)
    report = ValidationReport(str(artifact), precision, thresholds, inputs.description)
    names = [s["name"] for s in runner.input_specs]
    if names != list(expected_inputs):
        report.failures.append(InputNameError(f"inputs are {names}, expected {list(expected_inputs)} in this order"))
    missing = [n for n in expected_outputs if n not in runner.output_names]
    extra = [n for n in runner.output_names if n not in expected_outputs]
    if missing:
        report.failures.append(OutputNameError(f"missing output(s) {missing} (artifact has {runner.output_names})"))
    if extra:
        report.failures.append(OutputNameError(f"unexpected output(s) {extra}"))
    if runner.output_names and expected_outputs and runner.output_names[0] != expected_outputs[0]:
        report.failures.append(OutputNameError(f"first output is {runner.output_names[0]!r}, expected {expected_outputs[0]!r}"))
    seq = runner.seq_len
    if seq is not None and seq != inputs.seq_len:
        report.failures.append(OutputShapeError(f"artifact sequence length {seq} != validation inputs' {inputs.seq_len}"))
        return report
    if getattr(runner, "takes_text", False):
        # The tokenizer runs inside the file: it is fed the lines the reference's rows were tokenized from.
        if inputs.texts is None:
            report.failures.append(InputNameError(f"the file takes text ({names[0]}); the validation rows are "
                                                  "arrays, not text: validate on text (.txt or the built-in sentences)"))
            return report
        outputs = runner.run_text(inputs.texts, inputs.seq_len)
    elif names and set(names) - set(INPUT_NAMES):
        return report  # cannot feed it
    else:
        outputs = runner.run(inputs.arrays)
    mask = inputs.arrays["attention_mask"]
    for name in expected_outputs:
        if name not in outputs:
            continue
        ours, ref = np.asarray(outputs[name]), np.asarray(reference_outputs[name])
        if ours.shape != ref.shape:
            report.failures.append(OutputShapeError(f"{name} has shape {list(ours.shape)}, expected {list(ref.shape)}"))
            continue
        metrics = compare(name, ours, ref, mask if name in token_outputs else None,
                          logits=logit_outputs.get(name, False))
        report.outputs.append(metrics)
        report.failures.extend(check_values(metrics, thresholds))
    return report


def drift_report(runner, reference_hidden, inputs, layer_names):
    """Per-layer agreement of a probe artifact's hidden-state outputs with the Keras hidden states.

    Returns a list of ``{"layer", "cosine", "snr_db", "max_abs_error"}`` in layer order,
    so the layer where the error grows is visible.
    """
    outputs = runner.run(inputs.arrays)
    mask = inputs.arrays["attention_mask"]
    rows = []
    for name, ref in zip(layer_names, reference_hidden):
        m = compare(name, outputs[name], ref, mask)
        rows.append({"layer": name, "cosine": m.cosine, "snr_db": m.snr_db, "max_abs_error": m.max_abs_error})
    return rows
