"""Every quantization mode, one record each: what it needs, what it allows, how each converter does it.

One word for the concept: *quantization*. ``mbk export --quantize``, the
recipe's ``quantize`` key and ``ExportOptions.quantize`` choose a mode by name;
the artifact's metadata records it as ``quantization``; ``mbk validate
--precision`` picks its thresholds by the same name (``precision`` there is an
accepted alias of the concept); the profiler, which sees only the file, calls
what it finds :attr:`QuantizationMode.profiled_as`.

Adding a mode is adding a record to :data:`MODES`: the CLI choices, the recipe
check, both converters, the calibration rule, validation thresholds and the
export report read it (the model of huggingface/optimum's
``QuantizationApproach`` with the reason written beside each refusal).

Standard library and error types only: the CLI registers its choices from here without
loading TensorFlow.

Example:
    >>> quantization_mode("qat").onnx_as
    'int8'
    >>> quantization_mode("dynamic").refused["int8_io"]  # doctest: +ELLIPSIS
    'int8 io is a TFLite int8/qat option because ...'
"""

import re
from dataclasses import dataclass, field

from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.errors import check_choice
from mobilebert_kit.utils.limits import Limit


# How a dynamic ONNX export scales each weight MatMul's activations (OnnxQuantizer.activation_scales); what each
# keeps and costs is measured in convert/onnx/row_scale.py's module doc.
ACTIVATION_SCALES = {
    "tensor": "ONNX Runtime's quantize_dynamic as it is: one uint8 scale per activation tensor, fused kernels "
              "(DynamicQuantizeMatMul); the fastest, but a few wide tokens take the range from the rest",
    "row": "each row divided by its absolute maximum before ORT's fused kernels and multiplied back after "
           "(convert/onnx/row_scale.py): per-row fidelity in ORT's own kernels",
}


@dataclass(frozen=True)
class OnnxQuantizer:
    """How ONNX Runtime quantizes a mode (:func:`mobilebert_kit.convert.onnx.export.quantize`).

    Args:
        method (str): ``"dynamic"`` (``quantize_dynamic``), ``"static"`` (``quantize_static``, QDQ),
            ``"float16"`` (float16 initializers cast back at load) or ``"int4"`` (``MatMulNBits`` /
            ``GatherBlockQuantized``, ONNX Runtime's int4 weight kernels, int8 compute).
        activations (str): ``"uint8"`` or ``"int16"`` activation type (``"float32"`` for float16).
        activation_scales (str): for ``"dynamic"``, a key of :data:`ACTIVATION_SCALES` (what each costs and keeps).
        block_size (int): for ``"int4"``, the inputs of each output channel that share one scale in the weight
            MatMuls (the embedding tables take blocks of :data:`ONNX_INT4_TABLE_BLOCK`).

    Example:
        >>> OnnxQuantizer("dynamic").activation_scales
        'row'
    """

    method: str
    activations: str = "uint8"
    activation_scales: str = "row"
    block_size: int = 32

    def __post_init__(self):
        check_choice("activation_scales", self.activation_scales, tuple(ACTIVATION_SCALES))

    @property
    def fused_kernels(self):
        """The float graph this mode quantizes has ONNX Runtime's fused encoder kernels (``convert/onnx/fused.py``).

        ``dynamic`` and ``int4`` quantize their weight products (``DynamicQuantizeMatMul``, ``MatMulNBits``, after
        ``fused.dynamic_form`` gives them MatMuls; attention, LayerNorm and GELU stay float, as in TFLite's
        dynamic range) and ``float16`` only stores weights. The static QDQ quantizers keep tf2onnx's graph: ORT's
        QDQ rules were measured and gated (task metrics) on that graph, and have none for the contrib kernels.
        """
        return self.method in ("dynamic", "float16", "int4")

    @property
    def float_ops(self):
        """Op types a static quantization always leaves float: ORT cannot run them quantized reliably.

        tf2onnx writes a LayerNorm's means as GlobalAveragePool, which static QDQ turns into
        QLinearGlobalAveragePool; ORT's kernel (MLAS) refuses to run when input scale / (output scale x
        pooled size) leaves [2^-32, 256): "QLinearGlobalAveragePool parameter out of computation
        range". A mean whose calibrated range is small next to its input's (random tiny-bert weights,
        one seed in a few) hits it at run time, after the file was written. A float mean costs little
        and keeps LayerNorm's statistics exact.
        """
        return ("GlobalAveragePool",) if self.method == "static" else ()

    @property
    def reduce_range(self):
        """7-bit weights wherever activations are uint8.

        ONNX Runtime's u8 x s8 GEMM on x86 CPUs without VNNI (AVX2, AVX-512F) sums pairs of
        products in int16 (vpmaddubsw) and saturates with full-range weights. Measured on an AVX2
        EPYC: tiny-bert dynamic int8 cosine 0.9957 -> 0.99990, tiny-mobilebert 0.9718 (refused)
        -> 0.9981. On VNNI and ARM (sdot) the cost is one bit of weight precision: all-MiniLM-L6-v2's
        min sentence cosine 0.9934 -> 0.9905 with per-row scales (issue 36). A file does not know the
        CPU it will run on, so it is written for both. ORT offers no switch to force its non-VNNI
        kernels on a VNNI host (none in 1.32), so that path is measured on an AVX2 host only.
        """
        return self.activations == "uint8"

    @property
    def row_activations(self):
        """Whether activations get one scale per row (token), as TFLite's dynamic range kernels do.

        That difference, not ``reduce_range``, the embedding Gather or one group of layers, is why ORT dynamic
        int8 lost more than TFLite: all-MiniLM-L6-v2 at seq 64, sentence-embedding cosine on 300 held-out
        tweets, per tensor mean 0.9898 / min 0.9785, per row 0.9967 / 0.9926 (TFLite 0.9985 / 0.9965;
        benchmarks/RESULTS.md). How: :mod:`~mobilebert_kit.convert.onnx.row_scale` (weight MatMuls only).
        """
        return self.method == "dynamic" and self.activation_scales != "tensor"


# int4 weight layouts (Int4Weights.block_size -> ai-edge-quantizer's QuantGranularity); 0 is one scale per output
# channel. The quantizer's blockwise layouts store a float16 scale per block of the input dimension.
INT4_BLOCK_SIZES = (0, 32, 64, 128, 256)


@dataclass(frozen=True)
class Int4Weights:
    """How ai-edge-quantizer writes a mode's int4 weights (:mod:`mobilebert_kit.convert.tflite.int4`).

    Args:
        activations (str): ``"int8"``: the matrix products quantize their input to int8 on the fly
            (the quantizer's dynamic recipe; XNNPACK runs them as ``qd8-f32-qc4w`` / ``qb4w`` GEMMs);
            ``"float32"``: each int4 weight is expanded to float32 by a ``DEQUANTIZE`` and the product runs
            in float (the weight-only recipe; only per-channel is in the quantizer's policy).
        block_size (int): 0 for one scale per output channel, else the block of the input dimension that
            shares a scale (one of :data:`INT4_BLOCK_SIZES`; every quantized dimension must be a multiple).

    Example:
        >>> Int4Weights("int8", 32).granularity
        'BLOCKWISE_32'
    """

    activations: str = "int8"
    block_size: int = 0

    def __post_init__(self):
        check_choice("int4 activations", self.activations, ("int8", "float32"))
        check_choice("int4 block_size", self.block_size, INT4_BLOCK_SIZES)

    @property
    def granularity(self):
        """The name of ai-edge-quantizer's ``QuantGranularity`` member."""
        return f"BLOCKWISE_{self.block_size}" if self.block_size else "CHANNELWISE"


@dataclass(frozen=True)
class TfliteSettings:
    """How the TFLite converter is configured for a mode (:func:`mobilebert_kit.convert.tflite.export.convert`).

    Args:
        optimize (bool): ``converter.optimizations = [Optimize.DEFAULT]``.
        float16_weights (bool): ``target_spec.supported_types = [tf.float16]``.
        int16_activations (bool): the ``EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8`` op set.
        symmetric_matmuls (bool): run :mod:`~mobilebert_kit.convert.tflite.int8_graph` afterwards, so
            XNNPACK takes the int8 attention matmuls.
        default_float_ops (tuple): op types kept float when the user does not say (``keep_float_ops=None``).
        default_float_nodes (tuple): layer paths kept float with them (no error when a model has none).
        float_hybrid_convs (bool): run :mod:`~mobilebert_kit.convert.tflite.hybrid_convs` afterwards, so
            XNNPACK takes the depthwise convolutions that dynamic-range quantization made hybrid.
        layer_norm_float_nodes (tuple): layer paths kept float by default in a model that normalizes with
            LayerNorm (not NoNorm).
        layer_norm_dynamic_nodes (tuple): layer paths of such a model left out of static int8 by default whose
            fully connected layers get dynamic-range int8 weights (int8 weights, float input and output); the ONNX
            writer gives the same layers' weight MatMuls ORT's dynamic int8 (``onnx.export.quantize``).
        int4 (Int4Weights | None): convert in float, then write int4 weights with ai-edge-quantizer.
    """

    optimize: bool = True
    float16_weights: bool = False
    int16_activations: bool = False
    symmetric_matmuls: bool = False
    default_float_ops: tuple = ()
    default_float_nodes: tuple = ()
    float_hybrid_convs: bool = False
    layer_norm_float_nodes: tuple = ()
    layer_norm_dynamic_nodes: tuple = ()
    int4: Int4Weights = None


# Validation thresholds a record sets and a recipe or --threshold may override, with their bounds
# (convert.validation.compare.Thresholds fields).
THRESHOLD_LIMITS = {
    "min_cosine": Limit(float, -1.0, 1.0),
    "min_snr_db": Limit(float, -1e12, 1e12),  # finite; a huge bar is a way to make validation fail on purpose
    "min_argmax_agreement": Limit(float, 0.0, 1.0),
    "max_abs_error": Limit(float, 0.0, 1e30),
}
THRESHOLD_KEYS = tuple(THRESHOLD_LIMITS)

# What a mode can be asked for beyond its name; each record lists the ones it refuses, with the reason.
CAPABILITIES = ("int8_io", "keep_float:tflite", "keep_float:onnx", "default_calibration", "format:tflite", "format:onnx")


@dataclass(frozen=True)
class QuantizationMode:
    """One quantization mode and everything the toolkit decides by it.

    Args:
        name (str): the value of ``--quantize`` / ``quantize = ...`` / the metadata's ``quantization``.
        summary (str): one line for docs.
        quantized (bool): False for float32 only (no drift report, no keep-float, nothing to map).
        calibration (bool): activations get static ranges, so calibration inputs are needed (and
            the export report lists the ops left in float).
        trains (bool): quantization-aware fine-tuning builds the graph that is converted.
        refused (dict): capability (one of :data:`CAPABILITIES`) -> the reason this mode refuses it;
            every capability not listed is allowed.
        onnx_as (str): the mode whose ONNX Runtime quantizer runs (``qat`` -> ``int8``); None for float.
        onnx (OnnxQuantizer): the ONNX Runtime settings when ``onnx_as`` is this mode itself.
        tflite (TfliteSettings): the TFLite converter settings.
        thresholds (dict): default validation thresholds (``convert.validation.compare.Thresholds`` keys), set
            from measurements (docs/export.md): several times looser than a healthy export of a random
            tiny model and of all-MiniLM-L6-v2 reached, far tighter than a broken export gives.
        profiled_as (str): the precision the profiler reads from such a file
            (:func:`mobilebert_kit.artifacts.taxonomy.precision`).
        fallback (tuple): :class:`SearchStep` records tried in turn when the first file fails validation
            and the user chose no float ops or layers (``quantization.search.Search``); the first that passes is written.
        search (tuple): :class:`SearchStep` records of a searched mode (``auto``): nothing is converted as
            this mode itself; each step is tried in order and judged by the task metric on ``--eval-data``
            (``convert.quantization.search``).
        stream_fold (tuple): the formats whose ``--fold-nonorm`` files also fold the MobileBERT residual
            stream between blocks (``_STREAM_FOLD_QDQ`` says why the static ONNX modes leave it).
    """

    name: str
    summary: str
    quantized: bool = True
    calibration: bool = False
    trains: bool = False
    refused: dict = field(default_factory=dict)
    onnx_as: str = None
    onnx: OnnxQuantizer = None
    tflite: TfliteSettings = TfliteSettings()
    thresholds: dict = field(default_factory=dict)
    profiled_as: str = "float32"
    fallback: tuple = ()
    search: tuple = ()
    stream_fold: tuple = ("tflite", "onnx")

    def allows(self, capability):
        """Whether this mode allows ``capability`` (one of :data:`CAPABILITIES`)."""
        check_choice("capability", capability, CAPABILITIES)
        return capability not in self.refused

    def check_calibration(self, calibration):
        """Raises ExportError when this mode calibrates and the InputSet ``calibration`` has no rows (a library
        caller's guard; ``ExportOptions.check`` refuses an export without data first, in the user's spelling)."""
        if self.calibration and (calibration is None or calibration.count == 0):
            raise ExportError(f"quantization {self.name} needs calibration data (an InputSet of at least one row)")


@dataclass(frozen=True)
class SearchStep:
    """One rung of a quantization search ladder (a mode's ``fallback`` or ``search``): the mode ``quantize``
    with ``float_layers`` float: ``"none"`` (the mode's own defaults), a tuple of layer paths, or ``"ranked"``,
    the k most drift-sensitive layers on the user's data (:func:`ranked_counts`), each as the paths of ``unit``
    (``{layer}`` standing for its name; ``("{layer}",)``: the whole layer), named ``unit_name`` in reports.

    Example:
        >>> SearchStep("int8", "ranked", ("{layer}/**/norm", "{layer}/**/add")).paths(["transformer_layer_1"])
        ('transformer_layer_1/**/norm', 'transformer_layer_1/**/add')
    """

    quantize: str
    float_layers: object = "none"
    unit: tuple = ("{layer}",)
    unit_name: str = ""

    def paths(self, layers):
        """The ``keep_float_layers`` paths of a setting: a ranked step's units of ``layers``, else ``layers``."""
        if self.float_layers != "ranked":
            return tuple(layers)
        return tuple(template.format(layer=layer) for layer in layers for template in self.unit)

    def describe(self, layers=()):
        """The setting's label in reports: mode, then what is kept float (ranked layers by name)."""
        if not layers:
            return self.quantize
        what = self.unit_name if self.float_layers == "ranked" else ""
        return f"{self.quantize}, {what}{', '.join(layers)} float"


def nodes_of_layers(names, layers):
    """The graph node ``names`` (fused ones joined by ``;``) that belong to one of the layer paths ``layers``.

    A path such as ``transformer_layer_3`` or ``ffn_0/output`` matches a name whose ``/``-separated segments hold
    its segments consecutively; ``**`` stands for any segments between two parts (``transformer_layer_3/**/norm``
    is every LayerNorm of block 3: the per-block units of :class:`SearchStep`). Both converters keep TensorFlow's
    ``<graph>/<layer>/<sublayer>/<op>`` names.

    Example:
        >>> nodes_of_layers(["m/transformer_layer_3/ffn_0/norm/mul", "m/add"], ["transformer_layer_3/**/norm"])
        ['m/transformer_layer_3/ffn_0/norm/mul']
    """
    patterns = [[tuple(filter(None, part.split("/"))) for part in re.split(r"/\*\*(?=/)", f"/{layer}/")]
                for layer in layers]
    return [name for name in names
            if any(_contains(part.split("/"), pattern) for part in name.split(";") for pattern in patterns)]


def _contains(segments, parts):
    """Whether each of ``parts`` appears consecutively in ``segments``, in order."""
    start = 0
    for part in parts:
        n = len(part)
        found = next((i for i in range(start, len(segments) - n + 1) if tuple(segments[i:i + n]) == part), None)
        if found is None:
            return False
        start = found + n
    return True


def ranked_counts(layers):
    """How many of the ranked layers a ``"ranked"`` step keeps float, in turn: 1, 2, 4, ... below ``layers``.

    Doubling finds a passing count in log2(L) conversions (each a full calibrated conversion); keeping
    every layer float is no int8 model, so the count stays below the layer count.
    """
    return tuple(2 ** i for i in range(max(layers - 1, 0).bit_length()))


def modes_allowing(capability):
    """Names of the modes that allow ``capability``, in table order."""
    return tuple(name for name, mode in MODES.items() if mode.allows(capability))


# Reasons, each written once and cited by the records that refuse for it.
_NOT_INTEGER_IO = "int8 io is a TFLite int8/qat option because only a full-integer graph has int8 tensors at its edges"
_NOTHING_QUANTIZED = "a float model has no quantized op to keep in float"
_TFLITE_SELECTIVE = ("the TFLite converter keeps ops float only while it quantizes from its own calibration "
                     "(selective quantization of int8); an ONNX export of this mode can keep them")
_FLOAT16_WHOLE = "float16 weights are stored whole and cast back at load; there is no per-op choice"
_QAT_TRAINS = ("QAT trains on its data, and built-in rows would teach the model random ids or text that is "
               "not your app's")
_NOT_CALIBRATED = "this mode is not calibrated"
# The formats whose --fold-nonorm files also fold the MobileBERT residual stream's NoNorms between blocks
# (QuantizationMode.stream_fold; scale_migration ``stream``; ``export_model.plan_graph`` reads it; docs/export.md
# has what it saves). ONNX Runtime's static QDQ of tf2onnx's graph lost 1.4 dB on tiny-mobilebert with it: its
# modes fold the stream in TFLite files only.
_STREAM_FOLD_QDQ = ("tflite",)
_INT4_BY_RECIPE = ("ai-edge-quantizer writes int4 into every fully connected layer and the word-embedding table by "
                   "op type; keeping single layers float is not offered for int4")
_INT4_BY_BLOCKS = ("ONNX Runtime's MatMulNBits stores int4 weights in blocks (16 to 256 inputs) and its quantizer "
                   "offers no per-channel layout for it: export ONNX with --quantize int4 (blocks of 32) or "
                   "int4-block128, or this mode with --format tflite")
_INT4_WHOLE = ("ONNX Runtime's int4 quantizer writes every weight MatMul and embedding table by op type; keeping "
               "single layers float is not offered for int4")

# Full int8 defaults are chosen for XNNPACK, the CPU path of every Android phone; docs/export.md ("Graph changes for
# speed") says why each of these stays float and what it measured: SOFTMAX and the attention-mask ADD before it, an
# embedding's sentence pooling (SUM, DIV, MAXIMUM, L2_NORMALIZATION: no other op of our graphs), and in a LayerNorm
# model its LayerNorms and the residual ADDs that feed them (NoNorm models are untouched: NoNorm runs in int8 in
# XNNPACK). A LayerNorm model's feed-forward output projections ("output") take int8 weights with activations
# quantized on the fly and a float output (issue 46): a static int8 output grew the one-ULP differences between the
# aarch64 and x86-64 kernels to a sentence cosine of 0.984 between the two (0.992 so). The ONNX writer gives the
# same layers ORT's dynamic int8: in all-static QDQ all-MiniLM-L6-v2's embedder failed validation
# (benchmarks/RESULTS.md, issue 45 item 2).
# The default group's label in notes (both writers).
DYNAMIC_GROUP = "feed-forward output projection"
_XNNPACK_FLOAT = {"default_float_ops": ("SOFTMAX", "SUM", "DIV", "MAXIMUM", "L2_NORMALIZATION"),
                  "default_float_nodes": ("attention/add",), "layer_norm_float_nodes": ("norm", "add"),
                  "layer_norm_dynamic_nodes": ("output",)}
# int8's fallback: a file that passes is better than none (docs/export.md: trained post-LN encoders' outlier
# channels); the note says what stayed float. The search first keeps the fewest layers' residual paths float,
# ranked by the per-layer drift on the export's own data; the residual path of every layer is the last resort.
# With the LayerNorms and residual ADDs of a LayerNorm model float by default, what is left to lose is the
# feed-forward: its GELU output ("intermediate") and the projection back to the stream ("output"). A tiny
# LayerNorm classifier whose block 1 carries x200 feed-forward channels: all-int8 0.836 accuracy, + block 1's
# norms, adds and output float 0.844, + its intermediate too 0.953, the whole block 0.945, dynamic 0.992.
_RESIDUAL_PATH = ("norm", "add", "intermediate", "output")
# The same, one block at a time: what the ranked search keeps float per sensitive layer. Measured on
# all-MiniLM-L6-v2 (seq 64, 16 sample sentences, before LayerNorms were float by default): whole blocks float
# did not pass even with 4 of 7 units (sentence-embedding cosine 0.889), the residual path of every block did (0.988).
_RESIDUAL_UNIT = ("{layer}/**/norm", "{layer}/**/add", "{layer}/**/intermediate", "{layer}/**/output")
_RANKED_RESIDUAL = SearchStep("int8", "ranked", _RESIDUAL_UNIT, "residual path of ")
_INT8_FALLBACK = (_RANKED_RESIDUAL, SearchStep("int8", _RESIDUAL_PATH))
# --quantize auto: fastest first (docs/export.md has the ladder and why, Search.fastest what is written). The
# residual-path rung is not here: it ran no faster than float32 on MiniLM (issue 15). int4 per channel reads half
# the weight bytes and ran in 0.88x dynamic int8's time on an AVX-512 VNNI Xeon, but lost 1.3 accuracy points of
# the fine-tuned MiniLM classifier (dynamic int8: 0.0), so the int8 rungs come first; the default int4 layout
# (blocks of 32: -0.7, but 1.79x dynamic int8's time) is no rung (benchmarks/RESULTS.md, issue 38).
_AUTO_SEARCH = (SearchStep("int8"), _RANKED_RESIDUAL, SearchStep("int4-channel"), SearchStep("dynamic"))
_INT4_REFUSED = {"int8_io": _NOT_INTEGER_IO, "keep_float:tflite": _INT4_BY_RECIPE, "keep_float:onnx": _INT4_WHOLE,
                 "default_calibration": _NOT_CALIBRATED}
_INT4_CHANNEL_REFUSED = {**_INT4_REFUSED, "format:onnx": _INT4_BY_BLOCKS}
# ONNX int4: the embedding tables (GatherBlockQuantized) take blocks of 128, the weight MatMuls the mode's: their
# float32 scales in blocks of 32 cost 1.1 MB more on MiniLM at the same fidelity (docs/export.md#int4-weights).
ONNX_INT4_TABLE_BLOCK = 128
_SEARCH_CHOOSES = "auto chooses the float layers itself from their measured sensitivity"
_LOOSE = {"min_cosine": 0.9, "min_snr_db": 5.0, "min_argmax_agreement": 0.7}
_DYNAMIC = {"min_cosine": 0.98, "min_snr_db": 12.0, "min_argmax_agreement": 0.9}
# int4 weights (round to nearest, 16 levels) move a trained encoder's outputs far more than int8 does. Measured
# (issue 38, benchmarks/RESULTS.md): the fine-tuned MiniLM classifier's probabilities on 16 sample sentences, cosine
# 0.9995 / SNR 29.4 dB (blocks of 32), 0.9983 / 24.6 dB (per channel), argmax agreement 1.0; all-MiniLM-L6-v2's
# sentence embeddings 0.958 / 10.7 dB (blocks of 32), 0.936 / 8.9 dB (128), 0.910 / 7.4 dB (per channel; the
# embedding task's own 0.95 floor refuses all but blocks of 32); its token states (features, seq 64) 0.960 / 11.2 dB
# (blocks of 32), 0.907 / 7.6 dB (per channel); tiny-bert 0.996 / 21 dB. A zeroed kernel still
# fails them (tests/convert/test_quantization.py).
_INT4 = {"min_cosine": 0.9, "min_snr_db": 6.0, "min_argmax_agreement": 0.7}

# "default_calibration": a calibrated mode run without --calibration measures its ranges on built-in data
# (InputSet.default_calibration): a model with a vocabulary on the built-in calibration sentences (issue 14:
# `mbk export MINILM --quantize int8` was refused), one without on rows shaped like tokenized text (issue 12:
# full int8 of a preset needed an undocumented .npz). Only ranges are measured, never weights trained.
MODES = {m.name: m for m in (
    QuantizationMode(
        "none", "float32", quantized=False, tflite=TfliteSettings(optimize=False),
        refused={"int8_io": _NOT_INTEGER_IO, "keep_float:tflite": _NOTHING_QUANTIZED,
                 "keep_float:onnx": _NOTHING_QUANTIZED, "default_calibration": _NOT_CALIBRATED},
        thresholds={"min_cosine": 0.99999, "min_snr_db": 60.0, "min_argmax_agreement": 0.99}, profiled_as="float32",
    ),
    QuantizationMode(
        "dynamic", "dynamic-range int8: int8 weights, activations quantized on the fly; no calibration",
        refused={"int8_io": _NOT_INTEGER_IO, "keep_float:tflite": _TFLITE_SELECTIVE,
                 "default_calibration": _NOT_CALIBRATED},
        onnx_as="dynamic", onnx=OnnxQuantizer("dynamic"), tflite=TfliteSettings(float_hybrid_convs=True),
        thresholds=_DYNAMIC, profiled_as="dynamic-int8",
    ),
    QuantizationMode(
        "int8", "full integer, calibrated on representative inputs",
        calibration=True, onnx_as="int8", onnx=OnnxQuantizer("static"), stream_fold=_STREAM_FOLD_QDQ,
        tflite=TfliteSettings(symmetric_matmuls=True, **_XNNPACK_FLOAT), thresholds=_LOOSE, profiled_as="int8",
        fallback=_INT8_FALLBACK,
    ),
    QuantizationMode(
        "float16", "float16 weights, float32 compute",
        refused={"int8_io": _NOT_INTEGER_IO, "keep_float:tflite": _FLOAT16_WHOLE, "keep_float:onnx": _FLOAT16_WHOLE,
                 "default_calibration": _NOT_CALIBRATED},
        onnx_as="float16", onnx=OnnxQuantizer("float16", "float32"), tflite=TfliteSettings(float16_weights=True),
        thresholds={"min_cosine": 0.9999, "min_snr_db": 40.0, "min_argmax_agreement": 0.98}, profiled_as="float16",
    ),
    QuantizationMode(
        "int16x8", "int16 activations, int8 weights, calibrated",
        calibration=True, refused={"int8_io": _NOT_INTEGER_IO, "keep_float:tflite": _TFLITE_SELECTIVE},
        onnx_as="int16x8", onnx=OnnxQuantizer("static", "int16"), stream_fold=_STREAM_FOLD_QDQ, tflite=TfliteSettings(int16_activations=True),
        thresholds=_DYNAMIC, profiled_as="int8",
    ),
    QuantizationMode(
        # ONNX: static QDQ int8 of the quantization-aware graph, as onnx/export.py says.
        "qat", "quantization-aware fine-tuning, then int8 from the learned ranges",
        calibration=True, trains=True,
        refused={"keep_float:tflite": _TFLITE_SELECTIVE, "default_calibration": _QAT_TRAINS},
        onnx_as="int8", tflite=TfliteSettings(symmetric_matmuls=True), thresholds=_LOOSE, profiled_as="int8",
        stream_fold=_STREAM_FOLD_QDQ,
    ),
    QuantizationMode(
        # The default layout is blocks of 32 (docs/export.md#int4-weights): the only one that kept all-MiniLM-L6-v2's
        # sentence embeddings above the embedding task's 0.95 floor (_INT4), at a price in speed (_AUTO_SEARCH).
        "int4", "int4 weights, one scale per 32 inputs of each output channel, activations quantized to int8 on "
        "the fly; no calibration", refused=_INT4_REFUSED, onnx_as="int4",
        onnx=OnnxQuantizer("int4", "int8", block_size=32),
        tflite=TfliteSettings(optimize=False, int4=Int4Weights("int8", 32)), thresholds=_INT4,
        profiled_as="dynamic-int4",
    ),
    QuantizationMode(
        "int4-channel", "int4 weights, one scale per output channel, int8 activations on the fly: the fastest int4 "
        "on x86 XNNPACK, the least accurate", refused=_INT4_CHANNEL_REFUSED,
        tflite=TfliteSettings(optimize=False, int4=Int4Weights("int8", 0)), thresholds=_INT4,
        profiled_as="dynamic-int4",
    ),
    QuantizationMode(
        "int4-block128", "int4 weights, one scale per 128 inputs of each output channel, int8 activations on the fly",
        refused=_INT4_REFUSED, onnx_as="int4-block128",
        onnx=OnnxQuantizer("int4", "int8", block_size=128),
        tflite=TfliteSettings(optimize=False, int4=Int4Weights("int8", 128)),
        thresholds=_INT4, profiled_as="dynamic-int4",
    ),
    QuantizationMode(
        # ai-edge-quantizer's weight-only policy has no blockwise int4.
        "int4-weight-only", "int4 weights (per channel) expanded to float32 at load, float compute: file size only "
        "(XNNPACK leaves these products to the builtin kernels)",
        refused=_INT4_CHANNEL_REFUSED, tflite=TfliteSettings(optimize=False, int4=Int4Weights("float32", 0)),
        thresholds=_INT4, profiled_as="int4-weight-only",
    ),
    QuantizationMode(
        # Calibrated (its int8 rungs are), on built-in text when no --calibration is given, like int8.
        "auto", "the fastest setting that holds the task metric on --eval-data: int8, then the most sensitive "
        "layers float, then int4 weights (per channel), then dynamic int8",
        calibration=True,
        refused={"int8_io": _NOT_INTEGER_IO, "keep_float:tflite": _SEARCH_CHOOSES, "keep_float:onnx": _SEARCH_CHOOSES},
        thresholds=_LOOSE, profiled_as="int8", search=_AUTO_SEARCH,
    ),
)}


# The modes a file can be converted with (and validated as): a searched mode writes one of these.
CONVERTED_MODES = tuple(name for name, mode in MODES.items() if not mode.search)


def quantization_mode(name):
    """The record of mode ``name`` (a key of :data:`MODES`); an unknown name is a ConfigError listing the valid ones."""
    return MODES[check_choice("quantize", name, tuple(MODES))]


def needs_calibration_message(mode, data, why):
    """The one-line error for a calibrated mode without data, naming both options as the user writes them
    (``--quantize qat``, ``[calibration] data = 'FILE'``), with the record's reason ``why`` no default applies."""
    return (f"{mode} needs calibration data: {data} (.txt, one sentence per line, or .npz input arrays, "
            f"see docs/export.md); {why}")
