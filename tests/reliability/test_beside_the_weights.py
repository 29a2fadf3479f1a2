"""What travels beside the weights is checked against the model, before anything is written (issue 37).

The vocabulary against the embedding table, class names against the head (count, type, look-alikes), the
tokenizer's settings with the types transformers gives them, ``architectures`` as transformers reads it, and
every side file read with a bound; a refused ``mbk import`` leaves an earlier import at its ``--out`` as it was.
"""

import json
import os

import numpy as np
import pytest

from mobilebert_kit.errors import ConfigError, DataError
from tests.data.conftest import write_vocab
from tests.helpers import assert_one_line_error
from tests.test_checkpoints import TINY_HF, _write_safetensors, tiny_hf_arrays

WORDS = ["the", "cat", "sat"]
TINY_HF_ENCODER = dict(vocab_size=50, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
                       max_position_embeddings=16)  # TINY_HF as Encoder arguments


def _checkpoint(directory, classes=None, config=None, vocab=WORDS):
    """A tiny BERT checkpoint (vocab_size 50) with a vocab.txt; with ``classes``, a sequence classifier."""
    directory.mkdir(parents=True, exist_ok=True)
    arrays = tiny_hf_arrays()
    settings = dict(TINY_HF)
    if classes:
        arrays.update({"classifier.weight": np.zeros((classes, 8), np.float32),
                       "classifier.bias": np.zeros(classes, np.float32)})
        settings.update(architectures=["BertForSequenceClassification"],
                        id2label={str(i): f"c{i}" for i in range(classes)})
    settings.update(config or {})
    (directory / "config.json").write_text(json.dumps(settings))
    _write_safetensors(directory / "model.safetensors", arrays)
    write_vocab(directory / "vocab.txt", vocab)
    return directory


def _files(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _duplicate_token(source):
    write_vocab(source / "vocab.txt", WORDS + ["cat"])


def _lower_case_zero(source):
    (source / "tokenizer_config.json").write_text('{"do_lower_case": 0}')


def _larger_vocabulary(source):
    write_vocab(source / "vocab.txt", [f"w{i}" for i in range(60)])  # 65 ids for a 50-row table


def _huge_side_file(source):
    with open(source / "special_tokens_map.json", "wb") as handle:  # sparse: no memory or disk spent
        handle.truncate(17 * 1024 * 1024)


@pytest.mark.parametrize("breakage, fragment", [
    (_duplicate_token, "lists 'cat' twice"),
    (_lower_case_zero, "do_lower_case is 0 (int), not true, false or null"),
    (_larger_vocabulary, "has 65 tokens but the model embeds only 50"),
    (_huge_side_file, "over the 16,777,216-byte limit"),
])
def test_a_refused_import_leaves_the_earlier_import_as_it_was(tmp_path, mbk, breakage, fragment):
    # The model was saved first and the side files checked after: a refused import replaced a good earlier
    # import at the same --out with a model that had no vocabulary (or read a 3 GB side file whole: MemoryError).
    source = _checkpoint(tmp_path / "hf")
    out = tmp_path / "out"
    assert mbk("import", source, "--out", out).returncode == 0
    before = _files(out)
    assert "vocab.txt" in before
    breakage(source)
    assert_one_line_error(mbk("import", source, "--out", out), fragment)
    assert _files(out) == before
    assert_one_line_error(mbk("import", source, "--out", tmp_path / "fresh"), fragment)
    assert not (tmp_path / "fresh").exists()


def test_a_vocabulary_larger_than_the_embedding_table_is_refused_at_export(tmp_path, mbk):
    # It exported with exit 0, and the app failed with "gather index out of bounds" on the extra tokens.
    saved = tmp_path / "saved"
    from mobilebert_kit.models.api import build, save

    save(build(dict(TINY_HF_ENCODER)), saved)
    write_vocab(saved / "vocab.txt", [f"w{i}" for i in range(60)])
    proc = mbk("export", saved, "--format", "tflite", "--out", tmp_path / "m.tflite", "--no-validate")
    assert_one_line_error(proc, "has 65 tokens but the model embeds only 50", "gather index out of bounds")
    assert not (tmp_path / "m.tflite").exists()


@pytest.mark.parametrize("id2label, fragment", [
    ({"0": {"name": "neg"}, "1": {"name": "pos"}}, "class 0 is dict"),
    ({"0": "neg", "2": "pos"}, "has 2 class(es) but no class 1"),
    ({"0": "neg", "1": "pos", "2": "neutral"}, "names 3 class(es) and the model's head has 2"),
    ({"0": "caf\u00e9", "1": "cafe\u0301"}, "composed differently (NFC and NFD)"),
    ({"0": "neg", "1": "neg\u200b"}, "differ only by invisible characters"),
    ({"0": "neg", "1": "\u200fneg"}, "differ only by invisible characters"),
    ({"0": "Pos", "1": "pos"}, "differ only in case"),
    ({"zero": "neg", "1": "pos"}, "id2label key 'zero' is no class id"),
])
def test_class_names_of_an_imported_classifier_are_checked_against_its_head(tmp_path, mbk, id2label, fragment):
    # Objects became labels like "{'name': 'neg'}", 3 names for a 2-class head were packed and validation said
    # PASSED, look-alikes became separate classes: all with exit 0.
    source = _checkpoint(tmp_path / "clf", classes=2, config={"id2label": id2label})
    assert_one_line_error(mbk("import", source, "--out", tmp_path / "out"), fragment)
    assert not (tmp_path / "out").exists()


def _saved_classifier(directory, labels):
    from mobilebert_kit.models.api import build, save
    from mobilebert_kit.models.heads import HEADS

    save(HEADS["sequence_classifier"](build(dict(TINY_HF_ENCODER)), num_labels=2), directory)
    write_vocab(directory / "vocab.txt", WORDS)
    (directory / "labels.txt").write_text("".join(f"{name}\n" for name in labels), encoding="utf-8")
    return directory


@pytest.mark.parametrize("labels, fragment", [
    (["neg", "pos", "neutral"], "names 3 class(es) and the model's head has 2"),
    (["neg", "neg\u2060"], "differ only by invisible characters"),
    (["\uff50\uff4f\uff53", "pos"], "look alike"),
])
def test_a_labels_file_that_does_not_fit_the_head_is_refused_at_export(tmp_path, mbk, labels, fragment):
    saved = _saved_classifier(tmp_path / "saved", labels)
    proc = mbk("export", saved, "--format", "tflite", "--out", tmp_path / "m.tflite", "--no-validate")
    assert_one_line_error(proc, "labels.txt", fragment)
    assert not (tmp_path / "m.tflite").exists()


def test_look_alike_labels_given_to_an_export_are_refused(tmp_path):
    # [export] labels in a recipe (ExportOptions.labels) are held to the rules of the source's own names.
    from mobilebert_kit.convert.exporter import ExportOptions, export

    saved = _saved_classifier(tmp_path / "saved", ["neg", "pos"])
    with pytest.raises(ConfigError, match="labels.*differ only in case"):
        export(ExportOptions(str(saved), "tflite", "none", out=str(tmp_path / "m.tflite"), labels=("neg", "NEG"),
                             validate=False), log=None)
    assert not (tmp_path / "m.tflite").exists()


def test_architectures_as_a_string_is_refused_not_read_as_no_head(tmp_path, mbk):
    # transformers iterates the value (a string names no class, character by character); the head was dropped.
    source = _checkpoint(tmp_path / "clf", classes=2, config={"architectures": "BertForSequenceClassification"})
    assert_one_line_error(mbk("import", source, "--out", tmp_path / "out"), "architectures is the str",
                          "list of class names")
    (source / "config.json").write_text(json.dumps({**json.loads((source / "config.json").read_text()),
                                                    "architectures": ["BertForSequenceClassification"]}))
    assert mbk("import", source, "--out", tmp_path / "out").returncode == 0
    assert (tmp_path / "out" / "labels.txt").read_text() == "c0\nc1\n"


@pytest.mark.parametrize("setting, value", [("do_lower_case", 0), ("do_lower_case", "false"),
                                            ("strip_accents", 1)])
def test_tokenizer_settings_must_have_the_types_transformers_gives_them(tmp_path, setting, value):
    # do_lower_case: 0 was ignored and a cased model's text lower-cased; transformers' fast tokenizer refuses
    # a non-bool ("'int' object cannot be converted to 'PyBool'") and its slow one tests truthiness.
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    write_vocab(tmp_path / "vocab.txt", WORDS)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({setting: value}))
    with pytest.raises(ConfigError, match=f"{setting} is .* not true, false or null"):
        TextTokenizer.from_file(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({setting: False}))
    assert TextTokenizer.from_file(tmp_path).lowercase is (setting != "do_lower_case")


@pytest.mark.parametrize("raw, fragment", [
    (["pos", "neg", "pos\u200b"], "differ only by invisible characters"),
    (["caf\u00e9", "cafe\u0301"], "composed differently (NFC and NFD)"),
    (["pos", "\u202epos"], "differ only by invisible characters"),
    (["\uff50\uff4f\uff53", "pos"], "look alike"),
])
def test_look_alike_labels_in_fine_tuning_data_are_one_class_refused(raw, fragment):
    from mobilebert_kit.training.task_data import class_labels

    with pytest.raises(DataError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        class_labels("t.tsv", raw)
    assert class_labels("t.tsv", ["\U0001f468\u200d\U0001f469", "pos"])  # one emoji ZWJ sequence alone is kept


def test_a_labels_file_is_read_with_a_bound(tmp_path):
    from mobilebert_kit.sources.model_source import read_labels

    with open(tmp_path / "labels.txt", "wb") as handle:
        handle.truncate(5 * 1024 * 1024)
    with pytest.raises(ConfigError, match="over the 4,194,304-byte limit"):
        read_labels(tmp_path)
    os.remove(tmp_path / "labels.txt")


def test_a_teachers_side_files_are_checked_before_distillation_writes_anything(mbk, tiny_run_inputs, tmp_path):
    # They were copied beside the student at the end: a refusal came after the whole run (or its 3 GB file was
    # read whole then).
    import shutil

    teacher = shutil.copytree(tiny_run_inputs / "teacher", tmp_path / "teacher")
    (teacher / "tokenizer_config.json").write_text('{"do_lower_case": "yes"}')
    proc = mbk("distill", "--teacher", teacher, "--student", "tiny-mobilebert", "--data", tiny_run_inputs / "data",
               "--out", tmp_path / "run", "--layer-steps", 1, "--batch-size", 4)
    assert_one_line_error(proc, "do_lower_case is 'yes' (str), not true, false or null")
    assert not (tmp_path / "run").exists()
