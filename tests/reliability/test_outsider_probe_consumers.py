"""Consumers of parsed values that an outside probe (session 10) still broke, each fixed at its cause.

Each case fed the real command or its consumer a value the parser had let through: a model file with
no inputs, a static shape of ten billion values, a rank-1 token input, a sequence longer than the
model's positions, more shards than open files, one path for two reports, recipe values that name
nothing (a preset, a head, labels of the wrong count), a table read as CoNLL tokens and SQuAD answers
outside their context.
"""

import re

import pytest

from mobilebert_kit.errors import ConfigError, MbkError
from tests.reliability.test_bad_inputs import assert_refused


def _onnx_file(path, input_shape=None):
    """A valid ONNX model: ``y = x + 1`` over an int64 ``input_ids`` of ``input_shape``, or a constant (no inputs)."""
    import onnx
    from onnx import TensorProto, helper

    if input_shape is None:
        one = helper.make_tensor("one", TensorProto.INT64, [1], [1])
        nodes, inputs = [helper.make_node("Constant", [], ["y"], value=one)], []
        output = helper.make_tensor_value_info("y", TensorProto.INT64, [1])
    else:
        one = helper.make_tensor("one", TensorProto.INT64, [], [1])
        nodes = [helper.make_node("Add", ["input_ids", "one"], ["y"])]
        inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, input_shape)]
        output = helper.make_tensor_value_info("y", TensorProto.INT64, input_shape)
    graph = helper.make_graph(nodes, "probe", inputs, [output],
                              initializer=[] if input_shape is None else [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_a_model_without_inputs_is_refused_by_every_runner_caller(mbk, tmp_path):
    # `mbk validate` read input_specs[0] of a file with none: an IndexError as an internal error.
    from mobilebert_kit.artifacts.errors import ArtifactError
    from mobilebert_kit.artifacts.runner import ArtifactRunner

    path = _onnx_file(tmp_path / "noin.onnx")
    with pytest.raises(ArtifactError, match="has no inputs, so it is not an encoder export"):
        ArtifactRunner(path)
    proc = mbk("validate", path, "--reference", "tiny-bert")
    assert_refused(proc, "has no inputs")


@pytest.mark.parametrize("shape, problem", [
    ([100_000, 100_000], "needs 10,000,000,000 values"),  # numpy's MemoryError was an internal error
    ([4], "has shape [4]; the profiler feeds token inputs of shape [batch, seq] only"),  # a broadcast ValueError
])
def test_profile_refuses_token_inputs_it_cannot_feed(mbk, tmp_path, shape, problem):
    path = _onnx_file(tmp_path / "odd.onnx", shape)
    proc = mbk("profile", path, "--runs", "1")
    assert_refused(proc, problem)


def test_feeds_keep_working_for_a_static_batch_within_bounds():
    from mobilebert_kit.profiler.inputs import make_feeds

    feeds = make_feeds([{"name": "ids", "role": "input_ids", "dtype": "int32", "shape": [8, 16]}], 16, 100)
    assert feeds["ids"].shape == (8, 16) and feeds["ids"].min() >= 1


def test_flops_past_the_models_positions_is_a_config_error():
    # `mbk quickstart --seq-len 513` failed in a multi-line Keras shape error inside the FLOPs trace.
    import mobilebert_kit as mbk_api
    from mobilebert_kit.models.flops import count_flops

    model = mbk_api.build("tiny-bert")
    positions = model.config["max_position_embeddings"]
    with pytest.raises(ConfigError, match=f"--seq-len {positions + 1} exceeds the model's {positions} positions"):
        count_flops(model, seq_len=positions + 1)
    assert count_flops(model, seq_len=positions) > count_flops(model, seq_len=positions // 2) > 0


def test_two_reports_on_one_path_are_refused_before_profiling(mbk, tmp_path):
    # The CSV replaced the JSON, which was left behind under the CSV's name.
    path = _onnx_file(tmp_path / "m.onnx", [1, 8])
    proc = mbk("profile", path, "--json", tmp_path / "r", "--csv", tmp_path / "." / "r")
    assert_refused(proc, "--json and --csv both name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


@pytest.mark.parametrize("source, export, problem", [
    ('preset = "nope"', "", "[source] preset = 'nope' is not a preset; valid: mobilebert"),
    ('preset = "tiny-bert"\nhead = "bogus"', "", "unknown head 'bogus' in [source]; valid values: 'auto'"),
])
def test_recipe_values_naming_nothing_are_refused_when_read(mbk, tmp_path, source, export, problem):
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[source]\n{source}\n[export]\nformats = ["tflite"]\nseq_len = 16\n{export}')
    proc = mbk("pipeline", recipe, "--out", tmp_path / "out")
    assert_refused(proc, problem)
    assert not (tmp_path / "out").exists()


def test_a_pipeline_refused_at_its_first_stage_leaves_no_directory(mbk, tmp_path):
    # Labels for a model without classes are found when the source is loaded, after the output directory
    # was made: a directory holding only the marker was left; an empty one the user made stays empty.
    recipe = tmp_path / "r.toml"
    recipe.write_text('[source]\npreset = "tiny-bert"\n[export]\nformats = ["tflite"]\nseq_len = 16\n'
                      'labels = ["a", "b"]\n')
    proc = mbk("pipeline", recipe, "--out", tmp_path / "new")
    assert_refused(proc, "[export] labels names classes, and this source is encoder, not a classifier")
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    assert mbk("pipeline", recipe, "--out", tmp_path / "empty").returncode == 2
    assert list((tmp_path / "empty").iterdir()) == []


def test_labels_must_name_each_class_of_the_head(tmp_path):
    from mobilebert_kit.convert.exporter import ExportOptions, _check_labels

    options = ExportOptions("tiny-bert", out="m.tflite", labels=("a", "b", "c"), named_by="recipe")
    with pytest.raises(ConfigError, match=re.escape("[export] labels lists 3 names and the model's head has 2 classes")):
        _check_labels(options, "sequence_classifier", 2)
    _check_labels(options, "sequence_classifier", 3)
    _check_labels(ExportOptions("tiny-bert", out="m.tflite"), "encoder", None)


def test_head_choices_are_the_model_heads():
    from mobilebert_kit.convert.export_options import HEAD_CHOICES
    from mobilebert_kit.models.heads import HEADS

    assert set(HEAD_CHOICES) == {"auto"} | set(HEADS)


@pytest.mark.parametrize("body, line", [
    ("sentence\tlabel\nthe film was great\tpos\nawful\tneg\n", 2),  # a GLUE table: a column with spaces
    ("the film was great pos\nawful neg\n", 2),  # space-separated sentences: columns vary
])
def test_a_table_of_sentences_is_not_read_as_conll_tokens(tmp_path, body, line):
    # token_classification trained on a GLUE .tsv as one long "sentence" tagged with its rows' last words.
    from mobilebert_kit.training.task_data import read_tagged

    path = tmp_path / "train.tsv"
    path.write_text(body)
    with pytest.raises(MbkError, match=rf"train.tsv:{line}: .*(table of sentences|columns where line 1)"):
        read_tagged(path)
    conll = tmp_path / "train.txt"
    conll.write_text("EU NNP B-ORG\nrejects VBZ O\n\nPeter NNP B-PER\n")
    assert read_tagged(conll) == [(["EU", "rejects"], ["B-ORG", "O"]), (["Peter"], ["B-PER"])]


@pytest.mark.parametrize("answer, problem", [
    ({"text": "Paris", "answer_start": 400}, "answer_start 400, outside its 28-character context"),
    ({"text": "Paris", "answer_start": -1}, "answer_start -1"),
    ({"text": " ", "answer_start": 0}, "an empty text"),
])
def test_squad_answers_outside_their_context_are_refused(tmp_path, answer, problem):
    # They were trained as "no answer" (both positions on [CLS]) without a word.
    import json

    from mobilebert_kit.training.task_data import read_squad

    context = "The capital of France: Paris"
    data = {"data": [{"paragraphs": [{"context": context, "qas": [
        {"id": "q1", "question": "Capital?", "answers": [{"text": "Paris", "answer_start": 23}]},
        {"id": "q2", "question": "Capital?", "answers": [answer]}]}]}]}
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(MbkError, match=re.escape(f"data[0].paragraphs[0].qas[1].answers[0] has {problem}")):
        read_squad(path)
    data["data"][0]["paragraphs"][0]["qas"].pop()
    path.write_text(json.dumps(data))
    assert [e["answers"] for e in read_squad(path)] == [[{"text": "Paris", "start": 23}]]
