"""Bad inputs through the command line: one error line, a non-zero exit, nothing written.

Most commands run in-process through ``main()`` (a subprocess per case would spend its time importing
TensorFlow); the fault tests in test_faults.py run real child processes.
"""

import json
import struct

import pytest

from tests.helpers import assert_one_line_error


def assert_refused(proc, *fragments, detail_lines=False):
    """One ``mbk CMD: error:`` line, exit status 2, and (unless ``detail_lines``) nothing else on stderr."""
    line = assert_one_line_error(proc, *fragments)
    assert proc.returncode == 2 and ": error: " in line, proc.stderr
    rest = proc.stderr.strip().splitlines()[1:]
    if detail_lines:
        assert rest and all(r.startswith("  - ") for r in rest), proc.stderr  # one indented line per variable
    else:
        assert rest == [], proc.stderr
    return line


# ------------------------------------------------------------------ checkpoints
def test_import_corrupt_safetensors_header(mbk, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": 50, "hidden_size": 8,
                                                  "num_hidden_layers": 1, "num_attention_heads": 2,
                                                  "intermediate_size": 16}))
    (src / "model.safetensors").write_bytes(struct.pack("<Q", 12) + b"{not json!!}")
    assert_refused(mbk("import", src, "--out", tmp_path / "out"), "header of", "is not valid JSON")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_import_tf1_checkpoint_with_missing_and_misshaped_variables(mbk, tmp_path):
    from tests.test_checkpoints import OFFICIAL_TINY, write_tf1_checkpoint

    missing = "bert/encoder/layer_1/ffn_layer_0/output/dense/kernel"
    misshaped = "bert/encoder/layer_0/attention/self/value/kernel"
    prefix = write_tf1_checkpoint(tmp_path / "ckpt", OFFICIAL_TINY, drop=[missing], reshape={misshaped: [24, 24]})
    proc = mbk("import", prefix, "--out", tmp_path / "out")
    assert_refused(proc, "1 missing, 0 unexpected, 1 misshaped", detail_lines=True)
    assert f"missing {missing}" in proc.stderr and "misshaped encoder/transformer_layer_0/attention/value/kernel: expected shape [48, 24], got [24, 24]" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_import_config_json_that_is_not_an_object(mbk, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text('{"model_type": "bert", "hidden_size": "wide"}')
    (src / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")
    assert_refused(mbk("import", src, "--out", tmp_path / "out"), "config.json: hidden_size must be an integer")
    assert not (tmp_path / "out").exists()


def test_load_hand_edited_saved_model_config(mbk, tmp_path):
    import mobilebert_kit as mbk_api

    saved = mbk_api.save(mbk_api.build("tiny-bert"), tmp_path / "saved")
    meta = json.loads((saved / "config.json").read_text())
    meta["encoder"]["intermediate_size"] = "big"
    (saved / "config.json").write_text(json.dumps(meta))
    assert_refused(mbk("info", saved), "config.json: intermediate_size must be an integer")
    (saved / "config.json").write_text("[1, 2]")  # named since session 9; it was "is not a checkpoint"
    assert_refused(mbk("info", saved), "config.json must hold a JSON object, not an array")


# ------------------------------------------------------------------ models and data
def test_export_sequence_longer_than_the_position_table(mbk, tmp_path):
    proc = mbk("export", "tiny-bert", "--seq-len", 100, "--out", tmp_path / "m.tflite")
    assert_refused(proc, "--seq-len 100 exceeds the model's 64 positions; use at most 64")
    assert list(tmp_path.iterdir()) == []


def test_export_with_another_models_vocabulary(mbk, tmp_path):
    import mobilebert_kit as mbk_api

    saved = mbk_api.save(mbk_api.build("tiny-bert"), tmp_path / "saved")  # 512 embeddings
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(2000)]
    (saved / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (tmp_path / "text.txt").write_text("w1999 w1500 w3\nw1800 w7\n")
    proc = mbk("export", saved, "--seq-len", 16, "--out", tmp_path / "m.tflite", "--validation-data", tmp_path / "text.txt")
    assert_refused(proc, "has 2005 tokens but the model embeds only 512", "vocab.txt the model was trained with")
    assert not (tmp_path / "m.tflite").exists() and not list(tmp_path.glob(".m.tflite*"))


def test_finetune_with_another_models_vocabulary(mbk, tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(2000)]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    context = "w1999 w1500 w3 w1800 w7 ."
    qas = [{"id": str(i), "question": "w1999 w3", "is_impossible": False,
            "answers": [{"text": "w1800", "answer_start": context.index("w1800")}]} for i in range(4)]
    (tmp_path / "squad.json").write_text(json.dumps({"version": "v2.0", "data": [{"paragraphs": [
        {"context": context, "qas": qas}]}]}))
    proc = mbk("finetune", "--model", "tiny-bert", "--task", "span_qa", "--train", tmp_path / "squad.json", "--vocab",
               tmp_path / "vocab.txt", "--out", tmp_path / "ft", "--epochs", 1, "--batch-size", 2, "--seq-len", 16)
    assert_refused(proc, "has 2005 tokens but tiny-bert embeds only 512", "--vocab")
    assert not (tmp_path / "ft").exists()


def test_distill_with_data_tokenized_by_another_vocabulary(mbk, tiny_run_inputs, tmp_path):
    from tests.training.synthetic import write_synthetic_data

    write_synthetic_data(tmp_path / "data", num_examples=8, seq_len=12, max_predictions=3, vocab_size=1000)
    proc = mbk("distill", "--teacher", tiny_run_inputs / "teacher", "--student", "tiny-mobilebert", "--data",
               tmp_path / "data", "--out", tmp_path / "run", "--layer-steps", 1, "--batch-size", 4)
    assert_refused(proc, "tokenized with a vocabulary of 1000 tokens but the models have 512")
    assert not (tmp_path / "run").exists()


def test_distill_never_overwrites_its_student_directory(mbk, tiny_run_inputs, tmp_path):
    # --student DIR --out DIR --overwrite read the user's student, then replaced it with the run directory.
    import shutil

    student = shutil.copytree(tiny_run_inputs / "student", tmp_path / "student")
    before = sorted(p.name for p in student.iterdir())
    proc = mbk("distill", "--teacher", tiny_run_inputs / "teacher", "--student", student, "--data",
               tiny_run_inputs / "data", "--out", student, "--overwrite", "--layer-steps", 1, "--batch-size", 4)
    assert_refused(proc, "is the command's input")
    assert sorted(p.name for p in student.iterdir()) == before


@pytest.fixture
def vocab(tmp_path):
    from tests.data.conftest import write_vocab

    return write_vocab(tmp_path / "vocab.txt", ["the", "cat", "sat", "on", "a", "mat", "dog", "."])


def test_empty_corpus(mbk, vocab, tmp_path):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text("\n  \n\n")
    for name in ("empty.txt", "blank.txt"):
        proc = mbk("pretraining-data", "--input", tmp_path / name, "--vocab", vocab, "--out", tmp_path / "data",
                   "--seq-len", 16, "--shards", 1)
        assert_refused(proc, "no examples")
    assert not list(tmp_path.glob("*data*"))


def test_non_utf8_corpus(mbk, vocab, tmp_path):
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes("the cat sat on the mat .\n\nthe dog sat on a caf\u00e9 mat .\n".encode("latin-1"))
    proc = mbk("pretraining-data", "--input", corpus, "--vocab", vocab, "--out", tmp_path / "data", "--seq-len", 16,
               "--shards", 1)
    assert_refused(proc, "latin1.txt line 3 is not UTF-8 text (byte 0xe9 at column 21)", "iconv")
    assert not list(tmp_path.glob("*data*"))


# ------------------------------------------------------------------ artifacts
@pytest.fixture(scope="module")
def tflite_file(tmp_path_factory):
    from mobilebert_kit.convert.exporter import ExportOptions, export

    out = tmp_path_factory.mktemp("artifact") / "m.tflite"
    export(ExportOptions("tiny-bert", "tflite", "none", out=str(out), seq_len=16, validate=False), log=None)
    return out


@pytest.mark.parametrize("command", ["inspect", "validate", "profile"])
def test_truncated_tflite(mbk, tflite_file, tmp_path, command):
    bad = tmp_path / "cut.tflite"
    bad.write_bytes(tflite_file.read_bytes()[:600])  # an interrupted download: header present, tables not
    extra = {"inspect": [], "validate": ["--reference", "tiny-bert"],
             "profile": ["--target", "host", "--json", tmp_path / "r.json"]}[command]
    assert_refused(mbk(command, bad, *extra), "TFLite")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("command", ["inspect", "validate", "profile"])
def test_corrupt_onnx(mbk, tmp_path, command):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage\xff\xfe")
    extra = {"inspect": [], "validate": ["--reference", "tiny-bert"],
             "profile": ["--target", "host", "--json", tmp_path / "r.json"]}[command]
    assert_refused(mbk(command, bad, *extra), "not a readable ONNX model")
    assert not (tmp_path / "r.json").exists()


# ------------------------------------------------------------------ recipes and run records
@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[source]\npreset = 'tiny-bert'\n[export]\nquantise = 'int8'\n", "unknown key 'quantise' in [export]"),
        ("[source]\npreset = 'tiny-bert'\n[export]\nout_dir = '../outside'\n", "escapes the recipe's directory"),
        ("[source]\nmodel = '/etc'\n", "is absolute"),
    ],
)
def test_bad_recipe_through_the_cli(mbk, tmp_path, text, fragment):
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "r.toml").write_text(text)
    assert_refused(mbk("export", "--recipe", recipes / "r.toml"), fragment)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["r.toml", "recipes"]


def test_distill_resume_with_a_damaged_run_record(mbk, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text('{"a": 1}')
    assert_refused(mbk("distill", "--out", run, "--resume"), "is not a distillation run record")
    (run / "run.json").write_text('{"config": {"layer_steps": "x"}, "teacher": "t", "student": "s", "data": "d"}')
    assert_refused(mbk("distill", "--out", run, "--resume"), "layer_steps must be an integer >= 1")
    (run / "run.json").write_text("{truncated")
    assert_refused(mbk("distill", "--out", run, "--resume"), "is not valid JSON")
    assert sorted(p.name for p in run.iterdir()) == ["run.json"]


def test_distill_loss_weight_that_is_not_a_number(mbk, tmp_path):
    (tmp_path / "d").mkdir()  # --data is checked as a directory when the command line is parsed
    proc = mbk("distill", "--teacher", "t", "--student", "s", "--data", tmp_path / "d", "--out", tmp_path / "run",
               "--weights", "feature_map=lots")
    assert_refused(proc, "--weights feature_map='lots' is not a number")
    assert not (tmp_path / "run").exists()
