"""Consumers of parsed values that an outside probe (session 10) still broke, each fixed at its cause.

Each case fed the real command or its consumer a value the parser had let through: a model file with
no inputs, a static shape of ten billion values, a rank-1 token input, a sequence longer than the
model's positions, more shards than open files, one path for two reports, recipe values that name
nothing (a preset, a head, labels of the wrong count), a table read as CoNLL tokens and SQuAD answers
outside their context.
"""

import os
import re

import numpy as np
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
    from mobilebert_kit.convert.plan.export_plan import check_labels as _check_labels
    from mobilebert_kit.convert.exporter import ExportOptions

    options = ExportOptions("tiny-bert", out="m.tflite", labels=("a", "b", "c"), named_by="recipe")
    with pytest.raises(ConfigError, match=re.escape("[export] labels lists 3 names and the model's head has 2 classes")):
        _check_labels(options, "sequence_classifier", 2)
    _check_labels(options, "sequence_classifier", 3)
    _check_labels(ExportOptions("tiny-bert", out="m.tflite"), "encoder", None)


def test_head_choices_are_the_model_heads():
    from mobilebert_kit.convert.plan.export_options import HEAD_CHOICES
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


def test_pipeline_overwrite_of_a_user_s_directory_puts_it_back_when_a_stage_fails(mbk, tmp_path):
    # The directory was emptied before the first stage; a stage that then failed left neither it nor an output.
    recipe = tmp_path / "r.toml"
    recipe.write_text('[source]\npreset = "tiny-bert"\n[export]\nformats = ["tflite"]\nseq_len = 16\n'
                      'labels = ["a", "b"]\n')
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "precious.txt").write_text("keep me")
    proc = mbk("pipeline", recipe, "--out", mine, "--overwrite")
    assert_refused(proc, "[export] labels names classes")
    assert [p.name for p in mine.iterdir()] == ["precious.txt"] and (mine / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "r.toml"]


def test_pipeline_inputs_include_the_evaluation_data(tmp_path):
    # --overwrite of an output directory holding the [evaluation] data deleted it (the other data were refused).
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.pipeline.runner import Pipeline

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "test.tsv").write_text("sentence\tlabel\na\tpos\n")
    recipe = tmp_path / "r.toml"
    recipe.write_text('[source]\npreset = "tiny-bert"\n[export]\nformats = ["tflite"]\nseq_len = 16\n'
                      'out_dir = "out"\n[evaluation]\ndata = "out/test.tsv"\n')
    with pytest.raises(MbkError, match="contains the command's input"):
        Pipeline(recipe, overwrite=True).run()
    assert (tmp_path / "out" / "test.tsv").is_file()


def test_stdlib_corpus_is_an_output_that_never_replaces_the_user_s_files(mbk, tmp_path):
    # --stdlib-corpus DIR overwrote DIR/train.txt and heldout.txt; DIR equal to --out left a corpus in it.
    from tests.data.conftest import write_vocab

    vocab = write_vocab(tmp_path / "vocab.txt", ["the", "a"])
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "train.txt").write_text("MINE")
    proc = mbk("pretraining-data", "--stdlib-corpus", mine, "--vocab", vocab, "--out", tmp_path / "pd")
    assert_refused(proc, "is a directory not written by mbk as a standard-library corpus directory")
    assert (mine / "train.txt").read_text() == "MINE" and not (tmp_path / "pd").exists()
    proc = mbk("pretraining-data", "--stdlib-corpus", tmp_path / "c", "--vocab", vocab, "--out", tmp_path / "c" / "pd")
    assert_refused(proc, "overlap; give each its own directory")
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("name, value, problem", [
    ("input_ids", np.full((2, 8), 5 + 2**40, np.int64), "input_ids holds values outside int32"),  # wrapped to 5
    ("input_ids", np.full((2, 8), 5, np.uint64) + np.uint64(2**63), "input_ids holds values outside int32"),
    ("input_ids", np.ones((2, 8), bool), "input_ids holds bool values"),
    ("input_ids", np.full((2, 8), "five"), "input_ids holds <U4 values"),  # an internal TypeError from np.round
    ("attention_mask", np.full((2, 8), 7, np.int32), "attention_mask holds values other than 0 and 1"),
    ("attention_mask", np.array([[1] * 8, [0] * 8], np.int32), "row 1 has no real token (attention_mask all 0)"),
])
def test_npz_inputs_that_no_tokenizer_makes_are_refused(tmp_path, name, value, problem):
    # They were cast to int32 silently: validation passed on wrapped ids and on masks of 7.
    from mobilebert_kit.convert.errors import ExportError
    from mobilebert_kit.convert.plan.input_set import InputSet

    arrays = {"input_ids": np.full((2, 8), 5, np.int32), "attention_mask": np.ones((2, 8), np.int32),
              "token_type_ids": np.zeros((2, 8), np.int32)}
    np.savez(tmp_path / "ok.npz", **arrays)
    assert InputSet.from_file(tmp_path / "ok.npz", 8, vocab_size=100).arrays["input_ids"].max() == 5
    np.savez(tmp_path / "in.npz", **{**arrays, name: value})
    with pytest.raises(ExportError, match=re.escape(problem)):
        InputSet.from_file(tmp_path / "in.npz", 8, vocab_size=100)


@pytest.mark.parametrize("fmt, ops, problem", [
    ("tflite", "NOPE,SOFTMAX", "keep-float op type(s) NOPE are not in this model; its TFLite op types: "),
    ("onnx", "bogus", "keep-float op type(s) bogus are not in this model; its ONNX op types: "),
])
def test_keep_float_ops_the_model_lacks_are_refused(mbk, tmp_path, fmt, ops, problem):
    # The converters ignore a name they do not know: a typo kept nothing float and the export passed.
    out = tmp_path / f"m.{fmt}"
    proc = mbk("export", "tiny-bert", "--format", fmt, "--quantize", "int8", "--keep-float-ops", ops,
               "--seq-len", 16, "--out", out)
    assert_refused(proc, problem)
    assert not out.exists()


def test_a_squad_answer_not_at_its_offset_is_refused_for_training(tmp_path):
    # Training read the span at answer_start whatever the text said: "The cat sa" was learned as "on the mat".
    from mobilebert_kit.data.text_tokenizer import TextTokenizer
    from mobilebert_kit.training.task_data import squad_features
    from tests.data.conftest import write_vocab

    tokenizer = TextTokenizer.from_vocab(write_vocab(tmp_path / "vocab.txt", ["the", "cat", "sat", "on", "mat", "where"]))
    example = {"id": "q1", "question": "where", "context": "The cat sat on the mat", "impossible": False,
               "answers": [{"text": "on the mat", "start": 0}]}
    with pytest.raises(MbkError, match=re.escape("question 'q1': its answer 'on the mat' is not at answer_start 0 "
                                                 "of its context (there: 'The cat sa')")):
        squad_features(tokenizer, [example], 24, training=True)
    squad_features(tokenizer, [example], 24, training=False)  # scoring reads the answer texts only
    example["answers"][0]["start"] = 12
    features, _ = squad_features(tokenizer, [example], 24, training=True)
    assert features["end_positions"][0] > features["start_positions"][0] > 0


def test_an_empty_onnx_file_is_no_model_for_any_reader(mbk, tmp_path):
    # protobuf reads 0 bytes as an empty model: `mbk inspect` listed it, exit 0.
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    for command in (("inspect", path), ("profile", path, "--runs", "1")):
        assert_refused(mbk(*command), "holds no ONNX graph (no nodes; the file is empty)")


def test_a_file_that_aborts_the_interpreter_is_one_line_for_every_command(mbk, tmp_path):
    # LiteRT's int16 kernels abort the process (SIGABRT, exit 134, no message) on tiny-bert's int16x8 graph:
    # `mbk export` died during validation leaving its .partial, and validate/profile/inspect died with it.
    out = tmp_path / "m.tflite"
    proc = mbk("export", "tiny-bert", "--quantize", "int16x8", "--seq-len", 16, "--out", out)
    assert_refused(proc, f"{out} crashes the TFLite interpreter (SIGABRT while preparing or running it)")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    unchecked = tmp_path / "unchecked.tflite"
    assert mbk("export", "tiny-bert", "--quantize", "int16x8", "--seq-len", 16, "--out", unchecked,
               "--no-validate").returncode == 0
    for command in (("validate", unchecked, "--reference", "tiny-bert"), ("profile", unchecked, "--runs", "1"),
                    ("inspect", unchecked, "--xnnpack")):
        assert_refused(mbk(*command), "crashes the TFLite interpreter")


@pytest.mark.parametrize("name", ["a\\nb", "\\u001b[2Jok", "tab\\there"])
def test_a_recipe_name_with_control_characters_is_refused(tmp_path, name):
    from mobilebert_kit.convert.errors import RecipeError
    from mobilebert_kit.convert.recipe import Recipe

    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[source]\npreset = "tiny-bert"\n[export]\nname = "{name}"\n')
    with pytest.raises(RecipeError, match="must be a file name without directories"):
        Recipe.load(recipe).options()


def test_info_defaults_to_a_length_the_model_takes(mbk):
    proc = mbk("info", "tiny-bert", "--json")
    assert proc.returncode == 0 and '"seq_len": 64' in proc.stdout, proc.stderr


def test_evaluate_names_the_model_an_error_is_about_when_there_are_several(mbk, tmp_path):
    (tmp_path / "good.tsv").write_text("sentence\tlabel\na\tpos\n")
    (tmp_path / "fake.tflite").write_text("not a model")
    (tmp_path / "other.tflite").write_text("not a model either")
    proc = mbk("evaluate", "--model", tmp_path / "fake.tflite", "--model", tmp_path / "other.tflite",
               "--data", tmp_path / "good.tsv")
    assert_refused(proc, f"--model {tmp_path / 'fake.tflite'}: ")


def test_validation_checks_the_padding_mask_when_no_row_is_padded(tmp_path):
    # At --seq-len 16 the built-in sentences fill every row: an export with --mask-value 0 (padding attended)
    # passed validation and gave other answers on an app's short inputs.
    import mobilebert_kit as mbk_api
    from mobilebert_kit.convert.exporter import ExportOptions, export
    from mobilebert_kit.convert.validation.file_validation import validate_file
    from mobilebert_kit.convert.plan.input_set import InputSet
    from tests.convert.conftest import trained_like

    model = trained_like(mbk_api.build("tiny-bert", attention_mask_value=-120.0), seed=3)
    out = tmp_path / "nomask.tflite"
    export(ExportOptions(model, "tflite", out=str(out), seq_len=16, attention_mask_value=0.0, validate=False),
           log=None)
    full = InputSet.random(model.config["vocab_size"], 8, 16).take(1)  # one unpadded row
    assert (full.arrays["attention_mask"] == 1).all()
    padded = full.with_padded_rows()
    assert padded.count == 2 and padded.arrays["attention_mask"][1, 8:].sum() == 0
    assert not validate_file(out, model, full, "none").passed
    assert padded.with_padded_rows() is padded


def test_a_vocab_size_past_the_models_table_is_refused_naming_the_option(mbk, tmp_path):
    # The runtime's "gather index out of bounds" was reported as a broken file: "re-export the model".
    out = tmp_path / "m.onnx"
    assert mbk("export", "tiny-bert", "--format", "onnx", "--seq-len", 16, "--out", out, "--no-validate").returncode == 0
    proc = mbk("profile", out, "--vocab-size", 100000, "--runs", 1)
    assert_refused(proc, "--vocab-size 100000 exceeds the 512 ids of", "embedding table; pass at most 512")
    assert mbk("profile", out, "--vocab-size", 100, "--runs", 1).returncode == 0


def test_a_config_whose_width_the_heads_do_not_divide_names_the_file_and_the_fix(mbk, tmp_path):
    import json

    from safetensors.numpy import save_file

    source = tmp_path / "hf"
    source.mkdir()
    (source / "config.json").write_text(json.dumps({
        "model_type": "bert", "hidden_size": 32, "num_attention_heads": 3, "num_hidden_layers": 1,
        "intermediate_size": 64, "vocab_size": 64, "max_position_embeddings": 32, "type_vocab_size": 2}))
    save_file({"embeddings.word_embeddings.weight": np.zeros((64, 32), np.float32)}, str(source / "model.safetensors"))
    proc = mbk("info", source, "--seq-len", 16)
    assert_refused(proc, f"{source / 'config.json'}: attention width 32 is not a multiple of num_heads=3",
                   "to a divisor of 32")


@pytest.mark.parametrize("name", ["b.onnx", "a.TFLITE"])
def test_info_on_an_exported_file_points_to_inspect(mbk, tmp_path, name):
    # "not a checkpoint: expected config.json + model.safetensors ..." sent the user looking for a config.
    path = tmp_path / name
    path.write_bytes(b"exported")
    assert_refused(mbk("info", path), f"{path} is a {path.suffix.lower()} file (an exported model), not a preset or "
                   f"checkpoint; run `mbk inspect {path}`")


@pytest.mark.parametrize("ops, fmt, name", [
    ({"Gather", "MatMul"}, "onnx", "no LayerNorm/GELU/ReLU found"),  # was "NoNorm+none", a BERT variant's name
    (set(), "tflite", "no LayerNorm/GELU/ReLU found"),  # a file with no ops
    ({"RSQRT", "FULLY_CONNECTED"}, "tflite", "LayerNorm, no GELU/ReLU found"),
    ({"FULLY_CONNECTED", "RELU"}, "tflite", "NoNorm+ReLU"),  # NoNorm is read from a transformer's missing LayerNorm
])
def test_a_graph_without_a_known_activation_is_named_by_what_was_found(ops, fmt, name):
    from mobilebert_kit.artifacts.taxonomy import variant_name

    assert variant_name(ops, fmt) == name


def test_onnx_readiness_says_what_the_client_feeds_in_whole_phrases(tmp_path):
    # "...; it feeds any" ended a reason; a graph with no inputs read "(found none)".
    from mobilebert_kit.artifacts.clients import client_readiness

    optimum = "onnxruntime (optimum-style)"  # the text-in client (--tokenizer-in-graph) is another record
    none = client_readiness(_onnx_file(tmp_path / "noin.onnx"))[optimum]
    # token_type_ids is fed only where the graph takes it (the checkpoint's tokenizer returns it: issue 35).
    assert "it feeds inputs named input_ids, attention_mask (the graph has no inputs)" in none
    fixed = client_readiness(_onnx_file(tmp_path / "fixed.onnx", [1, 16]))[optimum]
    assert "inputs input_ids have a fixed batch or sequence length, but it feeds any batch size and sequence " \
           "length (export with dynamic axes, as mbk export writes .onnx)" in fixed
    assert not [reason for reason in none + fixed if reason.endswith("feeds any")]


def test_a_relative_output_in_a_deleted_working_directory_is_one_line(tmp_path):
    # os.path.abspath raised FileNotFoundError from getcwd: "internal error", exit 1.
    import subprocess
    import sys

    gone = tmp_path / "gone"
    gone.mkdir()
    code = ("import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); from mobilebert_kit.cli.main import main; "
            "sys.exit(main(['export', 'tiny-bert', '--format', 'onnx', '--no-validate', '--out', 'rel.onnx']))")
    proc = subprocess.run([sys.executable, "-c", code, gone], capture_output=True, text=True, timeout=600)
    assert_refused(proc, "cannot write rel.onnx: the working directory no longer exists; cd to an existing directory")
    assert list(tmp_path.iterdir()) == []


def _edited_tflite(source, path, edit):
    """``source`` with ``edit(model_object)`` applied, written to ``path`` (the flatbuffer object API)."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(source.read_bytes(), 0))
    edit(model)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    path.write_bytes(builder.Output())
    return path


def test_a_tflite_file_naming_missing_tensors_or_bytes_is_refused_by_every_reader(mbk, tmp_path):
    # `mbk inspect` of an operator naming tensor 99999 was an internal error (KeyError), and a buffer whose offset
    # lies past the end of the file was reported ready.
    from tests.profiler.fixture_models import build_tflite_bert

    plain = tmp_path / "plain.tflite"
    build_tflite_bert(plain, vocab_size=20, hidden=8, layers=1, intermediate=16, seq_len=8)

    def missing_tensor(model):
        model.subgraphs[0].operators[0].inputs = np.array([99999], dtype=np.int32)

    def far_buffer(model):
        buffer = next(b for b in model.buffers if b.data is not None and len(b.data) > 8)
        buffer.data, buffer.offset, buffer.size = None, 10**9, 64

    for name, edit, problem in (("tensor", missing_tensor, "names tensor 99999, and the file has"),
                                ("buffer", far_buffer, "lies past the end of the file")):
        bad = _edited_tflite(plain, tmp_path / f"{name}.tflite", edit)
        for command in (("inspect", bad), ("profile", bad, "--runs", 1, "--warmup", 1, "--min-time", 0)):
            assert_refused(mbk(*command), problem)


def test_onnx_weights_kept_outside_the_file_must_sit_whole_beside_it(mbk, tmp_path):
    # onnxruntime follows an initializer's external location anywhere; `mbk inspect` called such files ready.
    import onnx

    from tests.profiler.fixture_models import build_onnx_bert

    build_onnx_bert(tmp_path / "m.onnx", vocab_size=20, hidden=8, layers=1, seq_len=8)
    (tmp_path / "w.bin").write_bytes(b"\0" * 4096)
    os.mkfifo(tmp_path / "fifo.bin")
    cases = [("/etc/passwd", 0, "outside the model's directory"), ("../w.bin", 0, "outside the model's directory"),
             ("fifo.bin", 0, "not a data file beside the model"), ("m2.onnx", 0, "not a data file beside the model"),
             ("gone.bin", 0, "not a data file beside the model"), ("w.bin", 4000, "past the end of that 4,096-byte file")]
    for number, (location, offset, problem) in enumerate(cases):
        model = onnx.load(str(tmp_path / "m.onnx"))
        init = max(model.graph.initializer, key=lambda t: len(t.raw_data))
        length = len(init.raw_data)
        init.ClearField("raw_data")
        init.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
            entry = init.external_data.add()
            entry.key, entry.value = key, value
        path = tmp_path / ("m2.onnx" if location == "m2.onnx" else f"x{number}.onnx")
        onnx.save(model, str(path))
        assert_refused(mbk("inspect", path), problem)


def test_a_file_whose_int16_kernels_refuse_to_run_names_the_fix(mbk, tmp_path):
    # A Hugging Face BERT's int16x8 .tflite: LiteRT refuses its LayerNorm's int16 SQUARED_DIFFERENCE with an error
    # (no abort), and `mbk export` said "the runtime could not run ...; re-export the model (or report it with
    # the file)", which no re-export fixes.
    from tests.tokenizer_fixtures import save_checkpoint

    save_checkpoint("bert", tmp_path / "hf")
    out = tmp_path / "out" / "m.tflite"
    out.parent.mkdir()
    proc = mbk("export", tmp_path / "hf", "--quantize", "int16x8", "--seq-len", 16, "--out", out)
    assert_refused(proc, f"{out} cannot run in the TFLite interpreter (", "SQUARED_DIFFERENCE",
                   "export it with --quantize int8 or dynamic instead")
    assert list(out.parent.iterdir()) == []
