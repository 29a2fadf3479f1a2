"""The foreign CPU architectures a file can be run on under user-mode emulation, as records in one table.

Each :class:`Arch` says what its emulated Python is built from; each :class:`EmulatedCpu` says which CPU QEMU
models and the ``/proc/cpuinfo`` the runtime reads for it (why, and what emulation cannot show: docs/export.md,
"ARM numerics under emulation"). The ``Features`` line is written from QEMU's models for a reader, not checked.

Example:
    >>> ARCHES["arm64"].cpu(None).name
    'cortex-a76'
    >>> ARCHES["arm64"].cpu("cortex-a53").qemu_cpu
    'cortex-a53'
"""

import dataclasses

from mobilebert_kit.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class EmulatedCpu:
    """One CPU model QEMU emulates, with what the runtime is told about it.

    Args:
        name (str): the ``--cpu`` value.
        qemu_cpu (str): QEMU's ``-cpu`` argument.
        midr (tuple[int, int, int, int]): implementer, variant, part, revision (``/proc/cpuinfo``'s
            ``CPU implementer`` / ``variant`` / ``part`` / ``revision``), as QEMU's model reports them.
        features (str): the ``Features`` line: the instruction-set extensions QEMU's model enables.
        phones (str): which phones' cores run the same kernels (what the result stands for).
    """

    name: str
    qemu_cpu: str
    midr: tuple
    features: str
    phones: str

    def cpuinfo(self, cores=1):
        """The arm64 ``/proc/cpuinfo`` text of ``cores`` cores of this CPU."""
        implementer, variant, part, revision = self.midr
        core = (f"BogoMIPS\t: 50.00\nFeatures\t: {self.features}\nCPU implementer\t: {implementer:#04x}\n"
                f"CPU architecture: 8\nCPU variant\t: {variant:#x}\nCPU part\t: {part:#05x}\n"
                f"CPU revision\t: {revision}\n\n")
        return "".join(f"processor\t: {i}\n{core}" for i in range(cores))


@dataclasses.dataclass(frozen=True)
class Arch:
    """A foreign architecture: how its emulated Python is built and which CPUs it can model.

    Args:
        name (str): the ``--arch`` value.
        machine (str): ``platform.machine()`` inside the emulator (what reports call it).
        debian_arch (str): Debian's name of the architecture (its packages make the Python).
        python (str): the Debian package of the interpreter, whose dependencies make the root.
        wheel_platforms (tuple[str, ...]): the ``pip download --platform`` tags tried, newest glibc
            last; Debian 12's glibc is 2.36, so any tag up to it runs.
        qemu_package (str): the Debian package (of the host's architecture) holding the static emulator.
        qemu_binary (str): the emulator inside it.
        cpus (dict[str, EmulatedCpu]): the CPUs by ``--cpu`` name.
        default_cpu (str): the CPU used when ``--cpu`` is not given.
    """

    name: str
    machine: str
    debian_arch: str
    python: str
    wheel_platforms: tuple
    qemu_package: str
    qemu_binary: str
    cpus: dict
    default_cpu: str

    def cpu(self, name):
        """The :class:`EmulatedCpu` called ``name`` (None: the default), or ConfigError listing the valid ones."""
        name = name or self.default_cpu
        if name not in self.cpus:
            raise ConfigError(f"unknown --cpu {name!r} for --arch {self.name}; valid: {', '.join(self.cpus)}")
        return self.cpus[name]


# The Features lines follow QEMU 7.2's models (target/arm/cpu64.c) as Linux would print them (not checked). Why
# each CPU, and why max-sme-off has SME off and a Neoverse N2 MIDR: docs/export.md ("Emulated CPUs").
_A76 = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs"
ARM64_CPUS = {
    "cortex-a76": EmulatedCpu("cortex-a76", "cortex-a76", (0x41, 0x4, 0xD0B, 1), _A76,
                              "big cores of 2019-2022 phones (A76, A77, A78, X1)"),
    "cortex-a53": EmulatedCpu("cortex-a53", "cortex-a53", (0x41, 0x0, 0xD03, 4),
                              "fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid",
                              "little cores and budget phones (A53, A55 without dotprod kernels)"),
    # Measured: QEMU's own `max` MIDR and a Cortex-A710 one (0xd47) killed full-int8 runs with SIGSEGV; N2 runs.
    "max-sme-off": EmulatedCpu("max-sme-off", "max,sme=off", (0x41, 0x0, 0xD49, 0),
                               _A76 + " dit uscat ilrcpc flagm sb paca pacg dcpodp sve2 sveaes svepmull svebitperm "
                               "svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 dgh rng bti",
                               "Armv9 big cores of 2022+ phones (A710, A715, X2, X3: i8mm kernels)"),
}

ARCHES = {
    "arm64": Arch(
        name="arm64", machine="aarch64", debian_arch="arm64", python="python3.11",
        wheel_platforms=tuple(f"manylinux_2_{v}_aarch64" for v in (17, 24, 26, 27, 28, 31, 34, 35, 36))
        + ("manylinux2014_aarch64",),
        qemu_package="qemu-user-static", qemu_binary="qemu-aarch64-static",
        cpus=ARM64_CPUS, default_cpu="cortex-a76",
    ),
}


def arch(name):
    """The :class:`Arch` called ``name``, or ConfigError listing the valid ones."""
    if name not in ARCHES:
        raise ConfigError(f"unknown --arch {name!r}; valid: {', '.join(ARCHES)}")
    return ARCHES[name]
