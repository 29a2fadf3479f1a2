"""Reading a ``.tflite`` file's TFLite Metadata back: what the app-side clients will find in it.

The clients (MediaPipe Tasks, the TFLite Task Library) read the ``TFLITE_METADATA`` entry (a ``ModelMetadata``
flatbuffer) and the zip archive appended after the model; this reader walks both for ``mbk inspect`` and the
readiness lint (:mod:`mobilebert_kit.artifacts.clients`).

A model file is untrusted input, so the walk is bounded: every offset is checked before it is read, and whatever
exceeds :data:`LIMITS` (or is a zip64 archive) is a one-line :class:`ArtifactError`. Flatbuffer offsets only point
forward and the schema's nesting is fixed, so no cycle can be followed. Field slots are
:mod:`~mobilebert_kit.artifacts.metadata_schema`'s, shared with the writer.
"""

import hashlib
import io
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from mobilebert_kit.artifacts import metadata_schema as schema
from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.artifacts.reader import artifact_format, read_artifact, read_tflite_bytes

# Far above any text model (3 inputs, a few outputs, one tokenizer, two packed files) and far below what costs
# time or memory: the most a walk can decode is 2 x 64 tensors x 16 files x 4 KiB names = 8 MiB of strings.
LIMITS = {"subgraphs": 16, "tensors": 64, "files": 16, "process units": 16, "string bytes": 4096,
          "packed files": 256, "central directory bytes": 1 << 20, "packed file bytes": 16 << 20}
_FILE_TYPE_NAMES = {v: k for k, v in schema.ASSOCIATED_FILE_TYPES.items()}
_OPTION_NAMES = {v: k for k, v in schema.PROCESS_UNIT_OPTIONS.items()}
_EOCD = b"PK\x05\x06"
_EOCD_SIZE = 22
_ZIP64_LOCATOR = b"PK\x06\x07"
_MAX_COMMENT = 0xFFFF


@dataclass(frozen=True)
class AssociatedFile:
    """One associated file a metadata entry names: ``name`` (looked up in the packed archive) and ``type``."""

    name: str
    type: str


@dataclass(frozen=True)
class TensorMetadata:
    """One input or output tensor's metadata: its ``name`` and its associated files."""

    name: str
    files: tuple = ()


@dataclass(frozen=True)
class ClientMetadata:
    """What a ``.tflite`` file's TFLite Metadata tells its clients.

    Attributes:
        name (str): the model name in the metadata.
        min_parser_version (str): the metadata parser version it asks for.
        subgraphs (int): SubGraphMetadata entries (the clients read the first).
        inputs, outputs (tuple[TensorMetadata]): the first subgraph's tensor metadata, in order.
        tokenizer (str | None): ``"bert"``, ``"sentencepiece"``, ``"regex"``, ``"other"`` (a process unit that
            is no tokenizer), or None (no input process unit).
        vocab_file (str | None): the file the tokenizer runs on: its ``vocab.txt``, or its SentencePiece model.
        packed_files (tuple[str]): the names in the archive appended to the model.
        line_counts (dict[str, int]): lines of each packed file the metadata names (vocabulary, labels).
        blank_lines (dict[str, int]): empty lines among them (MediaPipe skips them: later ids shift).
        packed_lines (dict[str, tuple[str]]): the lines of those files as the clients split them (on ``"\\n"``),
            decoded as UTF-8 (undecodable bytes replaced): what ``mbk evaluate`` tokenizes with and labels by.
        packed_tokenizer (bytes): the tokenizer's packed file as the clients read it (a ``vocab.txt`` or a
            SentencePiece model; b"" when it is not packed): what ``artifacts.carried_tokenizer`` hands out.
    """

    name: str
    min_parser_version: str
    subgraphs: int
    inputs: tuple
    outputs: tuple
    tokenizer: str = None
    vocab_file: str = None
    packed_files: tuple = ()
    line_counts: dict = field(default_factory=dict)
    blank_lines: dict = field(default_factory=dict)
    packed_lines: dict = field(default_factory=dict, repr=False)
    packed_tokenizer: bytes = field(default=b"", repr=False)

    @property
    def input_names(self):
        return tuple(t.name for t in self.inputs)

    @property
    def output_names(self):
        return tuple(t.name for t in self.outputs)

    @property
    def vocab_size(self):
        """Lines of the packed vocabulary (None when it is not packed)."""
        return self.line_counts.get(self.vocab_file)

    @property
    def labels_file(self):
        """The first output's TENSOR_AXIS_LABELS file name, or None."""
        files = self.outputs[0].files if self.outputs else ()
        return next((f.name for f in files if f.type == "TENSOR_AXIS_LABELS"), None)

    @property
    def label_count(self):
        """Lines of the packed labels file (None when there is none or it is not packed)."""
        return self.line_counts.get(self.labels_file)

    def to_dict(self):
        return {
            "name": self.name, "min_parser_version": self.min_parser_version, "subgraphs": self.subgraphs,
            "inputs": [_tensor_dict(t) for t in self.inputs], "outputs": [_tensor_dict(t) for t in self.outputs],
            "tokenizer": self.tokenizer, "vocab_file": self.vocab_file, "vocab_size": self.vocab_size,
            "labels_file": self.labels_file, "label_count": self.label_count,
            "packed_files": list(self.packed_files),
        }


def _tensor_dict(tensor):
    return {"name": tensor.name, "files": [{"name": f.name, "type": f.type} for f in tensor.files]}


def read_client_metadata(path, fmt=None):
    """The TFLite Metadata of a model file, or None when it has none (an ONNX file, an older export).

    Args:
        path (str | os.PathLike): the ``.tflite`` (or ``.onnx``) file.
        fmt (str | None): ``"tflite"`` or ``"onnx"`` when the suffix does not say.

    Returns:
        ClientMetadata | None

    Raises:
        ArtifactError: the file is not a readable model, or its metadata or packed archive is corrupt or
            over the :data:`LIMITS`.

    Example:
        >>> read_client_metadata("model.tflite").output_names  # doctest: +SKIP
        ('sentence_embedding',)
    """
    return read_with_client_metadata(path, fmt)[1]


def read_with_client_metadata(path, fmt=None):
    """``(ArtifactGraph, ClientMetadata | None)`` from one read of the file (``mbk inspect`` and the lint)."""
    path = Path(path)
    if not FORMATS[artifact_format(path, fmt)].client_metadata or not path.is_file():
        return read_artifact(path, fmt), None
    data = path.read_bytes()
    graph = read_tflite_bytes(data, str(path))
    return graph, parse_client_metadata(graph.metadata, data, str(path))


def parse_client_metadata(entries, model_bytes, path="<bytes>"):
    """The :class:`ClientMetadata` (None without a ``TFLITE_METADATA`` entry) from :attr:`ArtifactGraph.metadata`
    and the whole file's bytes (where the packed archive is); raises as :func:`read_client_metadata`."""
    if schema.TFLITE_METADATA not in entries:
        return None
    try:
        meta = _Walker(bytes(entries[schema.TFLITE_METADATA]), path).model_metadata()
    except _Corrupt as err:
        raise ArtifactError(f"{path}: its {schema.TFLITE_METADATA} entry is corrupt ({err}); re-export the model") from None
    tokenizer_file = meta.get("vocab_file") if meta.get("tokenizer") in schema.PACKED_AS else None
    packed, counts, raw = _read_archive(model_bytes, path, _counted_files(meta), tokenizer_file)
    return ClientMetadata(**meta, packed_files=packed, line_counts={n: len(lines) for n, lines in counts.items()},
                          blank_lines={n: lines.count("") for n, lines in counts.items() if "" in lines},
                          packed_lines=counts, packed_tokenizer=raw)


class _Corrupt(Exception):
    """A flatbuffer read outside the buffer or against the schema (reworded as ArtifactError by the caller)."""


class _Walker:
    """A bounds-checked walk of the ModelMetadata flatbuffer: every read is checked before it is made."""

    def __init__(self, buf, path):
        self.buf, self.path = buf, path

    def _unpack(self, fmt, pos):
        size = struct.calcsize(fmt)
        if pos < 0 or pos + size > len(self.buf):
            raise _Corrupt(f"offset {pos} is outside its {len(self.buf)} bytes")
        return struct.unpack_from(fmt, self.buf, pos)[0]

    def _field(self, table, table_name, key):
        """The position of a field's value, or None when the field is absent."""
        vtable = table - self._unpack("<i", table)
        vtable_size, object_size = self._unpack("<H", vtable), self._unpack("<H", vtable + 2)
        if vtable_size < 4 or vtable_size % 2:
            raise _Corrupt(f"a table at {table} has a bad vtable")
        slot_offset = 4 + 2 * schema.SLOTS[table_name][key]
        if slot_offset >= vtable_size:
            return None
        offset = self._unpack("<H", vtable + slot_offset)
        if offset and offset >= object_size:
            raise _Corrupt(f"field {key} of a {table_name} lies outside its table")
        return table + offset if offset else None

    def _ref(self, table, table_name, key):
        pos = self._field(table, table_name, key)
        return None if pos is None else pos + self._unpack("<I", pos)

    def byte(self, table, table_name, key):
        pos = self._field(table, table_name, key)
        return 0 if pos is None else self._unpack("<B", pos)

    def string(self, table, table_name, key):
        pos = self._ref(table, table_name, key)
        if pos is None:
            return None
        size = self._unpack("<I", pos)
        if size > LIMITS["string bytes"]:
            raise ArtifactError(f"{self.path}: a {table_name} {key} in its {schema.TFLITE_METADATA} is {size} bytes "
                                f"long, over the {LIMITS['string bytes']} this reader takes; re-export the model")
        if pos + 4 + size > len(self.buf):
            raise _Corrupt(f"a {size}-byte string at {pos} runs past its {len(self.buf)} bytes")
        return self.buf[pos + 4: pos + 4 + size].decode("utf-8", "replace")

    def tables(self, table, table_name, key, limit):
        """Positions of the tables in a vector field ([] when absent), at most ``LIMITS[limit]`` of them."""
        pos = self._ref(table, table_name, key)
        if pos is None:
            return []
        count = self._unpack("<I", pos)
        if count > LIMITS[limit]:
            raise ArtifactError(f"{self.path}: its {schema.TFLITE_METADATA} lists {count} {limit} in one "
                                f"{table_name}.{key}, over the {LIMITS[limit]} this reader takes; re-export the model")
        return [slot + self._unpack("<I", slot) for slot in range(pos + 4, pos + 4 + 4 * count, 4)]

    def model_metadata(self):
        if len(self.buf) < 8 or self.buf[4:8] != schema.FILE_IDENTIFIER:
            raise _Corrupt(f"no {schema.FILE_IDENTIFIER.decode()} identifier")
        root = self._unpack("<I", 0)
        subgraphs = self.tables(root, "ModelMetadata", "subgraph_metadata", "subgraphs")
        meta = {"name": self.string(root, "ModelMetadata", "name") or "",
                "min_parser_version": self.string(root, "ModelMetadata", "min_parser_version") or "",
                "subgraphs": len(subgraphs), "inputs": (), "outputs": ()}
        if not subgraphs:
            return meta
        sub = subgraphs[0]
        for side in ("input", "output"):
            meta[f"{side}s"] = tuple(self.tensor(t) for t in self.tables(
                sub, "SubGraphMetadata", f"{side}_tensor_metadata", "tensors"))
        units = self.tables(sub, "SubGraphMetadata", "input_process_units", "process units")
        for unit in units:
            option = _OPTION_NAMES.get(self.byte(unit, "ProcessUnit", "options_type"))
            if option in schema.TOKENIZERS:
                options = self._ref(unit, "ProcessUnit", "options")
                key = "sentencePiece_model" if option == "SentencePieceTokenizerOptions" else "vocab_file"
                vocab = self.files(options, option, key) if options is not None else ()
                meta.update(tokenizer=schema.TOKENIZERS[option].name, vocab_file=vocab[0].name if vocab else None)
                break
        else:
            meta["tokenizer"] = "other" if units else None
        return meta

    def files(self, table, table_name, key):
        return tuple(
            AssociatedFile(self.string(f, "AssociatedFile", "name") or "",
                           _FILE_TYPE_NAMES.get(self.byte(f, "AssociatedFile", "type"), "UNKNOWN"))
            for f in self.tables(table, table_name, key, "files"))

    def tensor(self, table):
        return TensorMetadata(self.string(table, "TensorMetadata", "name") or "",
                              self.files(table, "TensorMetadata", "associated_files"))


def _counted_files(meta):
    """The file names whose lines are counted: the tokenizer's vocabulary and the first output's labels."""
    names = [meta.get("vocab_file")] if schema.PACKED_AS.get(meta.get("tokenizer")) == "lines" else []
    if meta["outputs"]:
        names += [f.name for f in meta["outputs"][0].files if f.type == "TENSOR_AXIS_LABELS"]
    return [n for n in names if n]


def _read_archive(data, path, counted, raw_name=None):
    """``(names, {name: lines}, bytes of raw_name)`` of the zip appended to the model; ``((), {}, b"")`` when
    there is none."""
    # Found as zipfile finds it (an end record without a comment first, else the last one in reach), so the
    # bounds below are checked on the record zipfile will read.
    if data[-_EOCD_SIZE:-_EOCD_SIZE + 4] == _EOCD and data[-2:] == b"\0\0":
        end = len(data) - _EOCD_SIZE
    else:
        end = data.rfind(_EOCD, max(0, len(data) - _EOCD_SIZE - _MAX_COMMENT))
    if end < 0 or end + _EOCD_SIZE > len(data):
        return (), {}, b""
    entries, cd_size = struct.unpack_from("<HI", data, end + 10)
    # zipfile takes a zip64 record's (64-bit) counts whenever its locator precedes the end record.
    if entries == 0xFFFF or cd_size == 0xFFFFFFFF or (end >= 20 and data[end - 20: end - 16] == _ZIP64_LOCATOR):
        raise ArtifactError(f"{path}: its packed files are a zip64 archive, which the metadata never needs; "
                            "re-export the model")
    if entries > LIMITS["packed files"] or cd_size > LIMITS["central directory bytes"]:
        raise ArtifactError(f"{path}: its packed archive lists {entries} files in {cd_size} bytes, over the "
                            f"{LIMITS['packed files']} files / {LIMITS['central directory bytes']} bytes this "
                            "reader takes; re-export the model")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = [info.filename for info in archive.infolist()]
            if len(names) > LIMITS["packed files"]:
                raise ArtifactError(f"{path}: its packed archive holds {len(names)} files, over the "
                                    f"{LIMITS['packed files']} this reader takes; re-export the model")
            if len(set(names)) != len(names):
                twice = sorted({n for n in names if names.count(n) > 1})
                raise ArtifactError(f"{path}: its packed archive holds {twice[0]!r} more than once, so a client "
                                    "may read either copy; re-export the model")
            counts = {name: _packed_lines(archive, name, path) for name in counted if name in names}
            raw = _packed_bytes(archive, raw_name, path) if raw_name in names else b""
    except ArtifactError:
        raise
    except Exception as err:  # noqa: BLE001  (zipfile raises BadZipFile, OSError, ValueError, RuntimeError, zlib.error...)
        raise ArtifactError(f"{path}: its packed archive is corrupt ({type(err).__name__}: {err}); "
                            "re-export the model") from None
    return tuple(names), counts, raw


def _packed_lines(archive, name, path):
    lines = _packed_bytes(archive, name, path).split(b"\n")  # as the clients split; a last line without one counts
    if lines[-1] == b"":  # after the last "\n", or an empty file
        lines.pop()
    return tuple(line.decode("utf-8", "replace") for line in lines)


def _packed_bytes(archive, name, path):
    limit = LIMITS["packed file bytes"]
    info = archive.getinfo(name)
    if info.file_size > limit:
        raise ArtifactError(f"{path}: its packed {name} is {info.file_size} bytes, over the {limit} this reader "
                            "takes; re-export the model")
    with archive.open(info) as stream:
        text = stream.read(limit + 1)  # bounded whatever the header claims: a zip bomb stops here
    if len(text) > limit:
        raise ArtifactError(f"{path}: its packed {name} inflates past {limit} bytes; re-export the model")
    return text


# The names the clients' BertTokenizer looks special tokens up by: a packed vocab.txt carries them at the
# checkpoint's special ids where its own names differ (MPNet's <s>), so a line there may differ by design.
_CLIENT_SPECIALS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")


def _renamed_for_clients(index, ours, theirs, specials):
    """Whether line ``index`` differs by the exporter's renaming (``TextTokenizer._client_names``): a
    special token given the name the clients look up (MPNet's ``<s>`` as ``[CLS]``), or the token that held
    that name moved aside (``[CLS]`` at 104 as ``[unused-cls-104]``)."""
    return (theirs in _CLIENT_SPECIALS and ours in specials.values()
            or ours in _CLIENT_SPECIALS and theirs == f"[unused-{ours[1:-1].lower()}-{index}]")


def _packed_model_disagreements(meta, recorded, compared):
    """Where a packed tokenizer file is not the one exported with the model: a SentencePiece model that does not
    parse or overruns the embedding table, or a sha256 other than ``client_tokenizer_sha256`` (unless ``compared``)."""
    data = meta.packed_tokenizer
    if not data:
        return []
    reasons = []
    if schema.PACKED_AS.get(meta.tokenizer) == "model":
        # The generated module of the sentencepiece package: the same parser the clients' SentencePiece runs.
        from sentencepiece import sentencepiece_model_pb2  # noqa: PLC0415  (only SentencePiece files need it)
        model = sentencepiece_model_pb2.ModelProto()
        try:
            model.ParseFromString(data)
        except Exception as err:  # noqa: BLE001  (protobuf's DecodeError and its C errors)
            return [f"the packed {meta.vocab_file} is not a SentencePiece model ({str(err)[:60]})"]
        rows = recorded.get("vocab_size")
        if isinstance(rows, int) and not isinstance(rows, bool) and len(model.pieces) > rows:
            reasons.append(f"the packed {meta.vocab_file} has {len(model.pieces):,} pieces and the model embeds "
                           f"{rows:,}: ids past its table fail in the app (gather index out of bounds)")
    recorded_sha = recorded.get("client_tokenizer_sha256")
    if isinstance(recorded_sha, str) and not compared and not reasons and \
            hashlib.sha256(data).hexdigest() != recorded_sha:
        reasons.append(f"the packed {meta.vocab_file} is not the tokenizer exported with the model (its sha256 "
                       "differs from client_tokenizer_sha256 in mbk_metadata), so the app would compute other ids")
    return reasons


def packed_disagreements(meta, recorded, vocab):
    """Where the files packed for the clients (``meta``; None: nothing packed) disagree with the model they were
    exported with (its ``mbk_metadata`` ``recorded`` and ``mbk_vocab`` lines ``vocab``): one reason each, or [].

    The apps read the packed ``vocab.txt`` and ``labels.txt``, not our ``mbk_vocab`` / ``mbk_metadata``, so a
    packed file that differs makes the app answer wrongly: the export and evaluate refuse such a file, inspect
    calls it ready for no client.

    Example:
        >>> meta = ClientMetadata("m", "1.0", 1, (), (), "bert", "vocab.txt", ("vocab.txt",),
        ...                       packed_lines={"vocab.txt": ("[PAD]", "b", "a")})
        >>> packed_disagreements(meta, {"vocab_size": 3}, ["[PAD]", "a", "b"])
        ["line 2 of the packed vocab.txt is 'b' where the model's vocabulary has 'a' (mbk_vocab)"]
    """
    if meta is None:
        return []
    reasons = []
    lines = meta.packed_lines.get(meta.vocab_file) if schema.PACKED_AS.get(meta.tokenizer) == "lines" else None
    rows = recorded.get("vocab_size")
    if lines is not None and isinstance(rows, int) and not isinstance(rows, bool) and len(lines) > rows:
        reasons.append(f"the packed {meta.vocab_file} has {len(lines):,} tokens and the model embeds {rows:,}: ids "
                       "past its table fail in the app (gather index out of bounds)")
    if lines is not None and vocab:
        specials = recorded.get("special_tokens") if isinstance(recorded.get("special_tokens"), dict) else {}
        if len(lines) != len(vocab):
            reasons.append(f"the packed {meta.vocab_file} has {len(lines):,} lines and the model's vocabulary "
                           f"(mbk_vocab) {len(vocab):,}")
        else:
            differ = next((i for i, (ours, theirs) in enumerate(zip(vocab, lines))
                           if ours != theirs and not _renamed_for_clients(i, ours, theirs, specials)), None)
            if differ is not None:
                reasons.append(f"line {differ + 1} of the packed {meta.vocab_file} is {lines[differ][:40]!r} where "
                               f"the model's vocabulary has {vocab[differ][:40]!r} (mbk_vocab)")
    reasons += _packed_model_disagreements(meta, recorded, compared=lines is not None and bool(vocab))
    labels = meta.packed_lines.get(meta.labels_file) if meta.labels_file else None
    classes = recorded.get("labels")
    if labels is not None and isinstance(classes, list) and classes and list(labels) != classes:
        reasons.append(f"the packed {meta.labels_file} names {', '.join(labels)[:80] or 'nothing'} where the model's "
                       f"classes are {', '.join(map(str, classes))[:80]}")
    return reasons
