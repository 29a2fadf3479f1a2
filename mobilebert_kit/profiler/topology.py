"""CPU clusters of a big.LITTLE phone (or a host) and the taskset masks that pin to them.

Cores are grouped by sysfs's ``cpu_capacity`` and ``cpufreq/cpuinfo_max_freq``, slowest cluster first; the named
core sets (``little``, ``big``, ``prime``, ``all``) and hex masks are as docs/profiler.md ("Cores") describes.

Example:
    >>> topo = CpuTopology([{"cpu": i, "max_freq_khz": 1766400 if i < 4 else 2803200} for i in range(8)])
    >>> topo.mask("big")
    ('f0', [4, 5, 6, 7])
"""

import os

from mobilebert_kit.errors import check_choice
from mobilebert_kit.profiler.errors import ProfilerError

CORE_SETS = ("big", "little", "prime", "all")

# One command for the device shell (through bench_loop.sh, which honours $MBK_SYSROOT).
SYSFS_CPU = "/sys/devices/system/cpu"


def _int_or_none(text):
    text = (text or "").strip()
    return int(text) if text.lstrip("-").isdigit() else None


class CpuTopology:
    """Cores, their clusters and the masks that select them.

    Args:
        cores: list of dicts ``{cpu, max_freq_khz, capacity, online}``; missing
            fields are None (capacity is absent on many x86 hosts and older
            kernels; frequency is absent in some VMs).

    Raises:
        ProfilerError: no online core.
    """

    def __init__(self, cores):
        self.cores = sorted(
            (
                {
                    "cpu": int(c["cpu"]),
                    "max_freq_khz": c.get("max_freq_khz"),
                    "capacity": c.get("capacity"),
                    "online": c.get("online", True) is not False,
                }
                for c in cores
            ),
            key=lambda c: c["cpu"],
        )
        online = [c for c in self.cores if c["online"]]
        if not online:
            raise ProfilerError("no online CPU core found in the topology; check that sysfs is readable")
        groups = {}
        for core in online:
            key = (core["capacity"] if core["capacity"] is not None else -1, core["max_freq_khz"] or -1)
            groups.setdefault(key, []).append(core["cpu"])
        self.clusters = [
            {"cpus": cpus, "capacity": None if key[0] < 0 else key[0], "max_freq_khz": None if key[1] < 0 else key[1]}
            for key, cpus in sorted(groups.items())
        ]
        for cluster, name in zip(self.clusters, _cluster_names(len(self.clusters))):
            cluster["name"] = name

    @classmethod
    def from_sysfs_lines(cls, text):
        """Builds the topology from ``bench_loop.sh topology`` lines: ``cpu N MAX_FREQ_KHZ CAPACITY ONLINE``, with
        ``-`` for a value sysfs does not have."""
        cores = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) != 5 or parts[0] != "cpu" or not parts[1].isdigit():
                continue
            cores.append(
                {
                    "cpu": int(parts[1]),
                    "max_freq_khz": _int_or_none(parts[2]),
                    "capacity": _int_or_none(parts[3]),
                    "online": parts[4] != "0",
                }
            )
        if not cores:
            raise ProfilerError("could not read the CPU topology from the device's sysfs; the device shell may be restricted")
        return cls(cores)

    @classmethod
    def from_host(cls, root=SYSFS_CPU):
        """Reads this machine's topology, limited to the cores this process may use."""
        # macOS has no affinity API: every core counts, and pinning is reported as unavailable.
        allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
        cores = []
        for cpu in sorted(allowed):
            base = os.path.join(root, f"cpu{cpu}")
            cores.append(
                {
                    "cpu": cpu,
                    "max_freq_khz": _int_or_none(_read(os.path.join(base, "cpufreq", "cpuinfo_max_freq"))),
                    "capacity": _int_or_none(_read(os.path.join(base, "cpu_capacity"))),
                }
            )
        return cls(cores)

    @classmethod
    def from_profile(cls, profile):
        """Builds the topology of a device profile (``android_bench/devices/*.json``)."""
        return cls([{"cpu": cpu, "max_freq_khz": cluster["max_freq_khz"], "capacity": cluster.get("capacity")}
                    for cluster in profile["clusters"] for cpu in cluster["cpus"]])

    @property
    def online_cpus(self):
        return [c["cpu"] for c in self.cores if c["online"]]

    def mask(self, selection):
        """Returns ``(hex_mask, cpus)`` for ``big|little|prime|all`` or a hex mask.

        Raises:
            ProfilerError: an unknown name, a malformed mask, or a mask naming
                cores that are offline or do not exist.
        """
        selection = str(selection).strip().lower()
        if selection in CORE_SETS:
            if selection == "all":
                cpus = self.online_cpus
            elif selection == "little":
                cpus = self.clusters[0]["cpus"]
            elif selection == "prime":
                cpus = self.clusters[-1]["cpus"]
            else:
                rest = self.clusters[1:] or self.clusters
                cpus = sorted(cpu for cluster in rest for cpu in cluster["cpus"])
            return format(sum(1 << c for c in cpus), "x"), list(cpus)
        digits = selection[2:] if selection.startswith("0x") else selection
        if not digits or any(ch not in "0123456789abcdef" for ch in digits):
            check_choice("core set", selection, CORE_SETS + ("a hex mask such as f0",))
        value = int(digits, 16)
        cpus = [bit for bit in range(value.bit_length()) if value >> bit & 1]
        unknown = sorted(set(cpus) - set(self.online_cpus))
        if not cpus:
            raise ProfilerError("core mask 0 selects no core; use big, little, prime, all or a mask such as f0")
        if unknown:
            raise ProfilerError(
                f"core mask {selection} names cores {unknown} that are offline or absent "
                f"(online: {self.online_cpus}); pick a mask within them or use big/little/prime/all"
            )
        return format(value, "x"), cpus

    def summary(self):
        return {
            "cores": [dict(c) for c in self.cores],
            "clusters": [dict(c) for c in self.clusters],
            "masks": {name: self.mask(name)[0] for name in CORE_SETS},
        }


def _cluster_names(count):
    if count == 1:
        return ["all"]
    if count == 2:
        return ["little", "big"]
    return ["little"] + [f"mid{i}" if count > 3 else "mid" for i in range(1, count - 1)] + ["prime"]


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None
