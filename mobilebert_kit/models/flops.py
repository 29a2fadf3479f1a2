"""FLOP counter: 2 x multiply-accumulates of every matrix product in the traced graph.

The model is traced at a fixed ``[batch, seq_len]`` and every MatMul,
BatchMatMul, Einsum and convolution in the graph is counted from its static
shapes. Counting the graph rather than a formula means every architecture
option (bottlenecks, stacked FFNs, new attention types) is counted by the same
code. Element-wise work (norms, activations, softmax) is not counted, as in
the MobileBERT paper's #FLOPS columns (Tables 3-5).
"""

import numpy as np

from mobilebert_kit.backend import tf
from mobilebert_kit.models.api import check_positions
from mobilebert_kit.models.encoder import INPUT_NAMES


def _dims(tensor):
    shape = tensor.shape.as_list()
    if any(d is None for d in shape):
        raise ValueError(f"dynamic shape {shape} for {tensor.name}; trace with static shapes")
    return shape


def _op_flops(op):
    kind = op.type
    if kind == "MatMul":
        a, b = (_dims(t) for t in op.inputs[:2])
        m, k = (a[1], a[0]) if op.get_attr("transpose_a") else (a[0], a[1])
        n = b[0] if op.get_attr("transpose_b") else b[1]
        return 2 * m * k * n
    if kind in ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        a, b = (_dims(t) for t in op.inputs[:2])
        m, k = (a[-1], a[-2]) if op.get_attr("adj_x") else (a[-2], a[-1])
        n = b[-2] if op.get_attr("adj_y") else b[-1]
        batch = int(np.prod(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2])))) if (a[:-2] or b[:-2]) else 1
        return 2 * batch * m * k * n
    if kind == "Einsum":
        equation = op.get_attr("equation").decode()
        lhs = equation.split("->")[0].split(",")
        sizes = {}
        for letters, tensor in zip(lhs, op.inputs):
            for letter, dim in zip(letters.replace("...", ""), _dims(tensor)[-len(letters.replace("...", "")):]):
                sizes[letter] = max(sizes.get(letter, 1), dim)
        return 2 * int(np.prod(list(sizes.values())))
    if kind in ("Conv2D", "Conv1D", "DepthwiseConv2dNative"):
        out, kernel = _dims(op.outputs[0]), _dims(op.inputs[1])
        taps = kernel[0] * kernel[1] if kind == "DepthwiseConv2dNative" else int(np.prod(kernel[:-1]))
        return 2 * int(np.prod(out)) * taps
    return 0


def count_flops(model, seq_len=128, batch_size=1):
    """Returns the FLOPs (2 x MACs of matrix products) of one forward pass.

    Args:
        model: an Encoder or task model taking the standard input dict.
        seq_len: sequence length to trace at.
        batch_size: batch size to trace at.

    Raises:
        ConfigError: ``seq_len`` exceeds the model's learned positions (``mbk quickstart --seq-len 513``
            failed with a multi-line Keras shape error).

    Example:
        >>> count_flops(build("mobilebert"), seq_len=128) / 1e9  # doctest: +SKIP
        5.38
    """
    config = getattr(getattr(model, "encoder", model), "config", None)
    if config:
        check_positions(config, seq_len)
    spec = {name: tf.TensorSpec([batch_size, seq_len], tf.int32, name=name) for name in INPUT_NAMES}
    graph = tf.function(lambda inputs: model(inputs, training=False)).get_concrete_function(spec).graph
    return int(sum(_op_flops(op) for op in _walk(graph)))


def _walk(graph):
    """Yields the ops of ``graph`` and of the functions it calls (nested tf.functions)."""
    yield from graph.get_operations()
    for function in graph._functions.values():  # noqa: SLF001  (no public accessor for nested bodies)
        body = getattr(function, "graph", None)
        if body is not None:
            yield from _walk(body)
