"""Each artifact format's writer and the output kind it declares: :data:`WRITERS`, one per format, beside the writers.

The TensorFlow-free half of a format (suffix, magic number, runtimes, what clients and inspection need) is its
:class:`~mobilebert_kit.artifacts.formats.ArtifactFormat` record on the floor; this is the half that writes.
"""

from dataclasses import dataclass

from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.convert.onnx.writer import ONNX_OUTPUT, write_onnx
from mobilebert_kit.convert.tflite.writer import TFLITE_OUTPUT, write_tflite


@dataclass(frozen=True)
class ArtifactWriter:
    """How an artifact of one format is written and recognised.

    Args:
        format (ArtifactFormat): the format's TF-free record (suffix, magic, runtimes, ...).
        write (callable): ``write(graph, setting, calibration, metadata, path, calibrated=None) -> notes`` converts
            the export graph (``export_model.build_export_model``) with ``setting`` (the ExportPlan of the setting
            written) and writes the file at ``path`` (``tflite.writer.write_tflite``, ``onnx.writer.write_onnx``).
            ``calibration`` is the calibration InputSet (None for modes without static ranges), ``metadata``
            the export's ``FileMetadata`` (``FileMetadata({})`` for a drift probe, written like the artifact it
            describes), ``calibrated`` the TFLite writer's calibration per mode, shared by one export's settings.
        output (OutputKind): what ``utils.atomic`` may replace at the output path (a file this writer made).

    Example:
        >>> WRITERS["tflite"].output.name, WRITERS["onnx"].format.suffix
        ('tflite', '.onnx')
    """

    format: object
    write: object
    output: object


# One writer per format record: a format is added by adding its record and its writer here.
WRITERS = {name: ArtifactWriter(FORMATS[name], write, output)
           for name, write, output in (("tflite", write_tflite, TFLITE_OUTPUT), ("onnx", write_onnx, ONNX_OUTPUT))}
