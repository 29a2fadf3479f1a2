"""Encoder blocks written as ONNX Runtime's fused kernels (issue 45 item 1): the same outputs as tf2onnx's graph."""

import collections

import numpy as np
import onnx
import pytest

from tests.convert.conftest import SEQ, export_tiny, padded_inputs


def _run(model, inputs):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    runs = [session.run(None, {n: row[n].astype(np.float32 if n == "attention_mask" else np.int32) for n in names})
            for row in inputs.rows(1)]
    return [np.concatenate(outs) for outs in zip(*runs)]


def _both(model, **options):
    from mobilebert_kit.convert.export_model import build_export_model
    from mobilebert_kit.convert.onnx import export as onnx_export

    graph = build_export_model(model, seq_len=SEQ, **options)
    return onnx_export.convert(graph), onnx_export.convert(graph, fused=True)


@pytest.fixture(scope="module")
def tiny_bottleneck_attention():
    """MobileBERT-tiny's layout (q, k and v all read the input bottleneck), two layers."""
    import mobilebert_kit as mbk
    from tests.convert.conftest import trained_like

    return trained_like(mbk.build("mobilebert-tiny", num_layers=2, attention_mask_value=-120.0), seed=2)


@pytest.mark.parametrize("name", ["tiny_bert", "tiny_mobilebert", "tiny_bottleneck_attention"])
def test_fused_blocks_give_tf2onnx_graphs_outputs(name, request):
    """Every block becomes ORT's kernels and the outputs (padded rows included) stay those of tf2onnx's graph.

    Fails if a block is left unfused, if a kernel's inputs are wired wrongly (the mask, q/k/v, a residual,
    NoNorm's fold, the packed q/k/v split on token rows) or if tf2onnx's attention survives beside the fused one.
    """
    from mobilebert_kit.convert.onnx import export as onnx_export

    model = request.getfixturevalue(name)
    layers = model.config["num_layers"]
    plain, fused = _both(model, hidden_states=True)  # the probe outputs read every block's output
    onnx_export.check(fused)
    ops = collections.Counter(n.op_type for n in fused.graph.node)
    assert ops["MultiHeadAttention"] + ops["Attention"] == layers and ops["Softmax"] == ops["Transpose"] == 0, ops
    if name == "tiny_bert":  # LayerNorm + GELU: packed attention, the GELU's bias in its kernel
        assert ops["LayerNormalization"] == 2 * layers and ops["BiasGelu"] == ops["Attention"] == layers, ops
    else:  # NoNorm folded, ReLU FFNs: the bias-adding products as Gemm on token rows
        assert ops["Gemm"] >= 2 * layers and ops["Relu"] >= layers and ops["LayerNormalization"] == 0, ops
    assert [o.name for o in fused.graph.output] == [o.name for o in plain.graph.output]
    inputs = padded_inputs(model)
    for got, want in zip(_run(fused, inputs), _run(plain, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_attention_without_a_kernel_keeps_tf2onnx_nodes():
    """NEZHA's relative positions have no ORT kernel: its blocks stay as tf2onnx wrote them (the subclass does not
    inherit ``onnx_fused``)."""
    import mobilebert_kit as mbk
    from mobilebert_kit.convert.onnx.fused import qualifies

    model = mbk.build("tiny-nezha", attention_mask_value=-120.0)
    assert not any(qualifies(model.get_layer(f"transformer_layer_{i}")) for i in range(model.config["num_layers"]))
    plain, fused = _both(model)
    assert [n.op_type for n in fused.graph.node] == [n.op_type for n in plain.graph.node]


@pytest.mark.parametrize("name", ["tiny_bert", "tiny_mobilebert"])
def test_dynamic_int8_quantizes_the_fused_products_and_inspect_names_the_kernels(name, request, tmp_path):
    """The exported dynamic file runs every block product in ORT's int8 kernels (the Gemms went back to MatMul,
    the packed Attention to MatMul + MultiHeadAttention, for ``quantize_dynamic``; no QAttention, whose one
    scale per tensor the row scales would miss), keeps the optimum-style names, and ``mbk inspect`` names the
    contrib kernels a reduced ORT build needs."""
    from mobilebert_kit.artifacts.inspection import inspect_artifact

    path = export_tiny(request.getfixturevalue(name), tmp_path / "d.onnx", "onnx", quantize="dynamic").path
    model = onnx.load(str(path))
    ops = collections.Counter(n.op_type for n in model.graph.node)
    # LayerNormalization spelled out: ORT would fuse it with the residual Add into its slow SkipLayerNormalization
    assert ops["Gemm"] == ops["Attention"] == ops["QAttention"] == ops["LayerNormalization"] == 0, ops
    assert ops["MatMulInteger"] > 0 and ops["MultiHeadAttention"] == 2, ops
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask", "token_type_ids"]
    dims = [d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch_size", "sequence_length"], dims
    report = inspect_artifact(str(path))
    assert report.contrib_ops["com.microsoft.MultiHeadAttention"] == 2, report.contrib_ops
    text = report.format_text()
    assert "contrib ops: " in text and "com.microsoft.MultiHeadAttention x2" in text, text


def test_an_opset_before_layer_normalization_keeps_layer_norm_blocks_unfused(tiny_bert, tiny_mobilebert):
    """``--opset 15``: LayerNormalization is an ONNX op from 17, so a LayerNorm model keeps tf2onnx's graph (the
    pipeline's `opset = 15` recipe failed onnx.checker: "No Op registered for LayerNormalization with
    domain_version of 15"); NoNorm blocks need no LayerNormalization and stay fused."""
    from mobilebert_kit.convert.export_model import build_export_model
    from mobilebert_kit.convert.onnx import export as onnx_export

    for model, fused_layers in ((tiny_bert, 0), (tiny_mobilebert, tiny_mobilebert.config["num_layers"])):
        fused = onnx_export.convert(build_export_model(model, seq_len=SEQ), opset=15, fused=True)
        onnx_export.check(fused)
        ops = collections.Counter(n.op_type for n in fused.graph.node)
        assert ops["MultiHeadAttention"] + ops["Attention"] == fused_layers and ops["LayerNormalization"] == 0, ops


def test_a_folded_nonorm_writes_no_unit_scale(tiny_mobilebert):
    """``--fold-nonorm`` leaves unit gammas inside a block: the fused writer spells no Mul by ones for them (each
    was a kernel launch over the residual), and the folded file still gives the unfolded model's outputs."""
    from mobilebert_kit.convert.prepare.scale_migration import migrate_nonorm_scales

    folded, _report = migrate_nonorm_scales(tiny_mobilebert, "unit", stream=False)
    _plain, before = _both(tiny_mobilebert)
    _plain, after = _both(folded)
    muls = [collections.Counter(n.op_type for n in m.graph.node)["Mul"] for m in (before, after)]
    # A block's NoNorms after a residual: attention output, each FFN, the output bottleneck (which the stream
    # fold alone would unit); all but the last are unit once folded inside the block.
    layers, ffns = tiny_mobilebert.config["num_layers"], tiny_mobilebert.config["num_feedforward_networks"]
    assert muls[0] - muls[1] == layers * (1 + ffns), muls
    inputs = padded_inputs(tiny_mobilebert)
    for got, want in zip(_run(after, inputs), _run(before, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_fold_nonorm_folds_the_stream_in_fused_onnx_files_but_not_in_qdq(tmp_path):
    """``--fold-nonorm`` of a float (or dynamic) ONNX file folds the residual stream between blocks too: no NoNorm
    Mul is left and the answers are the unfolded file's; static QDQ keeps the stream's NoNorms (its mode's record's
    ``stream_fold`` leaves ONNX out: ORT's QDQ lost 1.4 dB with them folded)."""
    import mobilebert_kit as mbk
    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.convert.quantization.modes import quantization_mode
    from mobilebert_kit.models.api import named_weights
    from tests.convert.conftest import trained_like

    # Gammas within 10% of one, as trained MobileBERT's: the fixture's [0.5, 1.5] spread its stream beyond
    # scale_migration.STREAM_MAX_SPREAD, where the stream keeps its NoNorms in every format.
    model = trained_like(mbk.build("tiny-mobilebert", attention_mask_value=-120.0), seed=4)
    for path, var in named_weights(model).items():
        if path.endswith("gamma"):
            var.assign(1.0 + 0.2 * (var.numpy() - 1.0))
    plain = export_tiny(model, tmp_path / "plain.onnx", "onnx").path
    folded = export_tiny(model, tmp_path / "folded.onnx", "onnx", fold_nonorm=True).path
    # Left: the embeddings' NoNorm (tf2onnx's nodes, a Mul by ones) and the last block's, which writes the
    # encoder's output and takes the stream's product back. Without the stream, block 0 keeps its output's.
    muls = [n.name for n in onnx.load(str(folded)).graph.node if n.op_type == "Mul"]
    assert len(muls) == 2 and not any("transformer_layer_0" in name for name in muls), muls
    inputs = padded_inputs(model, count=3)
    want, got = (ArtifactRunner(str(path)).run(inputs.arrays) for path in (plain, folded))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-4 * np.abs(want[name]).max())
    assert ["onnx" in quantization_mode(m).stream_fold for m in ("none", "dynamic", "int8", "qat")] == [
        True, True, False, False]
    assert "tflite" in quantization_mode("int8").stream_fold
