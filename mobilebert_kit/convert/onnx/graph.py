"""Graph clean-up of tf2onnx output before ONNX Runtime sees it: fewer nodes, same numbers.

NoNorm (``x * gamma + beta``, MobileBERT Sec. 4.1) after a dense layer with no residual between them is
linear in the dense output; it folds into the dense weights (``W * gamma``, ``b * gamma + beta``), which ORT
does not do by itself (its MatMul fusions take a bias Add, not a per-channel Mul). Nodes left unread are
dropped.
"""

import numpy as np
from onnx import numpy_helper


def simplify(model):
    """Folds NoNorm into the dense weights and drops unread nodes of tf2onnx's float ModelProto, in place; returns
    what changed."""
    folded = fold_affine_into_matmul(model)
    drop_dead_nodes(model.graph)
    return {"affine_folded": folded}


def _index(graph):
    producer = {out: node for node in graph.node for out in node.output}
    consumers = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    return producer, consumers


def fold_affine_into_matmul(model):
    """Folds ``MatMul(W) [-> Add(b)] -> Mul(gamma) -> Add(beta)`` into ``MatMul(W*gamma) -> Add(b*gamma+beta)``.

    Only where every tensor between the MatMul and the final Add has a single
    consumer (nothing else, such as a residual, reads the unscaled value) and
    gamma/beta are constants broadcast along the output channels. Returns the
    number of folds.
    """
    graph = model.graph
    init = {i.name: i for i in graph.initializer}
    producer, consumers = _index(graph)
    outputs = {o.name for o in graph.output}
    uses = {name: len(nodes) for name, nodes in consumers.items()}

    def const(name):
        return numpy_helper.to_array(init[name]) if name in init else None

    def single(name):
        return uses.get(name, 0) == 1 and name not in outputs

    dropped, folds = set(), 0
    for mul in graph.node:
        if mul.op_type != "Mul" or id(mul) in dropped:
            continue
        data, gamma = _split_const(mul, const)
        if gamma is None or not single(mul.output[0]):
            continue
        add_beta = consumers[mul.output[0]][0]
        if add_beta.op_type != "Add":
            continue
        _, beta = _split_const(add_beta, const)
        source = producer.get(data)
        if beta is None or source is None or not single(data):
            continue
        bias_add, bias = None, None
        if source.op_type == "Add":
            inner, bias = _split_const(source, const)
            matmul = producer.get(inner)
            if bias is None or matmul is None or not single(inner):
                continue
            bias_add = source
        else:
            matmul = source
        if matmul.op_type != "MatMul" or matmul.input[1] not in init:
            continue
        weight = const(matmul.input[1])
        n = weight.shape[-1]
        if weight.ndim != 2 or any(v.size not in (1, n) for v in (gamma, beta) + ((bias,) if bias is not None else ())):
            continue
        if any(v.ndim > 1 and v.size > 1 and v.shape[-1] != n for v in (gamma, beta)):
            continue
        g = gamma.reshape(-1) if gamma.size == n else np.full(n, gamma.reshape(-1)[0], weight.dtype)
        b = np.zeros(n, weight.dtype) if bias is None else np.broadcast_to(bias.reshape(-1), (n,))
        new_w = (weight * g[None, :]).astype(weight.dtype)
        new_b = (b * g + np.broadcast_to(beta.reshape(-1), (n,))).astype(weight.dtype)
        base = matmul.output[0]
        w_name, b_name = f"{base}/folded_weight", f"{base}/folded_bias"
        graph.initializer.append(numpy_helper.from_array(new_w, w_name))
        graph.initializer.append(numpy_helper.from_array(new_b, b_name))
        init[w_name], init[b_name] = graph.initializer[-2], graph.initializer[-1]
        matmul.input[1] = w_name
        # The final Add keeps its output name: MatMul -> Add(new bias) -> (what read beta's Add).
        add_beta.input[0], add_beta.input[1] = matmul.output[0], b_name
        dropped.add(id(mul))
        if bias_add is not None:
            dropped.add(id(bias_add))
        folds += 1
    refill(graph.node, [n for n in graph.node if id(n) not in dropped])
    drop_unused_initializers(graph)
    return folds


def _split_const(node, const):
    """``(data input, constant input)`` of a binary node, or ``(None, None)``."""
    if len(node.input) != 2:
        return None, None
    a, b = const(node.input[0]), const(node.input[1])
    if b is not None and a is None:
        return node.input[0], b
    if a is not None and b is None:
        return node.input[1], a
    return None, None


def refill(field, items):
    """Replaces the contents of a repeated protobuf ``field`` (``graph.node``, ``graph.initializer``) by ``items``."""
    del field[:]
    field.extend(items)


def drop_dead_nodes(graph):
    """Removes nodes none of whose outputs is read, repeating until none is left."""
    outputs = {o.name for o in graph.output}
    while True:
        read = {name for node in graph.node for name in node.input} | outputs
        keep = [n for n in graph.node if any(o in read for o in n.output if o)]
        if len(keep) == len(graph.node):
            return
        refill(graph.node, keep)


def drop_unused_initializers(graph):
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    keep = [i for i in graph.initializer if i.name in used]
    if len(keep) != len(graph.initializer):  # no copy of every weight when none is dropped
        refill(graph.initializer, keep)


def onnx_opset(model):
    """The default domain's opset of ``model`` (17, the export's default, when it names none)."""
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=17)
