"""Post-conversion passes on full-integer ``.tflite`` graphs: int8 attention XNNPACK can run, and dynamic-range
fully connected layers where a static int8 output would lose the residual stream's outlier channels.

Why: the XNNPACK delegate (LiteRT 2.3) takes a signed-int8 ``BATCH_MATMUL``
only when its *second* operand has zero point 0, the way weights are
quantized. The TFLite converter calibrates K (of ``Q.K^T``) and V (of
``P.V``) asymmetrically, so in a full-int8 MobileBERT 44 of 48 attention
batch matmuls fall back to the builtin kernels and split the graph into ~50
delegate partitions with quantize/dequantize traffic between them. Measured
(benchmarks/perf/NOTES.md): full int8 went from 1.90x to 1.10x the latency
of dynamic-range int8 with this pass alone.

What the pass changes: for every ``BATCH_MATMUL`` whose second operand is
int8 with a non-zero zero point, that tensor and every tensor tied to it
through ops that must keep input and output parameters equal (:data:`_TIED`:
``RESHAPE``, ``TRANSPOSE``, and the slicing and joining ops: ``SPLIT`` of a
fused ``qkv`` projection, ``STRIDED_SLICE`` and ``CONCATENATION`` of a
rotation) get symmetric parameters over the same real range:
``scale = max(|min|, |max|) / 127``, zero point 0. The op that produces the
chain (a ``FULLY_CONNECTED``, an ``ADD``) requantizes to whatever its output
declares, so no op is added; the tensor loses at most one bit of resolution.
A constant in a chain (DeBERTa's projected position table, gathered) is
requantized to the new parameters; chains that start at a graph input or end
at a graph output are left alone (the caller's quantization would have to
change), and so are those whose constant bytes another tensor shares. A tie left out breaks the graph: ModernBERT's V, one output of its
``qkv`` ``SPLIT``, made symmetric alone left the ``SPLIT``'s outputs unequal,
and XNNPACK refused to prepare the file (the builtin kernel copies the bytes
and would compute with the wrong scale).
"""

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools import flatbuffer_utils as fb

from mobilebert_kit.convert.tflite.flatbuffer import serialized, text_of

# Ops whose int8 kernels require identical input/output quantization: op -> the data input tied to every
# output (None: every input, as CONCATENATION joins them).
_TIED = {"RESHAPE": 0, "TRANSPOSE": 0, "SPLIT": 1, "SPLIT_V": 0, "STRIDED_SLICE": 0, "SLICE": 0, "GATHER": 0,
         "CONCATENATION": None}


def symmetric_matmul_operands(model_bytes):
    """Returns ``(model_bytes, tensors_changed)`` with symmetric int8 second operands of BATCH_MATMUL (the input
    bytes unchanged when nothing needed it)."""
    model = fb.read_model_from_bytearray(bytearray(model_bytes))
    names = {v: k for k, v in schema.BuiltinOperator.__dict__.items() if not k.startswith("_")}
    changed = 0
    for graph in model.subgraphs:
        def op_name(op):
            return names.get(fb.get_builtin_code_from_operator_code(model.operatorCodes[op.opcodeIndex]))

        parent = list(range(len(graph.tensors)))

        def find(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for op in graph.operators:
            name = op_name(op)
            if name not in _TIED or not len(op.inputs) or not len(op.outputs):
                continue
            data = [int(t) for t in op.inputs if t >= 0] if _TIED[name] is None else [int(op.inputs[_TIED[name]])]
            for tensor in data + [int(t) for t in op.outputs[1:]]:
                parent[find(tensor)] = find(int(op.outputs[0]))
        members = {}
        for i in range(len(graph.tensors)):
            members.setdefault(find(i), []).append(i)
        boundary = {int(t) for t in graph.inputs} | {int(t) for t in graph.outputs}
        done = set()
        for op in graph.operators:
            if op_name(op) != "BATCH_MATMUL" or len(op.inputs) < 2:
                continue
            root = find(int(op.inputs[1]))
            if root in done:
                continue
            done.add(root)
            chain = members[root]
            params = [_int8_params(graph.tensors[t], schema) for t in chain]
            if any(p is None for p in params) or len({p for p in params}) != 1:
                continue  # not uniformly per-tensor int8: nothing we can safely rewrite
            scale, zero = params[0]
            if zero == 0:
                continue
            constants = [t for t in chain if _has_data(model, graph.tensors[t])]
            buffers = {graph.tensors[t].buffer for t in constants}
            shared = any(tensor.buffer in buffers for i, tensor in enumerate(graph.tensors) if i not in chain)
            if shared or any(t in boundary for t in chain):
                continue
            bound = max(abs((-128 - zero) * scale), abs((127 - zero) * scale))
            for t in constants:  # a folded constant in the chain (DeBERTa's projected position table): its bytes
                buffer = model.buffers[graph.tensors[t].buffer]
                real = (np.frombuffer(bytes(bytearray(buffer.data)), np.int8).astype(np.float64) - zero) * scale
                buffer.data = np.clip(np.round(real / (bound / 127.0)), -127, 127).astype(np.int8).view(np.uint8)
            for t in chain:
                q = graph.tensors[t].quantization
                q.scale = np.array([bound / 127.0], np.float32)
                q.zeroPoint = np.array([0], np.int64)
            changed += len(chain)
    return serialized(model, model_bytes, changed)


def _int8_params(tensor, schema):
    q = tensor.quantization
    if tensor.type != schema.TensorType.INT8 or q is None or q.scale is None or q.zeroPoint is None:
        return None
    if len(q.scale) != 1 or len(q.zeroPoint) != 1:
        return None
    return float(q.scale[0]), int(q.zeroPoint[0])


def _has_data(model, tensor):
    buffer = model.buffers[tensor.buffer] if tensor.buffer < len(model.buffers) else None
    return buffer is not None and buffer.data is not None and len(buffer.data) > 0


def dynamic_range_weights(model_bytes, names):
    """Returns ``(model_bytes, changed)``: the float ``FULLY_CONNECTED`` ops writing ``names`` with int8 weights.

    Each constant float kernel ``[out, in]`` becomes symmetric int8 with one scale per output channel and the op
    quantizes its float input on the fly (``asymmetric_quantize_inputs``), as a dynamic-range file's layers do:
    XNNPACK runs it with the int8 kernels and writes a float output, so no static output range applies.
    ``names``: output tensor names of the ops to rewrite; ops that are not float fully connected layers with a
    constant 2-D kernel are left alone.
    """
    wanted = set(names)
    model = fb.read_model_from_bytearray(bytearray(model_bytes))
    changed = 0
    for graph in model.subgraphs:
        for op in graph.operators:
            code = fb.get_builtin_code_from_operator_code(model.operatorCodes[op.opcodeIndex])
            if code != schema.BuiltinOperator.FULLY_CONNECTED or len(op.inputs) < 2 or not any(
                    text_of(graph.tensors[t].name) in wanted for t in op.outputs):
                continue
            data, kernel = graph.tensors[op.inputs[0]], graph.tensors[op.inputs[1]]
            buffer = model.buffers[kernel.buffer]
            if data.type != schema.TensorType.FLOAT32 or kernel.type != schema.TensorType.FLOAT32 \
                    or not _has_data(model, kernel) or len(kernel.shape) != 2:
                continue
            weights = np.frombuffer(bytes(buffer.data), "<f4").reshape(kernel.shape)
            scale = np.maximum(np.abs(weights).max(axis=1), np.finfo(np.float32).tiny) / 127.0
            buffer.data = np.frombuffer(np.clip(np.round(weights / scale[:, None]), -127, 127).astype(np.int8)
                                        .tobytes(), np.uint8)
            kernel.type = schema.TensorType.INT8
            kernel.quantization = schema.QuantizationParametersT()
            kernel.quantization.scale = scale.astype(np.float32)
            kernel.quantization.zeroPoint = np.zeros(len(scale), np.int64)
            kernel.quantization.quantizedDimension = 0
            op.builtinOptions.asymmetricQuantizeInputs = True
            changed += 1
    return serialized(model, model_bytes, changed)
