"""Export tasks end to end (issue 14): options resolve per source, the graph carries the task's outputs
named for its clients, the inputs have the format's types, and validation compares by task."""

import json
from dataclasses import dataclass

import numpy as np
import pytest

from mobilebert_kit.artifacts.metadata import read_artifact_metadata
from mobilebert_kit.artifacts.runner import ArtifactRunner
from mobilebert_kit.convert.plan.export_options import ExportOptions
from mobilebert_kit.convert.plan.export_plan import SourceFacts, plan_export
from mobilebert_kit.errors import ConfigError
from tests.convert.conftest import SEQ, export_tiny, padded_inputs

INPUTS = ["input_ids", "attention_mask", "token_type_ids"]


@dataclass(frozen=True)
class Declared:
    """A checkpoint's declared sentence pooling, shaped like ``sources.pooling.Pooling``."""

    mode: str
    normalize: bool


def options(fmt="tflite", **kwargs):
    return ExportOptions("tiny-bert", fmt, out=f"m.{fmt}", **kwargs)


def plan(opts, architecture="encoder", declared=None, max_positions=None, num_outputs=None, problem_type=None):
    """The export plan of checked ``opts`` for a source with these facts (a sequence head's problem as the source
    infers it when not given)."""
    from mobilebert_kit.models.sequence_classifier import problem_of

    if architecture == "sequence_classifier" and problem_type is None:
        problem_type = problem_of({"num_labels": num_outputs})
    return plan_export(opts.check(), SourceFacts(architecture, max_positions, num_outputs, declared,
                                                 problem_type=problem_type))


@pytest.mark.parametrize("architecture, declared, fmt, task, seq_len", [
    ("encoder", None, "tflite", "features", 128),
    ("encoder", Declared("mean", True), "tflite", "embedding", 128),
    ("sequence_classifier", None, "onnx", "classification", 128),
    ("span_question_answerer", None, "tflite", "span_qa", 384),  # the Task Library's BertQuestionAnswerer
    ("span_question_answerer", None, "onnx", "span_qa", 128),
    ("pretrainer", None, "tflite", "pretraining", 128),
])
def test_auto_task_and_default_length_follow_the_source(architecture, declared, fmt, task, seq_len):
    resolved = plan(options(fmt), architecture, declared)
    assert (resolved.task, resolved.seq_len) == (task, seq_len)
    if declared is not None:
        assert (resolved.pooling, resolved.normalize) == ("mean", True)


def test_defaults_per_format():
    tflite, onnx = plan(options("tflite")), plan(options("onnx"))
    assert (tflite.mask_dtype, tflite.dynamic_axes) == ("int32", False)  # features: its output follows the length
    assert plan(options("tflite", task="embedding", pooling="mean")).dynamic_axes is True  # issue 36
    assert (onnx.mask_dtype, onnx.dynamic_axes) == ("int64", True)
    assert plan(options("onnx", static_axes=True)).dynamic_axes is False
    assert plan(options("tflite", static_axes=True)).dynamic_axes is False  # one recipe serves both formats
    assert plan(options("tflite", mask_dtype="float32")).mask_dtype == "float32"
    # An int8-io (integer-only) file keeps a float mask, quantized to an int8 input: no float CAST.
    assert plan(options("tflite", quantize="int8", io_type="int8")).mask_dtype == "float32"
    # A default length never exceeds the position table; a given one is refused in one line.
    assert plan(options(), max_positions=64).seq_len == 64
    with pytest.raises(ConfigError, match="exceeds the model's 64 positions"):
        plan(options(seq_len=100), max_positions=64)
    # The options stay the user's words: checking them decides nothing.
    given = options("onnx")
    assert given.check() == given and (given.seq_len, given.mask_dtype, given.dynamic_axes) == (None, None, None)


def test_the_length_is_decided_once_from_the_source_whatever_the_task():
    # An explicit --task decided the length before the source's facts were known: `mbk export tiny-bert
    # --task features` failed with "--seq-len 128 exceeds the model's 64 positions", a flag never typed.
    for task in ("auto", "features"):
        assert plan(options(task=task, named_by="flag"), max_positions=64).seq_len == 64
    # A model fine-tuned at 32 tokens keeps its length under an explicit --task (it exported at 128).
    facts = SourceFacts("sequence_classifier", 512, 2, trained_seq_len=32)
    for task in ("auto", "classification"):
        assert plan_export(options(task=task).check(), facts).seq_len == 32
    # The task's own length for the format still comes first, and a given length always wins.
    assert plan_export(options(task="span_qa").check(), SourceFacts("span_question_answerer", 512, 2, None, 256)
                       ).seq_len == 384
    assert plan_export(options(task="classification", seq_len=48).check(), facts).seq_len == 48


@pytest.mark.parametrize("kwargs, architecture, message", [
    ({"task": "classification"}, "encoder", "exports sequence_classifier models; this source is encoder: use "
                                            "--task features or embedding"),
    ({"task": "embedding"}, "encoder", "declares no sentence pooling .*; pass --pooling mean|cls"),
    ({"task": "span_qa"}, "sequence_classifier", "use --task features or embedding or classification"),
])
def test_a_task_the_source_cannot_export_is_one_line(kwargs, architecture, message):
    with pytest.raises(ConfigError, match=message) as err:
        plan(options(**kwargs, named_by="flag"), architecture)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"mask_dtype": "int64"}, "--mask-dtype 'int64'|--mask-dtype int64"),
    ({"format": "onnx", "out": "m.onnx", "mask_dtype": "int32"}, "onnx token inputs are int64"),
    ({"format": "onnx", "out": "m.onnx", "dynamic_axes": True, "static_axes": True}, "contradict"),
    ({"dynamic_axes": True, "batch_size": 4}, "--batch-size 4 with --dynamic-axes: a dynamic TFLite file has batch 1"),
    ({"pooling": "mean", "task": "features"}, "applies to --task embedding"),
])
def test_contradictory_options_are_refused(kwargs, message):
    values = {"source": "tiny-bert", "out": "m.tflite", **kwargs}
    with pytest.raises(ConfigError, match=message):
        ExportOptions(**values, named_by="flag").check()


@pytest.mark.parametrize("fmt, batch_size, seq_len", [("tflite", 1, None), ("onnx", None, None)])
def test_dynamic_axes_open_the_formats_axes(fmt, batch_size, seq_len):
    # FORMATS' dynamic_axes: a TFLite file keeps batch 1 (its clients run one text), ONNX opens both; seq_len stays the
    # length validated and calibrated at.
    dynamic = plan(options(fmt, dynamic_axes=True, seq_len=16))
    assert (dynamic.batch_size, dynamic.static_seq_len, dynamic.seq_len) == (batch_size, seq_len, 16)
    static = plan(options(fmt, static_axes=True, seq_len=16))
    assert (static.batch_size, static.static_seq_len) == (1, 16)


EMBEDDING = {"task": "embedding", "pooling": "mean"}


@pytest.mark.parametrize("fmt, kwargs, shape, clips", [
    ("tflite", EMBEDDING, (1, None), True),  # issue 36: each text at its own length, cut in the file past the table
    ("tflite", {"task": "features"}, (1, 16), False),  # an output of the text's length: MediaPipe needs it static
    ("tflite", {**EMBEDDING, "batch_size": 4}, (4, 16), False),  # a batch above 1 is static (the clients run 1)
    ("tflite", {**EMBEDDING, "static_axes": True}, (1, 16), False),
    ("tflite", {"task": "features", "dynamic_axes": True}, (1, None), True),  # asked for: as asked
    ("onnx", {}, (None, None), False),  # optimum users' tokenizers truncate
])
def test_the_default_axes_of_each_format(fmt, kwargs, shape, clips):
    planned = plan(options(fmt, seq_len=16, **kwargs))
    assert (planned.batch_size, planned.static_seq_len) == shape
    assert planned.clips_in_graph is clips and planned.seq_len == 16


def test_sentence_embedding_is_masked_mean_then_unit_norm_and_safe_on_padding():
    from mobilebert_kit.backend import tf
    from mobilebert_kit.convert.export_model import sentence_embedding

    rng = np.random.default_rng(0)
    seq = rng.normal(size=(3, 5, 4)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], np.int32)
    mean = np.asarray(sentence_embedding(tf.constant(seq), tf.constant(mask), "mean", False))
    np.testing.assert_allclose(mean[0], seq[0, :3].mean(0), rtol=1e-5)
    np.testing.assert_allclose(mean[1], seq[1].mean(0), rtol=1e-5)
    unit = np.asarray(sentence_embedding(tf.constant(seq), tf.constant(mask), "mean", True))
    np.testing.assert_allclose(np.linalg.norm(unit[:2], axis=-1), 1.0, rtol=1e-5)
    assert np.all(np.isfinite(unit)) and np.all(unit[2] == 0)  # an all-padding row: zeros, not NaN
    cls = np.asarray(sentence_embedding(tf.constant(seq), tf.constant(mask), "cls", False))
    np.testing.assert_allclose(cls, seq[:, 0], rtol=1e-6)


def mean_pooled_unit(sequence_output, mask):
    mask = mask[..., None].astype(np.float64)
    pooled = (sequence_output * mask).sum(1) / mask.sum(1)
    return pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)


@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_embedding_export_is_the_pooled_normalized_sentence_vector(tiny_bert, tmp_path, fmt):
    out = tmp_path / f"e.{fmt}"
    result = export_tiny(tiny_bert, out, fmt, task="embedding", pooling="mean", normalize=True)
    assert result.validation.passed and result.task == "embedding"
    runner = ArtifactRunner(out)
    want = {"tflite": ["sentence_embedding"], "onnx": ["last_hidden_state", "sentence_embedding"]}[fmt]
    assert runner.output_names == want
    inputs = padded_inputs(tiny_bert)
    ours = runner.run(inputs.arrays)["sentence_embedding"]
    ref = tiny_bert(inputs.arrays, training=False)["sequence_output"].numpy()
    expected = mean_pooled_unit(ref, inputs.arrays["attention_mask"])
    assert ours.shape == (inputs.count, tiny_bert.config["hidden_size"])
    np.testing.assert_allclose(ours, expected, atol=1e-5)
    meta = read_artifact_metadata(out)
    assert meta["task"] == "embedding" and meta["client"] == "embedder"
    assert meta["pooling"] == {"mode": "mean", "normalize": True}


def test_full_int8_embedding_keeps_its_sentence_pooling_float(tiny_bert, tmp_path):
    # The masked mean and the L2 norm are a few ops on one [seq, hidden] tensor; in int8 the last one rounded the
    # output vector itself (the issue 16 student: 0.9890 cosine to its float model, 0.9902 with them float).
    result = export_tiny(tiny_bert, tmp_path / "e.tflite", "tflite", "int8", task="embedding", pooling="mean",
                         normalize=True)
    assert result.validation.passed
    float_ops = dict(result.float_ops)
    assert float_ops.get("L2_NORMALIZATION") == 1 and float_ops.get("SUM") and float_ops.get("DIV") == 1
    assert float_ops.get("FULLY_CONNECTED") is None  # the encoder itself stays int8
    note = next(n for n in result.notes if n.startswith("kept in float"))
    features = export_tiny(tiny_bert, tmp_path / "f.tflite", "tflite", "int8")
    assert "SUM" not in next(n for n in features.notes if n.startswith("kept in float"))  # names what the graph has
    assert "L2_NORMALIZATION" in note


def test_onnx_full_int8_of_a_layer_norm_model_quantizes_its_feed_forward_outputs_dynamically(tiny_bert, tmp_path):
    # layer_norm_dynamic_nodes, as in TFLite: the feed-forward output projections leave the static QDQ pass and run
    # ORT's dynamic int8 (all-MiniLM-L6-v2: validation passes as asked instead of through the float fallback).
    import onnx

    layers = tiny_bert.config["num_layers"]
    result = export_tiny(tiny_bert, tmp_path / "e.onnx", "onnx", "int8", task="embedding", pooling="mean")
    assert result.validation.passed and result.quantize == "int8" and not result.search
    model = onnx.load(str(tmp_path / "e.onnx"))
    dynamic = [n.name for n in model.graph.node if n.op_type == "MatMulInteger"]
    assert len(dynamic) == layers and all("/ffn_0/output/" in name for name in dynamic), dynamic
    produced_by = {out: n.op_type for n in model.graph.node for out in n.output}
    static = [n for n in model.graph.node if n.op_type == "MatMul" and "/query/" in n.name]
    assert static and all(produced_by.get(n.input[1]) == "DequantizeLinear" for n in static)  # the rest stays QDQ
    assert f"{layers} feed-forward output projection(s) with int8 weights, activations quantized per row at run " \
        "time (float output)" in result.notes
    # A choice of float ops is the user's whole choice: no default group.
    chosen = export_tiny(tiny_bert, tmp_path / "c.onnx", "onnx", "int8", keep_float_ops=("Softmax",), validate=False)
    assert not any(n.op_type == "MatMulInteger" for n in onnx.load(chosen.path).graph.node)


def test_classifier_tflite_outputs_probabilities_and_onnx_logits(tiny_mobilebert, tmp_path):
    from mobilebert_kit.models.heads import HEADS

    model = HEADS["sequence_classifier"](tiny_mobilebert, num_labels=3)
    inputs = padded_inputs(model)
    logits = model(inputs.arrays, training=False)["logits"].numpy()
    for fmt, name in (("tflite", "probability"), ("onnx", "logits")):
        out = tmp_path / f"c.{fmt}"
        result = export_tiny(model, out, fmt, labels=("neg", "neu", "pos"))
        assert result.validation.passed and ArtifactRunner(out).output_names == [name]
        values = ArtifactRunner(out).run(inputs.arrays)[name]
        if fmt == "tflite":
            np.testing.assert_allclose(values.sum(-1), 1.0, rtol=1e-5)
            assert np.all(values >= 0)
            np.testing.assert_allclose(np.log(values) - np.log(values[:, :1]), logits - logits[:, :1], atol=1e-3)
        else:
            np.testing.assert_allclose(values, logits, atol=1e-4)
    from mobilebert_kit.convert.tflite.writer import client_metadata_args

    meta, vocab = read_artifact_metadata(tmp_path / "c.tflite", with_vocab=True)
    args = client_metadata_args(meta, vocab or None)
    assert args["client"] == "classifier" and args["output_names"] == ["probability"]
    assert args["labels"] == ["neg", "neu", "pos"] and args["tokenizer"] is None


def test_onnx_runs_as_optimum_code_feeds_it(tiny_bert, tmp_path):
    """int64 feeds of any batch and any length up to the position table, named outputs, quantized alike."""
    import onnx

    from mobilebert_kit.convert.plan.input_set import InputSet

    positions = tiny_bert.config["max_position_embeddings"]
    rows = InputSet.like_text(tiny_bert.config["vocab_size"], 3, positions, 2, seed=4).arrays
    reference = {length: tiny_bert({k: v[:, :length] for k, v in rows.items()}, training=False)
                 for length in (1, 7, positions)}
    # atol: float compared by value; None: dynamic int8 compared by cosine; "shape": static int8 (random
    # calibration rows of an untrained preset) checked for its signature and shapes only.
    for quantize, atol in (("none", 1e-4), ("dynamic", None), ("int8", "shape")):
        out = tmp_path / f"{quantize}.onnx"
        export_tiny(tiny_bert, out, "onnx", quantize, seq_len=None, validate=quantize != "int8")
        model = onnx.load(str(out))
        for value in model.graph.input:
            assert value.type.tensor_type.elem_type == onnx.TensorProto.INT64
            assert [d.dim_param for d in value.type.tensor_type.shape.dim] == ["batch_size", "sequence_length"]
        session = ArtifactRunner(out)._session  # the plain onnxruntime session, fed directly
        for batch in (1, 3):
            for length in (1, 7, positions):
                feeds = {k: v[:batch, :length].astype(np.int64) for k, v in rows.items()}
                hidden, pooler = session.run(["last_hidden_state", "pooler_output"], feeds)
                ref = reference[length]["sequence_output"].numpy()[:batch]
                assert hidden.shape == ref.shape and pooler.shape == (batch, tiny_bert.config["hidden_size"])
                keep = feeds["attention_mask"].astype(bool)
                if atol == "shape":
                    assert np.all(np.isfinite(hidden))
                elif atol:
                    np.testing.assert_allclose(hidden[keep], ref[keep], atol=atol * np.abs(ref).max())
                else:
                    cos = np.sum(hidden[keep] * ref[keep], -1) / np.linalg.norm(hidden[keep], axis=-1) / \
                        np.linalg.norm(ref[keep], axis=-1)
                    assert cos.mean() > 0.98


def test_float_mask_file_on_request(tiny_bert, tmp_path):
    out = tmp_path / "f.tflite"
    result = export_tiny(tiny_bert, out, mask_dtype="float32")
    assert result.validation.passed
    assert [s["dtype"] for s in ArtifactRunner(out).input_specs] == ["int32", "float32", "int32"]


def test_mbk_validate_reads_the_task_and_accepts_older_files(tiny_mobilebert, tmp_path, capsys):
    from mobilebert_kit.cli.main import main
    from mobilebert_kit.convert.plan.export_plan import FileMetadata
    from mobilebert_kit.convert.tflite.writer import write_tflite
    from mobilebert_kit.convert.export_model import build_export_model
    from mobilebert_kit.convert.validation.file_validation import validate_file
    from mobilebert_kit.models.heads import HEADS

    model = HEADS["sequence_classifier"](tiny_mobilebert, num_labels=2)
    out = tmp_path / "c.tflite"
    export_tiny(model, out, validate=False)
    assert validate_file(out, model, padded_inputs(model), "none").passed  # task from the metadata
    # A file from before issue 14: canonical names, a float mask, no task in its metadata.
    old = tmp_path / "old.tflite"
    graph = build_export_model(tiny_mobilebert, 1, SEQ)
    write_tflite(graph, plan(options(seq_len=SEQ)), None, FileMetadata({"quantization": "none"}), old)
    assert ArtifactRunner(old).output_names == ["sequence_output", "pooled_output"]
    assert validate_file(old, tiny_mobilebert, padded_inputs(tiny_mobilebert), "none").passed
    # The reference must be able to produce the file's task: one line otherwise.
    with pytest.raises(ConfigError, match="is a classification export"):
        validate_file(out, tiny_mobilebert, padded_inputs(tiny_mobilebert), "none")
    import mobilebert_kit as mbk

    saved = mbk.save(model, tmp_path / "saved")
    assert main(["validate", str(out), "--reference", str(saved), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] and [o["name"] for o in report["outputs"]] == ["probability"]


def test_full_int8_int32_mask_keeps_the_float_mask_files_ops_and_xnnpack_coverage(tiny_mobilebert, tmp_path):
    """The mask is cast once at the input: the int32-mask file has the float-mask file's ops plus one CAST
    (not one per layer), and XNNPACK delegates as many ops (measured: 74 of 78 vs 74 of 77)."""
    from mobilebert_kit.artifacts.xnnpack_coverage import xnnpack_coverage

    files = {}
    for mask in ("int32", "float32"):
        out = tmp_path / f"{mask}.tflite"
        files[mask] = export_tiny(tiny_mobilebert, out, quantize="int8", mask_dtype=mask, validation_count=4)
        files[mask].coverage = xnnpack_coverage(out)
    ints, floats = files["int32"], files["float32"]
    assert ints.validation.passed and floats.validation.passed
    extra = dict(ints.op_counts)
    extra["CAST"] = extra.get("CAST", 0) - 1
    assert {k: v for k, v in extra.items() if v} == {k: v for k, v in floats.op_counts.items() if v}
    assert ints.float_ops.get("CAST") == 1 and "CAST" not in floats.float_ops
    assert ints.coverage["delegated"] == floats.coverage["delegated"]
    assert ints.coverage["partitions"] <= floats.coverage["partitions"]  # the CAST sits before the first one


def test_a_one_output_head_exports_its_raw_score_not_a_softmax():
    from mobilebert_kit.convert.plan.export_tasks import export_task

    options = ExportOptions("tiny-bert", out="m.tflite")
    regressor = plan(options, "sequence_classifier", num_outputs=1)
    assert regressor.task == "regression" and export_task("regression").output_names("tflite") == ("score",)
    assert export_task("regression").canonical("tflite") == {"score": "logits"}  # no softmax in the graph
    assert plan(options, "sequence_classifier", num_outputs=3).task == "classification"
    with pytest.raises(ConfigError, match="needs a head with several outputs; this one has 1: use .*task regression"):
        plan(ExportOptions("tiny-bert", out="m.tflite", task="classification"), "sequence_classifier",
             num_outputs=1)
    with pytest.raises(ConfigError, match="problem_type is single_label_classification .*: use .*task classification"):
        plan(ExportOptions("tiny-bert", out="m.tflite", task="regression"), "sequence_classifier",
             num_outputs=2)


def test_a_one_output_head_declared_single_label_is_refused_with_a_fix_not_the_same_task():
    # config.json problem_type single_label_classification with num_labels 1: mbk export said "--task
    # classification needs a head with several outputs; this one has 1: use --task classification".
    for task in ("auto", "classification"):
        with pytest.raises(ConfigError, match="this one has 1 and config.json's problem_type single_label_class"
                                              "ification, which no task exports.*set problem_type to regression"):
            plan(ExportOptions("tiny-bert", out="m.tflite", task=task), "sequence_classifier", num_outputs=1,
                 problem_type="single_label_classification")
    with pytest.raises(ConfigError, match="this one has 1: use .*task multi_label_classification$"):
        plan(ExportOptions("tiny-bert", out="m.tflite", task="classification"), "sequence_classifier",
             num_outputs=1, problem_type="multi_label_classification")


def test_a_regressor_of_several_targets_exports_its_raw_scores_not_a_softmax():
    # problem_type regression with num_labels 3 exported as classification: TFLite gave a softmax over the three
    # regression scores (found by comparing with transformers); now its raw scores, and classification is refused.
    options = ExportOptions("tiny-bert", out="m.tflite")
    assert plan(options, "sequence_classifier", num_outputs=3, problem_type="regression").task == "regression"
    with pytest.raises(ConfigError, match="problem_type is regression .*: use .*task regression"):
        plan(ExportOptions("tiny-bert", out="m.tflite", task="classification"), "sequence_classifier",
             num_outputs=3, problem_type="regression")


def test_a_multi_label_head_exports_a_sigmoid_per_label():
    # A checkpoint saying problem_type multi_label_classification was exported with a softmax over its independent
    # labels (TFLite probability cosine 0.88 to the sigmoids its users read).
    from mobilebert_kit.convert.plan.export_tasks import export_task

    options = ExportOptions("tiny-bert", out="m.tflite")
    facts = SourceFacts("sequence_classifier", None, 4, problem_type="multi_label_classification")
    assert plan_export(options.check(), facts).task == "multi_label_classification"
    assert export_task("multi_label_classification").canonical("tflite") == {"probability": "label_probabilities"}
    with pytest.raises(ConfigError, match="problem_type is multi_label_classification .*one sigmoid probability per "
                                          "label.* use .*task multi_label_classification"):
        plan_export(ExportOptions("tiny-bert", out="m.tflite", task="classification").check(), facts)
    assert plan(options, "sequence_classifier", num_outputs=4).task == "classification"  # single-label: unchanged


def test_a_multi_label_file_is_judged_by_each_labels_side_of_its_cut_not_by_argmax():
    # A multi-label ONNX dynamic file whose label decisions all held (logit > 0 on 99.4% of 160 real-sentence
    # labels, each validation row's unchanged) was refused at "logits argmax agreement 0.8750 < 0.9", and a
    # TFLite file's sigmoids had no answer check at all: a label crossing 0.5 passed on cosine alone.
    from mobilebert_kit.convert.export_model import logit_outputs
    from mobilebert_kit.convert.validation.compare import check_values, compare, thresholds_for

    assert logit_outputs(None, "multi_label_classification", "onnx") == {"logits": 0.0}
    assert logit_outputs(None, "multi_label_classification", "tflite") == {"probability": 0.5}
    assert logit_outputs(None, "classification", "onnx") == {"logits": True}
    reference = np.array([[2.0, 1.9, -1.0], [-2.0, 1.0, 0.5], [3.0, -1.0, 2.9], [0.4, -3.0, -1.0]])
    top_swapped = reference + [[-0.2, 0.2, 0.0], [0, 0, 0], [-0.2, 0.0, 0.2], [0, 0, 0]]  # same labels on
    assert compare("logits", top_swapped, reference, logits=True).argmax_agreement == 0.5
    held = compare("logits", top_swapped, reference, logits=0.0)
    assert held.argmax_agreement == 1.0 and not check_values(held, thresholds_for("dynamic"))
    flipped = reference * [[1, 1, 1], [1, 1, -1], [1, 1, 1], [-1, 1, 1]]  # two labels cross the cut
    problems = check_values(compare("logits", flipped, reference, logits=0.0), thresholds_for("dynamic"))
    assert [str(p) for p in problems if "agreement" in str(p)] == ["logits label agreement 0.8333 < 0.9"]
    probabilities = 1 / (1 + np.exp(-reference))
    near = compare("probability", 1 / (1 + np.exp(-flipped * 0.5 - reference * 0.5)), probabilities, logits=0.5)
    assert near.argmax_agreement == pytest.approx(10 / 12) and near.cosine > 0.97  # cosine alone passed it


def test_a_regressors_scores_are_not_judged_by_argmax():
    # A two-target regressor's int8 ONNX file: "int8 changed the logits answer on 19% of the validation rows"
    # (the argmax of two scores, which no user reads), and dynamic int8's 0.9 bar could refuse it on that alone.
    from mobilebert_kit.convert.export_model import logit_outputs
    from mobilebert_kit.convert.validation.compare import compare

    for fmt in ("onnx", "tflite"):
        assert set(logit_outputs(None, "regression", fmt).values()) == {"scores"}, fmt
    reference = np.random.default_rng(0).normal(0, 1, (16, 2))
    assert compare("logits", reference[:, ::-1], reference, logits="scores").argmax_agreement is None


def test_several_regression_targets_that_answer_constants_fail_every_mode():
    # Two targets in [1, 5] and [10, 20], each answered as its mean for every text: row by row the shared offset
    # kept cosine 0.995 and SNR 14.6 dB against the raw values; each target over the rows is one vector now.
    from mobilebert_kit.convert.validation.compare import check_values, compare, thresholds_for

    rng = np.random.default_rng(0)
    reference = np.stack([rng.uniform(1, 5, 16), rng.uniform(10, 20, 16)], -1)
    constant = compare("logits", np.broadcast_to(reference.mean(0), reference.shape), reference, logits="scores")
    assert constant.snr_db == pytest.approx(0.0, abs=1e-9)
    for mode in ("int8", "int4", "dynamic", "none"):
        assert any("SNR" in str(p) for p in check_values(constant, thresholds_for(mode))), mode
    close = compare("logits", reference + rng.normal(0, 0.05, reference.shape), reference, logits="scores")
    assert not check_values(close, thresholds_for("dynamic"))  # int8-sized noise on the scores still passes
    swapped = compare("logits", reference[::-1], reference, logits="scores")  # right values, wrong texts
    assert check_values(swapped, thresholds_for("int8"))


def test_a_one_column_output_is_compared_as_one_vector_not_row_by_row_signs():
    # A regression score's row cosine is its sign only: 0.01 read as -0.01 failed a dynamic-int8 regressor
    # ("score cosine 0.875 < 0.98") whose scores were all within 0.02.
    from mobilebert_kit.convert.validation.compare import compare

    reference = np.array([[0.01], [1.0], [-2.0], [0.5]])
    metrics = compare("score", reference + [[-0.02], [0.0], [0.01], [0.0]], reference, logits=True)
    assert metrics.cosine > 0.9999 and metrics.cosine_min == metrics.cosine
    assert compare("score", -reference, reference).cosine == pytest.approx(-1.0)  # a wrong sign still fails


def test_a_one_column_output_that_answers_one_constant_fails_every_mode():
    # Scores in [1, 5] answered as their mean for every text (Pearson 0) kept SNR 7.7 dB and cosine 0.91 against
    # the raw values, and int8's and int4's gates said PASSED; the SNR now counts the spread about the mean only.
    from mobilebert_kit.convert.validation.compare import check_values, compare, thresholds_for

    reference = np.random.default_rng(0).uniform(1, 5, (16, 1))
    constant = compare("score", np.full_like(reference, reference.mean()), reference)
    assert constant.snr_db == pytest.approx(0.0, abs=1e-9)
    for mode in ("int8", "int4", "dynamic", "none"):
        assert any("SNR" in str(p) for p in check_values(constant, thresholds_for(mode))), mode
    close = compare("score", reference + np.random.default_rng(1).normal(0, 0.05, reference.shape), reference)
    assert not check_values(close, thresholds_for("dynamic"))  # int8-sized noise on the scores still passes


def test_a_float_file_of_a_regressor_that_all_but_collapsed_to_one_value_passes():
    # A tiny regressor answering 0.5 +- 1e-5 for every text: its exact float file differed by one float32 step
    # (6e-8), and the spread about the mean alone as the SNR's signal failed it at 56.8 dB < 60.
    from mobilebert_kit.convert.validation.compare import check_values, compare, thresholds_for

    rng = np.random.default_rng(0)
    for shape in ((16, 1), (16, 2)):
        reference = 0.5 + rng.normal(0, 1e-5, shape)
        ours = reference + rng.choice([-6e-8, 0.0, 6e-8], shape)
        assert not check_values(compare("score", ours, reference, logits="scores"), thresholds_for("none")), shape
        far = compare("score", reference + 0.05, reference, logits="scores")  # 10% of the value: still refused
        assert check_values(far, thresholds_for("dynamic")), shape


def test_a_quantized_embedding_is_held_to_the_embedding_cosine_bar(tiny_bert, tmp_path):
    # all-MiniLM-L6-v2's full-int8 embedder passed int8's generic 0.9 at 0.904 and gave 0.90 in MediaPipe: an
    # embedding's cosine is its task's own measure, so the task sets 0.95; a user's --threshold still wins.
    embedding = export_tiny(tiny_bert, tmp_path / "e.tflite", "tflite", "int8", task="embedding", pooling="mean",
                            normalize=True)
    assert embedding.validation.thresholds.min_cosine == 0.95
    features = export_tiny(tiny_bert, tmp_path / "f.tflite", "tflite", "int8")
    assert features.validation.thresholds.min_cosine == 0.9  # the mode's own bar for other tasks
    own = export_tiny(tiny_bert, tmp_path / "o.tflite", "tflite", "int8", task="embedding", pooling="mean",
                      normalize=True, thresholds={"min_cosine": 0.5})
    assert own.validation.thresholds.min_cosine == 0.5
    dynamic = export_tiny(tiny_bert, tmp_path / "d.tflite", "tflite", "dynamic", task="embedding", pooling="mean")
    assert dynamic.validation.thresholds.min_cosine == 0.98  # already above the floor


def test_token_logits_argmax_agreement_counts_real_tokens_only():
    # A token classifier's text-in .onnx pads each row with zeros where the Keras model has scores: every
    # token-classification export with --tokenizer-in-graph failed validation ("logits argmax agreement 0.5010
    # < 0.99") while its logits matched transformers' at every real token.
    from mobilebert_kit.convert.validation.compare import compare

    reference = np.random.default_rng(0).normal(size=(2, 6, 3)) + [0.0, 0.0, 5.0]  # label 2 everywhere
    mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0]])
    ours = np.where(mask[..., None] == 1, reference, 0.0)
    metrics = compare("logits", ours, reference, mask, logits=True)
    assert metrics.argmax_agreement == 1.0 and metrics.cosine == pytest.approx(1.0)
    wrong = ours.copy()
    wrong[1, 1] = [9.0, 0.0, 0.0]  # one real token's label flips: 7 of 8 real tokens agree
    assert compare("logits", wrong, reference, mask, logits=True).argmax_agreement == pytest.approx(7 / 8)


def test_eval_data_scores_an_onnx_of_a_sentencepiece_checkpoint_with_its_tokenizer(tmp_path):
    """`mbk export XLM-R --format onnx --eval-data` failed: 'x.onnx ... carries none ...; pass --tokenizer' (an option
    export lacks). Its .tflite packs the SentencePiece model, its .onnx does not: exporter._scorer decided for both."""
    import torch
    import transformers

    from tests.helpers import run_mbk
    from tests.tokenizer_fixtures import LABELS, save_checkpoint

    reference = save_checkpoint("xlm-roberta", tmp_path / "x")
    sentences = ["The film was fine.", "A dull and slow story", "I loved every minute of it", "Not my kind of thing"]
    (tmp_path / "test.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{s}\t{LABELS[i % 3]}\n" for i, s in enumerate(sentences)))
    proc = run_mbk("export", tmp_path / "x", "--format", "onnx", "--seq-len", "16", "--eval-data",
                   tmp_path / "test.tsv", "--out", tmp_path / "x.onnx")
    assert proc.returncode == 0, proc.stderr
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "x")
    with torch.no_grad():
        predicted = [int(reference(**tokenizer(s, return_tensors="pt")).logits.argmax(-1)) for s in sentences]
    accuracy = sum(p == i % 3 for i, p in enumerate(predicted)) / len(sentences)
    assert f"accuracy {accuracy:.4f} on" in proc.stdout
