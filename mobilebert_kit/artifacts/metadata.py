"""Reading back what an export embedded: the ``mbk_metadata`` JSON and the vocabulary.

Both formats keep them as metadata entries (TFLite ``Model.metadata``, ONNX
``metadata_props``), read by :func:`~mobilebert_kit.artifacts.reader.read_artifact`.
:func:`parse_mbk_metadata` is the one place the JSON is decoded and checked,
for ``mbk validate``, the exporter and the profiler alike.
"""

from pathlib import Path

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.reader import read_artifact
from mobilebert_kit.utils.structured import load_json

METADATA_JSON = "mbk_metadata"
METADATA_VOCAB = "mbk_vocab"


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
