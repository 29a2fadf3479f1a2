"""int4 weights for a float ``.tflite`` graph, written by ai-edge-quantizer (the ``int4*`` quantization modes).

The TFLite converter writes no int4; ai-edge-quantizer 0.10 does, on a float
flatbuffer, one recipe entry per op type (``Int4Weights``: int8 activations
on the fly or weight-only, per channel or in blocks). Three things stand
between our float graphs and a small int4 file:

- The word-embedding table is half of a small encoder, and our graphs read it
  with ``GATHER``, which the quantizer does not quantize (its policy has
  ``EMBEDDING_LOOKUP``; docs/export.md#int4-weights has the sizes).
  :func:`embedding_lookups` rewrites each gather of a large constant 2-D float
  table by rows (``axis 0``) as ``RESHAPE`` (ids to 1-D) -> ``EMBEDDING_LOOKUP``
  -> ``RESHAPE`` (back to ``[..., seq, hidden]``).
- The quantizer refuses a whole graph when a blockwise layout does not divide
  one weight's input width (tiny-mobilebert's 48-wide trigram projection under
  blocks of 32); those weights get one scale per output channel instead.
- The quantizer rewrites the flatbuffer, so our names, metadata and packed
  files are applied afterwards, as for every mode (``tflite.writer``).
"""

import contextlib
import io
import re

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools import flatbuffer_utils as fb

from mobilebert_kit.artifacts.reader import read_tflite_bytes
from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.convert.tflite.flatbuffer import serialized, text_of
from mobilebert_kit.errors import first_line
from mobilebert_kit.utils.quiet import quiet_fd2

# Tables smaller than this stay float (position and segment embeddings: 512 x 384 and 2 x 384 in MiniLM, 0.8 MB):
# a RESHAPE pair per lookup buys nothing there.
_MIN_TABLE_ROWS = 1024
# The op types whose weights the int4 recipes store (input 1: the fully connected kernel [out, in], the lookup
# table [rows, width]); ai-edge-quantizer's TFLOperationName members carry the same names.
_WEIGHTED = ("FULLY_CONNECTED", "EMBEDDING_LOOKUP")
# ai-edge-quantizer's message for a blockwise layout the weight does not divide (0.10).
_UNDIVIDED = re.compile(r"for tensor: (\S+)\. Error: Quantized dimension \d+ in tensor shape (\([\d, ]+\))")


def int4_weights(model_bytes, settings):
    """Returns ``(model_bytes, notes)``: a float ``.tflite`` model with int4 weights as the mode's ``Int4Weights``
    ``settings`` say, and remarks for the export report. A graph the quantizer refuses is an ExportError.
    """
    # Imported here, not at the top: the quantizer loads its own policy tables and litert-lm-builder, which
    # only the int4 modes need (every other export runs without touching it).
    from ai_edge_quantizer import qtyping, quantizer

    data, lookups = embedding_lookups(model_bytes)
    notes = [f"{lookups} embedding table(s) read by EMBEDDING_LOOKUP so they are stored in int4 (one scale per row)"] \
        if lookups else []
    granularity = qtyping.QuantGranularity[settings.granularity]
    undivided = _undivided(data, settings.block_size)
    if undivided:
        notes.append(f"{len(undivided)} weight(s) whose input width is not a multiple of {settings.block_size} "
                     f"stored per channel: {', '.join(sorted(undivided.values()))}")
    what = f"int4 quantization ({settings.granularity.lower()}, {settings.activations} activations)"
    try:
        # The quantizer prints progress bars and a size summary: the export report says what it needs.
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), quiet_fd2():
            q = quantizer.Quantizer(bytearray(data))
            add = q.add_dynamic_config if settings.activations == "int8" else q.add_weight_only_config
            add(".*", qtyping.TFLOperationName.ALL_SUPPORTED, 4, granularity)
            # The quantizer has no blockwise layout for a width the block does not divide and refuses the
            # whole graph (tiny-mobilebert's trigram embedding projection is 48 wide); those ops get one scale
            # per output channel instead. A later entry of the recipe overrides an earlier one for its ops.
            for scope, op_type in undivided:
                add(f"^{re.escape(scope)}$", getattr(qtyping.TFLOperationName, op_type), 4,
                    qtyping.QuantGranularity.CHANNELWISE)
            quantized = bytes(q.quantize().quantized_model)
    except Exception as err:  # noqa: BLE001  (ValueError, RuntimeError ... from the quantizer)
        undivided = _UNDIVIDED.search(str(err))
        if undivided:
            raise ExportError(f"{what}: weight {undivided.group(2)} of {undivided.group(1)} is not a multiple of "
                              f"{settings.block_size} in its input dimension; use --quantize int4 (blocks of 32) or "
                              "per-channel int4 (--quantize int4-channel)") from err
        raise ExportError(f"{what} failed: {first_line(err)}") from err
    if quantized == data or len(quantized) >= len(data):
        raise ExportError(f"{what} quantized no weight: the quantizer's policy has no such recipe for this graph's "
                          "ops")
    return quantized, notes


def _undivided(model_bytes, block_size):
    """``{(op scope, op type): op label}`` of the weighted ops whose input width ``block_size`` does not divide
    (none for per-channel); the scope is the quantizer's name of the op (its output tensor names, each followed
    by ``;``), the label names the layer for the export report."""
    if not block_size:
        return {}
    graph = read_tflite_bytes(model_bytes)
    found = {}
    for op in graph.ops:
        if op["type"] not in _WEIGHTED or len(op["inputs"]) < 2 or op["inputs"][1] < 0:
            continue
        weight = graph.tensors[op["inputs"][1]]
        if weight["constant"] and len(weight["shape"]) == 2 and weight["shape"][-1] % block_size:
            names = [graph.tensors[i]["name"] for i in op["outputs"] if i >= 0]
            label = f"{names[0].split(';')[0].split('/Tensordot')[0]} ({weight['shape'][-1]} wide)"
            found[("".join(f"{n};" for n in names), op["type"])] = label
    return found


def embedding_lookups(model_bytes):
    """Returns ``(model_bytes, rewritten)``: gathers of large constant float tables as ``EMBEDDING_LOOKUP`` (the
    input unchanged when no gather qualified) and how many."""
    model = fb.read_model_from_bytearray(bytearray(model_bytes))
    codes = [fb.get_builtin_code_from_operator_code(c) for c in model.operatorCodes]
    rewritten = 0
    for graph in model.subgraphs:
        operators = []
        for op in graph.operators:
            replaced = _as_lookup(model, graph, codes, op) if codes[op.opcodeIndex] == schema.BuiltinOperator.GATHER \
                else None
            if replaced is None:
                operators.append(op)
            else:
                operators.extend(replaced)
                rewritten += 1
        graph.operators = operators
    return serialized(model, model_bytes, rewritten)


def _as_lookup(model, graph, codes, op):
    """``[RESHAPE, EMBEDDING_LOOKUP, RESHAPE]`` for a qualifying ``GATHER`` op, else None."""
    options = op.builtinOptions
    if getattr(options, "axis", 0) != 0 or getattr(options, "batchDims", 0) != 0:
        return None
    table, ids, out = graph.tensors[op.inputs[0]], graph.tensors[op.inputs[1]], graph.tensors[op.outputs[0]]
    buffer = model.buffers[table.buffer]
    if table.type != schema.TensorType.FLOAT32 or buffer.data is None or len(table.shape) != 2 \
            or table.shape[0] < _MIN_TABLE_ROWS or ids.type != schema.TensorType.INT32:
        return None
    # The output shape back from [rows, hidden]: every id dimension known but at most one (the dynamic sequence).
    ids_shape = list(ids.shapeSignature if ids.shapeSignature is not None else ids.shape)
    if sum(d < 0 for d in ids_shape) > 1:
        return None
    hidden = int(table.shape[1])
    flat = _tensor(model, graph, f"{text_of(ids.name)}/flat", schema.TensorType.INT32, [int(np.prod(ids.shape))],
                   [-1] if -1 in ids_shape else None)
    looked_up = _tensor(model, graph, f"{text_of(out.name)}/rows", schema.TensorType.FLOAT32,
                        [int(np.prod(ids.shape)), hidden], [-1, hidden] if -1 in ids_shape else None)
    flat_shape = _constant(model, graph, f"{text_of(ids.name)}/flat_shape", np.array([-1], np.int32))
    back_shape = _constant(model, graph, f"{text_of(out.name)}/shape", np.array(ids_shape + [hidden], np.int32))
    reshape, lookup = (_opcode(model, codes, code) for code in (schema.BuiltinOperator.RESHAPE,
                                                                  schema.BuiltinOperator.EMBEDDING_LOOKUP))
    return [_operator(reshape, [op.inputs[1], flat_shape], [flat]),
            # EMBEDDING_LOOKUP takes (ids, table), GATHER (table, ids).
            _operator(lookup, [flat, op.inputs[0]], [looked_up]),
            _operator(reshape, [looked_up, back_shape], [op.outputs[0]])]


def _tensor(model, graph, name, dtype, shape, signature=None):
    tensor = schema.TensorT()
    tensor.name, tensor.type, tensor.shape = name, dtype, list(shape)
    tensor.shapeSignature = list(signature) if signature is not None else None
    buffer = schema.BufferT()
    model.buffers.append(buffer)
    tensor.buffer = len(model.buffers) - 1
    graph.tensors.append(tensor)
    return len(graph.tensors) - 1


def _constant(model, graph, name, values):
    index = _tensor(model, graph, name, schema.TensorType.INT32, values.shape)
    model.buffers[graph.tensors[index].buffer].data = np.frombuffer(values.astype("<i4").tobytes(), np.uint8)
    return index


def _opcode(model, codes, code):
    if code not in codes:
        entry = schema.OperatorCodeT()
        entry.builtinCode = code
        entry.deprecatedBuiltinCode = min(code, 127)
        entry.version = 1
        model.operatorCodes.append(entry)
        codes.append(code)
    return codes.index(code)


def _operator(opcode, inputs, outputs):
    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = opcode, list(inputs), list(outputs)
    return op
