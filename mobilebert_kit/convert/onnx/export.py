"""ONNX export with tf2onnx, and ONNX Runtime quantization of the result.

Float32, float16 and dynamic files have their encoder blocks rewritten as ONNX Runtime's fused kernels
(:mod:`~mobilebert_kit.convert.onnx.fused`; the mode's ``OnnxQuantizer.fused_kernels`` says which modes).

Each quantization mode's ONNX Runtime settings are its record's
:class:`~mobilebert_kit.convert.quantization.modes.OnnxQuantizer`
(``onnx_as`` maps ``qat`` to ``int8``); this module applies them:

- ``dynamic``: int8 weights (signed, per output channel), activations
  quantized at run time to uint8 with one scale per row (token) like
  TFLite's dynamic range (``OnnxQuantizer.row_activations`` says why). The record's
  ``activation_scales`` says how (:data:`~mobilebert_kit.convert.quantization.modes.ACTIVATION_SCALES`); the
  default rescales each row before ORT's own fused kernels
  (:mod:`~mobilebert_kit.convert.onnx.row_scale`), which run u8 x s8
  (performance-notes.md: s8 x s8 is ~15x slower); ``quantize_dynamic`` then
  quantizes the weight MatMuls and the embedding Gather, with per-channel weight
  scales (per-tensor ones lost fidelity: docs/export.md's MiniLM table).
- ``static``: ``quantize_static`` in QDQ format, calibrated, int8 per-channel
  weights and uint8 (``int8``) or int16 (``int16x8``: ORT's com.microsoft Q/DQ
  ops carry the 16-bit types; ORT raises the opset to 21, the first with
  16-bit QuantizeLinear) activations. ``dynamic_layers`` (the writer passes a LayerNorm model's
  ``layer_norm_dynamic_nodes``: its feed-forward output projections) are left out of that pass and their
  weight MatMuls quantized as ``dynamic`` quantizes them (:func:`_dynamic_pass`).
- ``float16``: float16 weights stored, cast to float32 at load (the
  counterpart of TFLite's float16 weights; compute stays float32).
- ``int4`` / ``int4-block128``: int4 weights through ONNX Runtime's own
  quantizer (:func:`int4_weights`): ``MatMulNBits`` for the weight MatMuls
  (symmetric blocks of the record's size, int8 compute: ``accuracy_level`` 4)
  and ``GatherBlockQuantized`` for the embedding tables (blocks of
  :data:`~mobilebert_kit.convert.quantization.modes.ONNX_INT4_TABLE_BLOCK`).
- ``qat``: the quantization-aware graph through tf2onnx (its output
  fake-quants become QuantizeLinear/DequantizeLinear pairs; the fake-quantized
  weights are folded into float constants), then static QDQ int8 as for
  ``int8``, calibrated on the same data, so the fine-tuned weights run in int8.

Selective quantization: ``keep_float_ops`` are ONNX op types left out of
``op_types_to_quantize``; ``keep_float_layers`` are layer paths matched
against node names (tf2onnx keeps TensorFlow's ``<layer>/<sublayer>/<op>``
names) and passed as ``nodes_to_exclude``.
"""

import contextlib
import dataclasses
import logging
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper, version_converter
from onnxruntime import quantization as q

from mobilebert_kit.convert.errors import ExportError, check_op_types
from mobilebert_kit.convert.onnx.fused import fuse_blocks, dynamic_form
from mobilebert_kit.convert.onnx.graph import refill, simplify
from mobilebert_kit.convert.onnx.row_scale import scale_rows, weight_matmuls
from mobilebert_kit.convert.quantization.modes import ONNX_INT4_TABLE_BLOCK, nodes_of_layers, quantization_mode
from mobilebert_kit.errors import first_line
from mobilebert_kit.utils.scratch import scratch_directory

DEFAULT_OPSET = 17
# Names of the dynamic batch and sequence dimensions: optimum's, which code written for its exports
# (and tools reading the signature) expect.
DYNAMIC_DIMS = ("batch_size", "sequence_length")
# Weights smaller than this stay float32 in float16 mode (biases, norms: no size gain, some accuracy).
_FLOAT16_MIN_ELEMENTS = 1024


# OnnxQuantizer.activation_scales -> the pass run on the float graph before quantize_dynamic (which then quantizes
# the weights, per output channel).
_ROW_PASSES = {"tensor": lambda model, exclude: 0, "row": scale_rows}


def convert(graph, opset=DEFAULT_OPSET, fused=False):
    """Converts an export graph to an ONNX ModelProto with named, ordered inputs and outputs.

    Dynamic dimensions are named as optimum names them (:data:`DYNAMIC_DIMS`); ``fused`` writes the qualifying
    encoder blocks as ONNX Runtime's fused kernels (module doc).
    """
    # Imported where used: both load TensorFlow, and importing this module does not (onnx_writer imports it;
    # quantize, check and float16_weights work on ONNX models alone).
    import tf2onnx

    from mobilebert_kit.convert.export_model import serving_function

    serve = serving_function(graph)
    try:
        model, _ = tf2onnx.convert.from_function(serve, input_signature=serve.input_signature, opset=int(opset))
    except Exception as err:  # noqa: BLE001  (tf2onnx raises plain Exceptions and ValueErrors)
        raise ExportError(f"tf2onnx conversion (opset {opset}) failed: {first_line(err)}") from err
    outputs = {o.name: o for o in model.graph.output}
    order = list(graph.output_order)
    if sorted(outputs) != sorted(order):
        raise ExportError(f"tf2onnx outputs {sorted(outputs)} differ from the export graph's {sorted(order)}")
    refill(model.graph.output, [outputs[name] for name in order])
    for value in list(model.graph.input) + list(model.graph.output):  # named as optimum names them
        dims = value.type.tensor_type.shape.dim
        for index, label in enumerate(DYNAMIC_DIMS):
            if len(dims) > index and not dims[index].HasField("dim_value"):
                dims[index].dim_param = label
    if fused:
        fuse_blocks(model, graph)
    simplify(model)  # NoNorm after a dense layer (onnx/graph.py)
    model.producer_name = "mobilebert-kit"
    return model


def check(model):
    """Runs ``onnx.checker`` (full check); raises ExportError with its message."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as err:
        raise ExportError(f"the ONNX model fails onnx.checker: {first_line(err)}") from err


class _Reader:
    """ONNX Runtime calibration data reader over an InputSet, feeding each input in the model's type."""

    def __init__(self, calibration, input_dtypes, batch_size):
        self._batches = [{name: np.asarray(rows[name]).astype(dtype) for name, dtype in input_dtypes.items()}
                         for rows in calibration.rows(batch_size)]
        self.rewind()

    def get_next(self):
        return next(self._batches_left, None)

    def rewind(self):
        self._batches_left = iter(self._batches)


def int4_weights(model, block_size):
    """int4 weights through ONNX Runtime's own quantizer; returns the new ModelProto.

    ``MatMulNBits`` takes every weight MatMul (symmetric int4 in blocks of ``block_size`` inputs, int8
    compute: ``accuracy_level`` 4, ORT's fastest on x86 and ARM CPUs), ``GatherBlockQuantized`` the
    embedding tables (blocks of :data:`ONNX_INT4_TABLE_BLOCK`, whose float32 scales cost less than
    blocks of 32 would). Activation x activation products (attention) stay float. ``model``: the float
    ``onnx.ModelProto`` from :func:`convert`.
    """
    # Imported here, inside quantize()'s _quiet_root_logger: the module calls logging.basicConfig at import, which
    # made every later tf2onnx INFO line of the process print to stderr.
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    # int4 tensors need opset 21, which the Gather pass sets without converting the nodes: a ReduceMean or Split
    # kept the attributes opset 18 made inputs (a ModernBERT file failed onnx.checker or ORT's load). Converted
    # here, the quantizer finds opset 21 and leaves it.
    if next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) < 21:
        model = version_converter.convert_version(model, 21)
    for op, axis, block in (("Gather", 1, ONNX_INT4_TABLE_BLOCK), ("MatMul", 0, block_size)):
        config = DefaultWeightOnlyQuantConfig(block_size=block, is_symmetric=True, accuracy_level=4,
                                              op_types_to_quantize=(op,), quant_axes=((op, axis),))
        quantizer = MatMulNBitsQuantizer(model, algo_config=config)
        quantizer.process()
        model = quantizer.model.model
    return model


def quantize(model, quantize="dynamic", calibration=None, input_dtypes=None, keep_float_ops=(),
             keep_float_layers=(), activation_scales=None, dynamic_layers=()):
    """Quantizes a float ONNX ModelProto from :func:`convert` with ONNX Runtime; returns the new ModelProto.

    Args:
        quantize (str): a mode with ONNX Runtime settings (a record's ``onnx_as``).
        calibration (InputSet | None): the rows of a calibrated mode.
        input_dtypes (dict | None): ``{input name: numpy type name}`` (None: read from the graph inputs).
        keep_float_ops (tuple): ONNX op types not to quantize (e.g. ``"MatMul"``).
        keep_float_layers (tuple): layer paths whose nodes stay float.
        activation_scales (str | None): a dynamic mode's key of
            :data:`~mobilebert_kit.convert.quantization.modes.ACTIVATION_SCALES` (None: the record's own);
            benchmarks and tests compare the others with it.
        dynamic_layers (tuple): for a static mode, layer paths whose weight MatMuls get dynamic int8 instead
            (:func:`_dynamic_pass`; no error when the model has none).

    Example:
        >>> quantize(float_model, "dynamic", activation_scales="tensor")  # doctest: +SKIP
        <onnx.ModelProto>
    """
    mode = quantization_mode(quantize)
    if not mode.allows("format:onnx"):
        raise ExportError(f"quantize {quantize} has no ONNX export: {mode.refused['format:onnx']}")
    settings = mode.onnx
    if activation_scales is not None and settings is not None:
        settings = dataclasses.replace(settings, activation_scales=activation_scales)
    if settings is None:
        # A float mode, or one that runs another's quantizer (qat: its record's onnx_as).
        raise ExportError(f"quantize {quantize} has no ONNX Runtime quantizer of its own; pass its onnx_as "
                          f"({mode.onnx_as})")
    # ExportOptions.check refuses this first, naming the options as the user wrote them.
    if (keep_float_ops or keep_float_layers) and not mode.allows("keep_float:onnx"):
        raise ExportError(f"keeping layers/ops in float is refused for quantize {quantize}: "
                          f"{mode.refused['keep_float:onnx']}")
    if settings.method == "float16":
        return float16_weights(model)
    if settings.method == "int4":
        with _quiet_root_logger():  # MatMulNBits takes MatMul, not the fused blocks' Gemm or packed Attention
            return int4_weights(dynamic_form(model, spell_layer_norm=False), settings.block_size)
    if settings.method == "dynamic":
        # quantize_dynamic quantizes MatMul, not Gemm: the fused blocks' Gemms go back to MatMul + Add, which
        # ORT fuses into DynamicQuantizeMatMul with the bias.
        model = dynamic_form(model)
    names = [node.name for node in model.graph.node]  # tf2onnx keeps TensorFlow's <layer>/<sublayer>/<op> names
    exclude = nodes_of_layers(names, keep_float_layers)
    if keep_float_layers and not exclude:
        raise ExportError(f"no ONNX nodes found for layer(s) {', '.join(keep_float_layers)}")
    kept = set(keep_float_ops)
    check_op_types(kept, {node.op_type for node in model.graph.node}, "ONNX")
    with scratch_directory("onnx") as tmp, _quiet_root_logger():
        source, target = Path(tmp) / "float.onnx", Path(tmp) / "quantized.onnx"
        onnx.save(model, str(source))
        try:
            if settings.method == "dynamic":
                row_pass = _ROW_PASSES[settings.activation_scales]
                if "MatMul" not in kept:
                    # Per-row activation scales (OnnxQuantizer.row_activations says why; ACTIVATION_SCALES how).
                    work = onnx.ModelProto()
                    work.CopyFrom(model)
                    row_pass(work, exclude)
                    onnx.save(work, str(source))
                ops = [op for op in ("MatMul", "Gemm", "Attention", "Gather") if op not in kept]
                _quantize_dynamic(source, target, settings, op_types_to_quantize=ops,
                                  nodes_to_exclude=exclude)
            else:
                mode.check_calibration(calibration)
                # keep_float_layers win: a node kept float is not quantized dynamically either.
                excluded = set(exclude)
                dynamic = [name for name in nodes_of_layers(names, dynamic_layers) if name not in excluded]
                batch = model.graph.input[0].type.tensor_type.shape.dim[0]
                batch = batch.dim_value if batch.HasField("dim_value") else 8
                kept |= set(settings.float_ops)  # what ORT cannot run quantized (the record says why)
                ops = [op for op in q.registry.QDQRegistry if op not in kept]
                sixteen = settings.activations == "int16"
                dtypes = input_dtypes or {v.name: helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type).name
                                          for v in model.graph.input}
                q.quantize_static(
                    str(source), str(target), _Reader(calibration, dtypes, batch),
                    quant_format=q.QuantFormat.QDQ, per_channel=True, reduce_range=settings.reduce_range,
                    activation_type=q.QuantType.QInt16 if sixteen else q.QuantType.QUInt8,
                    weight_type=q.QuantType.QInt8, op_types_to_quantize=ops, nodes_to_exclude=exclude + dynamic,
                    calibrate_method=q.CalibrationMethod.MinMax,
                    extra_options={"UseQDQContribOps": sixteen, "ActivationSymmetric": sixteen},
                )
                if dynamic:
                    _dynamic_pass(target, dynamic)
        except ExportError:
            raise
        except Exception as err:  # noqa: BLE001  (ORT quantization raises many types)
            raise ExportError(f"ONNX Runtime {quantize} quantization failed: {first_line(err)}"
                              f"{_short_of_room(tmp, model)}") from err
        return onnx.load(str(target))


def _dynamic_pass(path, names):
    """Quantizes the weight MatMuls among the nodes ``names`` of the static QDQ file at ``path`` dynamically, in place.

    As ``dynamic`` quantizes a weight MatMul (the ``dynamic`` record's settings): each input row scaled to
    [-1, 1] (:mod:`~mobilebert_kit.convert.onnx.row_scale`), then ``quantize_dynamic`` (int8 per-channel
    7-bit weights, ORT's ``DynamicQuantizeMatMul``, float output). Why a LayerNorm model's feed-forward output
    projections take this in full int8 (``layer_norm_dynamic_nodes``): their input (the GELU output) and
    output span MiniLM's outlier channels. Measured on all-MiniLM-L6-v2 (benchmarks/RESULTS.md, issue 45 item
    2): min sentence cosine to PyTorch 0.873 (all static) -> 0.972, per-tensor activation scales 0.939; int8
    weights behind a DequantizeLinear (float MatMul) 0.978 but 1.29x the time.
    """
    model = onnx.load(str(path))
    wanted = set(names)
    targets = [node.name for node in weight_matmuls(model) if node.name in wanted]
    if not targets:
        return
    settings = quantization_mode("dynamic").onnx
    others = [node.name for node in model.graph.node if node.name not in set(targets)]
    _ROW_PASSES[settings.activation_scales](model, others)
    source = Path(path).with_name("static.onnx")
    onnx.save(model, str(source))
    _quantize_dynamic(source, path, settings, op_types_to_quantize=["MatMul"], nodes_to_quantize=targets)


def _quantize_dynamic(source, target, settings, **selection):
    """``quantize_dynamic`` of the ``.onnx`` at ``source`` into ``target`` with a dynamic record's ``settings`` (int8
    weights, ``reduce_range``), the nodes chosen by ``selection`` (``op_types_to_quantize``, ``nodes_to_exclude``,
    ``nodes_to_quantize``)."""
    q.quantize_dynamic(
        str(source), str(target), weight_type=q.QuantType.QInt8, per_channel=True,
        reduce_range=settings.reduce_range,
        # Activation x activation products (attention) stay float, as in TFLite's dynamic range.
        # DefaultTensorType: onnx's shape inference types no output of a com.microsoft kernel
        # (convert/onnx/fused.py), and the quantizer needs each MatMul's input type.
        extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT}, **selection,
    )


def _short_of_room(directory, model):
    """``"; ..."`` naming a temporary directory too full for the quantizer's copies, else ``""``.

    ORT's quantizer writes several copies of the model there; on a full TMPDIR a truncated copy then failed
    to parse, and the error said only "Error parsing message ... Wire format was corrupt".
    """
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return ""
    need = 3 * model.ByteSize()
    if free >= need:
        return ""
    return (f"; the temporary directory {directory} has {free / 1e6:.1f} MB free and the quantizer needs about "
            f"{need / 1e6:.0f} MB: free space there or set TMPDIR to a larger disk")


@contextlib.contextmanager
def _quiet_root_logger():
    """ONNX Runtime's quantizer logs advice ("consider pre-processing", opset upgrades) on the root logger, and
    its int4 module (``matmul_nbits_quantizer``) calls ``logging.basicConfig`` at import and logs each skipped
    node on its own logger: the root's handlers and level, and that logger's level, are put back afterwards."""
    root, nbits = logging.getLogger(), logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer")
    handlers, level, nbits_level = list(root.handlers), root.level, nbits.level
    root.setLevel(logging.ERROR)
    nbits.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        nbits.setLevel(nbits_level)


def float16_weights(model):
    """Stores large float32 initializers as float16 plus a Cast back to float32."""
    graph, casts = model.graph, []
    for init in graph.initializer:
        if init.data_type == onnx.TensorProto.FLOAT and np.prod(init.dims) >= _FLOAT16_MIN_ELEMENTS:
            casts.append(helper.make_node("Cast", [f"{init.name}__fp16"], [init.name], to=onnx.TensorProto.FLOAT,
                                          name=f"{init.name}__to_fp32"))
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), f"{init.name}__fp16"))
    refill(graph.node, casts + list(graph.node))
    return model
