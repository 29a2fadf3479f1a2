"""Post-conversion pass on dynamic-range ``.tflite`` graphs: float weights for hybrid depthwise convolutions.

Why: dynamic-range quantization stores every large enough weight as int8, and a
``DEPTHWISE_CONV_2D`` with float input and int8 filter is a *hybrid* op. The
XNNPACK delegate (LiteRT 2.3) has no hybrid depthwise convolution, so the op
runs on LiteRT's builtin kernels and cuts the delegated graph in two. ConvBERT's
span-based dynamic convolution has one per layer: a dynamic-int8
``convbert-small`` ran in 13 XNNPACK partitions with 12 ops left to the builtin
kernels (benchmarks/RESULTS.md, issue 17 variants on the VNNI host). Its filters
are tiny (kernel width x channels, a few KB each), so storing them in float32
costs nothing in size and gives every op of the file to XNNPACK.

What the pass changes: for every ``DEPTHWISE_CONV_2D`` whose input is float32 and
whose filter is a constant int8 tensor, the filter's bytes become the float32
values it stood for (``q * scale`` per channel, zero points are 0 for weights)
and the tensor loses its quantization parameters. No op is added or removed, and
the result is the same function as the hybrid op up to the float rounding of its
on-the-fly activation quantization.
"""

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools import flatbuffer_utils as fb

from mobilebert_kit.convert.tflite.flatbuffer import serialized


def float_hybrid_depthwise(model_bytes):
    """Returns ``(model_bytes, filters_changed)`` with the int8 filters of hybrid depthwise convolutions of a
    dynamic-range ``.tflite`` in float32 (the input bytes unchanged when no op needed it)."""
    model = fb.read_model_from_bytearray(bytearray(model_bytes))
    depthwise = schema.BuiltinOperator.DEPTHWISE_CONV_2D
    users = {}  # buffer index -> how many tensors read it (a shared filter buffer is left alone)
    for graph in model.subgraphs:
        for tensor in graph.tensors:
            users[tensor.buffer] = users.get(tensor.buffer, 0) + 1
    changed = 0
    for graph in model.subgraphs:
        for op in graph.operators:
            code = fb.get_builtin_code_from_operator_code(model.operatorCodes[op.opcodeIndex])
            if code != depthwise or len(op.inputs) < 2:
                continue
            source, weights = graph.tensors[int(op.inputs[0])], graph.tensors[int(op.inputs[1])]
            if source.type != schema.TensorType.FLOAT32 or weights.type != schema.TensorType.INT8:
                continue
            buffer = model.buffers[weights.buffer] if weights.buffer < len(model.buffers) else None
            q = weights.quantization
            if buffer is None or buffer.data is None or not len(buffer.data) or users[weights.buffer] != 1 \
                    or q is None or q.scale is None:
                continue
            values = np.frombuffer(bytes(buffer.data), np.int8).reshape(tuple(weights.shape)).astype(np.float32)
            scale = np.asarray(q.scale, np.float32)
            zero = np.zeros_like(scale) if q.zeroPoint is None else np.asarray(q.zeroPoint, np.float32)
            if scale.size > 1:  # per channel, along the quantized dimension
                shape = [1] * values.ndim
                shape[int(q.quantizedDimension)] = scale.size
                scale, zero = scale.reshape(shape), zero.reshape(shape)
            buffer.data = np.frombuffer(((values - zero) * scale).astype("<f4").tobytes(), np.uint8)
            weights.type = schema.TensorType.FLOAT32
            weights.quantization = None
            changed += 1
    return serialized(model, model_bytes, changed)
