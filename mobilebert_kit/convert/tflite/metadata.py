"""The TFLite Metadata the app-side clients need: a ``ModelMetadata`` flatbuffer and the files packed with it.

MediaPipe Tasks (TextEmbedder, TextClassifier) and the TFLite Task Library
(BertNLClassifier, BertQuestionAnswerer, TextEmbedder) refuse an int32 text
model without it (``No metadata or input process unit found``), and find the
inputs and the tokenizer only through it (``shared/reference/clients.md``,
measured by loading files). The flatbuffer (identifier ``M001``) holds one
SubGraphMetadata:

- ``input_tensor_metadata`` named ``ids``, ``mask``, ``segment_ids``
  (:data:`~mobilebert_kit.artifacts.metadata_schema.CLIENT_INPUT_NAMES`), in graph input order;
- ``input_process_units``: the checkpoint's tokenizer as its kind's record says
  (``data/tokenizer_kinds.py``): ``BertTokenizerOptions`` whose ``vocab_file`` is
  ``vocab.txt`` (type VOCABULARY) for WordPiece, ``SentencePieceTokenizerOptions``
  whose ``sentencePiece_model`` is ``sentencepiece.model`` for Unigram; none for
  byte-level BPE, which the schema cannot describe;
- ``output_tensor_metadata``: one entry per graph output, named as the output
  (MediaPipe refuses a count mismatch); a classifier's first output carries
  ``labels.txt`` (type TENSOR_AXIS_LABELS).

Every tensor gets ``FeatureProperties`` content, as the clients' own metadata
writers give text models. The exporter stores the flatbuffer as the
``TFLITE_METADATA`` entry of ``Model.metadata``
(:func:`~mobilebert_kit.convert.tflite.flatbuffer.finalize`) and then appends
the files with :func:`pack_files`: a zip archive after the flatbuffer, as
TFLite Support's metadata populator writes it (``zipfile`` in append mode:
offsets from the start of the file); the clients' zip reader finds the archive
from its end record. Field slots and enum values are
:mod:`~mobilebert_kit.artifacts.metadata_schema`'s, shared with the reader.

Example:
    >>> unit = ClientUnit("BertTokenizerOptions", "vocab.txt", b"[PAD]\\n[UNK]\\na\\n")
    >>> meta, files = client_metadata("embedder", ["sentence_embedding"], unit, name="m", description="an embedder")
    >>> sorted(files), meta[4:8]
    (['vocab.txt'], b'M001')
"""

import io
import zipfile

import flatbuffers

from mobilebert_kit.artifacts import metadata_schema as schema
from mobilebert_kit.artifacts.metadata_schema import CLIENT_INPUT_NAMES, TFLITE_METADATA  # noqa: F401  (re-exported)
from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.data.tokenizer_kinds import ClientUnit

CLIENTS = (None, "embedder", "classifier", "question_answerer")
# Each tokenizer process unit: the field naming its file, the file's AssociatedFileType, its description.
_TOKENIZER_UNITS = {
    "BertTokenizerOptions": ("vocab_file", "VOCABULARY", "WordPiece vocabulary"),
    "SentencePieceTokenizerOptions": ("sentencePiece_model", "UNKNOWN", "SentencePiece model, the checkpoint's ids"),
}
_INPUT_DESCRIPTIONS = ("token ids of the checkpoint's tokenizer", "1 for real tokens, 0 for padding",
                       "0 for the first segment, 1 for the second")


def client_metadata(client, output_names, tokenizer, labels=None, *, name, description):
    """The ModelMetadata flatbuffer and the files to pack for one export.

    Args:
        client (str | None): :attr:`ExportTask.client` (one of :data:`CLIENTS`).
        output_names (Sequence[str]): the graph's output names, in order.
        tokenizer (ClientUnit | Sequence[str] | None): the tokenizer process unit and its file, or WordPiece
            vocabulary lines (a ``vocab.txt``); None: no tokenizer process unit and no packed tokenizer file.
        labels (Sequence[str] | None): a classifier's class names, in output order (``labels.txt``).
        name (str): the model's name in the metadata.
        description (str): one line on what the model does.

    Returns:
        tuple[bytes, dict[str, bytes]]: the flatbuffer, and ``{file name: contents}`` for :func:`pack_files`.

    Raises:
        ExportError: something the metadata cannot represent (:func:`lines_file`'s refusals, no outputs, an
            unknown client).

    Example:
        >>> meta, files = client_metadata("classifier", ["probability"], None, ["neg", "pos"],
        ...                               name="m", description="sentiment")
        >>> files["labels.txt"]
        b'neg\\npos\\n'
    """
    if client not in CLIENTS:
        raise ExportError(f"unknown TFLite client family {client!r}; expected one of {CLIENTS}")
    output_names = [str(n) for n in output_names]
    if not output_names:
        raise ExportError("the model has no outputs to describe in the TFLite Metadata; re-export it")
    files = {}
    if tokenizer is not None and not isinstance(tokenizer, ClientUnit):
        tokenizer = ClientUnit("BertTokenizerOptions", schema.VOCAB_FILE, lines_file("vocabulary token", tokenizer))
    if tokenizer is not None:
        if tokenizer.options not in _TOKENIZER_UNITS:
            raise ExportError(f"no TFLite Metadata tokenizer {tokenizer.options!r}; expected one of "
                              f"{', '.join(_TOKENIZER_UNITS)}")
        if tokenizer.options == "BertTokenizerOptions":
            # The same checks as for lines given: the unit's vocab.txt is read a line a token.
            lines_file("vocabulary token", bytes(tokenizer.data).decode("utf-8").split("\n")[:-1])
        if not tokenizer.data:
            raise ExportError(f"the tokenizer file {tokenizer.file_name} is empty; re-export with the checkpoint's "
                              "tokenizer files")
        files[tokenizer.file_name] = bytes(tokenizer.data)
    label_file = client == "classifier" and labels is not None
    if label_file:
        files[schema.LABELS_FILE] = lines_file("label", labels)
    b = flatbuffers.Builder(1024)
    inputs = [_tensor(b, n, d) for n, d in zip(CLIENT_INPUT_NAMES, _INPUT_DESCRIPTIONS)]
    outputs = []
    for i, out in enumerate(output_names):
        labelled = label_file and i == 0
        attached = [_file(b, schema.LABELS_FILE, "TENSOR_AXIS_LABELS", "class names, one a line")] if labelled else []
        outputs.append(_tensor(b, out, f"output {out}", attached))
    units = []
    if tokenizer is not None:
        field_name, file_type, what = _TOKENIZER_UNITS[tokenizer.options]
        packed = _file(b, tokenizer.file_name, file_type, what)
        units.append(_table(b, "ProcessUnit", {
            "options_type": ("byte", schema.PROCESS_UNIT_OPTIONS[tokenizer.options]),
            "options": _table(b, tokenizer.options, {field_name: _vector(b, [packed])}),
        }))
    sub = _table(b, "SubGraphMetadata", {
        "name": b.CreateString(name),
        "input_tensor_metadata": _vector(b, inputs),
        "output_tensor_metadata": _vector(b, outputs),
        "input_process_units": _vector(b, units) if units else None,
    })
    root = _table(b, "ModelMetadata", {
        "name": b.CreateString(name),
        "description": b.CreateString(description),
        "subgraph_metadata": _vector(b, [sub]),
        "min_parser_version": b.CreateString(schema.MIN_PARSER_VERSION),
    })
    b.Finish(root, file_identifier=schema.FILE_IDENTIFIER)
    return bytes(b.Output()), files


def pack_files(model_bytes, files):
    """``model_bytes`` with ``files`` appended as a zip archive (stored, not compressed), as the clients read them.

    A model already ending in an archive (packing twice would leave two copies of a file) or a file name that
    is empty, a path or not ASCII is an ExportError.

    Example:
        >>> packed = pack_files(b"TFL3 model", {"vocab.txt": b"[PAD]\\n"})
        >>> packed.startswith(b"TFL3 model"), zipfile.ZipFile(io.BytesIO(packed)).namelist()
        (True, ['vocab.txt'])
    """
    if not files:
        return bytes(model_bytes)
    for file_name in files:
        if not file_name or not file_name.isascii() or any(c in file_name for c in "/\\\0\n\r") or file_name in (".", ".."):
            raise ExportError(f"cannot pack {file_name!r} into the model: the clients look files up by a plain "
                              "ASCII file name; rename it")
    if zipfile.is_zipfile(io.BytesIO(model_bytes)):
        raise ExportError("the model already has packed files; pack them once, from the converter's output")
    out = io.BytesIO()
    out.write(model_bytes)
    # Mode "w" at the end of the model: the entries' offsets count from the file's start, as the populator's
    # zipfile append mode writes them; stored entries, so a client can read them without inflating.
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        for file_name, contents in files.items():
            info = zipfile.ZipInfo(file_name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible bytes
            archive.writestr(info, bytes(contents))
    return out.getvalue()


def lines_file(what, lines):
    """The bytes of a one-item-a-line file (``vocab.txt``, ``labels.txt``) as the clients read it.

    Raises:
        ExportError: no lines, a line break inside an item, an empty item (the clients skip empty lines, so every
            later id would shift).
    """
    lines = [str(line) for line in lines]
    if not lines:
        raise ExportError(f"the {what} list is empty; a {what} file needs at least one line")
    for i, line in enumerate(lines):
        if "\n" in line or "\r" in line:
            raise ExportError(f"{what} {i} ({line[:40]!r}) holds a line break, which its one-a-line file "
                              "cannot represent; fix the vocabulary or label names")
        if not line:
            # MediaPipe 1.2.2 skips an empty vocabulary line (measured: the next token then ran with its
            # neighbour's id), so an empty token or label cannot keep its position in the file.
            raise ExportError(f"{what} {i} is empty, which its one-a-line file cannot represent; "
                              "name it or remove it")
    return ("\n".join(lines) + "\n").encode()


def _table(b, table, fields):
    """One table of ``table``'s schema; ``fields`` maps field names to offsets, ``("byte", value)`` for an enum
    field, or None (absent)."""
    slots = schema.SLOTS[table]
    present = {k: v for k, v in fields.items() if v is not None}
    b.StartObject(max(slots.values()) + 1)
    for key, value in present.items():
        if isinstance(value, tuple):  # ("byte", n): an enum field
            b.PrependUint8Slot(slots[key], value[1], 0)
        else:
            b.PrependUOffsetTRelativeSlot(slots[key], value, 0)
    return b.EndObject()


def _vector(b, offsets):
    b.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        b.PrependUOffsetTRelative(offset)
    return b.EndVector()


def _file(b, file_name, kind, description):
    return _table(b, "AssociatedFile", {
        "name": b.CreateString(file_name), "description": b.CreateString(description),
        "type": ("byte", schema.ASSOCIATED_FILE_TYPES[kind]),
    })


def _content(b):
    b.StartObject(0)  # FeatureProperties has no fields
    properties = b.EndObject()
    return _table(b, "Content", {
        "content_properties_type": ("byte", schema.CONTENT_PROPERTIES["FeatureProperties"]),
        "content_properties": properties,
    })


def _tensor(b, tensor_name, description, files=()):
    fields = {"name": b.CreateString(tensor_name), "description": b.CreateString(description), "content": _content(b)}
    if files:
        fields["associated_files"] = _vector(b, list(files))
    return _table(b, "TensorMetadata", fields)
