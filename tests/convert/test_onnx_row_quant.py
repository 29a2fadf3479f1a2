"""ONNX dynamic int8 with per-row scales written out as a graph (convert/onnx/row_quant.py, issue 15 item 4;
the ``row-graph`` record of ``ACTIVATION_SCALES`` since issue 36)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from mobilebert_kit.artifacts.runner import ArtifactRunner
from mobilebert_kit.convert.onnx.export import quantize
from mobilebert_kit.convert.onnx.row_quant import quantize_rows
from mobilebert_kit.convert.quantization.modes import quantization_mode
from tests.convert import two_dense
from tests.convert.conftest import export_tiny, padded_inputs
from tests.convert.two_dense import two_dense_model


def run(model, x):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["y1", "y2"], {"x": x})


def reference_rows(x, w, weight_bits):
    """The scheme in numpy: asymmetric uint8 per row (range holding 0), symmetric int weights per column."""
    lo, hi = np.minimum(x.min(-1, keepdims=True), 0), np.maximum(x.max(-1, keepdims=True), 0)
    scale = np.maximum((hi - lo) / 255, 1e-12)
    zero = -np.round(lo / scale)
    xq = np.clip(np.round(x / scale) + zero, 0, 255)
    qmax = 2 ** (weight_bits - 1) - 1
    w_scale = np.abs(w).max(0) / qmax
    wq = np.clip(np.round(w / w_scale), -qmax, qmax)
    return ((xq - zero) @ wq) * scale * w_scale


@pytest.fixture
def outlier_rows():
    return two_dense.outlier_rows(zero_row=False)


@pytest.mark.parametrize("opset", [17, 18])  # ReduceMax's axes: attribute before 18, input from 18
def test_each_row_gets_its_own_scale(outlier_rows, opset):
    x, w1, w2 = outlier_rows
    model = two_dense_model(w1, w2, opset)
    assert quantize_rows(model, weight_bits=7) == 2
    types = [n.op_type for n in model.graph.node]
    assert types.count("MatMulInteger") == 2 and "MatMul" not in types
    assert types.count("ReduceMax") == 1  # the shared input is quantized once
    y1, y2 = run(model, x)
    for ours, w in ((y1, w1), (y2, w2)):
        np.testing.assert_allclose(ours, reference_rows(x, w, 7), rtol=1e-4, atol=1e-3)
        exact = x @ w
        # The ordinary rows keep 8-bit precision next to the outlier row (one tensor scale would not).
        error = np.abs(ours - exact)[0, 1:].max() / np.abs(exact[0, 1:]).max()
        assert error < 0.03


def test_one_scale_per_tensor_loses_the_ordinary_rows(outlier_rows, tmp_path):
    """What the rewrite fixes, on the same rows: ORT's quantize_dynamic (one scale per tensor)."""
    from onnxruntime import quantization as q

    x, w1, w2 = outlier_rows
    source, target = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(two_dense_model(w1, w2), str(source))
    q.quantize_dynamic(str(source), str(target), weight_type=q.QuantType.QInt8, per_channel=True, reduce_range=True)
    per_tensor = run(onnx.load(str(target)), x)[0]
    rows = two_dense_model(w1, w2)
    quantize_rows(rows, weight_bits=7)
    per_row = run(rows, x)[0]
    exact = (x @ w1)[0, 1:]
    assert np.abs(per_row[0, 1:] - exact).max() * 5 < np.abs(per_tensor[0, 1:] - exact).max()


def test_constant_and_zero_rows_stay_finite(outlier_rows):
    x, w1, w2 = outlier_rows
    x[0, 1] = 0.0
    x[0, 2] = 3.5  # one value everywhere: the range holds 0, so the scale is not the tiny floor
    model = two_dense_model(w1, w2)
    # 7-bit weights as the dynamic record uses: with 8 bits this all-255 row saturates AVX2's u8 x s8
    # pair sums (OnnxQuantizer.reduce_range; seen here: 11.8 for 19.8).
    quantize_rows(model, weight_bits=7)
    y1, _ = run(model, x)
    assert np.all(np.isfinite(y1)) and np.allclose(y1[0, 1], 0.0)
    np.testing.assert_allclose(y1[0, 2], (x @ w1)[0, 2], rtol=0.03, atol=0.03 * np.abs(x[0, 2] @ w1).max())


def test_excluded_nodes_stay_float(outlier_rows):
    _, w1, w2 = outlier_rows
    model = two_dense_model(w1, w2)
    assert quantize_rows(model, exclude={"dense_2/MatMul"}) == 1
    assert [n.name for n in model.graph.node if n.op_type == "MatMul"] == ["dense_2/MatMul"]


def test_dynamic_record_chooses_row_scales():
    settings = quantization_mode("dynamic").onnx
    assert settings.row_activations and settings.reduce_range
    assert not quantization_mode("int8").onnx.row_activations
    assert settings.activation_scales == "row"  # this module's scheme is the "row-graph" record (ACTIVATION_SCALES)


def _min_token_cosine(ours, reference, mask):
    a, b = ours[mask > 0], reference[mask > 0]
    return float((np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)).min())


def test_tiny_bert_dynamic_onnx_is_no_worse_than_one_scale_per_tensor(tiny_bert, tmp_path):
    """The export path with the "row-graph" record: row scales applied (no DynamicQuantizeLinear left), fidelity
    at least ORT's own."""
    from onnxruntime import quantization as q

    float_path = export_tiny(tiny_bert, tmp_path / "f.onnx", "onnx", validate=False).path
    float_model = onnx.load(str(float_path))
    ours = quantize(float_model, "dynamic", activation_scales="row-graph")
    types = [n.op_type for n in ours.graph.node]
    weight_matmuls = [n for n in float_model.graph.node if n.op_type == "MatMul"
                      and n.input[1] in {i.name for i in float_model.graph.initializer}]
    assert types.count("MatMulInteger") == len(weight_matmuls) > 0
    assert "DynamicQuantizeLinear" not in types
    assert any(i.data_type in (TensorProto.INT8, TensorProto.UINT8) and len(i.dims) == 2 and i.dims[0] > 100
               for i in ours.graph.initializer)  # the word embedding table is still quantized (Gather)
    onnx.save(ours, str(tmp_path / "rows.onnx"))
    q.quantize_dynamic(str(float_path), str(tmp_path / "tensor.onnx"), weight_type=q.QuantType.QInt8,
                       op_types_to_quantize=["MatMul", "Gemm", "Attention", "Gather"], per_channel=True,
                       reduce_range=True)
    inputs = padded_inputs(tiny_bert).arrays
    name = "last_hidden_state"
    reference = ArtifactRunner(float_path).run(inputs)[name]
    cosine = {kind: _min_token_cosine(ArtifactRunner(tmp_path / f"{kind}.onnx").run(inputs)[name], reference,
                                      inputs["attention_mask"]) for kind in ("rows", "tensor")}
    assert cosine["rows"] >= cosine["tensor"] - 1e-4, cosine
