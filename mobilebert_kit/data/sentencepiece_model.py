"""A SentencePiece model file (``ModelProto``) written from a Unigram ``tokenizer.json``, and read back.

The TFLite Metadata's ``SentencePieceTokenizerOptions`` names a SentencePiece
model file; MediaPipe Tasks and the Task Library run SentencePiece on it and
look each piece up by name (``PieceToId``), after adding the literal ``[CLS]``
and ``[SEP]`` pieces themselves (``BertPreprocessor``). So the file must give
every piece the id the checkpoint's embedding table uses, which is the id in
``tokenizer.json`` (transformers' fast tokenizer), not the id of the original
``sentencepiece.bpe.model``: fairseq's XLM-R ids are SentencePiece's shifted
by one, with ``<s> <pad> </s> <unk>`` in front. Writing the model from the
``tokenizer.json`` vocabulary in id order gives the checkpoint's ids by
construction; the graph is never re-indexed (LiteRT users feed the checkpoint
tokenizer's ids). The checkpoint's class and separator tokens are renamed
``[CLS]`` / ``[SEP]`` so that the clients' lookups find them.

The protobuf wire format is written by hand (three messages, a dozen fields of
``sentencepiece_model.proto``): the package has no ``sentencepiece`` or
generated ``_pb2`` dependency. The normalizer is the ``tokenizer.json``'s
``Precompiled`` character map when it has one (what SentencePiece itself
runs); other normalizers cannot be expressed, and the client-fidelity check
measures what that changes.

Example:
    >>> data = write_model([("<unk>", 0.0, UNKNOWN), ("▁a", -1.0, NORMAL)], unk_id=0)
    >>> [p[0] for p in read_model(data)["pieces"]]
    ['<unk>', '▁a']
"""

import struct

from mobilebert_kit.errors import DataError

# ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM = 1  # TrainerSpec.ModelType
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


def _varint(value):
    value &= (1 << 64) - 1  # negative int32 fields are ten-byte two's complement varints
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number, wire):
    return _varint(number << 3 | wire)


def _int(number, value):
    return _key(number, _VARINT) + _varint(int(value))


def _bytes(number, value):
    value = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    return _key(number, _BYTES) + _varint(len(value)) + value


def _float(number, value):
    return _key(number, _FIXED32) + struct.pack("<f", float(value))


def write_model(pieces, unk_id, *, bos_id=-1, eos_id=-1, pad_id=-1, precompiled_charsmap=b"",
                add_dummy_prefix=True, remove_extra_whitespaces=True):
    """The bytes of a SentencePiece Unigram ``ModelProto``.

    Args:
        pieces (Sequence[tuple[str, float, int]]): ``(piece, score, type)`` in id order.
        unk_id (int): the id of the one UNKNOWN piece.
        bos_id / eos_id / pad_id (int): ids of those pieces, -1 for none (recorded in the trainer spec).
        precompiled_charsmap (bytes): SentencePiece's compiled normalization rules (empty: identity).
        add_dummy_prefix (bool): a space before the text, so that the first word reads as the others.
        remove_extra_whitespaces (bool): drop leading, trailing and repeated spaces.

    Returns:
        bytes: the serialized model.

    Raises:
        DataError: an empty piece, or no UNKNOWN piece at ``unk_id`` (SentencePiece refuses to load either).

    Example:
        >>> len(write_model([("<unk>", 0.0, UNKNOWN)], unk_id=0)) > 0
        True
    """
    if not 0 <= unk_id < len(pieces) or pieces[unk_id][2] != UNKNOWN:
        raise DataError(f"a SentencePiece model needs its unknown piece at id {unk_id}; the tokenizer has none there")
    out = bytearray()
    for piece, score, kind in pieces:
        if not piece:
            raise DataError("the tokenizer has an empty piece, which a SentencePiece model cannot hold")
        out += _bytes(1, _bytes(1, piece) + _float(2, score) + _int(3, kind))
    trainer = (_int(3, UNIGRAM) + _int(4, len(pieces)) + _int(40, unk_id) + _int(41, bos_id) + _int(42, eos_id)
               + _int(43, pad_id))
    normalizer = (_bytes(1, "precompiled" if precompiled_charsmap else "identity")
                  + (_bytes(2, precompiled_charsmap) if precompiled_charsmap else b"")
                  + _int(3, add_dummy_prefix) + _int(4, remove_extra_whitespaces) + _int(5, True))
    out += _bytes(2, trainer) + _bytes(3, normalizer)
    return bytes(out)


def _fields(data):
    """``(number, wire type, value)`` of one message's fields (bounded: every length is checked)."""
    data, i = memoryview(data), 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, i = _read_varint(data, i)
        elif wire == _BYTES:
            size, i = _read_varint(data, i)
            if i + size > len(data):
                raise DataError("the SentencePiece model is truncated")
            value, i = bytes(data[i:i + size]), i + size
        elif wire == _FIXED32 and i + 4 <= len(data):
            value, i = struct.unpack("<f", data[i:i + 4])[0], i + 4
        elif wire == _FIXED64 and i + 8 <= len(data):
            value, i = bytes(data[i:i + 8]), i + 8
        else:
            raise DataError(f"the SentencePiece model has an unreadable field {number} (wire type {wire})")
        yield number, wire, value


def _read_varint(data, i):
    value = shift = 0
    while i < len(data) and shift < 70:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not byte & 0x80:
            return value, i
    raise DataError("the SentencePiece model is truncated or malformed")


def read_model(data):
    """What :func:`write_model` wrote (and what any SentencePiece model holds of the same fields).

    Args:
        data (bytes): a serialized ``ModelProto``.

    Returns:
        dict: ``pieces`` (``[(piece, score, type)]`` in id order), ``unk_id``, ``precompiled_charsmap``,
        ``add_dummy_prefix``, ``remove_extra_whitespaces``.

    Raises:
        DataError: bytes that are not a SentencePiece model.

    Example:
        >>> read_model(write_model([("<unk>", 0.0, UNKNOWN)], unk_id=0))["unk_id"]
        0
    """
    model = {"pieces": [], "unk_id": 0, "precompiled_charsmap": b"", "add_dummy_prefix": True,
             "remove_extra_whitespaces": True}
    for number, _, value in _fields(data):
        if number == 1 and isinstance(value, bytes):
            piece = {1: "", 2: 0.0, 3: NORMAL}
            for n, _, v in _fields(value):
                piece[n] = v
            try:
                text = piece[1].decode("utf-8") if isinstance(piece[1], bytes) else piece[1]
            except UnicodeDecodeError as err:
                raise DataError("the SentencePiece model has a piece that is not UTF-8") from err
            model["pieces"].append((text, float(piece[2]), int(piece[3])))
        elif number == 2 and isinstance(value, bytes):
            for n, _, v in _fields(value):
                if n == 40:
                    model["unk_id"] = v
        elif number == 3 and isinstance(value, bytes):
            for n, _, v in _fields(value):
                if n == 2:
                    model["precompiled_charsmap"] = v
                elif n in (3, 4):
                    model["add_dummy_prefix" if n == 3 else "remove_extra_whitespaces"] = bool(v)
    if not model["pieces"]:
        raise DataError("the SentencePiece model has no pieces")
    return model


__all__ = ["write_model", "read_model", "NORMAL", "UNKNOWN", "CONTROL", "USER_DEFINED", "UNUSED", "BYTE"]
