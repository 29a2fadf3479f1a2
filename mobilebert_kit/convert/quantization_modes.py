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

from dataclasses import dataclass, field

from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.errors import check_choice


@dataclass(frozen=True)
class OnnxQuantizer:
    """How ONNX Runtime quantizes a mode (:func:`mobilebert_kit.convert.onnx_export.quantize`).

    Args:
        method (str): ``"dynamic"`` (``quantize_dynamic``), ``"static"`` (``quantize_static``, QDQ)
            or ``"float16"`` (float16 initializers cast back at load).
        activations (str): ``"uint8"`` or ``"int16"`` activation type (``"float32"`` for float16).
    """

    method: str
    activations: str = "uint8"

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
        -> 0.9981. On VNNI and ARM (sdot) the cost is one bit of weight precision.
        """
        return self.activations == "uint8"

    @property
    def row_activations(self):
        """Dynamic int8 quantizes each activation row (token) with its own scale and zero point.

        ONNX Runtime's ``quantize_dynamic`` uses one scale per activation tensor; TFLite's dynamic
        range kernels one per row. That difference, not ``reduce_range``, the embedding Gather or
        one group of layers, is why ORT dynamic int8 lost more than TFLite: all-MiniLM-L6-v2 at seq
        64, sentence-embedding cosine on 300 held-out tweets, per tensor mean 0.9898 / min 0.9785,
        per row 0.9967 / 0.9926 (TFLite 0.9985 / 0.9965); the table and the graph are in
        :mod:`~mobilebert_kit.convert.onnx_row_quant`. Weight MatMuls only: activation x activation
        MatMuls (attention) stay float, as in TFLite's dynamic range and ORT's ``MatMulConstBOnly``.
        """
        return self.method == "dynamic"


@dataclass(frozen=True)
class TfliteSettings:
    """How the TFLite converter is configured for a mode (:func:`mobilebert_kit.convert.tflite_export.convert`).

    Args:
        optimize (bool): ``converter.optimizations = [Optimize.DEFAULT]``.
        float16_weights (bool): ``target_spec.supported_types = [tf.float16]``.
        int16_activations (bool): the ``EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8`` op set.
        symmetric_matmuls (bool): run :mod:`~mobilebert_kit.convert.tflite_int8_graph` afterwards, so
            XNNPACK takes the int8 attention matmuls.
        default_float_ops (tuple): op types kept float when the user does not say (``keep_float_ops=None``).
        default_float_nodes (tuple): layer paths kept float with them (no error when a model has none).
    """

    optimize: bool = True
    float16_weights: bool = False
    int16_activations: bool = False
    symmetric_matmuls: bool = False
    default_float_ops: tuple = ()
    default_float_nodes: tuple = ()


# Validation thresholds a record sets and a user may override (convert.validation.Thresholds fields).
THRESHOLD_KEYS = ("min_cosine", "min_snr_db", "min_argmax_agreement", "max_abs_error")

# What a mode can be asked for beyond its name; each record lists the ones it refuses, with the reason.
CAPABILITIES = ("int8_io", "keep_float:tflite", "keep_float:onnx", "default_calibration")


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
        thresholds (dict): default validation thresholds (``convert.validation.Thresholds`` keys), set
            from measurements (docs/export.md): several times looser than a healthy export of a random
            tiny model and of all-MiniLM-L6-v2 reached, far tighter than a broken export gives.
        profiled_as (str): the precision the profiler reads from such a file
            (:func:`mobilebert_kit.artifacts.taxonomy.precision`).
        fallback_float_layers (tuple): layer paths kept float in a second try when the first file fails
            validation and the user chose no float ops or layers (``exporter._attempts``).
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
    fallback_float_layers: tuple = ()

    def allows(self, capability):
        """Whether this mode allows ``capability`` (one of :data:`CAPABILITIES`).

        Example:
            >>> quantization_mode("qat").allows("int8_io")
            True
        """
        check_choice("capability", capability, CAPABILITIES)
        return capability not in self.refused

    def check_calibration(self, calibration):
        """Raises ExportError when this mode calibrates and ``calibration`` has no rows (a library caller's guard;
        ``ExportOptions.check`` refuses an export without data first, in the user's spelling).

        Args:
            calibration (InputSet | None): the calibration rows given to a converter.
        """
        if self.calibration and (calibration is None or calibration.count == 0):
            raise ExportError(f"quantization {self.name} needs calibration data (an InputSet of at least one row)")


def modes_allowing(capability):
    """Names of the modes that allow ``capability``, in table order.

    Example:
        >>> modes_allowing("int8_io")
        ('int8', 'qat')
    """
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

# Full int8 defaults are chosen for XNNPACK, the CPU path of every Android phone
# (benchmarks/perf/NOTES.md has the op profile): SOFTMAX stays float because XNNPACK has no int8
# softmax and each int8 one splits the delegated graph (DEQUANTIZE, float SOFTMAX, QUANTIZE all run
# inside XNNPACK); the attention-mask ADD before it stays float too, because in int8 its output
# would span the mask value (-120) as well as the real scores, a quantization step of ~0.5 logits.
_XNNPACK_FLOAT = {"default_float_ops": ("SOFTMAX",), "default_float_nodes": ("attention/add",)}
# Trained post-LN encoders carry outlier channels in the residual stream, which one per-tensor int8
# scale cannot hold: all-MiniLM-L6-v2 in full int8 gives token cosine 0.74 (sentence embedding 0.78,
# refused), and 0.984 with the LayerNorms, residual ADDs and block output projections in float
# (benchmarks/RESULTS.md, fidelity table). A file that passes is better than none; the note says
# what stayed float, and issue 15's per-layer search will choose fewer layers.
_RESIDUAL_PATH = ("norm", "add", "output")
_LOOSE = {"min_cosine": 0.9, "min_snr_db": 5.0, "min_argmax_agreement": 0.7}
_DYNAMIC = {"min_cosine": 0.98, "min_snr_db": 12.0, "min_argmax_agreement": 0.9}

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
        onnx_as="dynamic", onnx=OnnxQuantizer("dynamic"), tflite=TfliteSettings(),
        thresholds=_DYNAMIC, profiled_as="dynamic-int8",
    ),
    QuantizationMode(
        "int8", "full integer, calibrated on representative inputs",
        calibration=True, onnx_as="int8", onnx=OnnxQuantizer("static"),
        tflite=TfliteSettings(symmetric_matmuls=True, **_XNNPACK_FLOAT), thresholds=_LOOSE, profiled_as="int8",
        fallback_float_layers=_RESIDUAL_PATH,
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
        onnx_as="int16x8", onnx=OnnxQuantizer("static", "int16"), tflite=TfliteSettings(int16_activations=True),
        thresholds=_DYNAMIC, profiled_as="int8",
    ),
    QuantizationMode(
        # ONNX: tf2onnx folds the fake-quantized weights into float constants, so the quantization-aware
        # graph is then quantized statically (QDQ int8) like int8, calibrated on the same data.
        "qat", "quantization-aware fine-tuning, then int8 from the learned ranges",
        calibration=True, trains=True,
        refused={"keep_float:tflite": _TFLITE_SELECTIVE, "default_calibration": _QAT_TRAINS},
        onnx_as="int8", tflite=TfliteSettings(symmetric_matmuls=True), thresholds=_LOOSE, profiled_as="int8",
    ),
)}


def quantization_mode(name):
    """The record of mode ``name``; an unknown name is a ConfigError listing the valid ones.

    Args:
        name (str): a key of :data:`MODES`.

    Example:
        >>> quantization_mode("int8").calibration
        True
    """
    return MODES[check_choice("quantize", name, tuple(MODES))]


def needs_calibration_message(mode, data, why):
    """The one-line error for a calibrated mode without data, naming both options as the user writes them.

    Args:
        mode (str): the mode option as written (``--quantize qat``, ``[export] quantize = 'qat'``).
        data (str): the option that supplies the data (``--calibration FILE``, ``[calibration] data = 'FILE'``).
        why (str): the record's reason that no default calibration applies.

    Example:
        >>> needs_calibration_message("--quantize qat", "--calibration FILE", "QAT trains on its data")  # doctest: +ELLIPSIS
        '--quantize qat needs calibration data: --calibration FILE (...); QAT trains on its data'
    """
    return (f"{mode} needs calibration data: {data} (.txt, one sentence per line, or .npz input arrays, "
            f"see docs/export.md); {why}")
