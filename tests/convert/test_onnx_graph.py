"""The ONNX clean-up passes (issue 7): fewer nodes, the same outputs as the unsimplified graph."""

import collections

import numpy as np

from tests.convert.conftest import SEQ, padded_inputs


def _run(model, inputs):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    runs = [session.run(None, {n: row[n].astype(np.float32 if n == "attention_mask" else np.int32) for n in names})
            for row in inputs.rows(1)]  # the export graph has a static batch of 1
    return [np.concatenate(outs) for outs in zip(*runs)]


def test_simplify_removes_reshapes_and_folds_nonorm_exactly(tiny_mobilebert, monkeypatch):
    from mobilebert_kit.convert.onnx import export as onnx_export
    from mobilebert_kit.convert.export_model import build_export_model

    graph = build_export_model(tiny_mobilebert, seq_len=SEQ)
    simplified = onnx_export.convert(graph)
    monkeypatch.setattr(onnx_export, "simplify", lambda model: {})
    plain = onnx_export.convert(graph)
    before = collections.Counter(n.op_type for n in plain.graph.node)
    after = collections.Counter(n.op_type for n in simplified.graph.node)
    # tiny-mobilebert: 2 layers. The layers emit no Reshape pair around a dense product (TokenDense: one broadcast
    # MatMul, issue 46), so tf2onnx's graph keeps only the head split/merge reshapes (4 per layer) and one more:
    # measured 9 before and after (before TokenDense: tf2onnx wrote a pair per dense, which simplify removed).
    assert before["Reshape"] == after["Reshape"] <= 4 * 2 + 1, (before, after)
    # NoNorm after the bottleneck dense layers (no residual between) folded: one Mul + one Add each.
    assert before["Mul"] - after["Mul"] >= 2 * 2, (before, after)
    assert after["MatMul"] == before["MatMul"]
    onnx_export.check(simplified)
    inputs = padded_inputs(tiny_mobilebert)
    for got, want in zip(_run(simplified, inputs), _run(plain, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_affine_fold_leaves_a_residual_read_alone():
    """Mul/Add after a MatMul whose output is also read elsewhere must not be folded."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from mobilebert_kit.convert.onnx.graph import fold_affine_into_matmul

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(size=(4, 3)).astype(np.float32), "w")
    g = numpy_helper.from_array(rng.normal(size=(3,)).astype(np.float32), "g")
    b = numpy_helper.from_array(rng.normal(size=(3,)).astype(np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Mul", ["m", "g"], ["s"]),
        helper.make_node("Add", ["s", "b"], ["y"]),
        helper.make_node("Add", ["y", "m"], ["z"]),  # the residual reads the unscaled product
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])], [w, g, b])
    model = helper.make_model(graph)
    assert fold_affine_into_matmul(model) == 0
    # Without the residual read, it folds and computes the same.
    nodes[3] = helper.make_node("Identity", ["y"], ["z"])
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])], [w, g, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = rng.normal(size=(2, 4)).astype(np.float32)
    want = (x @ numpy_helper.to_array(w)) * numpy_helper.to_array(g) + numpy_helper.to_array(b)
    assert fold_affine_into_matmul(model) == 1
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node] == ["MatMul", "Add", "Identity"]
    import onnxruntime as ort

    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_dynamic_axes_graph_has_no_dense_reshapes_or_their_shape_computations(tiny_mobilebert, monkeypatch):
    """With [batch, sequence] open, the graph has no dense Reshape pairs to fold and no shape computations for
    them, and the simplified graph gives the same at any batch and length."""
    import onnx

    from mobilebert_kit.convert.onnx import export as onnx_export
    from mobilebert_kit.convert.export_model import build_export_model
    from mobilebert_kit.convert.onnx.graph import simplify

    monkeypatch.setattr(onnx_export, "simplify", lambda model: {})
    plain = onnx_export.convert(build_export_model(tiny_mobilebert, batch_size=None, seq_len=None))
    simplified = onnx.ModelProto()
    simplified.CopyFrom(plain)
    simplify(simplified)
    before = collections.Counter(n.op_type for n in plain.graph.node)
    after = collections.Counter(n.op_type for n in simplified.graph.node)
    # No dense Reshape pair reaches tf2onnx any more (TokenDense), so nothing is left to fold, and each layer reads
    # its open batch once for all its reshapes (layers/shapes.py): measured 144 nodes before simplify and 136 after
    # (2 layers; before TokenDense tf2onnx wrote 268 and simplify left 139), 4 Shape nodes (one per attention
    # layer, the mask's, the position slice's).
    assert before["Reshape"] == after["Reshape"] <= 4 * 2 + 1 and after["Shape"] <= 4, (before, after)
    assert len(simplified.graph.node) <= len(plain.graph.node) <= 150
    onnx_export.check(simplified)
    import onnxruntime as ort

    runs = {name: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
            for name, m in (("plain", plain), ("simplified", simplified))}
    rng = np.random.default_rng(0)
    for batch, length in ((1, 16), (3, 9)):
        feeds = {i.name: (rng.integers(1, 100, (batch, length)) if i.name == "input_ids" else
                          np.ones((batch, length)) if i.name == "attention_mask" else np.zeros((batch, length)))
                 .astype(np.float32 if "float" in i.type else np.int32)
                 for i in runs["plain"].get_inputs()}
        want, got = (runs[k].run(None, feeds) for k in ("plain", "simplified"))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * np.abs(w).max())
