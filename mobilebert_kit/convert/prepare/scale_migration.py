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
- *Fixed* under ``unit`` (kept in their units, ``c = 1, d = 0``): the block
  input/output stream ``x`` (written by ``embeddings/norm`` and
  ``output_bottleneck/norm``, or ``ffn_{F-1}/norm`` in BERT). The last block's
  ``x`` is the encoder's output and what heads read, so it is fixed under every
  policy. The sums that feed only a ``bottleneck_*`` NoNorm are also fixed, so
  each block's ``x`` is unchanged.

So within a block every NoNorm except the one that writes ``x`` can become the
identity (``scale="unit"``: ``c = gamma * c_in``, ``d`` the carried shift). The
block's product of scales and its shifts then collect in the readers' kernel
rows and in the block's last NoNorm. ``unit`` is ``mbk export --fold-nonorm``,
whose drift probe compares the file's hidden states with the unfolded model's,
so it moves nothing outside a block.

**With data** (``balance``, ``smoothquant``), three more segments move, each
exactly (issue 15 item 3; measured below):

- the *embedding sum* (``embeddings``): the tables' columns are divided by
  ``c`` and ``embeddings/norm`` reads ``c`` units. Only without a projection
  or trigram input between the tables and the NoNorm.
- in the BERT layout, the *stream into each block* but the last block's
  output (key: its writer, ``embeddings/norm`` or the previous block's last
  ``ffn/norm``): read by query/key/value, added to by ``attention_output/dense``,
  closed by ``attention_output/norm``. The encoder's inner hidden states are
  then stored in other per-channel units (``sequence_output`` and every head's
  input are not). Not in the MobileBERT layout, whose stream also feeds the
  bottlenecks.
- each ReLU FFN's *hidden units* (``.../intermediate``): ``relu(x W / c) * c =
  relu(x W)`` for ``c > 0`` (:func:`_migrate_relu_ffns`). Not for GELU.

**Which ``c`` helps int8** (benchmarks/experiments/scale_migration_int8.py, tiny models,
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
  On the substituted all-MiniLM-L6-v2 it is what lets the all-int8 file pass
  validation (docs/export.md, "Scale migration after recovery"; benchmarks/nonorm_int8.py).

A channel whose ``c`` would be zero, not finite or beyond 1e6 keeps ``c = 1``.

**The stream between MobileBERT blocks** (``stream=True``, ``unit`` only; ``mbk export --fold-nonorm`` of a
``.tflite``; docs/export.md says what it saves). The stream is a segment like the others: written by the
previous block's ``output_bottleneck/norm`` (the first by ``embeddings/norm``), read by the block's input dense
layers (:func:`_stream_readers`), added to by ``output_bottleneck/dense`` and closed by the block's
``output_bottleneck/norm``. With ``c = gamma * c_in`` every writer becomes the identity, so the stream is carried
in the units of the product of all earlier stream gammas; the encoder's output stays fixed, so the last NoNorm
takes the whole product. Where that product would spread the channels' units more than ``STREAM_MAX_SPREAD``
apart, the block's NoNorm keeps its gamma (``c = c_in``) and only its shift moves. Inner hidden states are then
stored in other units, which is why the drift probe (per-layer hidden states) folds without it.

Models with LayerNorm are refused (LayerNorm divides by a per-token
statistic, so no scale can move through it), and so are attention types other
than ``self_attention`` and grouped feed-forward layers, whose readers are not
plain dense kernels.
"""

from typing import NamedTuple

import numpy as np

from mobilebert_kit.backend import keras
from mobilebert_kit.convert.prepare.rebuild import encoder_of, rebuild, weight_arrays
from mobilebert_kit.convert.prepare.substitution import recorded_batches
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
    for ffn in ffns:
        segments.append((writer, [f"{ffn}/intermediate"], [f"{ffn}/output"], f"{ffn}/norm"))
        writer = f"{ffn}/norm"  # in BERT the last one writes the block output x, which is fixed: no segment
    if config["use_bottleneck"]:
        segments.append((writer, ["output_bottleneck/dense"], [], None))
    return segments


def unmigratable(config):
    """Why an encoder config's NoNorm scales cannot move (one line), or None when they can."""
    if config["normalization_type"] != "no_norm":
        return (f"the model uses {config['normalization_type']}, which no scale can move through; "
                "run `mbk substitute --norm no_norm` first")
    if config["attention_type"] != "self_attention" or config["num_groups"] != 1:
        return (f"scale migration supports self_attention blocks with plain dense FFNs, not "
                f"attention_type={config['attention_type']} num_groups={config['num_groups']}")
    return None


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
    """A weighted geometric mean of the four pulls on ``c`` (module doc, "Which ``c`` helps int8"): activations
    ``c ~ r`` (counted ``ACTIVATION_PULL`` times), reader rows ``c ~ 1 / w``, the writer's constant
    ``c ~ gamma * c_in``, the closer's ``c ~ 1 / gamma_c``."""
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


# The most that the per-channel units of the MobileBERT residual stream may differ from one another
# (``max |c| / min |c|``) when ``stream`` moves it: the stream is one per-tensor int8 activation, and each block's
# ``c`` is the product of every earlier stream NoNorm's gamma, so trained gammas could compound to ranges one int8
# scale cannot hold. A block whose product would exceed it keeps its own NoNorm (its MUL) and passes the units on.
STREAM_MAX_SPREAD = 4.0


def _spread(scale):
    magnitude = np.abs(np.asarray(scale, np.float64))
    return float(magnitude.max() / max(magnitude.min(), 1e-300))


def _safe(scale):
    scale = np.asarray(scale, np.float64)
    ok = np.isfinite(scale) & (np.abs(scale) > 1e-6) & (np.abs(scale) < 1e6)
    return np.where(ok, scale, 1.0)


def migrate_nonorm_scales(model, scale="unit", inputs=None, stream=False):
    """Returns a copy of ``model`` with NoNorm scales and shifts moved into dense layers; outputs unchanged.

    Args:
        model: an Encoder or task model with ``normalization_type="no_norm"``
            (for example the output of ``substitute(..., norm="no_norm")``); not modified.
        scale: ``"unit"`` (no data), ``"balance"`` or ``"smoothquant"`` (data; module doc, "With data").
        inputs: an InputSet (or ``{name: int array}``) of calibration rows for the data policies.
        stream: ``"unit"`` in the MobileBERT layout only: also move the residual stream between blocks
            (module doc, "The stream between MobileBERT blocks"); the encoder's output stays fixed.

    Returns:
        ``(new model, report)``; the report maps each moved segment (its writer's path; ``embeddings``;
        an FFN's ``.../intermediate``) to ``{"max_scale", "min_scale"}`` of its ``|c|``.

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
    reason = unmigratable(config)
    if reason:
        raise ConfigError(reason)
    prefix = "" if encoder is model else f"{encoder.name}/"
    original = weight_arrays(model)
    # Computed in float64 and stored in each weight's own dtype, so a float64 model stays exact to 1e-12.
    arrays = {k: v.astype(np.float64) for k, v in original.items()}
    with_data = scale in _NEEDS_DATA
    segments = _model_segments(config, {k[len(prefix):] for k in arrays}, outer=with_data,
                               stream=stream and scale == "unit")
    ranges = _segment_ranges(encoder, segments, inputs) if with_data else {}
    report = {}
    units = {}  # NoNorm path -> (c, d) of the segment it writes; absent: fixed (1, 0)
    in_units = {}  # NoNorm path -> (c, d) of the segment it reads
    for segment in segments:
        writer, readers, adders, closer = segment.writer, segment.readers, segment.adders, segment.closer
        closer_gamma = arrays[f"{prefix}{closer}/gamma"] if closer is not None else None
        if writer is None:  # the embedding sum: tables are added, no NoNorm writes it, nothing to shift
            gamma, c_in, d = np.ones_like(closer_gamma), np.ones_like(closer_gamma), np.zeros_like(closer_gamma)
        else:
            gamma, beta = arrays[f"{prefix}{writer}/gamma"], arrays[f"{prefix}{writer}/beta"]
            c_in, d_in = in_units.get(writer, (np.ones_like(gamma), np.zeros_like(gamma)))
            d = gamma * d_in + beta  # the whole shift leaves the segment: the writer's beta becomes 0
        observed = ranges.get(segment.key)
        spread = None if observed is None else np.maximum(
            np.maximum(np.abs(observed[0] - d), np.abs(observed[1] - d)), observed[2])
        weights = _reader_adder_ranges(arrays, prefix, readers, () if segment.tables else adders)
        c = _safe(_POLICIES[scale](gamma, c_in, spread, weights, closer_gamma))
        if segment.stream and _spread(c) > STREAM_MAX_SPREAD:
            c = np.broadcast_to(np.asarray(c_in, np.float64), np.shape(gamma))  # the writer keeps its own gamma
        if writer is not None:
            units[writer] = (c, d)
        if closer is not None:
            in_units[closer] = (c, d)
        for reader in readers:
            kernel, bias = f"{prefix}{reader}/kernel", f"{prefix}{reader}/bias"
            arrays[bias] = arrays[bias] + d @ arrays[kernel]
            arrays[kernel] = arrays[kernel] * c[:, None]
        for adder in adders:
            if segment.tables:
                arrays[f"{prefix}{adder}"] = arrays[f"{prefix}{adder}"] / c[None, :]
                continue
            arrays[f"{prefix}{adder}/kernel"] = arrays[f"{prefix}{adder}/kernel"] / c[None, :]
            arrays[f"{prefix}{adder}/bias"] = arrays[f"{prefix}{adder}/bias"] / c
        report[segment.key] = {"max_scale": float(np.abs(c).max()), "min_scale": float(np.abs(c).min())}
    for norm in set(units) | set(in_units):
        gamma, beta = arrays[f"{prefix}{norm}/gamma"], arrays[f"{prefix}{norm}/beta"]
        c_in, d_in = in_units.get(norm, (1.0, 0.0))
        c_out, d_out = units.get(norm, (1.0, 0.0))
        arrays[f"{prefix}{norm}/gamma"] = gamma * c_in / c_out
        arrays[f"{prefix}{norm}/beta"] = (gamma * d_in + beta - d_out) / c_out
    if with_data and config["hidden_act"] == "relu" and config["num_groups"] == 1:
        report.update(_migrate_relu_ffns(encoder, config, arrays, prefix, inputs))
    new = rebuild(model, arrays={k: v.astype(original[k].dtype) for k, v in arrays.items()})
    return new, report


# How many times a ReLU unit may be enlarged (``c >= 1 / RELU_MAX_GROWTH``); shrinking is not bounded.
RELU_MAX_GROWTH = 8.0


def _migrate_relu_ffns(encoder, config, arrays, prefix, inputs):
    """Scales each ReLU FFN's hidden units: ``relu(x W / c) * c = relu(x W)`` for ``c > 0``, so dividing the
    intermediate kernel's columns and bias by ``c`` and multiplying the output kernel's rows by ``c`` is exact.

    The hidden units are one per-tensor int8 activation in a full-int8 file, and on the substituted MiniLM a
    single unit reaches 27 where the next reaches 6 (17x the median). ``c`` balances that activation
    (``ACTIVATION_PULL`` times) against the output kernel's rows, whose per-output-channel weight scales
    see every row; the intermediate's columns are per output channel, so they are free.
    Returns the report rows (``.../intermediate`` paths).
    """
    paths = [f"transformer_layer_{b}/ffn_{i}/intermediate" for b in range(config["num_layers"])
             for i in range(config["num_feedforward_networks"])]
    spreads = _dense_output_spreads(encoder, paths, inputs)
    report = {}
    for path in paths:
        output = path[: -len("intermediate")] + "output"
        rows = np.abs(arrays[f"{prefix}{output}/kernel"]).max(axis=1)
        pulls = ACTIVATION_PULL * _centred_log(spreads[path]) - _centred_log(rows)
        # Units that never fire keep c = 1 (no range to balance). A unit may be enlarged at most
        # RELU_MAX_GROWTH times: one that fired weakly on these rows can fire fully on the export's calibration
        # text, and then sets the whole tensor's range (on MiniLM, c went down to 0.005 unbounded).
        c = np.maximum(_safe(np.exp(pulls / (ACTIVATION_PULL + 1))), 1 / RELU_MAX_GROWTH)
        c = np.where(spreads[path] > 0, c, 1.0)
        arrays[f"{prefix}{path}/kernel"] = arrays[f"{prefix}{path}/kernel"] / c[None, :]
        arrays[f"{prefix}{path}/bias"] = arrays[f"{prefix}{path}/bias"] / c
        arrays[f"{prefix}{output}/kernel"] = arrays[f"{prefix}{output}/kernel"] * c[:, None]
        report[path] = {"max_scale": float(c.max()), "min_scale": float(c.min())}
    return report


def _reader_adder_ranges(arrays, prefix, readers, adders):
    """Per input channel, the largest |weight| of the segment's readers (rows) and adders (columns)."""
    parts = [np.abs(arrays[f"{prefix}{r}/kernel"]).max(axis=1) for r in readers]
    parts += [np.abs(arrays[f"{prefix}{a}/kernel"]).max(axis=0) for a in adders]
    if not parts:
        return None
    return np.max(parts, axis=0)


class Segment(NamedTuple):
    """Tensors stored in one per-channel unit (module doc). Paths are relative to the encoder.

    ``writer`` is None for the embedding sum, whose ``adders`` are then the embedding tables
    (``tables``: their columns are divided by ``c``; they are per-tensor int8 constants, so not free).
    ``key`` names the segment in the report and the ranges.
    """

    key: str
    writer: str
    readers: tuple
    adders: tuple
    closer: str
    tables: bool = False
    stream: bool = False


def _model_segments(config, names, outer, stream=False):
    """Every movable segment of the encoder in data-flow order (each writer's input units are known first).

    ``outer`` adds the segments that only a data policy moves (module doc, "With data"): the embedding sum
    and, in the BERT layout, the stream into each block. ``stream`` adds, in the MobileBERT layout, the stream
    into each block but the encoder's output (module doc). ``names`` are the encoder's weight paths.
    """
    segments = []
    plain_embeddings = not config["trigram_input"] and config["embedding_size"] == config["hidden_size"]
    if outer and plain_embeddings:
        tables = tuple(f"embeddings/{t}" for t in ("word_embeddings", "position_embeddings", "token_type_embeddings")
                       if f"embeddings/{t}" in names)
        segments.append(Segment("embeddings", None, (), tables, "embeddings/norm", tables=True))
    ffns = config["num_feedforward_networks"]
    for layer in range(config["num_layers"]):
        block = f"transformer_layer_{layer}/"
        if outer and not config["use_bottleneck"] and (layer or plain_embeddings):
            # The stream x into this block: written by the previous block's last NoNorm (or the embeddings'),
            # read by query/key/value, added to by the attention output, closed by attention_output/norm.
            writer = f"transformer_layer_{layer - 1}/ffn_{ffns - 1}/norm" if layer else "embeddings/norm"
            segments.append(Segment(writer, writer, tuple(f"{block}attention/{n}" for n in ("query", "key", "value")),
                                    (f"{block}attention_output/dense",), f"{block}attention_output/norm"))
        if stream and config["use_bottleneck"]:
            writer = f"transformer_layer_{layer - 1}/output_bottleneck/norm" if layer else "embeddings/norm"
            segments.append(Segment(writer, writer, tuple(block + r for r in _stream_readers(config)),
                                    (f"{block}output_bottleneck/dense",), f"{block}output_bottleneck/norm",
                                    stream=True))
        for writer, readers, adders, closer in _block_segments(config):
            segments.append(Segment(f"{block}{writer}", f"{block}{writer}", tuple(block + r for r in readers),
                                    tuple(block + a for a in adders), None if closer is None else block + closer))
    return segments


def _stream_readers(config):
    """The dense layers of a MobileBERT block that read its input ``x`` (layers/transformer_block.py)."""
    readers = ["bottleneck_input/dense"]
    if config["use_bottleneck_attention"]:
        return readers
    if config["key_query_shared_bottleneck"]:
        return readers + ["bottleneck_attention/dense", "attention/value"]
    return readers + ["attention/query", "attention/key", "attention/value"]


def _sublayer(encoder, path):
    """The layer at an encoder-relative path (``embeddings/norm``, ``transformer_layer_2/ffn_0/intermediate``)."""
    first, *rest = path.split("/")
    layer = encoder.blocks[int(first[len("transformer_layer_"):])] if first.startswith("transformer_layer_") \
        else encoder.get_layer(first)
    for part in rest:
        layer = layer.ffns[int(part[4:])] if part.startswith("ffn_") else getattr(layer, part)
    return layer


def _segment_ranges(encoder, segments, inputs):
    """Per segment with data, the per-channel ranges of the tensors stored in its units, real tokens.

    Returns ``{segment key: (low, high, added)}``: ``low``/``high`` bound the writer's
    output ``y`` and the sum ``z`` its closer reads, and ``added`` is the largest
    ``|z - y|``, the adders' output. All three are int8 tensors of their own in a
    full-int8 file, each with one scale, so ``c`` has to flatten all three. On the
    substituted MiniLM the adder output of every FFN segment carries the outliers
    (channel spread 17-83x against 4-6x for ``y``; per-tensor int8 SNR 18-22 dB
    against 30 dB for ``y``), which the writer's output alone never shows. The
    embedding sum has no writer: its ``z`` alone.
    """
    layers = {}
    for segment in segments:
        for path in (segment.writer, segment.closer):
            if path is not None:
                layers[path] = _sublayer(encoder, path)
    low = {s.key: np.inf for s in segments}
    high = {s.key: -np.inf for s in segments}
    added = {s.key: 0.0 for s in segments}
    # A NoNorm that closes one segment and writes the next is listed twice; recording_calls keys by layer.
    for records, keep in recorded_batches(encoder, NoNorm, list(layers.values()), getattr(inputs, "arrays", inputs)):
        if not keep.any():
            continue
        for segment in segments:
            values = []
            if segment.writer is not None:
                (_, y), = records[id(layers[segment.writer])]
                values.append(y[keep].astype(np.float64))
            if segment.closer is not None:
                (z, _), = records[id(layers[segment.closer])]
                values.append(z[keep].astype(np.float64))
                if segment.writer is not None:
                    added[segment.key] = np.maximum(added[segment.key], np.abs(values[1] - values[0]).max(0))
            low[segment.key] = np.minimum(low[segment.key], np.min([v.min(0) for v in values], axis=0))
            high[segment.key] = np.maximum(high[segment.key], np.max([v.max(0) for v in values], axis=0))
    return {s.key: (low[s.key], high[s.key], added[s.key]) for s in segments}


def _dense_output_spreads(encoder, paths, inputs):
    """``{path: per-unit max |output|}`` of Dense layers (after their activation), real tokens."""
    arrays = {k: np.asarray(v) for k, v in getattr(inputs, "arrays", inputs).items()}
    layers = {path: _sublayer(encoder, path) for path in paths}
    spread = {path: 0.0 for path in paths}
    for records, keep in recorded_batches(encoder, keras.layers.Dense, list(layers.values()), arrays):
        if not keep.any():
            continue
        for path, layer in layers.items():
            (_, y), = records[id(layer)]
            spread[path] = np.maximum(spread[path], np.abs(y[keep].astype(np.float64)).max(0))
    return spread
