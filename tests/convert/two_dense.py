"""The two-MatMul ONNX graph and its outlier rows, of the per-row int8 tests (row scales)."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROWS, K, N = 6, 16, 8


def two_dense_model(w1, w2, opset=17):
    """``x @ w1`` and ``x @ w2`` on one input (as Q and K share theirs); batch and rows are open axes, as an export's."""
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["y1"], name="dense_1/MatMul"),
             helper.make_node("MatMul", ["x", "w2"], ["y2"], name="dense_2/MatMul")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "rows", K])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, ["batch", "rows", N]) for y in ("y1", "y2")],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def outlier_rows(zero_row=False):
    """``x [1, ROWS, K]`` whose row 0 is 100x wider than the rest ([CLS]/[SEP] in a trained encoder), and two weights;
    ``zero_row`` makes row 1 all zeros (padding: a per-row scale's floor must keep it finite)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, ROWS, K)).astype(np.float32)
    x[0, 0] *= 100.0
    if zero_row:
        x[0, 1] = 0.0
    w1, w2 = (rng.normal(size=(K, N)).astype(np.float32) for _ in range(2))
    return x, w1, w2
