"""Errors the profiler raises for user and environment problems, all :class:`mobilebert_kit.errors.MbkError`
(one line: what is wrong, then what to do)."""

from mobilebert_kit.errors import MbkError


class ProfilerError(MbkError):
    """A model file, option or host problem (bad model, unknown core set, ...)."""


class BenchmarkParseError(ProfilerError):
    """Text that is not benchmark_model output, or output that contradicts itself; ``line_number`` (1-based) names
    the offending line, if one is to blame."""

    def __init__(self, message, line_number=None):
        self.line_number = line_number
        where = f" (line {line_number})" if line_number else ""
        super().__init__(f"cannot parse benchmark_model output{where}: {message}")


class DeviceError(ProfilerError):
    """adb missing, no device, an unauthorized/offline device or a wrong-ABI binary."""


class DeviceDisconnectedError(DeviceError):
    """The device went away while trials were running; ``partial_results`` are the results finished before, which the
    command line still writes to the report."""

    def __init__(self, message, partial_results=None):
        self.partial_results = list(partial_results or [])
        super().__init__(message)
