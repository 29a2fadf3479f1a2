"""Finding LiteRT's benchmark binary, knowing which of the two tools it is, and checking it fits the device.

The two tools are records in :data:`BENCHMARK_TOOLS` (docs/profiler.md compares them); :func:`tool_of` says
which one a binary is. The binary is the user's (``--benchmark-binary PATH``) or the cache's; its ABI is read
from the ELF header and checked against the device's before anything is copied. A file starting with ``#!`` is
a script (the test simulator's stand-in): it runs on any ABI and is reported as ``"script"``.

Example:
    >>> binary = BenchmarkBinary.locate("arm64-v8a", "bazel-bin/.../benchmark_model")  # doctest: +SKIP
    >>> binary.abi  # doctest: +SKIP
    'arm64-v8a'
"""

import dataclasses
import os

from mobilebert_kit.profiler.errors import DeviceError

# ELF e_machine values and the Android ABI names they build for.
_MACHINES = {183: "arm64-v8a", 40: "armeabi-v7a", 62: "x86_64", 3: "x86", 243: "riscv64"}
# Nightly builds of the tool, by ABI (LiteRT measurement guide).
NIGHTLY_URLS = {
    "arm64-v8a": "https://storage.googleapis.com/tensorflow-nightly-public/prod/tensorflow/release/lite/tools/nightly/latest/android_aarch64_benchmark_model",
    "armeabi-v7a": "https://storage.googleapis.com/tensorflow-nightly-public/prod/tensorflow/release/lite/tools/nightly/latest/android_arm_benchmark_model",
    "x86_64": "https://storage.googleapis.com/tensorflow-nightly-public/prod/tensorflow/release/lite/tools/nightly/latest/linux_x86-64_benchmark_model",
}


@dataclasses.dataclass(frozen=True)
class BenchmarkTool:
    """One benchmark binary kind: the flags it takes and how its result is read.

    Args:
        name (str): the tool's name, also its file name on the phone.
        api (str): the LiteRT API it times.
        delegate_flags (dict[str, tuple[str, ...]]): ``--delegate`` value -> the tool's flags; a value missing
            here is one the tool cannot run.
        input_flags (bool): takes ``--input_layer*`` shapes and value files (else it fills inputs itself).
        op_profile_flag (str): the flag that adds a per-op profile to its output.
        result_file_flag (str | None): the flag naming a result file it writes after the runs.
        marker (bytes): a string found in its binary (its own flag name), when the file name does not say.
        failure_hints (tuple[tuple[str, str], ...]): ``(text in its output, what it means)`` for its known failures.
    """

    name: str
    api: str
    delegate_flags: dict
    input_flags: bool
    op_profile_flag: str
    result_file_flag: str | None
    marker: bytes
    failure_hints: tuple = ()


BENCHMARK_TOOLS = {
    "benchmark_model": BenchmarkTool(
        name="benchmark_model", api="Interpreter",
        delegate_flags={"xnnpack": ("--use_xnnpack=true",), "none": ("--use_xnnpack=false",),
                        "gpu": ("--use_gpu=true",), "nnapi": ("--use_nnapi=true",)},
        input_flags=True, op_profile_flag="--enable_op_profiling=true", result_file_flag=None, marker=b"use_xnnpack",
    ),
    "benchmark_litert_model": BenchmarkTool(
        name="benchmark_litert_model", api="CompiledModel",
        # The CPU accelerator is XNNPACK with no switch to the builtin kernels; NNAPI is not among its accelerators.
        delegate_flags={"xnnpack": ("--use_cpu=true",), "gpu": ("--use_gpu=true", "--use_cpu=true")},
        input_flags=False, op_profile_flag="--use_profiler=true", result_file_flag="--result_file_path",
        marker=b"use_npu",
        failure_hints=(("gather index out of bounds",
                        "benchmark_litert_model fills int32 inputs with random values in [0, 99] and takes no input "
                        "values, so token_type_ids beyond the model's segment table fail; time this file with "
                        "benchmark_model"),),
    ),
}


def tool_of(path):
    """The :class:`BenchmarkTool` a binary (or the simulator's script) is: ``benchmark_litert_model`` when named so or
    holding its ``use_npu`` flag, else ``benchmark_model``."""
    name = os.path.basename(str(path))
    for tool in BENCHMARK_TOOLS.values():
        if tool.name in name:
            return tool
    try:
        with open(path, "rb") as f:
            content = f.read()
    except OSError:
        content = b""
    return BENCHMARK_TOOLS["benchmark_litert_model" if BENCHMARK_TOOLS["benchmark_litert_model"].marker in content
                           else "benchmark_model"]


def benchmark_args(graph, threads, runs, warmup, flags, value_files):
    """benchmark_model's command line after the binary: the run's settings, ``flags``, then the input value files
    (``{input name: path}``)."""
    args = [f"--graph={graph}", f"--num_threads={threads}", f"--num_runs={runs}", f"--warmup_runs={warmup}", *flags]
    if value_files:
        args.append("--input_layer_value_files=" + ",".join(f"{name}:{path}" for name, path in value_files.items()))
    return args


def elf_abi(path):
    """Returns the ABI a file is built for, ``"script"``, or None if it is neither ELF nor a script."""
    with open(path, "rb") as f:
        header = f.read(20)
    if header.startswith(b"#!"):
        return "script"
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return None
    little_endian = header[5] == 1
    machine = int.from_bytes(header[18:20], "little" if little_endian else "big")
    return _MACHINES.get(machine, f"elf-machine-{machine}")


class BenchmarkBinary:
    """A benchmark executable at ``path``, the ABI it was built for and which tool it is (``tool``: :func:`tool_of`);
    DeviceError when the file is missing or is not an executable (ELF or script)."""

    def __init__(self, path):
        self.path = os.path.abspath(str(path))
        if not os.path.isfile(self.path):
            raise DeviceError(f"benchmark binary {path} does not exist; check --benchmark-binary")
        self.abi = elf_abi(self.path)
        self.tool = tool_of(self.path)
        if self.abi is None:
            raise DeviceError(
                f"{path} is not an executable (no ELF header); download benchmark_model for your phone's ABI "
                f"from {NIGHTLY_URLS['arm64-v8a']} (arm64) or build it with bazel"
            )

    @classmethod
    def locate(cls, abi, explicit=None):
        """Returns the user's binary, or the cached one for ``abi``; a DeviceError naming where to put one without."""
        if explicit:
            return cls(explicit)
        cache = os.environ.get("MBK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "mobilebert_kit")
        cached = os.path.join(cache, "benchmark_model", abi, "benchmark_model")
        if os.path.isfile(cached):
            return cls(cached)
        url = NIGHTLY_URLS.get(abi, NIGHTLY_URLS["arm64-v8a"])
        raise DeviceError(
            f"no benchmark_model for {abi}: download {url} to {cached} (chmod +x) or pass --benchmark-binary PATH"
        )

    def check_abi(self, device_abis, where):
        """Raises DeviceError unless this binary runs on one of ``device_abis`` (preferred first); ``where`` names the
        target in the message (e.g. "device 8A1X0K9M3")."""
        if self.abi == "script" or self.abi in device_abis:
            return
        want = device_abis[0] if device_abis else "unknown"
        url = NIGHTLY_URLS.get(want)
        fix = f"download {url}" if url else f"build benchmark_model for {want}"
        raise DeviceError(
            f"benchmark binary {os.path.basename(self.path)} is built for {self.abi} but {where} runs {', '.join(device_abis) or 'an unknown ABI'}; "
            f"{fix} and pass it with --benchmark-binary"
        )
