"""TFLite conversion in every quantization mode the toolkit offers.

The modes, what each needs and allows, and the converter settings each one
uses are records in :mod:`mobilebert_kit.convert.quantization.modes`
(:class:`~mobilebert_kit.convert.quantization.modes.TfliteSettings` says what
each field does); this module applies a record to ``tf.lite.TFLiteConverter``.
Calibrated modes get a representative dataset; for ``qat`` the tensors without
a learned range are calibrated on the same data. ``io_type="int8"`` also
quantizes the float inputs/outputs (the mask and the outputs; token ids stay int32).

Selective quantization (``keep_float_ops`` by TFLite op type such as
``"SOFTMAX"``, ``keep_float_layers`` by layer name such as
``"transformer_layer_3"``) calibrates first and then quantizes with those ops
deny-listed, the mechanism of TFLite's quantization debugger. With
``keep_float_ops=None`` a mode's ``default_float_ops`` / ``default_float_nodes``
apply (full int8: SOFTMAX and the mask ADD, the record says why); pass
``keep_float_ops=()`` for an all-integer softmax (for integer-only
accelerators).
"""

import numpy as np
from ai_edge_litert.tools import flatbuffer_utils as fb

from mobilebert_kit.artifacts.reader import read_tflite_bytes
from mobilebert_kit.backend import tf
from mobilebert_kit.convert.errors import ExportError, check_op_types
from mobilebert_kit.convert.export_model import serving_function
from mobilebert_kit.convert.quantization.modes import DYNAMIC_GROUP, nodes_of_layers, quantization_mode
from mobilebert_kit.convert.tflite.hybrid_convs import float_hybrid_depthwise
from mobilebert_kit.convert.tflite.int4 import int4_weights
from mobilebert_kit.convert.tflite.int8_graph import dynamic_range_weights, symmetric_matmul_operands
from mobilebert_kit.errors import check_choice, first_line
from mobilebert_kit.utils.quiet import quiet_fd2

IO_TYPES = ("float32", "int8")


def _converter(graph):
    serve = serving_function(graph)
    # A bare tf.Module holding the weights, not the Keras model: the converter
    # saves its trackable as a SavedModel first (that is what yields the
    # serving signature), and saving a Keras model traces every layer's call
    # again: 5.6 s against 1.4 s for tiny-mobilebert on the 2-core test machine.
    holder = tf.Module()
    holder.weights = list(graph.weights)
    holder.serve = serve
    return tf.lite.TFLiteConverter.from_concrete_functions([serve.get_concrete_function()], holder)


# How many calibration rows a dynamic-length file also sees padded (min/max ranges: a few padded rows reach the
# pad positions' and the mask's extremes as all of them would, at a fraction of the calibration time).
PADDED_CALIBRATION_ROWS = 8


def _representative(graph, calibration):
    """The converter's representative dataset: a callable yielding dicts of input arrays (``_calibration_rows``)."""
    return lambda: (arrays for arrays, _ in _calibration_rows(graph, calibration))


def _calibration_rows(graph, calibration):
    """``(arrays, padded)`` per calibration sample; ``padded``: a dynamic-length file's row fed with its padding."""
    batch = graph.inputs[0].shape[0] or 1
    # A dynamic-length file (inputs [1, -1]) is fed each text at its own token count by the clients, never
    # padding: it is calibrated on the rows cut to their real tokens, so its ranges are those of the app's inputs
    # and of several lengths (the converter's calibrator resizes the inputs per sample). The first rows are fed
    # padded too: rows that are never padded give the attention mask's (1 - mask) * value a range of [0, 0], and
    # a caller that pads (validation, a batching app) then got no mask at all: all-MiniLM-L6-v2 in full int8
    # fell to cosine 0.52-0.62 against 0.92 for the static file on the same padded rows.
    open_sequence = graph.inputs[0].shape[1] is None
    for index, rows in enumerate(calibration.rows(batch)):
        arrays = {name: np.asarray(rows[name]).astype(dtype) for name, dtype in graph.input_dtypes.items()}
        if open_sequence:
            length = _real_length(rows["attention_mask"])
            yield {name: array[:, :length] for name, array in arrays.items()}, False
            if index < PADDED_CALIBRATION_ROWS and length < np.asarray(rows["attention_mask"]).shape[1]:
                yield arrays, True
        else:
            yield arrays, False


def _measured_ranges(calibrated, rows):
    """``calibrated`` with each recorded activation range measured again on ``rows``, every tensor kept apart.

    TFLite's calibrator records an op's input after the op has run, and the interpreter runs element-wise ops in
    place (the output in its input's buffer), so every input of an in-place ADD, SUB or MUL got the range of the
    op's output joined to its own. Measured on all-MiniLM-L6-v2 (issue 46): each attention-score BATCH_MATMUL
    took the range of the masked scores after the mask ADD ([-137, 14] for real scores within [-17, 14]: one int8
    step 0.59 logits, a factor 1.8 in a softmax weight), each block output projection that of the residual sum.
    A one-ULP difference in a float LayerNorm output that crossed an int8 rounding tie (aarch64 against x86-64
    kernels) then moved a whole sentence embedding to cosine 0.963. Here the rows run again with
    ``experimental_preserve_all_tensors`` (each tensor its own buffer, nothing in place) on the builtin kernels,
    and every range the calibrator recorded is replaced by the one measured.

    A padded row (``_calibration_rows``) counts only for the tensors that the unpadded rows hold at one value (the
    attention mask's path): its padded queries' scores reached [-108, 56] in MiniLM's first layer, where the real
    tokens' lie in [-30, 36], and they reach no output an app reads (masked keys, masked pooling).
    """
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    model = fb.read_model_from_bytearray(bytearray(calibrated))
    tensors = model.subgraphs[0].tensors
    logged = [i for i, t in enumerate(tensors)
              if t.quantization is not None and t.quantization.min is not None and len(t.quantization.min) == 1]
    if not logged:
        return calibrated
    interpreter = Interpreter(model_content=bytes(calibrated), experimental_preserve_all_tensors=True,
                              experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    run = interpreter.get_signature_runner()
    ranges = ({}, {})  # unpadded, padded: {tensor: (min, max)}
    for sample, padded in rows:
        run(**sample)
        seen = ranges[padded]
        for i in logged:
            value = interpreter.get_tensor(i)
            if value.size:
                low, high = seen.get(i, (np.inf, -np.inf))
                seen[i] = (min(low, float(value.min())), max(high, float(value.max())))
    for i in logged:
        low, high = ranges[False].get(i, (np.inf, -np.inf))
        if low >= high and i in ranges[True]:
            low, high = min(low, ranges[True][i][0]), max(high, ranges[True][i][1])
        if low <= high:
            tensors[i].quantization.min = np.array([low], np.float32)
            tensors[i].quantization.max = np.array([high], np.float32)
    return bytes(fb.convert_object_to_bytearray(model))


def _real_length(mask):
    """The tokens up to the last real one of any row of ``mask`` (``[n, seq]``; at least 1)."""
    real = np.flatnonzero(np.asarray(mask).astype(bool).any(axis=0))
    return int(real[-1]) + 1 if real.size else 1


def convert(graph, quantize="none", calibration=None, io_type="float32", keep_float_ops=None, keep_float_layers=(),
            calibrated=None, layer_norm=False):
    """Converts an export graph (:func:`~mobilebert_kit.convert.export_model.build_export_model`) to TFLite bytes.

    ``graph`` is, for ``qat``, the quantization-aware one; ``keep_float_ops`` None: the mode's defaults (with
    ``layer_norm``, its ``layer_norm_*`` nodes too). ``calibrated`` caches calibrated models for several
    conversions of one ``graph`` on one ``calibration`` (a quantization search): selective quantization
    calibrates once per mode and io type and only re-quantizes with each deny-list (calibrating is ~80% of a
    tiny conversion). Returns ``(model_bytes, notes)``: the raw converter output (names are fixed later by
    ``tflite.flatbuffer.finalize``) and a list of remarks.

    Example:
        >>> data, notes = convert(graph, "dynamic")  # doctest: +SKIP
    """
    mode = quantization_mode(quantize)
    check_choice("io_type", io_type, IO_TYPES)
    settings = mode.tflite
    notes = []
    default_nodes = ()
    asked_ops = tuple(keep_float_ops or ())  # the user's own: each must name an op type of the graph
    if keep_float_ops is None:
        # int8 inputs/outputs ask for an integer-only graph (accelerators): no float default there.
        defaults = io_type == "float32"
        keep_float_ops = settings.default_float_ops if defaults else ()
        groups = (("attention-mask ADD", settings.default_float_nodes),
                  ("LayerNorm and residual ADD", settings.layer_norm_float_nodes if layer_norm else ()),
                  (DYNAMIC_GROUP, settings.layer_norm_dynamic_nodes if layer_norm else ()))
        default_nodes = tuple((label, nodes) for label, nodes in groups if nodes) if defaults else ()
    # ExportOptions.check refuses these first, naming the options as the user wrote them.
    if io_type == "int8" and not mode.allows("int8_io"):
        raise ExportError(f"io_type int8 needs quantize int8 or qat, not {quantize}: {mode.refused['int8_io']}")
    selective = bool(keep_float_ops or keep_float_layers)
    if selective and not mode.allows("keep_float:tflite"):
        raise ExportError(f"keeping layers/ops in float is refused for quantize {quantize}: "
                          f"{mode.refused['keep_float:tflite']}")
    mode.check_calibration(calibration)
    converter = _converter(graph)
    if settings.optimize:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if settings.float16_weights:
        converter.target_spec.supported_types = [tf.float16]
    if mode.calibration:
        # For qat: tensors without a learned range (inside the blocks) are calibrated on the same data.
        converter.representative_dataset = _representative(graph, calibration)
    if settings.int16_activations:
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8,
            tf.lite.OpsSet.TFLITE_BUILTINS,
        ]
    if io_type == "int8":
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    try:
        # Every int8 calibration goes through _selective (nothing deny-listed when nothing is kept float), so its
        # ranges are measured with each tensor kept apart (_measured_ranges); int16x8 and qat keep the converter's.
        if selective or (mode.calibration and not settings.int16_activations and not mode.trains):
            data = _selective(converter, graph, calibration, io_type, keep_float_ops, keep_float_layers, notes,
                              default_nodes, calibrated, (quantize, io_type), asked_ops)
        else:
            with quiet_fd2():  # calibrated conversions print the quantizer's settings from C++
                data = converter.convert()
    except ExportError:
        raise
    except Exception as err:  # noqa: BLE001  (ConverterError, OpError, ValueError, RuntimeError ...)
        raise ExportError(f"TFLite conversion ({quantize}) failed: {first_line(err)}") from err
    if settings.int4 is not None:
        data, written = int4_weights(data, settings.int4)
        notes.extend(written)
    if settings.float_hybrid_convs:
        data, changed = float_hybrid_depthwise(data)
        if changed:
            notes.append(f"{changed} depthwise convolution filter(s) kept float32 (XNNPACK has no hybrid kernel)")
    if settings.symmetric_matmuls:
        data, changed = symmetric_matmul_operands(data)
        if changed:
            notes.append(f"{changed} attention matmul operand tensor(s) made symmetric int8 (XNNPACK runs them)")
    return data, notes


def _selective(converter, graph, calibration, io_type, keep_float_ops, keep_float_layers, notes, default_nodes=(),
               calibrated=None, key=None, asked_ops=()):
    """Calibrate, then quantize with ops/nodes deny-listed (TFLite's selective quantization).

    ``default_nodes`` are ``(label, layer paths)`` groups kept float by default: unlike ``keep_float_layers``
    it is no error when a model has none of them (another attention type); the note counts each group. The
    ``DYNAMIC_GROUP``'s fully connected layers then get dynamic-range int8 weights
    (``int8_graph.dynamic_range_weights``).
    """
    # Imported where used: at the top it would sit above the backend import and load TensorFlow before
    # mobilebert_kit.backend silences its start-up banners.
    from tensorflow.lite.python import convert as lite_convert

    cache = {} if calibrated is None else calibrated
    if key not in cache:
        converter._experimental_calibrate_only = True  # noqa: SLF001  (the public debugger uses the same switch)
        cache[key] = _measured_ranges(converter.convert(), _calibration_rows(graph, calibration))
    calibrated = cache[key]
    graph_of_calibrated = read_tflite_bytes(calibrated)  # parsed once: the node names and the op types below
    # TFLite node names: each op's output tensor names (``<graph>/<layer>/<sublayer>/<op>``, fused ones joined by ';').
    names = [graph_of_calibrated.tensors[index]["name"] for op in graph_of_calibrated.ops for index in op["outputs"]]
    nodes = nodes_of_layers(names, keep_float_layers)
    if keep_float_layers and not nodes:
        raise ExportError(
            f"no ops found for layer(s) {', '.join(keep_float_layers)}; use layer names such as "
            "transformer_layer_0, embeddings, transformer_layer_0/attention"
        )
    # The note names the op types the graph has: the defaults list some that only some tasks produce.
    present = {op["type"] for op in graph_of_calibrated.ops}
    check_op_types({op.upper() for op in asked_ops}, present, "TFLite")
    named = sorted(op.upper() for op in keep_float_ops if op.upper() in present)
    kept = [f"op types {', '.join(named)}"] if named else []
    kept += [f"{len(nodes)} node(s) of {', '.join(sorted(keep_float_layers))}"] if keep_float_layers else []
    dynamic = []
    for label, paths in default_nodes:
        extra = [n for n in nodes_of_layers(names, paths) if n not in nodes]
        if extra:
            kept.append(f"{len(extra)} {label} node(s)")
            nodes = nodes + extra
            dynamic += extra if label == DYNAMIC_GROUP else []
    if kept:
        notes.append("kept in float: " + "; ".join(kept))
    dtype = tf.int8 if io_type == "int8" else tf.float32
    with quiet_fd2():  # the quantizer prints its settings ("fully_quantize: 0, ...") from C++
        data = lite_convert.mlir_quantize(
            calibrated,
            fully_quantize=io_type == "int8",
            input_data_type=dtype,
            output_data_type=dtype,
            denylisted_ops=[op.upper() for op in keep_float_ops],
            denylisted_nodes=nodes,
        )
    if dynamic:
        data, changed = dynamic_range_weights(data, dynamic)
        notes.append(f"{changed} {DYNAMIC_GROUP}(s) with int8 weights, activations quantized on the fly (float "
                     "output)")
    return data
