"""DEVICE SIMULATOR: a fake big.LITTLE Android phone for testing ``mbk profile --target adb``.

Nothing here touches a real phone. A simulated phone is a directory tree:

    <root>/registry.json              serial -> state, props, fault injection
    <root>/adb_calls.jsonl            every adb stand-in invocation (argv)
    <root>/<serial>/fs/sys/...        sysfs: cpuN/cpufreq/{cpuinfo_max_freq,scaling_max_freq,
                                      scaling_cur_freq}, cpuN/cpu_capacity, class/thermal/thermal_zoneN/{type,temp}
    <root>/<serial>/fs/data/local/tmp where pushed files land
    <root>/<serial>/fs/system/bin     device-side stand-ins: taskset, getprop, sleep, python3
    <root>/<serial>/thermal.json      the thermal model's state
    <root>/<serial>/taskset.log       every mask the taskset stand-in was asked for

The ``adb`` stand-in (``fake_adb.py``) runs ``adb shell`` commands with the
host's POSIX ``/bin/sh`` inside that tree (``$MBK_SYSROOT`` points the device
script at the fake sysfs; ``/data/local/tmp`` is mapped into the tree). The
``benchmark_model`` stand-in (``fake_benchmark_model.py``) really runs the
model with ai-edge-litert on the host and prints the tool's output format.

Thermal model: every simulated inference adds ``heat_per_run_mc`` to the SoC
temperature; time passing (the device's ``sleep``) cools it exponentially
towards ambient with time constant ``tau_s``. Above ``throttle_at_mc`` the big
cluster's ``scaling_max_freq`` is capped (as a thermal governor does) until
the temperature falls below ``release_at_mc``. The stand-in ``sleep`` advances
simulated time by its argument but sleeps only ``time_scale`` of it for real.

Example:
    >>> phone = SimulatedPhone(tmp_path / "sim", "SIM3A")  # doctest: +SKIP
    >>> phone.install()  # doctest: +SKIP
"""

import json
import math
import os
import shlex
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

DEFAULT_THERMAL = {
    "ambient_mc": 35000,
    "temp_mc": 35000.0,
    "tau_s": 20.0,
    "heat_per_run_mc": 150.0,
    "throttle_at_mc": 60000,
    "release_at_mc": 50000,
    "throttled_fraction": 0.6,
    "time_scale": 0.005,
}


def load_profile(name="pixel3"):
    with open(os.path.join(REPO, "android_bench", "devices", f"{name}.json")) as f:
        return json.load(f)


class SimulatedPhone:
    """One SIMULATED phone in a simulator root directory.

    Args:
        root: the simulator root (shared by all simulated phones of a test).
        serial: the adb serial.
        profile: device profile name in ``android_bench/devices`` (core layout).
        state: adb state: ``device``, ``unauthorized`` or ``offline``.
        thermal: overrides of :data:`DEFAULT_THERMAL`.
        disconnect_after_trials: vanish from adb after this many finished
            trials (``@@MBK_JSON`` lines) of a ``bench_loop.sh run``.
        abilist: the phone's ABIs.
        rooted: the device shell runs as root (uid 0) instead of "shell" (2000).
        trial_json: replaces the payload of every ``@@MBK_JSON`` line (a phone whose script prints other data).
    """

    def __init__(self, root, serial, *, profile="pixel3", state="device", thermal=None, disconnect_after_trials=None, abilist=("arm64-v8a", "armeabi-v7a", "armeabi"), rooted=False, trial_json=None):
        self.root = str(root)
        self.serial = serial
        self.profile = load_profile(profile)
        self.state = state
        self.thermal = dict(DEFAULT_THERMAL, **(thermal or {}))
        self.disconnect_after_trials = disconnect_after_trials
        self.trial_json = trial_json
        self.abilist = list(abilist)
        self.rooted = rooted
        self.dir = os.path.join(self.root, serial)
        self.fs = os.path.join(self.dir, "fs")

    # --- set-up -------------------------------------------------------------------------

    def install(self):
        """Creates the phone's tree and registers it; returns self."""
        for ch in self.fs:
            if ch in " '\"$`\\;&|<>()*?[]!#~":
                raise ValueError(f"simulator root {self.fs!r} must not contain shell metacharacters")
        os.makedirs(os.path.join(self.fs, "data", "local", "tmp"), exist_ok=True)
        bin_dir = os.path.join(self.fs, "system", "bin")
        os.makedirs(bin_dir, exist_ok=True)
        _write(os.path.join(self.dir, "uid"), 0 if self.rooted else 2000)
        self._install_cpus()
        self._install_thermal()
        self._install_tools(bin_dir)
        props = {
            "ro.product.manufacturer": "Google",
            "ro.product.model": self.profile["model_names"][0],
            "ro.product.device": self.profile["codenames"][0],
            "ro.soc.manufacturer": "SIMULATED",
            "ro.soc.model": self.profile["soc"] + " (simulated)",
            "ro.board.platform": "simulated",
            "ro.hardware": "simulated",
            "ro.build.version.release": "14",
            "ro.build.version.sdk": "34",
            "ro.build.fingerprint": "mobilebert-kit/simulator",
            "ro.product.cpu.abi": self.abilist[0],
            "ro.product.cpu.abilist": ",".join(self.abilist),
            "ro.mbk.simulator": "1",
        }
        with open(os.path.join(self.fs, "props.txt"), "w") as f:
            for key, value in props.items():
                f.write(f"{key}={value}\n")
        registry_path = os.path.join(self.root, "registry.json")
        registry = {"devices": {}}
        if os.path.exists(registry_path):
            with open(registry_path) as f:
                registry = json.load(f)
        registry["devices"][self.serial] = {
            "state": self.state,
            "fs": self.fs,
            "dir": self.dir,
            "model": props["ro.product.model"].replace(" ", "_"),
            "product": props["ro.product.device"],
            "disconnect_after_trials": self.disconnect_after_trials,
            "trial_json": self.trial_json,
        }
        with open(registry_path, "w") as f:
            json.dump(registry, f, indent=1)
        return self

    def _install_cpus(self):
        cpu_root = os.path.join(self.fs, "sys", "devices", "system", "cpu")
        big_capacity = 1024
        clusters = self.profile["clusters"]
        top = max(c["max_freq_khz"] for c in clusters)
        for cluster in clusters:
            # Simulated capacities: proportional to the clock (real kernels also weigh the core type).
            capacity = int(round(big_capacity * cluster["max_freq_khz"] / top))
            for cpu in cluster["cpus"]:
                base = os.path.join(cpu_root, f"cpu{cpu}")
                os.makedirs(os.path.join(base, "cpufreq"), exist_ok=True)
                _write(os.path.join(base, "cpu_capacity"), capacity)
                _write(os.path.join(base, "online"), 1)
                for name in ("cpuinfo_max_freq", "scaling_max_freq", "scaling_cur_freq"):
                    _write(os.path.join(base, "cpufreq", name), cluster["max_freq_khz"])
                _write(os.path.join(base, "cpufreq", "scaling_min_freq"), 300000)
        # Noise a real sysfs has next to the cores.
        os.makedirs(os.path.join(cpu_root, "cpufreq"), exist_ok=True)
        os.makedirs(os.path.join(cpu_root, "cpuidle"), exist_ok=True)

    def _install_thermal(self):
        zones = [("cpu0-silver-usr", "soc"), ("cpu4-gold-usr", "soc"), ("skin-therm", "skin"), ("battery", "battery"), ("pm8998_tz", "broken")]
        root = os.path.join(self.fs, "sys", "class", "thermal")
        for index, (name, kind) in enumerate(zones):
            zone = os.path.join(root, f"thermal_zone{index}")
            os.makedirs(zone, exist_ok=True)
            _write(os.path.join(zone, "type"), name)
        state = dict(self.thermal)
        state["zones"] = [kind for _, kind in zones]
        state["big_cpus"] = [c for cluster in self.profile["clusters"][1:] for c in cluster["cpus"]]
        state["max_khz"] = {str(c): cl["max_freq_khz"] for cl in self.profile["clusters"] for c in cl["cpus"]}
        state["throttled"] = False
        with open(os.path.join(self.dir, "thermal.json"), "w") as f:
            json.dump(state, f)
        apply_thermal(self.fs, self.dir, state)

    def _install_tools(self, bin_dir):
        # A wrapper, not a symlink: a venv's python finds its venv through the path it was started by
        # (pyvenv.cfg next to it), so a symlink elsewhere runs the bare base interpreter without the
        # venv's packages (ai_edge_litert missing: every simulator test failed in a venv, issue 12).
        _write_exec_wrapper(os.path.join(bin_dir, "python3"), [sys.executable], "the test's interpreter, venv kept")
        for name in ("taskset", "getprop", "id"):
            shutil.copy(os.path.join(HERE, "device_tools", name), os.path.join(bin_dir, name))
            os.chmod(os.path.join(bin_dir, name), 0o755)
        _write_exec_wrapper(os.path.join(bin_dir, "sleep"), [sys.executable, os.path.join(HERE, "device_tools", "sim_sleep.py")],
                            "advances the simulated clock, sleeps a fraction of it")

    # --- inspection -----------------------------------------------------------------

    def taskset_log(self):
        """``[(mask, scaling_min_freq of its first core)]`` for every taskset call."""
        path = os.path.join(self.dir, "taskset.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [(line.split()[0], int(line.split()[1])) for line in f if line.strip()]

    def taskset_masks(self):
        return [mask for mask, _ in self.taskset_log()]

    def read_sys(self, relative):
        with open(os.path.join(self.fs, "sys", relative)) as f:
            return f.read().strip()

    def thermal_state(self):
        with open(os.path.join(self.dir, "thermal.json")) as f:
            return json.load(f)

    def leftover_files(self):
        tmp = os.path.join(self.fs, "data", "local", "tmp")
        return sorted(os.listdir(tmp))


def _write(path, value):
    with open(path, "w") as f:
        f.write(f"{value}\n")


def _write_exec_wrapper(path, argv, purpose):
    """Writes an executable ``/bin/sh`` script at ``path`` that execs ``argv`` plus its own arguments.

    Args:
        path (str): where the script goes (a simulated phone's ``system/bin``).
        argv (list[str]): the command it runs, absolute paths.
        purpose (str): one line for the script's comment.

    Example:
        >>> _write_exec_wrapper("/tmp/x/python3", [sys.executable], "the test's interpreter")  # doctest: +SKIP
    """
    command = " ".join(shlex.quote(part) for part in argv)
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\n# SIMULATOR: {purpose}.\nexec {command} "$@"\n')
    os.chmod(path, 0o755)


def apply_thermal(fs, device_dir, state):
    """Writes zone temperatures and the throttling cap from the thermal state."""
    # A real phone shuts down long before its sensors leave their range.
    state["temp_mc"] = min(state["temp_mc"], 105000.0)
    t, ambient = state["temp_mc"], state["ambient_mc"]
    root = os.path.join(fs, "sys", "class", "thermal")
    for index, kind in enumerate(state["zones"]):
        value = {"soc": t, "skin": ambient + 0.5 * (t - ambient), "battery": ambient + 0.2 * (t - ambient), "broken": -40000}[kind]
        _write(os.path.join(root, f"thermal_zone{index}", "temp"), int(round(value)))
    if t >= state["throttle_at_mc"]:
        state["throttled"] = True
    elif t <= state["release_at_mc"]:
        state["throttled"] = False
    for cpu, max_khz in state["max_khz"].items():
        cap = max_khz
        if state["throttled"] and int(cpu) in state["big_cpus"]:
            cap = int(max_khz * state["throttled_fraction"])
        base = os.path.join(fs, "sys", "devices", "system", "cpu", f"cpu{cpu}", "cpufreq")
        _write(os.path.join(base, "scaling_max_freq"), cap)
        _write(os.path.join(base, "scaling_cur_freq"), cap)
    with open(os.path.join(device_dir, "thermal.json"), "w") as f:
        json.dump(state, f)


def load_state(device_dir):
    with open(os.path.join(device_dir, "thermal.json")) as f:
        return json.load(f)


def heat(fs, device_dir, runs):
    """Simulated inferences warm the SoC."""
    state = load_state(device_dir)
    state["temp_mc"] += state["heat_per_run_mc"] * runs
    apply_thermal(fs, device_dir, state)
    return state


def cool(fs, device_dir, seconds):
    """Simulated time passing cools the SoC towards ambient."""
    state = load_state(device_dir)
    ambient = state["ambient_mc"]
    state["temp_mc"] = ambient + (state["temp_mc"] - ambient) * math.exp(-float(seconds) / state["tau_s"])
    apply_thermal(fs, device_dir, state)
    return state
