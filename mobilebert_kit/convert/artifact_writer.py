"""One artifact format's writer and the output kind it declares (``file_validation.WRITERS`` holds one per format)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ArtifactWriter:
    """How an artifact of one format is written and recognised.

    Args:
        write (callable): ``write(graph, setting, calibration, metadata, path, calibrated=None)`` writes the file
            (``tflite_writer.write_tflite``, ``onnx_writer.write_onnx``); a drift probe is written like the
            artifact it describes.
        output (OutputKind): what ``utils.atomic`` may replace at the output path (a file this writer made).

    Example:
        >>> from mobilebert_kit.convert.validation.file_validation import WRITERS  # doctest: +SKIP
        >>> WRITERS["tflite"].output.name  # doctest: +SKIP
        'tflite'
    """

    write: object
    output: object
