"""Reading back what an export embedded: the ``mbk_metadata`` JSON and the vocabulary.

Both formats keep them as metadata entries (TFLite ``Model.metadata``, ONNX
``metadata_props``), read by :func:`~mobilebert_kit.artifacts.reader.read_artifact`.
:func:`parse_mbk_metadata` is the one place the JSON is decoded and checked,
for ``mbk validate``, the exporter and the profiler alike.
"""

from pathlib import Path

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.formats import BATCH_SIZE, SEQ_LEN, VOCAB_SIZE
from mobilebert_kit.artifacts.reader import read_artifact
from mobilebert_kit.utils.limits import within
from mobilebert_kit.utils.structured import load_json

METADATA_JSON = "mbk_metadata"
METADATA_VOCAB = "mbk_vocab"
# The lengths, sizes and counts of a file's mbk_metadata that readers size work by, with their bounds.
BOUNDED = {"seq_len": SEQ_LEN, "planned_seq_len": SEQ_LEN, "max_seq_len": SEQ_LEN, "batch_size": BATCH_SIZE,
           "vocab_size": VOCAB_SIZE}

# The length a file runs at when neither the user, nor its own inputs, nor its export's plan fix one: the
# paper's setting (MobileBERT, Table 6), within the position table the file records (a tiny model has 64 rows).
DEFAULT_LENGTH = 128


def _positive(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def planned_length(meta, static_len=None, requested=None, max_positions=None):
    """The sequence length a written file is run at: the one rule of ``mbk profile``, ``validate``, ``evaluate``
    and the pipeline.

    The length the user asked for; else the length fixed in the file's inputs; else the length its export
    planned and validated at (``planned_seq_len`` in its ``mbk_metadata``, written by every export since the
    dynamic-length default); else :data:`DEFAULT_LENGTH` within the position table.

    Args:
        meta (dict): the file's ``mbk_metadata`` (``{}`` for a file without one).
        static_len (int | None): the length fixed in the file's inputs (None: an open length).
        requested (int | None): the user's ``--seq-len``.
        max_positions (int | None): the position table when known from elsewhere (else the file's record).

    Returns:
        int: the length.

    Example:
        >>> planned_length({"planned_seq_len": 32, "seq_len": None})
        32
        >>> planned_length({}, static_len=48)
        48
        >>> planned_length({"max_seq_len": 64})
        64
    """
    for value in (requested, static_len, meta.get("planned_seq_len"), meta.get("seq_len")):
        if _positive(value):
            return int(value)
    positions = max_positions if _positive(max_positions) else meta.get("max_seq_len")
    return min(DEFAULT_LENGTH, positions) if _positive(positions) else DEFAULT_LENGTH


def in_graph_length(meta):
    """The length a text-in file (``--tokenizer-in-graph``) cuts each text to inside itself, special tokens
    included (``tokenizer_in_graph.truncates_to``); None for any other file. Like a static file's length, no
    ``--seq-len`` changes it.

    Example:
        >>> in_graph_length({"tokenizer_in_graph": {"truncates_to": 64}}), in_graph_length({})
        (64, None)
    """
    record = meta.get("tokenizer_in_graph")
    value = record.get("truncates_to") if isinstance(record, dict) else None
    return int(value) if _positive(value) else None


def parse_mbk_metadata(entries, path):
    """The ``mbk_metadata`` dict and vocabulary lines from a file's metadata entries (empty when absent).

    Args:
        entries (dict[str, bytes]): :attr:`ArtifactGraph.metadata`.
        path (str | os.PathLike): the file, for messages.

    Returns:
        tuple[dict, list[str]]: the metadata and the vocabulary lines.

    Raises:
        ArtifactError: the entries are not UTF-8 JSON, or the JSON is not an object.

    Example:
        >>> parse_mbk_metadata({"mbk_metadata": b'{"seq_len": 128}'}, "m.onnx")
        ({'seq_len': 128}, [])
    """
    # load_json: bounded depth and size, duplicate keys refused, a JSON object required.
    meta = load_json(entries[METADATA_JSON], f"the {METADATA_JSON} of {path}", expect=dict, error=ArtifactError,
                     fix="re-export it") if METADATA_JSON in entries else {}
    for key, limit in BOUNDED.items():
        # A hand-edited length or size is bounded here, once, before any reader sizes a buffer by it: a
        # max_seq_len of 10**12 made `mbk profile --text` abort in a 4 GB allocation.
        if meta.get(key) is not None and not within(limit, meta[key]):
            raise ArtifactError(f"{path}: its {METADATA_JSON} gives {key} = {meta[key]!r}, which must be "
                                f"{limit.describe()}; re-export the file (its metadata was changed)")
    try:
        vocab = entries[METADATA_VOCAB].decode().splitlines() if METADATA_VOCAB in entries else []
    except UnicodeDecodeError as err:
        raise ArtifactError(f"{path}: the {METADATA_VOCAB} entry is not UTF-8 ({err}); re-export it") from err
    return meta, vocab


def read_artifact_metadata(path, with_vocab=False):
    """Returns the ``mbk_metadata`` dict of a ``.tflite`` / ``.onnx`` file ({} when absent).

    With ``with_vocab``, returns ``(metadata, vocab_lines)``.

    Example:
        >>> meta = read_artifact_metadata("model.tflite")  # doctest: +SKIP
        >>> meta["seq_len"], meta["do_lower_case"]  # doctest: +SKIP
        (128, True)
    """
    path = Path(path)
    meta, vocab = parse_mbk_metadata(read_artifact(path).metadata, path)
    return (meta, vocab) if with_vocab else meta
