"""The checkpoint's own tokenizer of every kind (issue 35): ids as transformers gives them, and the file the clients get.

Each family's tiny tokenizer is saved by transformers' own fast tokenizer class
(``tests/tokenizer_fixtures.py``) and compared with ``AutoTokenizer`` on real
sentences and sentence pairs. The client unit (a renamed ``vocab.txt`` or a
SentencePiece model written with sentencepiece_model_pb2) must keep every id, and the tokenizer
emulating the client must give the checkpoint's ids on lower-cased ASCII text
(MediaPipe itself is run on these files in ``tests/clients/test_checkpoint_families.py``).
"""

import numpy as np
import pytest

from mobilebert_kit.convert.plan.sample_text import SENTENCE_PAIRS, SENTENCES
from mobilebert_kit.data import sentencepiece_model as spm
from mobilebert_kit.data.text_tokenizer import TextTokenizer, tokenizer_of
from mobilebert_kit.errors import DataError
from tests.tokenizer_fixtures import save_tokenizer

transformers = pytest.importorskip("transformers")

FAMILIES = ("xlm-roberta", "albert", "roberta", "mpnet", "distilbert", "deberta-v2")
KIND = {"xlm-roberta": "sentencepiece", "albert": "sentencepiece", "roberta": "bpe", "mpnet": "wordpiece",
        "distilbert": "wordpiece", "deberta-v2": "sentencepiece"}
SEQ = 24


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """``{family: directory}`` with each family's tokenizer files."""
    root = tmp_path_factory.mktemp("tokenizers")
    for family in FAMILIES:
        save_tokenizer(family, root / family)
    return {family: root / family for family in FAMILIES}


def hf_ids(directory, texts, pairs=None):
    tok = transformers.AutoTokenizer.from_pretrained(str(directory))
    out = tok(list(texts), list(pairs) if pairs else None, padding="max_length", truncation=True, max_length=SEQ)
    return np.array(out["input_ids"]), np.array(out["attention_mask"])


@pytest.mark.parametrize("family", FAMILIES)
def test_ids_are_the_checkpoint_tokenizers(saved, family):
    tok = tokenizer_of(saved[family])
    assert tok.kind.name == KIND[family]
    singles = list(SENTENCES[:24])
    ours = tok.encode_inputs(singles, SEQ)
    ids, mask = hf_ids(saved[family], singles)
    np.testing.assert_array_equal(ours["input_ids"], ids)
    np.testing.assert_array_equal(ours["attention_mask"], mask)
    a, b = zip(*[pair.split("\t") if isinstance(pair, str) else pair for pair in SENTENCE_PAIRS[:6]])
    ours = tok.encode_inputs([f"{x}\t{y}" for x, y in zip(a, b)], SEQ)
    ids, mask = hf_ids(saved[family], a, b)
    np.testing.assert_array_equal(ours["input_ids"], ids)


@pytest.mark.parametrize("family", ["xlm-roberta", "albert", "mpnet", "distilbert", "deberta-v2"])
def test_client_unit_keeps_every_id_and_the_client_finds_the_specials(saved, family):
    tok = tokenizer_of(saved[family])
    unit = tok.client_unit()
    if unit.options == "SentencePieceTokenizerOptions":
        names = [p[0] for p in spm.read_model(unit.data)["pieces"]]
    else:
        names = unit.data.decode().split("\n")[:-1]
    assert len(names) == tok.vocab_size == len(set(names))
    assert names[tok.cls_id] == "[CLS]" and names[tok.sep_id] == "[SEP]"
    renamed = dict(unit.renamed)
    for index, name in enumerate(names):  # every other token keeps its name at its id
        token = tok.inverse_vocab[index]
        assert name == token or renamed.get(token) == name or name.startswith("[unused-"), (index, token, name)
    # The ids the client computes on lower-cased ASCII text are the checkpoint's.
    texts = [s.lower() for s in SENTENCES if s.isascii()][:20]
    np.testing.assert_array_equal(tok.client_tokenizer().encode_inputs(texts, SEQ)["input_ids"],
                                  tok.encode_inputs(texts, SEQ)["input_ids"])


def test_mpnet_vocabulary_moves_berts_own_cls_aside(saved):
    tok = tokenizer_of(saved["mpnet"])
    lines = tok.client_unit().data.decode().split("\n")
    assert lines[0] == "[CLS]" and lines[2] == "[SEP]" and "<s>" not in lines
    bert_cls = tok.vocab["[CLS]"]  # the BERT vocabulary inside MPNet's has its own [CLS], never produced by text
    assert lines[bert_cls].startswith("[unused-cls")


def test_byte_level_bpe_has_no_client_tokenizer(saved):
    tok = tokenizer_of(saved["roberta"])
    assert tok.client_unit() is None and tok.client_tokenizer() is None
    assert "byte-level BPE" in tok.kind.no_client


def test_bert_directories_keep_the_wordpiece_path(saved, tmp_path):
    save_tokenizer("bert", tmp_path)
    bert = tokenizer_of(tmp_path)
    assert bert.kind.bert_names and bert.special_tokens["cls"] == "[CLS]" and bert.token_types
    assert TextTokenizer.from_file(saved["xlm-roberta"] / "tokenizer.json").kind.name == "sentencepiece"
    assert TextTokenizer.from_file(saved["mpnet"]).special_tokens["cls"] == "<s>"  # its own names, not BERT's


def test_sentencepiece_model_round_trips_and_refuses_bad_bytes():
    pieces = [("<s>", 0.0, spm.CONTROL), ("<unk>", 0.0, spm.UNKNOWN), ("▁héllo", -2.5, spm.NORMAL)]
    data = spm.write_model(pieces, unk_id=1, precompiled_charsmap=b"\x01\x02")
    model = spm.read_model(data)
    assert model["pieces"] == pieces and model["unk_id"] == 1 and model["precompiled_charsmap"] == b"\x01\x02"
    with pytest.raises(DataError, match="unknown piece"):
        spm.write_model(pieces, unk_id=0)
    for cut in (1, len(data) // 2, len(data) - 1):
        with pytest.raises(DataError):
            spm.read_model(data[:cut])
    with pytest.raises(DataError):
        spm.read_model(b"\xff" * 12)


def test_missing_special_token_is_one_line(saved, tmp_path):
    import json
    import shutil

    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(saved["xlm-roberta"] / name, tmp_path / name)
    config = json.loads((tmp_path / "special_tokens_map.json").read_text())
    config["cls_token"] = "<cls-that-is-not-there>"
    (tmp_path / "special_tokens_map.json").write_text(json.dumps(config))
    with pytest.raises(DataError, match="not in its vocabulary") as err:
        tokenizer_of(tmp_path)
    assert "\n" not in str(err.value)
