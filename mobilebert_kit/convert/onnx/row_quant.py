"""Dynamic int8 for ONNX with one activation scale per row (token), as TFLite's dynamic-range kernels do.

Since issue 36 this is the ``row-graph`` record of
:data:`~mobilebert_kit.convert.quantization.modes.ACTIVATION_SCALES`, no longer the default: it runs outside
ONNX Runtime's fused kernels (2.1-2.4x Hugging Face's ``quantize_dynamic`` file on ``mobilebert``), and
:mod:`~mobilebert_kit.convert.onnx.row_scale` gets per-row scales inside them.

Why: ONNX Runtime's ``quantize_dynamic`` puts one ``DynamicQuantizeLinear``
before each weight MatMul: one uint8 scale and zero point for the whole
``[batch, seq, in]`` activation. A trained encoder's tokens differ in range
([CLS]/[SEP] and a few others carry much larger values), so one scale for all
of them spends the 8 bits on the widest token. TFLite's hybrid
FULLY_CONNECTED quantizes each input row on its own (asymmetric, per row).
Measured on all-MiniLM-L6-v2, seq 64, sentence-embedding cosine to the float
ONNX file on 300 held-out CrowdFlower tweets (``/tmp/q15/sentences.txt``):

============================================  =======  =======
variant                                         mean     min
============================================  =======  =======
ORT ``quantize_dynamic`` (per-tensor activations, 7-bit per-channel weights)  0.9898   0.9785
  same, 8-bit weights (``reduce_range`` off)    0.9901   0.9808
  same, embeddings (Gather) left float          0.9899   0.9749
  same, FFN output MatMuls left float           0.9946   0.9876
per-row symmetric activations, 7-bit weights    0.9952   0.9894
per-row asymmetric activations, 7-bit weights   0.9967   0.9926
TFLite dynamic-range int8 (same sentences)      0.9985   0.9965
============================================  =======  =======

So the cause is the per-tensor activation scale, not ``reduce_range``, the
embedding Gather or one group of layers. Only standard ONNX ops are used
(``MatMulInteger`` and element-wise ops), so any ONNX runtime can run the file.

The graph per weight MatMul (``x [..., K] @ W [K, N]``, ``W`` a constant)::

    lo, hi = min(ReduceMin(x, -1), 0), max(ReduceMax(x, -1), 0)   # per row
    scale  = max((hi - lo) / 255, tiny);  nzp = Round(lo / scale)   # nzp = -zero point
    xq     = QuantizeLinear(x / scale - nzp, 1, uint8 0)   # in [0, 255]
    y      = (Cast(MatMulInteger(xq, Wq)) + nzp * colsum(Wq)) * scale * w_scale

``MatMulInteger`` takes only a scalar activation zero point in ONNX Runtime
("input1 zero point must be a scalar"), hence the exact column-sum correction
with zero point 0 instead. The activations are uint8 with weights of
``weight_bits`` (7 where the u8 x s8 kernel sums pairs in int16, see
``OnnxQuantizer.reduce_range``): 255 x 63 x 2 < 32767, no saturation.

Example:
    >>> count = quantize_rows(model, exclude={"encoder/pooler/MatMul"}, weight_bits=7)  # doctest: +SKIP
    >>> count
    37
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from mobilebert_kit.convert.onnx.row_scale import weight_matmuls

# Smallest per-row scale: an all-zero row would divide by zero.
_TINY_SCALE = 1e-12


def _const(graph, name, value):
    graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    return name


def _opset(model):
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=17)


def quantize_rows(model, exclude=(), weight_bits=8, per_channel=True):
    """Rewrites weight MatMuls in place to uint8 per-row activations x int8 weights; returns how many.

    Args:
        model (onnx.ModelProto): a float model (tf2onnx output).
        exclude (Iterable[str]): node names left float (``keep_float_layers`` matches).
        weight_bits (int): 8, or 7 where the CPU kernel saturates (``OnnxQuantizer.reduce_range``).
        per_channel (bool): one weight scale per output column (else one per weight).

    Returns:
        int: the number of MatMuls rewritten.

    Example:
        >>> quantize_rows(model, weight_bits=7)  # doctest: +SKIP
        37
    """
    graph = model.graph
    targets = {n.name for n in weight_matmuls(model, exclude)}
    if not targets:
        return 0
    weights = {i.name: i for i in graph.initializer}
    opset = _opset(model)
    prefix = "rowq"
    one = _const(graph, f"{prefix}/one", np.array(1.0, np.float32))
    zero_f = _const(graph, f"{prefix}/zero", np.array(0.0, np.float32))
    zero_u8 = _const(graph, f"{prefix}/zero_u8", np.array(0, np.uint8))
    inv255 = _const(graph, f"{prefix}/inv255", np.array(1.0 / 255.0, np.float32))
    tiny = _const(graph, f"{prefix}/tiny", np.array(_TINY_SCALE, np.float32))
    axes = _const(graph, f"{prefix}/axes", np.array([-1], np.int64)) if opset >= 18 else None
    qmax = 2 ** (int(weight_bits) - 1) - 1
    nodes, used_weights, quantized = [], set(), {}
    for index, node in enumerate(graph.node):
        if node.name not in targets:
            nodes.append(node)
            continue
        w = numpy_helper.to_array(weights[node.input[1]]).astype(np.float32)
        bound = np.abs(w).max(axis=0) if per_channel else np.full(w.shape[1], np.abs(w).max())
        w_scale = (np.maximum(bound, 1e-30) / qmax).astype(np.float32)
        wq = np.clip(np.round(w / w_scale), -qmax, qmax).astype(np.int8)
        # Short generated names: 16 nodes per MatMul named after its full layer path made a tiny model's
        # dynamic file larger than its float one; the last node keeps the MatMul's name (the layer path).
        p = f"{prefix}{index}"
        wq_name = _const(graph, f"{p}/weight_q", wq)
        ws_name = _const(graph, f"{p}/weight_scale", w_scale)
        colsum = _const(graph, f"{p}/weight_colsum", wq.astype(np.float32).sum(axis=0))
        x, y = node.input[0], node.output[0]
        if x not in quantized:
            # Q, K and V read the same input: quantize it once (a third of the rewritten MatMuls).
            quantized[x] = _quantize_input(x, f"{p}/in", axes, zero_f, inv255, tiny, one, zero_u8, nodes)
        x_q, scale, nzp = quantized[x]
        t = lambda s: f"{p}/{s}"  # noqa: E731
        nodes += [
            helper.make_node("MatMulInteger", [x_q, wq_name], [t("y_int")], name=t("y_int")),
            helper.make_node("Cast", [t("y_int")], [t("y_float")], to=TensorProto.FLOAT, name=t("y_float")),
            helper.make_node("Mul", [nzp, colsum], [t("zp_term")], name=t("zp_term")),
            helper.make_node("Add", [t("y_float"), t("zp_term")], [t("y_steps")], name=t("y_steps")),
            helper.make_node("Mul", [t("y_steps"), scale], [t("y_row")], name=t("y_row")),
            helper.make_node("Mul", [t("y_row"), ws_name], [y], name=node.name),
        ]
        used_weights.add(node.input[1])
    del graph.node[:]
    graph.node.extend(nodes)
    still_used = {i for n in graph.node for i in n.input}
    kept = [i for i in graph.initializer if i.name not in used_weights or i.name in still_used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return len(targets)


def _quantize_input(x, p, axes, zero_f, inv255, tiny, one, zero_u8, nodes):
    """Appends the per-row uint8 quantization of ``x`` to ``nodes``; returns (x_q, scale, -zero point) names."""
    def reduce(op, out):
        if axes is not None:
            return helper.make_node(op, [x, axes], [out], keepdims=1, name=out)
        return helper.make_node(op, [x], [out], axes=[-1], keepdims=1, name=out)

    t = lambda s: f"{p}/{s}"  # noqa: E731
    nodes += [
        reduce("ReduceMax", t("max")), reduce("ReduceMin", t("min")),
        # The range holds 0 (TFLite's rule too): 0 stays exact, and a constant non-zero row gets a
        # scale of its own size instead of ``tiny`` (x / tiny would lose every digit in float32).
        helper.make_node("Max", [t("max"), zero_f], [t("hi")], name=t("hi")),
        helper.make_node("Min", [t("min"), zero_f], [t("lo")], name=t("lo")),
        helper.make_node("Sub", [t("hi"), t("lo")], [t("range")], name=t("range")),
        helper.make_node("Mul", [t("range"), inv255], [t("scale0")], name=t("scale0")),
        helper.make_node("Max", [t("scale0"), tiny], [t("scale")], name=t("scale")),
        helper.make_node("Div", [t("lo"), t("scale")], [t("lo_steps")], name=t("lo_steps")),
        helper.make_node("Round", [t("lo_steps")], [t("nzp")], name=t("nzp")),
        helper.make_node("Div", [x, t("scale")], [t("x_steps")], name=t("x_steps")),
        helper.make_node("Sub", [t("x_steps"), t("nzp")], [t("x_shifted")], name=t("x_shifted")),
        helper.make_node("QuantizeLinear", [t("x_shifted"), one, zero_u8], [t("x_q")], name=t("x_q")),
    ]
    return t("x_q"), t("scale"), t("nzp")
