"""sources/: one resolver from a model spec to a model, and one prepare_source for substitution (issue 13 items 3, 6)."""

import subprocess
import sys

import numpy as np
import pytest

from mobilebert_kit.errors import CheckpointError, ConfigError
from mobilebert_kit.models.api import build, named_weights, save
from mobilebert_kit.sources.model_source import ModelSource
from mobilebert_kit.sources.spec import classify, locate
from tests.test_checkpoints import OFFICIAL_TINY, write_tf1_checkpoint


def _weights(model):
    return {path: var.numpy() for path, var in named_weights(model).items()}


def _assert_same_weights(a, b):
    a, b = _weights(a), _weights(b)
    assert a.keys() == b.keys()
    for path in a:
        np.testing.assert_array_equal(a[path], b[path], err_msg=path)


def test_a_preset_is_seeded_for_every_caller():
    # Fine-tuning used to build presets unseeded, export seeded: the same name meant two models.
    from mobilebert_kit.training.fine_tuner import load_encoder
    from mobilebert_kit.training.teacher_student import build_student

    exported = ModelSource.load("tiny-bert").model
    _assert_same_weights(load_encoder("tiny-bert"), exported)
    # A run's own seed chooses a student's initial weights, and the same seed gives the same student.
    first, again, other = (build_student("tiny-mobilebert", seed=s) for s in (3, 3, 4))
    _assert_same_weights(first, again)
    assert any(not np.array_equal(x, y) for x, y in zip(_weights(first).values(), _weights(other).values()))


def test_each_kind_of_spec_is_classified_with_its_directory(tmp_path, monkeypatch):
    model = build("tiny-bert")
    saved = save(model, tmp_path / "saved")
    assert classify("tiny-bert").kind == "preset" and classify("tiny-bert").directory is None
    assert (classify(saved).kind, classify(saved).directory) == ("saved", saved)
    assert classify({"hidden_size": 32}).kind == "config"
    assert classify(model).kind == "model"
    # An existing directory wins over a preset of the same name: it is what the user made.
    monkeypatch.chdir(tmp_path)
    save(model, tmp_path / "tiny-bert")
    assert classify("tiny-bert").kind == "saved" and locate("tiny-bert") == "path"


def test_one_tf1_detection_for_prefix_index_file_and_directory(tmp_path):
    prefix = write_tf1_checkpoint(tmp_path / "ckpt", OFFICIAL_TINY)
    found = [classify(spec) for spec in (prefix, f"{prefix}.index", tmp_path / "ckpt")]
    assert {(s.kind, str(s.location), s.directory) for s in found} == {("tf1", prefix, tmp_path / "ckpt")}
    source = ModelSource.load(tmp_path / "ckpt", head=None)
    assert source.kind == "tf1" and source.encoder.config["hidden_size"] == OFFICIAL_TINY["hidden_size"]


@pytest.mark.parametrize(
    "spec, accept, what, error, fragment",
    [
        ("no-such-model", None, "model", ConfigError, "valid presets: mobilebert, "),
        ("tiny-bert", ("saved", "hf", "tf1", "model"), "teacher", ConfigError,
         "teacher tiny-bert is a preset; pass a saved model, Hugging Face checkpoint, TF1 checkpoint or model"),
        ("{tmp}/notes.txt", None, "model", CheckpointError, "is not a checkpoint"),
        ("{tmp}/weights.bin", None, "model", CheckpointError, "refusing to load weights.bin"),
    ],
)
def test_a_spec_that_is_not_a_model_is_one_error_naming_what_to_pass(tmp_path, spec, accept, what, error, fragment):
    (tmp_path / "notes.txt").write_text("not a model\n")
    (tmp_path / "weights.bin").write_bytes(b"\x80\x02")
    kwargs = {"accept": accept} if accept else {}
    with pytest.raises(error) as caught:
        classify(spec.format(tmp=tmp_path), what=what, **kwargs)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_a_spec_is_located_and_classified_without_tensorflow():
    code = ("import sys\nfrom mobilebert_kit.sources.spec import classify, locate\n"
            "print(locate('tiny-bert'), locate('no-such-model'), classify('tiny-bert').kind, 'tensorflow' in sys.modules)\n")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["preset", "None", "preset", "False"]


def test_prepare_source_substitutes_once_and_keeps_tokenizer_and_labels(tmp_path):
    from mobilebert_kit.convert.prepare.source import Recovery, prepare_source

    directory = save(build("tiny-bert"), tmp_path / "saved")
    (directory / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"]) + "\n")
    (directory / "labels.txt").write_text("neg\npos\n")
    unchanged = prepare_source(directory)
    assert unchanged.source is unchanged.original and unchanged.substitution is None
    prepared = prepare_source(directory, {"norm": "no_norm"}, Recovery(steps=0, seq_len=8))
    assert prepared.source.encoder.config["normalization_type"] == "no_norm"
    assert prepared.original.encoder.config["normalization_type"] == "layer_norm"
    assert (prepared.source.directory, prepared.source.labels) == (directory, ["neg", "pos"])
    assert prepared.source.tokenizer.vocab_lines()[-1] == "hello"
    assert prepared.data.arrays["input_ids"].shape[1] == 8 and prepared.fidelity.steps == 0


def test_a_recipe_prepares_its_source_from_the_substitute_table_without_changing_its_options(tmp_path, monkeypatch):
    from mobilebert_kit.convert.prepare import source as prepare
    from mobilebert_kit.convert.recipe import Recipe

    path = tmp_path / "r.toml"
    path.write_text("[source]\npreset = 'tiny-bert'\n[substitute]\nnorm = 'no_norm'\nrecover_steps = 3\n"
                    "seq_len = 24\nlearning_rate = 0.001\nfit = false\n[export]\nformats = ['tflite', 'onnx']\n"
                    "seq_len = 16\nout_dir = 'out'\n")
    recipe = Recipe.load(path)
    options = recipe.options(validate=False)
    before = [vars(o).copy() for o in options]
    calls = []
    monkeypatch.setattr(prepare, "prepare_source", lambda *args, **kwargs: calls.append((args, kwargs)) or
                        prepare.PreparedSource("prepared", "original"))
    assert recipe.prepare(options[0], log=None) == "prepared"
    (spec, substitutions, recovery), _ = calls[0]
    assert (spec.kind, spec.name, substitutions) == ("preset", "tiny-bert", {"norm": "no_norm"})  # loaded once
    assert recovery == prepare.Recovery(steps=3, data=None, seq_len=24, learning_rate=0.001, fit=False)
    assert [vars(o) for o in options] == before  # every export still says what it was made from
    # Without [substitute] seq_len the recovery runs at the export plan's length: [export] seq_len here, else the
    # source's own (tiny-bert: 64 positions, where a fixed 128 was refused as "--seq-len 128 exceeds ...").
    for export_len, planned in (("seq_len = 16\n", 16), ("", 64)):
        path.write_text("[source]\npreset = 'tiny-bert'\n[substitute]\nnorm = 'no_norm'\n[export]\n" + export_len)
        recipe = Recipe.load(path)
        calls.clear()
        recipe.prepare(recipe.options(validate=False)[0], log=None)
        assert calls[0][0][2].seq_len == planned
