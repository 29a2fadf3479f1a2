"""ONNX dynamic int8 with per-row scales inside ONNX Runtime's fused kernels (convert/onnx/row_scale.py, issue 36)."""

import collections

import numpy as np
import onnx
import pytest

from mobilebert_kit.artifacts.runner import ArtifactRunner
from mobilebert_kit.convert.onnx.export import quantize
from mobilebert_kit.convert.onnx.fused import dynamic_form
from mobilebert_kit.convert.onnx.row_scale import scale_rows, weight_matmuls
from mobilebert_kit.convert.quantization.modes import ACTIVATION_SCALES, OnnxQuantizer, quantization_mode
from mobilebert_kit.errors import ConfigError
from tests.convert import two_dense
from tests.convert.conftest import export_tiny, padded_inputs
from tests.convert.two_dense import two_dense_model


def session(model, optimized_path=None):
    """An ONNX Runtime session with default options, as optimum users open a file."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if optimized_path:
        options.optimized_model_filepath = str(optimized_path)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def dynamic_int8(model, tmp_path):
    """``model`` through ORT's quantize_dynamic with the record's settings (7-bit per-channel weights)."""
    from onnxruntime import quantization as q

    tmp_path.mkdir(parents=True, exist_ok=True)
    source, target = tmp_path / "float.onnx", tmp_path / "int8.onnx"
    onnx.save(model, str(source))
    q.quantize_dynamic(str(source), str(target), weight_type=q.QuantType.QInt8, per_channel=True, reduce_range=True,
                       extra_options={"MatMulConstBOnly": True})
    return onnx.load(str(target))


@pytest.fixture
def outlier_rows():
    return two_dense.outlier_rows(zero_row=True)


@pytest.mark.parametrize("opset", [17, 18])  # ReduceMax's axes: attribute before 18, input from 18
def test_scaling_rows_is_exact_in_float(outlier_rows, opset):
    x, w1, w2 = outlier_rows
    model = two_dense_model(w1, w2, opset)
    assert scale_rows(model) == 2
    types = collections.Counter(n.op_type for n in model.graph.node)
    assert types["ReduceMax"] == 1 and types["MatMul"] == 2  # the shared input is scaled once
    y1, y2 = session(model).run(["y1", "y2"], {"x": x})
    np.testing.assert_allclose(y1, x @ w1, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(y2, x @ w2, rtol=1e-5, atol=1e-4)
    assert np.all(y1[0, 1] == 0.0)


def test_ordinary_rows_keep_their_precision_in_the_fused_kernel(outlier_rows, tmp_path):
    """Each row gets its own range inside ORT's DynamicQuantizeMatMul; one tensor scale loses the ordinary rows."""
    x, w1, w2 = outlier_rows
    rows = two_dense_model(w1, w2)
    scale_rows(rows)
    rows = dynamic_int8(rows, tmp_path / "a")
    per_tensor = dynamic_int8(two_dense_model(w1, w2), tmp_path / "b")
    exact = (x @ w1)[0, 2:]
    ours = session(rows, tmp_path / "opt.onnx").run(["y1"], {"x": x})[0][0, 2:]
    theirs = session(per_tensor).run(["y1"], {"x": x})[0][0, 2:]
    fused = collections.Counter(n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node)
    assert fused["DynamicQuantizeMatMul"] + fused["MatMulIntegerToFloat"] == 2, fused
    assert np.abs(ours - exact).max() / np.abs(exact).max() < 0.03
    assert np.abs(ours - exact).max() * 5 < np.abs(theirs - exact).max()


def test_constant_and_zero_rows_stay_finite_in_the_fused_kernel(outlier_rows, tmp_path):
    """A padded (all-zero) row divides by the tiny floor, not by 0; a constant row keeps int8 precision."""
    x, w1, w2 = outlier_rows
    x[0, 2] = 3.5  # one value everywhere
    rows = two_dense_model(w1, w2)
    scale_rows(rows)
    y1 = session(dynamic_int8(rows, tmp_path)).run(["y1"], {"x": x})[0]
    assert np.all(np.isfinite(y1)) and np.allclose(y1[0, 1], 0.0)
    np.testing.assert_allclose(y1[0, 2], (x @ w1)[0, 2], rtol=0.03, atol=0.03 * np.abs(x[0, 2] @ w1).max())


def test_excluded_nodes_are_left_alone(outlier_rows):
    _, w1, w2 = outlier_rows
    model = two_dense_model(w1, w2)
    assert scale_rows(model, exclude={"dense_2/MatMul"}) == 1
    assert [n.name for n in weight_matmuls(model)] == ["dense_1/MatMul", "dense_2/MatMul"]
    assert next(n for n in model.graph.node if n.name == "dense_2/MatMul").input[0] == "x"


def test_the_dynamic_record_scales_rows_in_the_kernels():
    settings = quantization_mode("dynamic").onnx
    assert settings.activation_scales == "row" and settings.row_activations and settings.reduce_range
    assert set(ACTIVATION_SCALES) == {"tensor", "row"}
    assert not OnnxQuantizer("dynamic", activation_scales="tensor").row_activations
    with pytest.raises(ConfigError, match="valid values"):
        OnnxQuantizer("dynamic", activation_scales="per-block")


def _min_token_cosine(ours, reference, mask):
    a, b = ours[mask > 0], reference[mask > 0]
    return float((np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)).min())


def test_tiny_bert_dynamic_onnx_runs_fused_kernels_and_keeps_its_fidelity(tiny_bert, tmp_path):
    """The export path (dynamic axes): every weight MatMul runs in ORT's fused int8 kernels after its default
    graph optimizations, and the file stays closer to float than one scale per tensor.

    Fails if the graph stops fusing (a Reshape or an op between the quantized product and its scale, as
    tf2onnx's dynamic-shape Reshapes did) or if the row scales stop reaching the kernel.
    """
    float_path = export_tiny(tiny_bert, tmp_path / "f.onnx", "onnx", validate=False).path
    float_model = onnx.load(str(float_path))
    assert float_model.graph.input[0].type.tensor_type.shape.dim[1].dim_param == "sequence_length"
    matmuls = len(weight_matmuls(dynamic_form(float_model)))  # the packed attention's projection included
    outputs = {}
    for scales in ("row", "tensor"):
        onnx.save(quantize(float_model, "dynamic", activation_scales=scales), str(tmp_path / f"{scales}.onnx"))
        outputs[scales] = tmp_path / f"{scales}.onnx"
    session(onnx.load(str(outputs["row"])), tmp_path / "row.opt.onnx")
    fused = collections.Counter(n.op_type for n in onnx.load(str(tmp_path / "row.opt.onnx")).graph.node)
    assert fused["DynamicQuantizeMatMul"] + fused["MatMulIntegerToFloat"] == matmuls > 0, fused
    # The heads' split and merge (4 per layer) are all the Reshapes left: none around a dense layer.
    assert fused["MatMulInteger"] == 0 and fused["Reshape"] <= 4 * tiny_bert.config["num_layers"] + 1, fused  # + the mask's one RESHAPE (issue 46)
    inputs = padded_inputs(tiny_bert).arrays
    name = "last_hidden_state"
    reference = ArtifactRunner(float_path).run(inputs)[name]
    cosine = {kind: _min_token_cosine(ArtifactRunner(path).run(inputs)[name], reference, inputs["attention_mask"])
              for kind, path in outputs.items()}
    # tiny-bert, 6 padded random rows: row 0.99967, tensor 0.99961 (2026-11-27); 0.999 is 3x that error.
    assert cosine["row"] >= 0.999 and cosine["row"] >= cosine["tensor"] - 1e-5, cosine
