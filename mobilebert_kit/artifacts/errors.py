"""The one error type of the artifact floor: a ``.tflite`` / ``.onnx`` file that cannot be read or run (an
:class:`~mobilebert_kit.errors.MbkError`; the profiler re-raises it as a ``ProfilerError`` with the same text)."""

from mobilebert_kit.errors import MbkError


class ArtifactError(MbkError):
    """A ``.tflite`` / ``.onnx`` file that cannot be read or run."""


class RuntimeLoadError(ArtifactError):
    """The runtime (ai-edge-litert, onnxruntime) refused to load or prepare the file; its own exception is the
    ``__cause__``, for callers that word the message themselves (the profiler adds a ``--seq-len`` hint)."""
