"""The TFLite Metadata writer, read back by our reader and loaded by the real client (MediaPipe TextEmbedder).

The real-client tests export one tiny model with a vocabulary and an int32 mask, add the metadata in the test
(the exporter's wiring is separate), and load the file in ``mediapipe.tasks.python.text``: the embedding must
equal the model's own output for the same token ids (so the metadata maps ids/mask/segment_ids to the right
inputs), and a file whose metadata is broken on purpose must be refused by MediaPipe and by the lint alike.
"""

import io
import json
import re
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

import mobilebert_kit  # noqa: F401,I001  (first: it sets TF_USE_LEGACY_KERAS before mediapipe imports TensorFlow)
from mediapipe.tasks.python.core import base_options
from mediapipe.tasks.python.text import text_classifier, text_embedder

from mobilebert_kit.artifacts.client_metadata import parse_client_metadata, read_client_metadata
from mobilebert_kit.artifacts.clients import client_readiness
from mobilebert_kit.artifacts.metadata import read_artifact_metadata
from mobilebert_kit.artifacts.reader import read_artifact
from mobilebert_kit.convert.tflite import flatbuffer as tflite_flatbuffer
from mobilebert_kit.convert.tflite import metadata as tflite_metadata
from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.convert.tflite.metadata import TFLITE_METADATA, client_metadata, pack_files
from tests.convert.conftest import SEQ, export_tiny
from tests.helpers import assert_one_line_error, run_mbk

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(507)]
LABELS = [f"class{i}" for i in range(32)]


# ------------------------------------------------------------------ writer -> reader, no model needed
@pytest.mark.parametrize("client, outputs, labels", [
    ("embedder", ["sentence_embedding"], None),
    ("classifier", ["probability"], ["negative", "positive"]),
    ("question_answerer", ["start_logits", "end_logits"], None),
    (None, ["sequence_output", "pooled_output"], None),
])
def test_writer_round_trips_through_the_reader(client, outputs, labels):
    meta, files = client_metadata(client, outputs, VOCAB, labels, name="tiny", description="a test model")
    packed = pack_files(b"TFL3 stands in for the model", files)
    read = parse_client_metadata({TFLITE_METADATA: meta}, packed, "m.tflite")
    assert meta[4:8] == b"M001" and read.min_parser_version == "1.1.0" and read.subgraphs == 1
    assert read.input_names == ("ids", "mask", "segment_ids") and read.output_names == tuple(outputs)
    assert (read.tokenizer, read.vocab_file, read.vocab_size) == ("bert", "vocab.txt", len(VOCAB))
    assert read.labels_file == ("labels.txt" if labels else None) and read.label_count == (len(labels) if labels else None)
    assert set(read.packed_files) == set(files) == ({"vocab.txt", "labels.txt"} if labels else {"vocab.txt"})
    # The archive is stored (the clients read it without inflating) and the model bytes come first, unchanged.
    assert packed.startswith(b"TFL3 stands in for the model")
    assert {i.compress_type for i in zipfile.ZipFile(io.BytesIO(packed)).infolist()} == {zipfile.ZIP_STORED}


def test_no_vocabulary_means_no_tokenizer_and_nothing_packed():
    meta, files = client_metadata("embedder", ["sentence_embedding"], None, name="m", description="d")
    read = parse_client_metadata({TFLITE_METADATA: meta}, pack_files(b"model", files), "m.tflite")
    assert files == {} and read.tokenizer is None and read.vocab_file is None and read.packed_files == ()


@pytest.mark.parametrize("call, fragment", [
    (lambda: client_metadata("embedder", ["e"], [], name="m", description="d"), "list is empty"),
    (lambda: client_metadata("embedder", ["e"], ["[PAD]", "two\nlines"], name="m", description="d"), "line break"),
    (lambda: client_metadata("classifier", ["p"], VOCAB, ["a", "b\rc"], name="m", description="d"), "line break"),
    (lambda: client_metadata("classifier", ["p"], VOCAB, ["a", ""], name="m", description="d"), "label 1 is empty"),
    (lambda: client_metadata("embedder", [], VOCAB, name="m", description="d"), "no outputs"),
    (lambda: client_metadata("detector", ["e"], VOCAB, name="m", description="d"), "unknown TFLite client"),
    (lambda: pack_files(pack_files(b"model", {"vocab.txt": b"a\n"}), {"labels.txt": b"x\n"}), "already has packed"),
    (lambda: pack_files(b"model", {"../vocab.txt": b"a\n"}), "plain ASCII file name"),
    (lambda: pack_files(b"model", {"": b"a\n"}), "plain ASCII file name"),
])
def test_writer_refuses_what_the_metadata_cannot_represent(call, fragment):
    with pytest.raises(ExportError, match=fragment) as caught:
        call()
    assert "\n" not in str(caught.value)


# ------------------------------------------------------------------ the real client
@pytest.fixture(scope="module")
def int32_export(tmp_path_factory):
    """A tiny BERT with a vocabulary, exported with an int32 mask (what MediaPipe takes): the file and its vocab."""
    import mobilebert_kit as mbk
    from mobilebert_kit.sources.model_source import ModelSource

    directory = tmp_path_factory.mktemp("client")
    saved = mbk.save(ModelSource.load("tiny-bert").model, directory / "saved")
    (saved / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    out = directory / "m.tflite"
    export_tiny(str(saved), out, mask_dtype="int32", validate=False)
    return out


def with_client_metadata(src, out, client="embedder", outputs=("pooled_output", "sequence_output"), labels=None,
                         files=None, metadata_outputs=None):
    """Writes ``src`` with client metadata to ``out``: ``outputs`` ordered as given (the first is what the
    client reads); ``files`` / ``metadata_outputs`` replace what is packed / described, to break it on purpose."""
    graph = read_artifact(src)
    _, vocab = read_artifact_metadata(src, with_vocab=True)
    meta, packed = client_metadata(client, list(metadata_outputs or outputs), vocab, labels, name="tiny", description="t")
    model = tflite_flatbuffer.finalize(src.read_bytes(), [s["name"] for s in graph.input_specs()], list(outputs),
                                       metadata={TFLITE_METADATA: meta})
    out.write_bytes(pack_files(model, packed if files is None else files))
    return out


def _embedder(path):
    options = text_embedder.TextEmbedderOptions(base_options=base_options.BaseOptions(model_asset_path=str(path)))
    return text_embedder.TextEmbedder.create_from_options(options)


def test_mediapipe_text_embedder_runs_the_file_and_feeds_the_right_inputs(int32_export, tmp_path):
    path = with_client_metadata(int32_export, tmp_path / "embedder.tflite")
    with _embedder(path) as embedder:
        got = np.asarray(embedder.embed("w7 w8 w9").embeddings[0].embedding)
    # The same sentence through the file's own interpreter: [CLS] w7 w8 w9 [SEP], padded. A metadata that
    # named the inputs in another order, or a tokenizer reading another vocabulary, gives another vector.
    ids = np.zeros((1, SEQ), np.int32)
    ids[0, :5] = [VOCAB.index(t) for t in ("[CLS]", "w7", "w8", "w9", "[SEP]")]
    feeds = {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int32), "token_type_ids": np.zeros_like(ids)}
    runner = Interpreter(model_path=str(path)).get_signature_runner()
    want = runner(**feeds)["pooled_output"][0]
    assert got.shape == want.shape == (32,)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert client_readiness(path)["MediaPipe TextEmbedder"] == []


def test_mediapipe_text_classifier_names_categories_from_the_packed_labels(int32_export, tmp_path):
    path = with_client_metadata(int32_export, tmp_path / "classifier.tflite", "classifier", labels=LABELS)
    assert read_client_metadata(path).label_count == 32
    options = text_classifier.TextClassifierOptions(base_options=base_options.BaseOptions(model_asset_path=str(path)))
    with text_classifier.TextClassifier.create_from_options(options) as classifier:
        categories = classifier.classify("w1 w2").classifications[0].categories
    assert categories and {c.category_name for c in categories} <= set(LABELS)


BROKEN = {
    # what is broken: (with_client_metadata arguments, what MediaPipe says, what the lint says)
    "input names": ({}, "Input tensor indices form the set {-1, -1, -1}", "input metadata names are input_ids"),
    "no vocab packed": ({"files": {}}, "No associated file with name: vocab.txt", "vocab.txt is not packed"),
    "output count": ({"metadata_outputs": ("pooled_output",)}, "Mismatch between number of output tensors (2) and "
                     "output tensors metadata (1)", "1 output metadata entries for 2 graph outputs"),
}


@pytest.mark.parametrize("broken", list(BROKEN))
def test_mediapipe_refuses_broken_metadata_and_the_lint_says_why(int32_export, tmp_path, monkeypatch, broken):
    arguments, client_says, lint_says = BROKEN[broken]
    if broken == "input names":
        monkeypatch.setattr(tflite_metadata, "CLIENT_INPUT_NAMES", ("input_ids", "attention_mask", "token_type_ids"))
    path = with_client_metadata(int32_export, tmp_path / "broken.tflite", **arguments)
    with pytest.raises(Exception, match=re.escape(client_says)):
        with _embedder(path) as embedder:
            embedder.embed("w1")
    reasons = client_readiness(path)["MediaPipe TextEmbedder"]
    assert any(lint_says in r for r in reasons), reasons


def test_inspect_shows_the_client_metadata_and_readiness_without_tensorflow(int32_export, tmp_path):
    path = with_client_metadata(int32_export, tmp_path / "c.tflite", "classifier", labels=LABELS)
    code = (
        "import contextlib, io, json, sys\n"
        "from mobilebert_kit.cli.main import main\n"
        "text, report = io.StringIO(), io.StringIO()\n"
        f"with contextlib.redirect_stdout(text): main(['inspect', {str(path)!r}])\n"
        f"with contextlib.redirect_stdout(report): main(['inspect', '--json', {str(path)!r}])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'tf_keras', 'keras'))\n"
        "print(json.dumps({'text': text.getvalue(), 'report': json.loads(report.getvalue()), 'imported': bad}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["imported"] == []  # mbk inspect stays on the TensorFlow-free floor
    text, report = result["text"], result["report"]
    assert ("client metadata: inputs ids, mask, segment_ids; tokenizer bert (vocab.txt, 512 tokens); outputs "
            "pooled_output, sequence_output; labels: 32 (labels.txt); packed files: vocab.txt, labels.txt") in text
    assert "ready for: MediaPipe TextClassifier\n" in text  # a classifier is no embedder (its scores are no vector)
    assert "not ready for MediaPipe TextEmbedder: the first output is a classifier's scores" in text
    assert "not ready for Task Library BertNLClassifier: no output metadata named probability" in text
    assert report["client_metadata"]["label_count"] == 32 and report["client_metadata"]["vocab_size"] == 512
    assert report["clients"]["MediaPipe TextClassifier"] == {"ready": True, "reasons": []}
    assert report["clients"]["Task Library BertQuestionAnswerer"]["ready"] is False


@pytest.mark.parametrize("metadata, files, fragment", [
    (b"\x10\x00\x00\x00M001" + b"\xff" * 8, {"vocab.txt": b"a\n"}, "TFLITE_METADATA entry is corrupt"),
    (None, {f"f{i}.txt": b"x" for i in range(3000)}, "its packed archive lists 3000 files"),
])
def test_inspect_of_a_hostile_file_is_one_error_line(int32_export, tmp_path, metadata, files, fragment):
    graph = read_artifact(int32_export)
    meta = metadata or client_metadata("embedder", ["pooled_output", "sequence_output"], VOCAB, name="m",
                                       description="d")[0]
    model = tflite_flatbuffer.finalize(int32_export.read_bytes(), [s["name"] for s in graph.input_specs()],
                                       ["pooled_output", "sequence_output"], metadata={TFLITE_METADATA: meta})
    path = tmp_path / "hostile.tflite"
    path.write_bytes(pack_files(model, files))
    proc = run_mbk("inspect", path, timeout=120)
    assert proc.returncode == 2
    assert_one_line_error(proc, "hostile.tflite", fragment)


def test_a_blank_vocabulary_line_shifts_mediapipe_s_ids_and_the_lint_says_so(int32_export, tmp_path):
    # Why the writer refuses an empty token: MediaPipe skips the blank line, so "w7" runs with w6's id.
    gapped = list(VOCAB)
    gapped[VOCAB.index("w3")] = ""
    path = with_client_metadata(int32_export, tmp_path / "gapped.tflite",
                                files={"vocab.txt": ("\n".join(gapped) + "\n").encode()})
    with _embedder(path) as embedder:
        got = np.asarray(embedder.embed("w7").embeddings[0].embedding)
    runner = Interpreter(model_path=str(path)).get_signature_runner()
    ids = np.zeros((1, SEQ), np.int32)
    ids[0, :3] = [VOCAB.index("[CLS]"), VOCAB.index("w6"), VOCAB.index("[SEP]")]
    feeds = {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int32), "token_type_ids": np.zeros_like(ids)}
    np.testing.assert_allclose(got, runner(**feeds)["pooled_output"][0], rtol=1e-4, atol=1e-5)
    assert any("1 blank line(s)" in r for r in client_readiness(path)["MediaPipe TextEmbedder"])
