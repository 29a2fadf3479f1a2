"""EmulatedRunner: runs a ``.tflite`` / ``.onnx`` file on the runtime's aarch64 build under QEMU user-mode emulation.

The same file and inputs (``ArtifactRunner.batches``), run by the runtime's foreign-architecture wheel of the
host's version inside an emulated Python (``artifacts/sysroot.py``): the outputs are what a phone's CPU kernels
compute, up to QEMU's fidelity. Arrays cross the process boundary as ``.npz`` files (``emulated_child.py``).

Example:
    >>> host = ArtifactRunner("model.tflite")  # doctest: +SKIP
    >>> EmulatedRunner(host, "arm64", "cortex-a76").run(inputs)["sentence_embedding"].shape  # doctest: +SKIP
    (16, 384)
"""

import os
import signal
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

import numpy as np

from mobilebert_kit.artifacts.arches import arch as arch_record
from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.errors import EmulationError
from mobilebert_kit.artifacts.sysroot import SysrootSpec, ensure_sysroot, sysroot_built

CHILD = Path(__file__).with_name("emulated_child.py")
# The host's runtime packages: the emulated root gets the same versions, so a difference is the architecture's.
RUNTIME_PACKAGES = ("numpy", "ai-edge-litert", "onnxruntime")
# An emulated MiniLM run takes ~1-10 s a row; a stuck emulator must not hang validation for ever.
TIMEOUT_S = 3600


def sysroot_spec(arch):
    """The :class:`~mobilebert_kit.artifacts.sysroot.SysrootSpec` of ``arch`` (an Arch record) with the host's
    versions."""
    return SysrootSpec(
        debian_arch=arch.debian_arch, python=arch.python,
        wheels=tuple(f"{name}=={metadata.version(name)}" for name in RUNTIME_PACKAGES),
        wheel_platforms=arch.wheel_platforms, qemu_package=arch.qemu_package, qemu_binary=arch.qemu_binary,
        cpuinfo={name: cpu.cpuinfo() for name, cpu in arch.cpus.items()},
    )


def emulation_ready(arch):
    """Whether ``arch``'s emulated runtimes are in the cache already (``mbk validate --arch`` builds them once)."""
    return sysroot_built(sysroot_spec(arch_record(arch)))


class EmulatedRunner:
    """Runs a host runner's file on a foreign architecture's runtime, emulated.

    Args:
        host (ArtifactRunner): the file loaded on this machine (its inputs, batch and outputs decide the runs).
        arch (str): a key of :data:`~mobilebert_kit.artifacts.arches.ARCHES`.
        cpu (str | None): a CPU of that arch (None: its default).
        say (callable | None): the cache build's progress lines (default: stderr).

    Attributes:
        arch (Arch), cpu (EmulatedCpu): the records.
        runtime (str): what ran, for reports (``ai-edge-litert 2.3.0 (aarch64, XNNPACK) under qemu-aarch64``).

    Raises:
        ConfigError: an unknown arch or cpu.
        EmulationError: the emulated root cannot be built (at construction), or a run fails (in :meth:`run`).
    """

    def __init__(self, host, arch, cpu=None, say=None):
        self.host = host
        self.arch = arch_record(arch)
        self.cpu = self.arch.cpu(cpu)
        self.format = host.format
        spec = sysroot_spec(self.arch)
        self.sysroot = ensure_sysroot(spec, say)
        package, kernels = FORMATS[self.format].runtime_package, FORMATS[self.format].emulated_kernels
        self.runtime = (f"{package} {metadata.version(package)} ({self.arch.machine}, {kernels}) under "
                        f"{spec.qemu_binary} -cpu {self.cpu.qemu_cpu}")

    def run(self, inputs):
        """Runs every row of ``inputs`` as the host runner's :meth:`run` would; returns ``{output: [n, ...]}``."""
        batches = self.host.batches(inputs)
        with tempfile.TemporaryDirectory(prefix="mbk-emulated-") as tmp:
            feeds = Path(tmp) / "inputs.npz"
            outputs = Path(tmp) / "outputs.npz"
            np.savez(feeds, **{f"{run}/{name}": value for run, (arrays, _) in enumerate(batches)
                               for name, value in arrays.items()})
            command = self.sysroot.command(self.cpu.name, self.cpu.qemu_cpu,
                                           [CHILD, self.host.path, self.format, 1, feeds, outputs])
            self._call(command)
            with np.load(outputs, allow_pickle=False) as arrays:
                values = {key: arrays[key] for key in arrays.files}
        return {name: np.concatenate([values[f"{run}/{name}"][:keep] for run, (_, keep) in enumerate(batches)])
                for name in self.host.output_names}

    def _call(self, command):
        # A clean environment: the host's PYTHONPATH or LD_LIBRARY_PATH must not reach the foreign Python.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/"),
               "LANG": "C.UTF-8", "TF_CPP_MIN_LOG_LEVEL": "3"}
        where = f"{self.host.path.name} on {self.arch.name} ({self.cpu.name}, emulated)"
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired as err:
            raise EmulationError(f"running {where} took over {TIMEOUT_S} s; pass fewer rows (--count)") from err
        except OSError as err:
            raise EmulationError(f"cannot start the emulator for {where}: {err}; delete "
                                 f"{self.sysroot.directory} so it is built again") from err
        if done.returncode != 0:
            if done.returncode < 0 or done.returncode >= 128:
                number = -done.returncode if done.returncode < 0 else done.returncode - 128
                why = f"it died of {signal.Signals(number).name}" if number in signal.valid_signals() else \
                    f"exit {done.returncode}"
            else:
                lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
                why = lines[-1].strip() if lines else f"exit {done.returncode}"
            raise EmulationError(f"the {self.arch.machine} runtime could not run {where}: {why}; report it with "
                                 "the file (a crash here is the aarch64 runtime's, not this machine's)")
