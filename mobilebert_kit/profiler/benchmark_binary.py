"""Finding LiteRT's ``benchmark_model`` binary and checking it fits the device.

The binary is the user's (``--benchmark-binary PATH``) or comes from a local
cache, ``$MBK_CACHE_DIR/benchmark_model/<abi>/benchmark_model`` (default
``~/.cache/mobilebert_kit``). Its ABI is read from the ELF header and must be
one of the device's ``ro.product.cpu.abilist``: an x86_64 build pushed to an
arm64 phone fails with "not executable: 64-bit ELF file" long after the push,
so the check happens before anything is copied.

A file starting with ``#!`` is a script (the test simulator's stand-in is
one); it runs on any ABI and is reported as ``"script"``.

Example:
    >>> binary = BenchmarkBinary.locate("arm64-v8a", "bazel-bin/.../benchmark_model")  # doctest: +SKIP
    >>> binary.abi  # doctest: +SKIP
    'arm64-v8a'
"""

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


def cache_dir():
    """Returns the cache root (``$MBK_CACHE_DIR`` or ``~/.cache/mobilebert_kit``)."""
    return os.environ.get("MBK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "mobilebert_kit")


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
    """A benchmark_model executable and the ABI it was built for.

    Args:
        path: the file.

    Raises:
        DeviceError: the file is missing or is not an executable (ELF or script).
    """

    def __init__(self, path):
        self.path = os.path.abspath(str(path))
        if not os.path.isfile(self.path):
            raise DeviceError(f"benchmark binary {path} does not exist; check --benchmark-binary")
        self.abi = elf_abi(self.path)
        if self.abi is None:
            raise DeviceError(
                f"{path} is not an executable (no ELF header); download benchmark_model for your phone's ABI "
                f"from {NIGHTLY_URLS['arm64-v8a']} (arm64) or build it with bazel"
            )

    @classmethod
    def locate(cls, abi, explicit=None):
        """Returns the user's binary, or the cached one for ``abi``.

        Raises:
            DeviceError: no binary given and none cached, naming where to put one.
        """
        if explicit:
            return cls(explicit)
        cached = os.path.join(cache_dir(), "benchmark_model", abi, "benchmark_model")
        if os.path.isfile(cached):
            return cls(cached)
        url = NIGHTLY_URLS.get(abi, NIGHTLY_URLS["arm64-v8a"])
        raise DeviceError(
            f"no benchmark_model for {abi}: download {url} to {cached} (chmod +x) or pass --benchmark-binary PATH"
        )

    def check_abi(self, device_abis, where):
        """Raises DeviceError unless this binary runs on one of ``device_abis``.

        Args:
            device_abis: the device's ABI list, preferred first.
            where: how to name the target in the message (e.g. "device 8A1X0K9M3").
        """
        if self.abi == "script" or self.abi in device_abis:
            return
        want = device_abis[0] if device_abis else "unknown"
        url = NIGHTLY_URLS.get(want)
        fix = f"download {url}" if url else f"build benchmark_model for {want}"
        raise DeviceError(
            f"benchmark binary {os.path.basename(self.path)} is built for {self.abi} but {where} runs {', '.join(device_abis) or 'an unknown ABI'}; "
            f"{fix} and pass it with --benchmark-binary"
        )
