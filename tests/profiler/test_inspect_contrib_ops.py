"""``mbk inspect`` names the ``com.microsoft`` contrib ops an ONNX file needs (issue 45 item 5).

The files are built with ``onnx.helper`` and run in onnxruntime first, so the ops named are ones the
runtime's full package really executes, not just strings in a protobuf.
"""

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from mobilebert_kit.artifacts.inspection import inspect_artifact
from tests.helpers import run_mbk

HIDDEN = 8


def _write(path, contrib):
    """hidden -> MatMul -> (FastGelu + SkipLayerNormalization | Add + Gelu-free LayerNormalization) -> output."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(HIDDEN).astype(np.float32), "b"),
             numpy_helper.from_array(np.ones(HIDDEN, np.float32), "gamma"),
             numpy_helper.from_array(np.zeros(HIDDEN, np.float32), "beta")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"])]
    if contrib:
        nodes += [helper.make_node("FastGelu", ["mm", "b"], ["act"], domain="com.microsoft"),
                  helper.make_node("SkipLayerNormalization", ["act", "x", "gamma", "beta"], ["y"],
                                   domain="com.microsoft", epsilon=1e-12)]
    else:
        nodes += [helper.make_node("Add", ["mm", "b"], ["biased"]), helper.make_node("Add", ["biased", "x"], ["res"]),
                  helper.make_node("LayerNormalization", ["res", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-12)]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", HIDDEN])], inits)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.microsoft", 1)] if contrib else [])
    model = helper.make_model(graph, opset_imports=opsets)
    onnx.save(model, str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = session.run(None, {"x": np.ones((2, 3, HIDDEN), np.float32)})[0]
    assert out.shape == (2, 3, HIDDEN) and np.isfinite(out).all()
    return path


def test_inspect_counts_the_contrib_ops_and_none_in_a_standard_file(tmp_path):
    fused = inspect_artifact(_write(tmp_path / "fused.onnx", contrib=True))
    plain = inspect_artifact(_write(tmp_path / "plain.onnx", contrib=False))
    assert dict(fused.contrib_ops) == {"com.microsoft.FastGelu": 1, "com.microsoft.SkipLayerNormalization": 1}
    assert fused.to_dict()["contrib_ops"] == dict(fused.contrib_ops)
    assert not plain.contrib_ops
    assert "contrib ops: none" in plain.format_text()


def test_mbk_inspect_prints_the_contrib_ops_a_reduced_build_must_include(tmp_path):
    proc = run_mbk("inspect", _write(tmp_path / "fused.onnx", contrib=True), check=True, timeout=300)
    line = next(line for line in proc.stdout.splitlines() if line.startswith("contrib ops:"))
    assert "com.microsoft.FastGelu x1" in line and "com.microsoft.SkipLayerNormalization x1" in line
    assert "reduced build must include them" in line


def test_flops_of_a_file_symbolic_inference_cannot_finish_write_nothing_in_the_working_directory(tmp_path, monkeypatch):
    """onnxruntime's symbolic shape inference, run for a ``com.microsoft`` file's shapes, saves a half-inferred model
    (``sym_shape_infer_temp.onnx`` and a ``<uuid>.data``) into the working directory where an op it does not know
    (here an ``ai.onnx.contrib`` one, as a text-in file's tokenizer) stops it: ``mbk profile`` of a text-in file
    left both in the repository root. The user's directory is unchanged and the model's holds only the model."""
    from mobilebert_kit.profiler.model_info import ModelInfo

    rng = np.random.default_rng(0)
    hidden = 32  # a weight over onnx's 1024-byte external-data threshold: the dump wrote it to a .data file
    inits = [numpy_helper.from_array(rng.standard_normal((hidden, hidden)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(hidden).astype(np.float32), "b")]
    nodes = [helper.make_node("Unknown", ["x"], ["u"], domain="ai.onnx.contrib"),
             helper.make_node("MatMul", ["u", "w"], ["mm"]),
             helper.make_node("FastGelu", ["mm", "b"], ["y"], domain="com.microsoft")]
    graph = helper.make_graph(nodes, "untyped", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", hidden])], inits)
    opsets = [helper.make_opsetid(domain, 1) for domain in ("com.microsoft", "ai.onnx.contrib")]
    models, cwd = tmp_path / "models", tmp_path / "cwd"
    models.mkdir()
    cwd.mkdir()
    path = models / "untyped.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), *opsets]), str(path))
    monkeypatch.chdir(cwd)
    flops, _, source = ModelInfo(path).count_flops(16)
    assert flops is None and "MatMul" in source  # the shapes stay unknown, as before
    assert sorted(p.name for p in cwd.iterdir()) == []
    assert sorted(p.name for p in models.iterdir()) == ["untyped.onnx"]
