"""Reading back what an export embedded: the ``mbk_metadata`` JSON and the vocabulary."""

from pathlib import Path

from mobilebert_kit.convert.errors import ArtifactError
from mobilebert_kit.utils.structured import load_json


def read_artifact_metadata(path, with_vocab=False):
    """Returns the ``mbk_metadata`` dict of a ``.tflite`` / ``.onnx`` file ({} when absent).

    With ``with_vocab``, returns ``(metadata, vocab_lines)``.

    Example:
        >>> meta = read_artifact_metadata("model.tflite")  # doctest: +SKIP
        >>> meta["seq_len"], meta["do_lower_case"]  # doctest: +SKIP
        (128, True)
    """
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path} does not exist")
    if path.suffix == ".tflite":
        from mobilebert_kit.convert.tflite_flatbuffer import read_mbk_metadata

        try:
            meta, vocab = read_mbk_metadata(path.read_bytes())
        except ArtifactError as err:
            raise ArtifactError(f"{path}: {err}") from err  # the reader sees bytes only: name the file
    elif path.suffix == ".onnx":
        from mobilebert_kit.convert.onnx_export import read_metadata

        try:
            props = read_metadata(path)
        except Exception as err:  # noqa: BLE001  (protobuf decode errors have many types)
            raise ArtifactError(f"{path} is not a readable ONNX model ({type(err).__name__}); re-export it") from err
        meta = load_json(props["mbk_metadata"], f"the mbk_metadata of {path}", expect=dict, error=ArtifactError,
                         fix="re-export it") if "mbk_metadata" in props else {}
        vocab = props.get("mbk_vocab", "").splitlines()
    else:
        raise ArtifactError(f"{path}: unknown model type {path.suffix!r}; expected .tflite or .onnx")
    return (meta, vocab) if with_vocab else meta
