"""A SentencePiece model file (``ModelProto``) written from a Unigram ``tokenizer.json``, and read back.

The clients look each piece up by name (``PieceToId``), so the file gives every piece the id in
``tokenizer.json`` (the checkpoint's embedding rows), not the original ``sentencepiece.bpe.model``'s: writing it
from that vocabulary in id order gives those ids by construction (XLM-R's shift: docs/models.md, "Supported
checkpoints").

The message is built with the ``sentencepiece`` package's generated
``sentencepiece_model_pb2`` (protobuf does the wire format; it loads under
protobuf 7). The normalizer is the ``tokenizer.json``'s ``Precompiled``
character map when it has one (what SentencePiece itself runs); other
normalizers cannot be expressed, and the client-fidelity check measures what
that changes.

Example:
    >>> data = write_model([("<unk>", 0.0, UNKNOWN), ("▁a", -1.0, NORMAL)], unk_id=0)
    >>> [p[0] for p in read_model(data)["pieces"]]
    ['<unk>', '▁a']
"""

from google.protobuf.message import DecodeError
from sentencepiece import sentencepiece_model_pb2 as pb

from mobilebert_kit.errors import DataError

_PIECE = pb.ModelProto.SentencePiece
NORMAL, UNKNOWN, CONTROL, USER_DEFINED = _PIECE.NORMAL, _PIECE.UNKNOWN, _PIECE.CONTROL, _PIECE.USER_DEFINED


def write_model(pieces, unk_id, *, precompiled_charsmap=b"", add_dummy_prefix=True):
    """The bytes of a SentencePiece Unigram ``ModelProto`` of ``pieces`` (``(piece, score, type)`` in id order).

    No bos, eos or pad ids (the clients add the literal ``[CLS]``/``[SEP]``); ``precompiled_charsmap`` holds
    SentencePiece's compiled normalization rules (empty: identity); ``add_dummy_prefix`` puts a space before the
    text, so that the first word reads as the others; extra whitespace is removed (SentencePiece's default). An
    empty piece, or no UNKNOWN piece at ``unk_id``, is a DataError (SentencePiece refuses to load either); the
    module docstring's example round-trips one.
    """
    if not 0 <= unk_id < len(pieces) or pieces[unk_id][2] != UNKNOWN:
        raise DataError(f"a SentencePiece model needs its unknown piece at id {unk_id}; the tokenizer has none there")
    model = pb.ModelProto()
    for piece, score, kind in pieces:
        if not piece:
            raise DataError("the tokenizer has an empty piece, which a SentencePiece model cannot hold")
        model.pieces.add(piece=piece, score=float(score), type=int(kind))
    model.trainer_spec.MergeFrom(pb.TrainerSpec(model_type=pb.TrainerSpec.UNIGRAM, vocab_size=len(pieces),
                                                unk_id=unk_id, bos_id=-1, eos_id=-1, pad_id=-1))
    normalizer = model.normalizer_spec
    normalizer.name = "precompiled" if precompiled_charsmap else "identity"
    if precompiled_charsmap:
        normalizer.precompiled_charsmap = bytes(precompiled_charsmap)
    normalizer.add_dummy_prefix = bool(add_dummy_prefix)
    normalizer.remove_extra_whitespaces = True
    normalizer.escape_whitespaces = True
    return model.SerializeToString()


def read_model(data):
    """What :func:`write_model` wrote (and what any SentencePiece model holds of the same fields): ``pieces``
    (``[(piece, score, type)]`` in id order), ``unk_id``, ``precompiled_charsmap``, ``add_dummy_prefix``. Bytes
    that are not a SentencePiece model are a DataError.

    Example:
        >>> read_model(write_model([("<unk>", 0.0, UNKNOWN)], unk_id=0))["unk_id"]
        0
    """
    model = pb.ModelProto()
    try:
        model.ParseFromString(bytes(data))
    except DecodeError as err:
        raise DataError(f"the SentencePiece model is truncated or malformed ({err})") from None
    pieces = []
    for piece in model.pieces:
        # proto2 strings are not checked on parse: an undecodable piece comes back as bytes.
        if not isinstance(piece.piece, str):
            raise DataError("the SentencePiece model has a piece that is not UTF-8")
        pieces.append((piece.piece, float(piece.score), int(piece.type)))
    if not pieces:
        raise DataError("the SentencePiece model has no pieces")
    if not 0 <= model.trainer_spec.unk_id < len(pieces):
        # The tokenizers library refused it with a bare Exception ("unk_id is larger than vocabulary size").
        raise DataError(f"the SentencePiece model's unk_id {model.trainer_spec.unk_id} is none of its "
                        f"{len(pieces)} pieces")
    normalizer = model.normalizer_spec
    return {"pieces": pieces, "unk_id": int(model.trainer_spec.unk_id),
            "precompiled_charsmap": bytes(normalizer.precompiled_charsmap),
            "add_dummy_prefix": bool(normalizer.add_dummy_prefix)}


__all__ = ["write_model", "read_model", "NORMAL", "UNKNOWN", "CONTROL", "USER_DEFINED"]
