"""Exact NoNorm scale migration: move NoNorm's per-channel scale and shift into the neighbouring dense layers.

NoNorm is ``y = gamma * z + beta`` per channel (layers/no_norm.py), a linear
map, so the same function can be computed with the values inside a block
stored in other per-channel units. This is the SmoothQuant idea, and here it
involves no approximation at all: the float outputs are unchanged up to
rounding (tests: within 1e-5).

**Segments.** A *segment* is a set of tensors that live in the same per-channel
units because a residual add joins them: the output ``y`` of one NoNorm (its
*writer*), the dense outputs added to ``y`` (*adders*), and the sum that the
next NoNorm (its *closer*) reads. Dense layers that read ``y`` are its
*readers*. A segment may be stored as ``y' = (y - d) / c`` for any per-channel
``d`` and any ``c`` with no zero entries, provided that:

- the writer NoNorm gets ``gamma' = gamma * c_in / c`` and ``beta' = (gamma * d_in + beta - d) / c``,
  where ``(c_in, d_in)`` are the units of the segment it reads;
- the closer NoNorm reads ``(c, d)`` units and gets the same rule;
- each reader's kernel rows are multiplied by ``c`` and ``kernel^T d`` is added to its bias;
- each adder's kernel columns and bias are divided by ``c``. The shift ``d`` stays
  in the sum because ``y'`` already lacks it: ``z' = A(h) / c + y' = (z - d) / c``.

**Which segments can move (the layer structure of layers/transformer_block.py).**
A residual add *after* a NoNorm means its scale cannot simply be folded into
one consumer: it is also carried on the residual path, so the whole segment
(the adder and the closing NoNorm) has to change with it. The rule above does
exactly that. Segments are:

- MobileBERT block (bottleneck): ``LI`` (written by ``bottleneck_input/norm``,
  added to by ``attention_output/dense``, closed by ``attention_output/norm``;
  also read by query/key/value with ``use_bottleneck_attention``). ``KQ``
  (``bottleneck_attention/norm``, read by query and key, no residual, no
  closer). ``H0 ... H_{F-1}`` (``attention_output/norm`` then ``ffn_i/norm``
  write them, each read by ``ffn_i/intermediate``, added to by ``ffn_i/output``
  and closed by ``ffn_i/norm``). ``H_F`` (written by the last ``ffn/norm``,
  read by ``output_bottleneck/dense``, no closer).
- BERT block: ``H0`` (written by ``attention_output/norm``, then read, added to
  and closed by ``ffn_0``).
- *Fixed* (kept in their units, ``c = 1, d = 0``): the block input/output
  stream ``x`` (written by ``embeddings/norm`` and ``output_bottleneck/norm``,
  or ``ffn_{F-1}/norm`` in BERT). It is the encoder's output, its hidden states
  (distillation reads them) and what heads read, so rescaling it would change
  the model's answers. The sums that feed only a ``bottleneck_*`` NoNorm are
  also fixed, so each block's ``x`` is unchanged.

So within a block every NoNorm except the one that writes ``x`` can become the
identity (``scale="unit"``: ``c = gamma * c_in``, ``d`` the carried shift). The
block's product of scales and its shifts then collect in the readers' kernel
rows and in the block's last NoNorm.

**Which ``c`` helps int8** (benchmarks/scale_migration_int8.py, tiny models,
full-int8 TFLite, sequence_output SNR before -> after). Four things are
quantized with one scale across a segment's channels: its activations
(per tensor), the readers' kernel rows (weights are per *output* channel, so a
row scaled by ``c`` widens every channel's range), and the two NoNorms'
constant vectors (int8 with one scale in the exported file, checked on a
tiny-mobilebert full-int8 export). Adders' columns are free.

- ``unit`` (no data) helps when the NoNorm scales are mild: 19.0 -> 19.8 dB
  (tiny-mobilebert), 10.0 -> 12.6 dB (substituted tiny-bert with 2 outlier
  channels x20 per NoNorm). On tiny-mobilebert with outliers it multiplies them
  into reader rows (52x the median row) and drops to 7.3 dB from 16.0.
- ``smoothquant`` (data, ``r^0.5 / w^0.5``) flattens activations but moved a
  160x range into a BERT block's last NoNorm: 10.0 -> 1.0 dB.
- ``balance`` (data, a geometric mean of all four pulls in which the
  activations count ``ACTIVATION_PULL`` times) was no worse than ``none`` in
  any of the four cases: 19.0 -> 19.8, 16.0 -> 21.2, 28.0 -> 28.5, 10.0 -> 13.5 dB.
  On the substituted all-MiniLM-L6-v2 (600 recovery steps) it is what lets the
  all-int8 file pass validation: mean sentence-embedding cosine to the original
  0.852 with the writer's ranges alone and equal pulls, 0.926 now (float: 0.955;
  benchmarks/nonorm_int8.py).

A channel whose ``c`` would be zero, not finite or beyond 1e6 keeps ``c = 1``.

Models with LayerNorm are refused (LayerNorm divides by a per-token
statistic, so no scale can move through it), and so are attention types other
than ``self_attention`` and grouped feed-forward layers, whose readers are not
plain dense kernels.
"""

import numpy as np

from mobilebert_kit.convert.rebuild import encoder_of, rebuild, weight_arrays
from mobilebert_kit.convert.substitution import recorded_batches
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.layers.no_norm import NoNorm



def _block_segments(config):
    """``[(writer, readers, adders, closer)]`` of one block's movable segments, in data-flow order.

    Paths are relative to the block (``ffn_0/norm``); readers and adders are dense
    layers, writer and closer NoNorms (closer None when no residual add follows).
    """
    ffns = [f"ffn_{i}" for i in range(config["num_feedforward_networks"])]
    qkv = ["attention/query", "attention/key", "attention/value"]
    segments = []
    if config["use_bottleneck"]:
        shared_qk = config["key_query_shared_bottleneck"] and not config["use_bottleneck_attention"]
        segments.append(("bottleneck_input/norm", qkv if config["use_bottleneck_attention"] else [],
                         ["attention_output/dense"], "attention_output/norm"))
        if shared_qk:
            segments.append(("bottleneck_attention/norm", qkv[:2], [], None))
    writer = "attention_output/norm"
    for i, ffn in enumerate(ffns):
        last = i == len(ffns) - 1
        if last and not config["use_bottleneck"]:
            # BERT: the last FFN's norm writes the block output x, which is fixed.
            segments.append((writer, [f"{ffn}/intermediate"], [f"{ffn}/output"], f"{ffn}/norm"))
            break
        segments.append((writer, [f"{ffn}/intermediate"], [f"{ffn}/output"], f"{ffn}/norm"))
        writer = f"{ffn}/norm"
    if config["use_bottleneck"]:
        segments.append((writer, ["output_bottleneck/dense"], [], None))
    return segments


def unmigratable(config):
    """Why an encoder config's NoNorm scales cannot move (one line), or None when they can.

    Example:
        >>> unmigratable({"normalization_type": "layer_norm"})
        'the model uses layer_norm, which no scale can move through; run `mbk substitute --norm no_norm` first'
    """
    if config["normalization_type"] != "no_norm":
        return (f"the model uses {config['normalization_type']}, which no scale can move through; "
                "run `mbk substitute --norm no_norm` first")
    if config["attention_type"] != "self_attention" or config["num_groups"] != 1:
        return (f"scale migration supports self_attention blocks with plain dense FFNs, not "
                f"attention_type={config['attention_type']} num_groups={config['num_groups']}")
    return None


def _check_migratable(config):
    reason = unmigratable(config)
    if reason:
        raise ConfigError(reason)


def _unit_scale(gamma, c_in, spread, weight, closer_gamma):
    """The writer's whole scale leaves it: ``gamma' = gamma * c_in / c = 1``."""
    return gamma * c_in


def _smoothquant_scale(gamma, c_in, spread, weight, closer_gamma, alpha=0.5):
    """SmoothQuant's ``r^alpha / w^(1 - alpha)`` (Xiao et al., 2023, Eq. 4) per channel of the segment."""
    if weight is None:
        return spread
    return (spread + 1e-6) ** alpha / np.maximum(weight, 1e-12) ** (1.0 - alpha)


def _centred_log(values):
    logs = np.log(np.maximum(np.abs(values), 1e-12))
    return logs - np.median(logs)


# How many times the activations' pull counts in ``balance``, against once for each constant or kernel pull.
# Activations are the only per-tensor int8 values of a segment with no per-channel escape, and three of them
# share its units. On the substituted MiniLM (600 recovery steps, all-int8 TFLite, 300 held-out sentences,
# mean sentence-embedding cosine to the original): weight 1 0.875, 3 0.920, 8 0.926
# (benchmarks/nonorm_int8.py; before the adders' outputs were counted: 0.852).
ACTIVATION_PULL = 8.0


def _balance_scale(gamma, c_in, spread, weight, closer_gamma):
    """A weighted geometric mean of what keeps each per-tensor or per-row int8 range flat.

    Four things are quantized with one scale across the segment's channels and
    each pulls ``c`` its own way: the stored activations want ``c ~ r`` (their
    spread: the writer's output, the adders' outputs and the sum), the readers'
    kernel rows (per output channel, not per row) want ``c ~ 1 / w``, the writer
    NoNorm's constant ``gamma * c_in / c`` wants ``c ~ gamma * c_in``, the
    closer's ``gamma_c * c`` wants ``c ~ 1 / gamma_c``. The activations count
    ``ACTIVATION_PULL`` times. Adders' columns are free (per-output-channel
    weights). SmoothQuant's rule alone (``_smoothquant_scale``) moved a 160x
    range into the closer NoNorm of a BERT block and cut full-int8 SNR from 10
    to 1 dB (benchmarks/scale_migration_int8.py).
    """
    pulls = [ACTIVATION_PULL * _centred_log(spread), _centred_log(gamma * c_in)]
    count = ACTIVATION_PULL + 1
    if weight is not None:
        pulls.append(-_centred_log(weight))
        count += 1
    if closer_gamma is not None:
        pulls.append(-_centred_log(closer_gamma))
        count += 1
    return np.exp(np.sum(pulls, axis=0) / count)


_POLICIES = {"unit": _unit_scale, "balance": _balance_scale, "smoothquant": _smoothquant_scale}
# What `mbk substitute` (and every other caller of prepare_source: export --norm, recipes, the pipeline)
# applies after recovery, and the choices of its --scale-migration flag ("none": leave the scales).
MIGRATION_POLICIES = (*_POLICIES, "none")
# Policies that read calibration data.
_NEEDS_DATA = ("balance", "smoothquant")


def _safe(scale):
    scale = np.asarray(scale, np.float64)
    ok = np.isfinite(scale) & (np.abs(scale) > 1e-6) & (np.abs(scale) < 1e6)
    return np.where(ok, scale, 1.0)


def migrate_nonorm_scales(model, scale="unit", inputs=None):
    """Returns a copy of ``model`` with NoNorm scales and shifts moved into dense layers; outputs unchanged.

    Args:
        model: an Encoder or task model with ``normalization_type="no_norm"``
            (for example the output of ``substitute(..., norm="no_norm")``); not modified.
        scale: ``"unit"`` (no data: every movable NoNorm becomes the identity),
            ``"balance"`` (data: activation, kernel-row and NoNorm ranges balanced) or
            ``"smoothquant"`` (data: SmoothQuant's alpha 0.5 rule alone). See the module doc.
        inputs: an InputSet (or ``{name: int array}``) of calibration rows for the data policies.

    Returns:
        ``(new model, report)``; the report maps each moved segment's writer path to
        ``{"max_scale", "min_scale"}`` of its ``|c|``.

    Raises:
        ConfigError: a LayerNorm model, an unsupported block type, an unknown policy,
            or a data policy without inputs.

    Example:
        >>> migrated, report = migrate_nonorm_scales(mbk.build("tiny-mobilebert"))  # doctest: +SKIP
        >>> sorted(report)[0]  # doctest: +SKIP
        'transformer_layer_0/attention_output/norm'
    """
    if scale not in _POLICIES:
        raise ConfigError(f"unknown scale policy {scale!r}; choose one of {', '.join(_POLICIES)}")
    if scale in _NEEDS_DATA and inputs is None:
        raise ConfigError(f"scale={scale!r} needs calibration inputs; pass inputs=InputSet or use scale='unit'")
    encoder = encoder_of(model)
    config = encoder.config
    _check_migratable(config)
    prefix = "" if encoder is model else f"{encoder.name}/"
    original = weight_arrays(model)
    # Computed in float64 and stored in each weight's own dtype, so a float64 model stays exact to 1e-12.
    arrays = {k: v.astype(np.float64) for k, v in original.items()}
    ranges = _segment_ranges(encoder, config, inputs) if scale in _NEEDS_DATA else {}
    report = {}
    for layer in range(config["num_layers"]):
        block = f"{prefix}transformer_layer_{layer}/"
        units = {}  # NoNorm path -> (c, d) of the segment it writes; absent: fixed (1, 0)
        in_units = {}  # NoNorm path -> (c, d) of the segment it reads
        for writer, readers, adders, closer in _block_segments(config):
            gamma = arrays[f"{block}{writer}/gamma"]
            beta = arrays[f"{block}{writer}/beta"]
            c_in, d_in = in_units.get(writer, (np.ones_like(gamma), np.zeros_like(gamma)))
            d = gamma * d_in + beta  # the whole shift leaves the segment: the writer's beta becomes 0
            observed = ranges.get(f"transformer_layer_{layer}/{writer}")
            spread = None if observed is None else np.maximum(
                np.maximum(np.abs(observed[0] - d), np.abs(observed[1] - d)), observed[2])
            weights = _reader_adder_ranges(arrays, block, readers, adders)
            closer_gamma = arrays[f"{block}{closer}/gamma"] if closer is not None else None
            c = _safe(_POLICIES[scale](gamma, c_in, spread, weights, closer_gamma))
            units[writer] = (c, d)
            if closer is not None:
                in_units[closer] = (c, d)
            for reader in readers:
                kernel, bias = f"{block}{reader}/kernel", f"{block}{reader}/bias"
                arrays[bias] = arrays[bias] + d @ arrays[kernel]
                arrays[kernel] = arrays[kernel] * c[:, None]
            for adder in adders:
                arrays[f"{block}{adder}/kernel"] = arrays[f"{block}{adder}/kernel"] / c[None, :]
                arrays[f"{block}{adder}/bias"] = arrays[f"{block}{adder}/bias"] / c
            report[f"{block}{writer}"[len(prefix):]] = {"max_scale": float(np.abs(c).max()),
                                                         "min_scale": float(np.abs(c).min())}
        for norm in set(units) | set(in_units):
            gamma, beta = arrays[f"{block}{norm}/gamma"], arrays[f"{block}{norm}/beta"]
            c_in, d_in = in_units.get(norm, (1.0, 0.0))
            c_out, d_out = units.get(norm, (1.0, 0.0))
            arrays[f"{block}{norm}/gamma"] = gamma * c_in / c_out
            arrays[f"{block}{norm}/beta"] = (gamma * d_in + beta - d_out) / c_out
    new = rebuild(model, arrays={k: v.astype(original[k].dtype) for k, v in arrays.items()})
    return new, report


def _reader_adder_ranges(arrays, block, readers, adders):
    """Per input channel, the largest |weight| of the segment's readers (rows) and adders (columns)."""
    parts = [np.abs(arrays[f"{block}{r}/kernel"]).max(axis=1) for r in readers]
    parts += [np.abs(arrays[f"{block}{a}/kernel"]).max(axis=0) for a in adders]
    if not parts:
        return None
    return np.max(parts, axis=0)


def _segment_ranges(encoder, config, inputs):
    """Per movable segment, the per-channel ranges of the three tensors stored in its units, real tokens.

    Returns ``{transformer_layer_i/writer: (low, high, added)}``: ``low``/``high``
    bound both the writer's output ``y`` and the sum ``z`` its closer reads, and
    ``added`` is the largest ``|z - y|``, the adders' output. All three are int8
    tensors of their own in a full-int8 file, each with one scale, so ``c`` has
    to flatten all three. On the substituted MiniLM the adder output of every
    FFN segment carries the outliers (channel spread 17-83x against 4-6x for
    ``y``; per-tensor int8 SNR 18-22 dB against 30 dB for ``y``), which the
    writer's output alone never shows.
    """
    arrays = {k: np.asarray(v) for k, v in getattr(inputs, "arrays", inputs).items()}

    def sublayer(block, path):
        for part in path.split("/"):
            block = getattr(block, "ffns")[int(part[4:])] if part.startswith("ffn_") else getattr(block, part)
        return block

    segments = {}  # writer path -> (writer layer, closer layer or None)
    for index, block in enumerate(encoder.blocks):
        for writer, _, _, closer in _block_segments(config):
            segments[f"transformer_layer_{index}/{writer}"] = (
                sublayer(block, writer), None if closer is None else sublayer(block, closer))
    # A NoNorm that closes one segment and writes the next is listed twice; recording_calls keys by layer.
    layers = [layer for pair in segments.values() for layer in pair if layer is not None]
    low = {path: np.inf for path in segments}
    high = {path: -np.inf for path in segments}
    added = {path: 0.0 for path in segments}
    for records, keep in recorded_batches(encoder, NoNorm, layers, arrays):
        if not keep.any():
            continue
        for path, (writer, closer) in segments.items():
            (_, y), = records[id(writer)]
            y = y[keep].astype(np.float64)
            values = [y]
            if closer is not None:
                (z, _), = records[id(closer)]
                z = z[keep].astype(np.float64)
                values.append(z)
                added[path] = np.maximum(added[path], np.abs(z - y).max(0))
            low[path] = np.minimum(low[path], np.min([v.min(0) for v in values], axis=0))
            high[path] = np.maximum(high[path], np.max([v.max(0) for v in values], axis=0))
    return {path: (low[path], high[path], added[path]) for path in segments}
