"""Reading back what an export embedded: the ``mbk_metadata`` JSON and the vocabulary.

Both formats keep them as metadata entries (TFLite ``Model.metadata``, ONNX ``metadata_props``);
:func:`parse_mbk_metadata` is the one place the JSON is decoded and checked.
"""

import json
from pathlib import Path

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.formats import BATCH_SIZE, SEQ_LEN, VOCAB_SIZE
from mobilebert_kit.artifacts.reader import read_artifact
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.limits import within
from mobilebert_kit.utils.structured import load_json

METADATA_JSON = "mbk_metadata"
METADATA_VOCAB = "mbk_vocab"
# The lengths, sizes and counts of a file's mbk_metadata that readers size work by, with their bounds.
BOUNDED = {"seq_len": SEQ_LEN, "planned_seq_len": SEQ_LEN, "max_seq_len": SEQ_LEN, "batch_size": BATCH_SIZE,
           "vocab_size": VOCAB_SIZE}


def _strings(value):
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# What each other entry of mbk_metadata that a reader uses must be, when present and not null: (check, what it is);
# a hand-edited value of another type is refused once here, not misread later ("no" is a true string).
TYPED = {
    **dict.fromkeys(("format", "architecture", "task", "client", "source", "quantization", "mask_dtype", "io_type",
                     "tokenizer_kind", "normalization_type", "hidden_act", "client_tokenizer_sha256"),
                    (lambda v: isinstance(v, str), "a string")),
    "do_lower_case": (lambda v: isinstance(v, bool), "true or false"),
    **dict.fromkeys(("labels", "input_names", "outputs"), (_strings, "a list of strings")),
    **dict.fromkeys(("inputs", "input_dtypes", "special_tokens"),
                    (lambda v: isinstance(v, dict) and _strings(list(v.values())), "an object of strings")),
    "table_columns": (lambda v: isinstance(v, dict) and _strings(v.get("text_columns", []))
                      and isinstance(v.get("label_column"), (str, type(None))),
                      'an object {"text_columns": [strings], "label_column": string}'),
    "pooling": (lambda v: isinstance(v, dict) and isinstance(v.get("mode"), str)
                and isinstance(v.get("normalize", False), bool),
                'an object {"mode": string, "normalize": true or false}'),
    "tokenizer_in_graph": (lambda v: isinstance(v, dict), "an object"),
    "squad_windows": (lambda v: isinstance(v, dict) and all(_positive(v.get(k)) for k in ("doc_stride",
                                                                                           "max_query_length")),
                      'an object {"doc_stride": integer > 0, "max_query_length": integer > 0}'),
}

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
    recorded = meta.get("max_seq_len")
    if _positive(requested) and _positive(recorded) and not static_len and requested > recorded:
        raise ConfigError(f"--seq-len {requested} is more than the {recorded} positions the file takes (its "
                          f"{METADATA_JSON} max_seq_len); pass --seq-len {recorded} or less")
    for value in (requested, static_len, meta.get("planned_seq_len"), meta.get("seq_len")):
        if _positive(value):
            return int(value)
    positions = max_positions if _positive(max_positions) else meta.get("max_seq_len")
    return min(DEFAULT_LENGTH, positions) if _positive(positions) else DEFAULT_LENGTH


def in_graph_length(meta):
    """The length a text-in file (``--tokenizer-in-graph``) cuts each text to inside itself, special tokens included
    (``tokenizer_in_graph.truncates_to``); None for any other file. Like a static length, ``--seq-len`` cannot
    change it."""
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
    for key, limit in BOUNDED.items():  # once, before any reader sizes a buffer by it
        if meta.get(key) is not None and not within(limit, meta[key]):
            raise ArtifactError(f"{path}: its {METADATA_JSON} gives {key} = {meta[key]!r}, which must be "
                                f"{limit.describe()}; re-export the file (its metadata was changed)")
    for key in ("seq_len", "planned_seq_len"):
        if _positive(meta.get(key)) and _positive(meta.get("max_seq_len")) and meta[key] > meta["max_seq_len"]:
            raise ArtifactError(f"{path}: its {METADATA_JSON} gives {key} = {meta[key]}, more than its max_seq_len "
                                f"({meta['max_seq_len']} positions); re-export the file (its metadata was changed)")
    for key, (valid, what) in TYPED.items():
        if meta.get(key) is not None and not valid(meta[key]):
            raise ArtifactError(f"{path}: its {METADATA_JSON} gives {key} = {json.dumps(meta[key])[:60]}, which must be "
                                f"{what}; re-export the file (its metadata was changed)")
    try:
        vocab = entries[METADATA_VOCAB].decode().splitlines() if METADATA_VOCAB in entries else []
    except UnicodeDecodeError as err:
        raise ArtifactError(f"{path}: the {METADATA_VOCAB} entry is not UTF-8 ({err}); re-export it") from err
    return meta, vocab


def read_artifact_metadata(path, with_vocab=False):
    """Returns the ``mbk_metadata`` dict of a ``.tflite`` / ``.onnx`` file ({} when absent); with ``with_vocab``,
    ``(metadata, vocab_lines)``.

    Example:
        >>> meta = read_artifact_metadata("model.tflite")  # doctest: +SKIP
        >>> meta["seq_len"], meta["do_lower_case"]  # doctest: +SKIP
        (128, True)
    """
    path = Path(path)
    meta, vocab = parse_mbk_metadata(read_artifact(path).metadata, path)
    return (meta, vocab) if with_vocab else meta
