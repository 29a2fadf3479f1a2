"""Latency profiler for ``.tflite`` / ``.onnx`` files: this host, or Android phones through adb.

Independent of the Keras model code: it reads and runs model files through the artifacts floor
(:mod:`mobilebert_kit.artifacts`) and never imports TensorFlow (``tests/test_artifact_floor.py`` checks). Heavy
runtimes load lazily (``_LAZY``) so ``import mobilebert_kit.profiler`` stays fast. docs/architecture.md maps its
modules.
"""

import importlib

from mobilebert_kit.profiler.errors import BenchmarkParseError, DeviceDisconnectedError, DeviceError, ProfilerError

_LAZY = {
    "AdbClient": "mobilebert_kit.profiler.adb",
    "BenchmarkLog": "mobilebert_kit.profiler.bench_parser",
    "CpuTopology": "mobilebert_kit.profiler.topology",
    "DeviceProfiler": "mobilebert_kit.profiler.device",
    "HostProfiler": "mobilebert_kit.profiler.host",
    "ModelInfo": "mobilebert_kit.profiler.model_info",
    "parse_benchmark_output": "mobilebert_kit.profiler.bench_parser",
}
__all__ = sorted([*_LAZY, "BenchmarkParseError", "DeviceDisconnectedError", "DeviceError", "ProfilerError"])


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mobilebert_kit.profiler' has no attribute {name!r}")
