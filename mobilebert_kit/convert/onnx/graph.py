"""Graph clean-up of tf2onnx output before ONNX Runtime sees it: fewer nodes, same numbers.

Why: tf2onnx lowers every Keras ``Dense`` on a ``[batch, seq, in]`` tensor to
``Reshape([batch*seq, in]) -> MatMul -> Reshape([batch, seq, out])``, so a
float32 MobileBERT arrives with 722 Reshape nodes among 2,300, and ONNX
Runtime runs each as its own kernel. ONNX ``MatMul`` broadcasts over leading
dimensions and MLAS runs a ``[b, s, k] x [k, n]`` product as one GEMM, so the
reshapes buy nothing. NoNorm (``x * gamma + beta``, MobileBERT Sec. 4.1)
after a dense layer with no residual between them is linear in the dense
output; it folds into the dense weights (``W * gamma``, ``b * gamma + beta``),
which ORT does not do by itself (its MatMul fusions take a bias Add, not a
per-channel Mul).

Both passes read shapes from ``onnx.shape_inference``. With dynamic axes
(the default ONNX signature, optimum's ``[batch, sequence]``) tf2onnx computes
each un-flatten shape at run time (``Shape -> Cast -> Slice -> Concat``:
2,300 of a dynamic MobileBERT's 3,900 nodes), so the shapes are inferred
twice, with the dynamic dimensions fixed to two different sets of primes
(:data:`_PROBE_DIMS`) and data propagation on; a Reshape pair is folded only
where it collapses and restores the leading dimensions under both. Folding
them in the dynamic graph is also what lets ONNX Runtime fuse the bias Add
into its quantized kernels (``DynamicQuantizeMatMul``): tf2onnx puts the bias
after the un-flatten Reshape. The shape computations left unread are dropped.

Example:
    >>> counts = simplify(model)  # doctest: +SKIP
    >>> counts
    {'reshapes_removed': 602, 'affine_folded': 48}
"""

import math

import numpy as np
from onnx import numpy_helper, shape_inference

# Values given to each dynamic input dimension (``dim_param``) in the two shape probes: distinct primes, so a
# Reshape target that only looks right at one size (7 rows read as a batch of 7) cannot pass both.
_PROBE_DIMS = ((3, 7, 11, 13), (5, 17, 19, 23))


def simplify(model):
    """Applies both passes in place; returns what each changed.

    Args:
        model: an ``onnx.ModelProto`` from tf2onnx (float, before quantization).
    """
    removed = fold_dense_reshapes(model)
    folded = fold_affine_into_matmul(model)
    return {"reshapes_removed": removed, "affine_folded": folded}


def _static_shapes(model):
    inferred = shape_inference.infer_shapes(model, data_prop=True)
    shapes = {}
    graph = inferred.graph
    for value in list(graph.value_info) + list(graph.input) + list(graph.output):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim]
        shapes[value.name] = dims if dims and None not in dims else None
    return shapes


def _shape_probes(model):
    """Static shapes of every tensor: one dict for a static model, one per :data:`_PROBE_DIMS` set otherwise."""
    names = []
    for value in model.graph.input:
        for dim in value.type.tensor_type.shape.dim:
            label = dim.dim_param or "?"
            if not dim.HasField("dim_value") and label not in names:
                names.append(label)
    if not names:
        return [_static_shapes(model)]
    if len(names) > len(_PROBE_DIMS[0]):
        return []  # more open dimensions than probe values: leave the graph as it is
    probes = []
    for values in _PROBE_DIMS:
        fixed = type(model)()
        fixed.CopyFrom(model)
        size = dict(zip(names, values))
        for value in fixed.graph.input:
            for dim in value.type.tensor_type.shape.dim:
                if not dim.HasField("dim_value"):
                    dim.dim_value = size[dim.dim_param or "?"]
        probes.append(_static_shapes(fixed))
    return probes


def _index(graph):
    producer = {out: node for node in graph.node for out in node.output}
    consumers = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    return producer, consumers


def fold_dense_reshapes(model):
    """Feeds each dense ``MatMul`` its N-D input directly; returns the number of Reshape nodes removed.

    ``Reshape(x: [..., k] -> [prod, k]) -> MatMul(W) -> Reshape(-> [..., n])``
    becomes ``MatMul(x, W)``. A trailing Reshape to another shape (the split
    into attention heads) stays, now applied to the N-D product.
    """
    graph = model.graph
    probes = _shape_probes(model)
    if not probes:
        return 0
    initializers = {init.name for init in graph.initializer}
    producer, consumers = _index(graph)
    outputs = {o.name for o in graph.output}
    dropped = set()

    def collapses(flatten, matmul):
        for shapes in probes:
            x_shape, flat_shape = shapes.get(flatten.input[0]), shapes.get(flatten.output[0])
            if not x_shape or len(x_shape) < 3 or flat_shape != [math.prod(x_shape[:-1]), x_shape[-1]]:
                return False
            if not shapes.get(matmul.output[0]):
                return False
        return True

    def restores(flatten, matmul, unflatten):
        for shapes in probes:
            x_shape, out_shape = shapes[flatten.input[0]], shapes[matmul.output[0]]
            if shapes.get(unflatten.output[0]) != list(x_shape[:-1]) + [out_shape[-1]]:
                return False
        return True

    for matmul in graph.node:
        if matmul.op_type != "MatMul" or matmul.input[1] not in initializers:
            continue
        flatten = producer.get(matmul.input[0])
        if flatten is None or flatten.op_type != "Reshape" or not collapses(flatten, matmul):
            continue
        users = consumers.get(matmul.output[0], [])
        if matmul.output[0] in outputs or not users or any(u.op_type != "Reshape" for u in users):
            continue  # someone reads the 2-D product itself
        matmul.input[0] = flatten.input[0]
        for unflatten in users:
            if restores(flatten, matmul, unflatten) and unflatten.output[0] not in outputs:
                _rewire(graph, unflatten.output[0], matmul.output[0])
                dropped.add(id(unflatten))
    reshapes = sum(n.op_type == "Reshape" for n in graph.node)
    keep = [n for n in graph.node if id(n) not in dropped]
    del graph.node[:]
    graph.node.extend(keep)
    _drop_dead_nodes(graph)  # the flattens, now unread, and the shape computations of the removed Reshapes
    _drop_unused_initializers(graph)
    return reshapes - sum(n.op_type == "Reshape" for n in graph.node)


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
    keep = [n for n in graph.node if id(n) not in dropped]
    del graph.node[:]
    graph.node.extend(keep)
    _drop_unused_initializers(graph)
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


def _rewire(graph, old, new):
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new


def _drop_dead_nodes(graph):
    """Removes nodes none of whose outputs is read (the flatten Reshapes and the shape computations that fed
    only removed Reshapes), repeating until none is left."""
    outputs = {o.name for o in graph.output}
    while True:
        read = {name for node in graph.node for name in node.input} | outputs
        keep = [n for n in graph.node if any(o in read for o in n.output if o)]
        if len(keep) == len(graph.node):
            return
        del graph.node[:]
        graph.node.extend(keep)


def _drop_unused_initializers(graph):
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    keep = [i for i in graph.initializer if i.name in used]
    if len(keep) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(keep)
