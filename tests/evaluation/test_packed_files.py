"""`mbk evaluate` and `mbk inspect` read the files the app reads: the packed vocab.txt and labels.txt (issue 37).

With the packed vocabulary swapped or grown past the embedding table, or the packed labels reordered,
evaluate reported the metrics of our own ``mbk_vocab`` entry and inspect called the file ready for MediaPipe.
Such a file is refused by the export that would write it, flagged by inspect and refused by evaluate.
"""

import io
import json
import shutil
import zipfile

import pytest

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.errors import TrainingError
from tests.helpers import assert_one_line_error


def _repacked(source, target, change):
    """``source`` with its packed files replaced by ``change({name: bytes})``'s (the flatbuffer untouched)."""
    from mobilebert_kit.convert.tflite.metadata import pack_files

    data = source.read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        start = min(info.header_offset for info in archive.infolist())
        files = {name: archive.read(name) for name in archive.namelist()}
    target.write_bytes(pack_files(data[:start], change(files)))
    return target


def _swap_tokens(files):
    lines = files["vocab.txt"].decode().split("\n")
    lines[5], lines[6] = lines[6], lines[5]  # two ordinary words: "bad" takes the id of "good"
    return {**files, "vocab.txt": "\n".join(lines).encode()}


def _grow_vocabulary(files):
    return {**files, "vocab.txt": files["vocab.txt"] + b"".join(b"extra%d\n" % i for i in range(2000))}


def _empty_vocabulary(files):
    return {**files, "vocab.txt": b""}


def _reorder_labels(files):
    return {**files, "labels.txt": b"\n".join(reversed(files["labels.txt"].split(b"\n")[:-1])) + b"\n"}


@pytest.mark.parametrize("change, fragment", [
    (_swap_tokens, "line 6 of the packed vocab.txt is 'bad' where the model's vocabulary has 'good'"),
    (_grow_vocabulary, "the model embeds"),
    (_empty_vocabulary, "has 0 lines and the model's vocabulary (mbk_vocab) 32"),
    (_reorder_labels, "the packed labels.txt names c8, c7"),
])
def test_packed_files_that_disagree_with_the_model_are_flagged_by_inspect_and_refused_by_evaluate(
        tmp_path, exported, task_models, change, fragment):
    from mobilebert_kit.artifacts.inspection import inspect_artifact
    from mobilebert_kit.evaluation.artifact_metrics import evaluate_artifact

    good = exported[("classification", "tflite")]
    assert not inspect_artifact(good).clients["MediaPipe TextClassifier"]
    broken = _repacked(good, tmp_path / "broken.tflite", change)
    reasons = inspect_artifact(broken).clients["MediaPipe TextClassifier"]
    assert any(fragment in reason for reason in reasons), reasons
    with pytest.raises(ArtifactError, match="re-export it") as err:
        evaluate_artifact(broken, task_models["data"]["classification"])
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_the_packed_files_of_a_good_file_are_what_evaluate_runs(tmp_path, exported, task_models):
    # The same file repacked as it was scores as it did: evaluate reads the packed copies, which agree.
    from mobilebert_kit.evaluation.artifact_metrics import evaluate_artifact

    good = exported[("classification", "tflite")]
    same = _repacked(good, tmp_path / "same.tflite", lambda files: files)
    data = task_models["data"]["classification"]
    assert evaluate_artifact(same, data).metrics == evaluate_artifact(good, data).metrics


def test_an_export_whose_packed_files_would_disagree_is_refused_before_it_is_written(tmp_path, task_models,
                                                                                   monkeypatch):
    # The writer reads the packed files back as the clients will before writing: a client vocabulary other
    # than the model's (here: two tokens swapped) is refused, and nothing is left at --out.
    from mobilebert_kit.convert.errors import ExportError
    from mobilebert_kit.convert.exporter import ExportOptions, export
    from mobilebert_kit.data.tokenizer_kinds import ClientUnit
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    def swapped_unit(self):
        lines = self.vocab_lines()
        lines[5], lines[6] = lines[6], lines[5]
        return ClientUnit("BertTokenizerOptions", "vocab.txt", ("\n".join(lines) + "\n").encode())

    monkeypatch.setattr(TextTokenizer, "client_unit", swapped_unit)
    out = tmp_path / "m.tflite"
    with pytest.raises(ExportError, match="line 6 of the packed vocab.txt is 'bad'"):
        export(ExportOptions(str(task_models["classification"] / "model"), "tflite", "none", out=str(out), seq_len=24,
                             validate=False), log=None)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["24", 0, 1.5, True, None, -3, 100000, 1000])
def test_a_hand_edited_task_length_is_one_line(tmp_path, task_models, mbk_cli, value):
    # Each was an internal error (TypeError, IndexError, ValueError deep in tokenization or Keras).
    directory = shutil.copytree(task_models["classification"], tmp_path / "ft")
    spec = json.loads((directory / "task.json").read_text())
    (directory / "task.json").write_text(json.dumps({**spec, "seq_len": value}))
    proc = mbk_cli("evaluate", "--model", directory, "--data", task_models["data"]["classification"])
    assert_one_line_error(proc, "task.json: seq_len")
    assert proc.returncode == TrainingError.exit_code


@pytest.fixture
def mbk_cli(capsys):
    """``mbk ARGS`` in this process, as ``assert_one_line_error`` takes it."""
    import types

    from mobilebert_kit.cli.main import main

    def run(*args):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return types.SimpleNamespace(returncode=code, stdout=out, stderr=err)

    return run
