"""One reading of a checkpoint's tokenizer (issue 47 item 1) and the one rule for what a file carries (item 4).

Checkpoints are saved by transformers' own ``BertTokenizerFast`` (``add_tokens`` included), so the files are the
ones users bring: ``tokenizer.json`` with the added token, ``vocab.txt`` without it, ``added_tokens.json``.
Before, the tokenizer was read from ``tokenizer.json`` and packed from ``vocab.txt``: the added token was missing
from the app's vocabulary (exit 0), and a ``vocab.txt`` that disagreed with ``tokenizer.json`` was exported
with a warning blaming accents.
"""

import hashlib
import json

import numpy as np
import pytest

from mobilebert_kit.data import sentencepiece_model as spm
from mobilebert_kit.data.text_tokenizer import TextTokenizer, tokenizer_of
from mobilebert_kit.errors import DataError
from tests.data.conftest import write_vocab
from tests.tokenizer_fixtures import save_tokenizer

transformers = pytest.importorskip("transformers")

WORDS = ["i", "like", "the", "film", "a", "good", "##s", "bad", "it", "was"]
TEXTS = ["I like the film", "it was a good mbkword", "MBKWORD films were bad", "the mbkword was good"]


def _checkpoint(directory, added=("mbkword",)):
    vocab = write_vocab(directory.parent / f"{directory.name}-vocab.txt", WORDS)
    tok = transformers.BertTokenizerFast(vocab_file=str(vocab))
    tok.add_tokens(list(added))
    tok.save_pretrained(str(directory))
    return tok


def test_tokens_added_with_add_tokens_are_packed_at_their_ids(tmp_path):
    hf = _checkpoint(tmp_path / "ckpt")
    assert "mbkword" not in (tmp_path / "ckpt" / "vocab.txt").read_text().split()  # what transformers writes
    tok = tokenizer_of(tmp_path / "ckpt")
    lines = tok.client_unit().data.decode().split("\n")[:-1]
    assert lines[hf.convert_tokens_to_ids("mbkword")] == "mbkword" and len(lines) == len(hf)
    # The app's ids (the clients' WordPiece on the packed file) are the checkpoint's on every text.
    expected = hf(TEXTS, padding="max_length", max_length=12)["input_ids"]
    np.testing.assert_array_equal(tok.client_tokenizer().encode_inputs(TEXTS, 12)["input_ids"], expected)
    np.testing.assert_array_equal(tok.encode_inputs(TEXTS, 12)["input_ids"], expected)


@pytest.mark.parametrize("added, why", [("mbk-word", "punctuation"), ("MbkWord", "lower-case A-Z"),
                                        ("two words", "space")])
def test_an_added_token_the_packed_vocab_cannot_serve_is_refused_in_one_line(tmp_path, added, why):
    _checkpoint(tmp_path / "ckpt", added=(added,))
    with pytest.raises(DataError) as err:
        tokenizer_of(tmp_path / "ckpt").client_unit()
    message = str(err.value)
    assert f"adds the token {added!r}" in message and why in message and "\n" not in message


def test_a_vocab_txt_that_disagrees_with_tokenizer_json_is_refused_naming_both(tmp_path):
    _checkpoint(tmp_path / "ckpt")
    vocab = tmp_path / "ckpt" / "vocab.txt"
    lines = vocab.read_text().split("\n")
    lines[6], lines[7] = lines[7], lines[6]  # "like" and "the" swap ids in vocab.txt only
    vocab.write_text("\n".join(lines))
    with pytest.raises(DataError) as err:
        tokenizer_of(tmp_path / "ckpt")
    assert str(err.value) == (
        f"{vocab} line 7 is 'the' but tokenizer.json gives id 6 to 'like': the two files are different "
        "vocabularies and the packed vocab.txt would give the app other ids; keep the pair the model was trained "
        "with (save_pretrained writes both)")
    assert "accent" not in str(err.value)


def test_added_tokens_json_that_disagrees_is_refused(tmp_path):
    _checkpoint(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "added_tokens.json").write_text(json.dumps({"mbkword": 3}))
    with pytest.raises(DataError, match=r"added_tokens.json gives 'mbkword' the id 3 but the tokenizer gives it 15"):
        tokenizer_of(tmp_path / "ckpt")


def test_a_bare_vocab_txt_takes_its_added_tokens_after_it(tmp_path):
    # transformers' slow BertTokenizer layout: vocab.txt + added_tokens.json, no tokenizer.json.
    hf = _checkpoint(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "tokenizer.json").unlink()
    tok = tokenizer_of(tmp_path / "ckpt")
    assert tok.vocab["mbkword"] == hf.convert_tokens_to_ids("mbkword")
    assert tok.client_unit().data.decode().split("\n")[tok.vocab["mbkword"]] == "mbkword"
    (tmp_path / "ckpt" / "added_tokens.json").write_text(json.dumps({"mbkword": 40}))
    with pytest.raises(DataError, match="the vocab.txt's next id is 15"):
        tokenizer_of(tmp_path / "ckpt")


def test_the_checkpoint_files_are_read_once_and_handed_out(tmp_path):
    _checkpoint(tmp_path / "ckpt")
    tok = tokenizer_of(tmp_path / "ckpt")
    files = tok.checkpoint_files()
    assert {"tokenizer.json", "vocab.txt", "added_tokens.json", "special_tokens_map.json"} <= set(files)
    assert files["vocab.txt"] == (tmp_path / "ckpt" / "vocab.txt").read_bytes()
    model = tok.model_files()["vocab.txt"].decode().split("\n")
    assert model[tok.vocab["mbkword"]] == "mbkword"  # the reading, not the side file


def test_the_packed_sentencepiece_model_runs_in_sentencepiece_itself(tmp_path):
    # The file written with sentencepiece_model_pb2 loads in the SentencePiece library the clients embed, and
    # gives the ids our emulation of the client gives (the checkpoint's ids, fairseq's shift included).
    sentencepiece = pytest.importorskip("sentencepiece")
    save_tokenizer("xlm-roberta", tmp_path / "x")
    tok = tokenizer_of(tmp_path / "x")
    unit = tok.client_unit()
    processor = sentencepiece.SentencePieceProcessor(model_proto=unit.data)
    assert processor.get_piece_size() == tok.vocab_size
    client = tok.client_tokenizer()
    for text in ["the film was good", "please book a table for four", "an unusual word: zyxwv"]:
        assert processor.encode(text) == client.encode(text)[1] == tok.encode(text)[1], text
    assert spm.read_model(unit.data)["pieces"][tok.cls_id][0] == "[CLS]"


def test_a_sentencepiece_model_from_another_export_is_flagged_like_a_vocab_txt():
    # Issue 47: a packed vocab.txt was compared with the model, a packed SentencePiece model never was.
    from mobilebert_kit.artifacts.client_metadata import ClientMetadata, packed_disagreements

    ours = spm.write_model([("<unk>", 0.0, spm.UNKNOWN), ("[CLS]", 0.0, spm.CONTROL), ("▁a", -1.0, spm.NORMAL)], 0)
    other = spm.write_model([("<unk>", 0.0, spm.UNKNOWN), ("[CLS]", 0.0, spm.CONTROL), ("▁b", -1.0, spm.NORMAL)], 0)
    recorded = {"vocab_size": 3, "client_tokenizer_sha256": hashlib.sha256(ours).hexdigest()}

    def meta(data):
        return ClientMetadata("m", "1.1.0", 1, (), (), "sentencepiece", "sentencepiece.model",
                              ("sentencepiece.model",), packed_tokenizer=data)

    assert packed_disagreements(meta(ours), recorded, []) == []
    assert "is not the tokenizer exported with the model" in packed_disagreements(meta(other), recorded, [])[0]
    assert "not a SentencePiece model" in packed_disagreements(meta(b"\xff" * 9), recorded, [])[0]
    assert "the model embeds 2" in packed_disagreements(meta(ours), {"vocab_size": 2}, [])[0]


def test_one_rule_says_what_tokenizer_a_file_carries():
    # An MPNet-style WordPiece file (<s>/</s>, packed renamed) and a SentencePiece file carry their tokenizer:
    # evaluate and profile --text asked for --tokenizer while inspect called them ready for MediaPipe.
    from mobilebert_kit.artifacts.carried_tokenizer import carried_tokenizer
    from mobilebert_kit.artifacts.client_metadata import ClientMetadata

    mpnet = {"tokenizer_kind": "wordpiece", "special_tokens": {"cls": "<s>", "sep": "</s>"}, "vocab_size": 6}
    packed = b"[CLS]\n[PAD]\n[SEP]\n[UNK]\nhello\n[MASK]\n"
    meta = ClientMetadata("m", "1.1.0", 1, (), (), "bert", "vocab.txt", ("vocab.txt",),
                          packed_lines={"vocab.txt": tuple(packed.decode().split("\n")[:-1])}, packed_tokenizer=packed)
    carried = carried_tokenizer("m.tflite", meta, mpnet, [])
    assert carried.ready and carried.runs_as == "client" and carried.data == packed
    app = TextTokenizer.from_packed(carried.tokenizer, carried.data)
    assert app.encode_inputs(["Hello"], 4)["input_ids"].tolist() == [[0, 4, 2, 1]]
    # The same file without its TFLite Metadata (the .onnx export) carries no tokenizer for an app: one line.
    assert "pass --tokenizer" in carried_tokenizer("m.onnx", None, mpnet, []).missing


def test_model_files_hand_the_kind_to_another_runtime(tmp_path):
    # What the ONNX text front end (onnxruntime-extensions) builds its tokenizer from: the kind's own model files,
    # from the one reading, with the checkpoint's ids and names. Checked here by the libraries that read them.
    sentencepiece = pytest.importorskip("sentencepiece")
    from tokenizers import ByteLevelBPETokenizer

    texts = ["the film was good", "please book a table for four"]
    save_tokenizer("roberta", tmp_path / "r")
    roberta = tokenizer_of(tmp_path / "r")
    files = roberta.model_files()
    (tmp_path / "vocab.json").write_bytes(files["vocab.json"])
    (tmp_path / "merges.txt").write_bytes(files["merges.txt"])
    bpe = ByteLevelBPETokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    for text in texts:
        assert bpe.encode(text).ids == roberta.encode(text)[1], text
    save_tokenizer("xlm-roberta", tmp_path / "x")
    xlmr = tokenizer_of(tmp_path / "x")
    processor = sentencepiece.SentencePieceProcessor(model_proto=xlmr.model_files()["sentencepiece.model"])
    assert processor.id_to_piece(xlmr.cls_id) == xlmr.special_tokens["cls"] == "<s>"
    for text in texts:
        assert processor.encode(text) == xlmr.encode(text)[1], text


def test_mbk_export_refuses_an_added_token_the_app_cannot_produce_before_writing(tmp_path, capsys):
    # The whole command: one line, exit 2, nothing at --out (was exit 0: the token missing from the app's vocab).
    import types

    from mobilebert_kit.cli.main import main
    from tests.helpers import assert_one_line_error
    from tests.parity_helpers import randomize
    from tests.tokenizer_fixtures import _config

    source = tmp_path / "ckpt"
    hf = _checkpoint(source, added=("mbk-word",))
    model = randomize(transformers.BertForSequenceClassification(_config("bert", len(hf))), 0)
    model.save_pretrained(source, safe_serialization=True)
    out = tmp_path / "out"
    out.mkdir()
    code = main(["export", str(source), "--format", "tflite", "--out", str(out / "m.tflite")])
    captured = capsys.readouterr()
    line = assert_one_line_error(types.SimpleNamespace(returncode=code, stdout=captured.out, stderr=captured.err),
                                 "adds the token 'mbk-word' (id 15) with add_tokens")
    assert code == 2 and "punctuation" in line and list(out.iterdir()) == []


def test_a_kinds_own_file_that_disagrees_with_tokenizer_json_is_refused(tmp_path):
    # A checkpoint's SentencePiece model (or BPE vocab.json) is read with the rest and compared by name.
    save_tokenizer("xlm-roberta", tmp_path / "x")
    tok = tokenizer_of(tmp_path / "x")
    (tmp_path / "x" / "sentencepiece.bpe.model").write_bytes(tok.model_files()["sentencepiece.model"])
    assert tokenizer_of(tmp_path / "x").vocab == tok.vocab  # the same pieces: accepted
    other = spm.write_model([("<unk>", 0.0, spm.UNKNOWN), ("▁zzzqqq", -1.0, spm.NORMAL)], 0)
    (tmp_path / "x" / "sentencepiece.bpe.model").write_bytes(other)
    with pytest.raises(DataError, match=r"sentencepiece.bpe.model holds '▁zzzqqq', which tokenizer.json does not"):
        tokenizer_of(tmp_path / "x")
    save_tokenizer("roberta", tmp_path / "r")
    (tmp_path / "r" / "vocab.json").write_text(json.dumps({"<s>": 0, "hello": 1}))
    with pytest.raises(DataError, match=r"vocab.json holds 'hello'"):
        tokenizer_of(tmp_path / "r")
