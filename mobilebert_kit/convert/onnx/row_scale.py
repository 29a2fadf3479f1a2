"""Per-row activation scales for ONNX dynamic int8 that run inside ONNX Runtime's fused kernels.

Why: ``quantize_dynamic`` quantizes each weight MatMul's activation with one
uint8 scale per tensor (ORT fuses that into ``DynamicQuantizeMatMul`` /
``MatMulIntegerToFloat``: fast, but a trained encoder's few wide tokens
([CLS], [SEP]) take the range from the others).

This pass divides each weight MatMul's input by its per-row absolute maximum
and multiplies the product back (``x @ W = s * ((x / s) @ W)``, ``s`` one
scalar per row, exact in float). Every row then spans [-1, 1], so ORT's one
scale per tensor is, row for row, the scale each row would get alone, and the
quantized product still runs in ORT's own fused kernel. Q, K and V read one
input: it is scaled once. What it keeps and costs, against per-tensor scales
and the hand-written per-row graph it replaced, and what else was tried:
docs/export.md ("Precisions"; benchmarks/RESULTS.md, issue 36). Scaling only
some MatMuls chosen by layer name missed 0.99 (feed-forward outputs 0.9898,
Q/K/V 0.9844) or passed with less margin (all feed-forward MatMuls 0.9911).

The graph per weight MatMul (``x [..., K] @ W [K, N]``, ``W`` a constant)::

    s  = max(ReduceMax(Abs(x), -1), tiny)   # [..., 1], once per input (no Abs after a ReLU)
    y  = MatMul(x * (1 / s), W) * s         # ORT: DynamicQuantizeMatMul(x * (1 / s), Wq) * s

Only standard ONNX ops: ``quantize_dynamic`` afterwards writes
``DynamicQuantizeLinear`` + ``MatMulInteger``, which any ONNX runtime runs and
ONNX Runtime fuses at load.
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from mobilebert_kit.convert.onnx.graph import onnx_opset, refill

# Smallest per-row scale: an all-zero row (padding, a dead ReLU row) would divide 0 by 0.
_TINY_SCALE = 1e-12


def weight_matmuls(model, exclude=()):
    """The MatMul nodes whose second input is a 2-D float32 initializer (a weight), minus ``exclude`` names, in
    graph order.
    """
    weights = {i.name for i in model.graph.initializer if i.data_type == TensorProto.FLOAT and len(i.dims) == 2}
    skip = set(exclude)
    return [n for n in model.graph.node if n.op_type == "MatMul" and n.name not in skip
            and n.input[1] in weights and n.input[0] not in weights]


def scale_rows(model, exclude=()):
    """Rewrites weight MatMuls in place to ``MatMul(x / s, W) * s`` with ``s`` per row; returns how many.

    ``exclude``: node names left as they are (``keep_float_layers`` matches). Each rewritten MatMul keeps its
    name, so ``nodes_to_exclude`` still finds it.
    """
    graph = model.graph
    targets = {n.output[0] for n in weight_matmuls(model, exclude)}  # protobuf hands out new wrappers: no id()
    if not targets:
        return 0
    opset = onnx_opset(model)
    prefix = "rows"
    graph.initializer.append(numpy_helper.from_array(np.array(_TINY_SCALE, np.float32), f"{prefix}/tiny"))
    axes = None
    if opset >= 18:  # ReduceMax takes its axes as an input from opset 18, as an attribute before
        axes = f"{prefix}/axes"
        graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), axes))
    nonnegative = {n.output[0] for n in graph.node if n.op_type == "Relu"}
    nodes, scaled = [], {}
    for index, node in enumerate(graph.node):
        if node.op_type != "MatMul" or node.output[0] not in targets:
            nodes.append(node)
            continue
        x = node.input[0]
        if x not in scaled:
            scaled[x] = _scale_input(x, f"{prefix}{index}", axes, f"{prefix}/tiny", nodes, x in nonnegative)
        x_unit, scale = scaled[x]
        unit_product = f"{prefix}{index}/y_unit"
        nodes += [
            helper.make_node("MatMul", [x_unit, node.input[1]], [unit_product], name=node.name),
            helper.make_node("Mul", [unit_product, scale], [node.output[0]], name=f"{prefix}{index}/y"),
        ]
    refill(graph.node, nodes)
    return len(targets)


def _scale_input(x, p, axes, tiny, nodes, nonnegative=False):
    """Appends ``x / s`` (``s`` the per-row absolute maximum) to ``nodes``; returns the (x / s, s) names.

    ``x * (1 / s)``, not ``x / s``: ORT's broadcast Div took twice the time of its Mul (10.7 against 5.9 us on a
    [1, 128, 512] tensor, one core), and the reciprocal is one value per row. A ReLU's output (``nonnegative``)
    is its own absolute value: no Abs.
    """
    t = lambda s: f"{p}/{s}"  # noqa: E731
    magnitude = x if nonnegative else t("abs")
    reduce_inputs = [magnitude] + ([axes] if axes else [])
    reduce_attrs = {} if axes else {"axes": [-1]}
    if not nonnegative:
        nodes.append(helper.make_node("Abs", [x], [t("abs")], name=t("abs")))
    nodes += [
        helper.make_node("ReduceMax", reduce_inputs, [t("max")], keepdims=1, name=t("max"), **reduce_attrs),
        helper.make_node("Max", [t("max"), tiny], [t("scale")], name=t("scale")),
        helper.make_node("Reciprocal", [t("scale")], [t("inverse")], name=t("inverse")),
        helper.make_node("Mul", [x, t("inverse")], [t("unit")], name=t("unit")),
    ]
    return t("unit"), t("scale")
