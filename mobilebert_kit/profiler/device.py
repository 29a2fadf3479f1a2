"""Latency on an Android phone through adb and LiteRT's benchmark_model.

:class:`DeviceProfiler` does, for one device, the steps docs/profiler.md ("What mbk does on the phone") lists,
quoting every path that reaches the device shell; a device that vanishes mid-run raises
:class:`DeviceDisconnectedError` carrying the trials already finished. :func:`profile_devices` runs several
serials in parallel, one thread each.

Example:
    >>> adb = AdbClient()  # doctest: +SKIP
    >>> results = DeviceProfiler(adb, "8A1X0K9M3", cores="big", threads=1).profile_all(["m.tflite"])  # doctest: +SKIP
"""

import concurrent.futures
import contextlib
import glob
import json
import os
import shlex
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import numpy as np

from mobilebert_kit.artifacts.metadata import planned_length
from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.errors import MbkError, check_choice, first_line
from mobilebert_kit.profiler.bench_parser import (
    empty_op_profile, merge_benchmark_result, parse_benchmark_output, parse_benchmark_result,
)
from mobilebert_kit.profiler.benchmark_binary import BENCHMARK_TOOLS, BenchmarkBinary, benchmark_args
from mobilebert_kit.profiler.errors import BenchmarkParseError, DeviceDisconnectedError, DeviceError, ProfilerError
from mobilebert_kit.profiler.inputs import benchmark_input_flags
from mobilebert_kit.profiler.model_info import ModelInfo, fixed_length_error
from mobilebert_kit.profiler.result import (check_time_limits, counts, finish_result, new_result, run_config,
                                            runs_warning)
from mobilebert_kit.profiler.stats import combine_trials, too_few_runs
from mobilebert_kit.profiler.thermal import checked_record, checked_snapshot, trial_thermal
from mobilebert_kit.profiler.topology import CpuTopology
from mobilebert_kit.utils.limits import Limit, within
from mobilebert_kit.utils.structured import load_json
from mobilebert_kit.utils.terminal import escape

# A device profile's numbers (android_bench/devices/*.json, which a user may add to with MBK_ANDROID_BENCH_DIR).
_CPU = Limit(int, 0, 1023)
_KHZ = Limit(int, 1, 100_000_000)  # 100 GHz
_CAPACITY = Limit(int, 0, 1_000_000)

# Every --delegate value some benchmark tool runs; which tool takes which, and with what flags, is its record's.
DELEGATES = ("xnnpack", "none", "gpu", "nnapi")


def android_bench_dir():
    """Returns the ``android_bench/`` directory (``$MBK_ANDROID_BENCH_DIR`` or the source checkout's)."""
    if override := os.environ.get("MBK_ANDROID_BENCH_DIR"):
        return override
    checkout = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "android_bench")
    if os.path.isdir(checkout):
        return checkout
    # A wheel install puts the scripts under <prefix>/share (pyproject's data-files).
    return os.path.join(sys.prefix, "share", "mobilebert-kit", "android_bench")


def device_profiles():
    """Returns the device profiles of ``android_bench/devices/*.json`` (name -> dict); a one-line ProfilerError naming
    the file and the field for a profile that is not JSON or whose fields the profiler reads are wrong."""
    profiles = {}
    for path in sorted(glob.glob(os.path.join(android_bench_dir(), "devices", "*.json"))):
        profile = load_json(Path(path), "device profile", expect=dict, error=ProfilerError,
                            fix="fix or remove the file")
        profiles[_checked_profile(profile, path)["name"]] = profile
    return profiles


def _checked_profile(profile, path):
    """``profile`` if every field the profiler reads has its type and range, else a one-line ProfilerError."""

    def refuse(field, want):
        raise ProfilerError(f"device profile {escape(path)}: {field} must be {want}; fix or remove the file")

    name = profile.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        refuse("name", "a non-empty string of at most 200 characters")
    for key in ("model_names", "codenames"):
        names = profile.get(key, [])
        if not isinstance(names, list) or len(names) > 1000 or not all(isinstance(n, str) for n in names):
            refuse(key, "a list of strings")
    clusters = profile.get("clusters")
    if not isinstance(clusters, list) or not 1 <= len(clusters) <= 64 or not all(isinstance(c, dict) for c in clusters):
        refuse("clusters", "a list of 1 to 64 objects")
    for i, cluster in enumerate(clusters):
        cpus = cluster.get("cpus")
        if not isinstance(cpus, list) or not 1 <= len(cpus) <= 1024 or not all(within(_CPU, c) for c in cpus):
            refuse(f"clusters[{i}].cpus", "a list of 1 to 1024 CPU numbers from 0 to 1023")
        if not within(_KHZ, cluster.get("max_freq_khz")):
            refuse(f"clusters[{i}].max_freq_khz", f"an integer from {_KHZ.lo:,.0f} to {_KHZ.hi:,.0f}")
        if cluster.get("capacity") is not None and not within(_CAPACITY, cluster["capacity"]):
            refuse(f"clusters[{i}].capacity", f"an integer from 0 to {_CAPACITY.hi:,.0f}, or absent")
    return profile


def match_profile(props):
    """Returns the device profile matching the phone's codename or model, or None."""
    device = (props.get("ro.product.device") or "").lower()
    model = (props.get("ro.product.model") or "").lower()
    return next((profile for profile in device_profiles().values()
                 if device and device in [c.lower() for c in profile.get("codenames", [])]
                 or model and model in [m.lower() for m in profile.get("model_names", [])]), None)


def list_devices(adb):
    """Returns one row per attached device: serial, state, model, SoC, Android version, ABI."""
    rows = []
    for device in adb.devices():
        row = {"serial": device["serial"], "state": device["state"], "model": device["attributes"].get("model", "").replace("_", " ")}
        if device["state"] == "device":
            row.update(_describe(adb.props(device["serial"])))
        rows.append(row)
    return rows


def _describe(props):
    abilist = [a for a in (props.get("ro.product.cpu.abilist") or props.get("ro.product.cpu.abi") or "").split(",") if a]
    return {
        "manufacturer": props.get("ro.product.manufacturer", ""),
        "model": props.get("ro.product.model", ""),
        "codename": props.get("ro.product.device", ""),
        "soc": props.get("ro.soc.model") or props.get("ro.board.platform") or props.get("ro.hardware", ""),
        "soc_manufacturer": props.get("ro.soc.manufacturer", ""),
        "android": props.get("ro.build.version.release", ""),
        "sdk": props.get("ro.build.version.sdk", ""),
        "abi": abilist[0] if abilist else props.get("ro.product.cpu.abi", ""),
        "abilist": abilist,
        "simulated": props.get("ro.mbk.simulator") == "1",
    }


class DeviceProfiler:
    """Runs benchmark trials on one phone, with benchmark_model or benchmark_litert_model (``BENCHMARK_TOOLS``).

    Args:
        adb: an :class:`~mobilebert_kit.profiler.adb.AdbClient`.
        serial: the device.
        cores: ``big``, ``little``, ``prime``, ``all`` or a hex mask.
        threads: ``--num_threads``.
        delegate: ``xnnpack``, ``none`` (builtin kernels), ``gpu`` or ``nnapi``.
        runs, warmup, min_time_s, max_time_s: ``--num_runs``, ``--warmup_runs``,
            ``--min_secs``, ``--max_secs``.
        trials: benchmark_model invocations per model, each after a cooldown.
        seq_len: sequence length; None uses the length fixed in the file, else 128.
        vocab_size: token ids stay below this; None reads it from the model.
        op_profile: one extra invocation with ``--enable_op_profiling=true``.
        peak_memory: add ``--report_peak_memory_footprint=true`` (a monitor
            thread; it can slow the runs slightly).
        cooldown_timeout_s, cooldown_tolerance_c, poll_s: wait before each
            trial until the hottest CPU zone is within the tolerance of the
            session's baseline, polling every ``poll_s`` seconds, at most
            ``cooldown_timeout_s``.
        lock_freq: None, ``"max"`` or a frequency in kHz (root only).
        benchmark_binary: path of benchmark_model or benchmark_litert_model (which one: ``tool_of``); None uses
            the cached benchmark_model.
        bench_script: path of ``bench_loop.sh``; None uses ``android_bench/``.
        workdir: device directory under which the run directory is made.
        flops: FLOPs per inference overriding the count from the file.
    """

    def __init__(
        self,
        adb,
        serial,
        *,
        cores="big",
        threads=1,
        delegate="xnnpack",
        runs=50,
        warmup=5,
        min_time_s=None,
        max_time_s=150.0,
        trials=3,
        seq_len=None,
        vocab_size=None,
        op_profile=False,
        peak_memory=False,
        cooldown_timeout_s=120,
        cooldown_tolerance_c=2.0,
        poll_s=2,
        lock_freq=None,
        benchmark_binary=None,
        bench_script=None,
        workdir="/data/local/tmp",
        flops=None,
    ):
        self.adb = adb
        self.serial = serial
        self.cores = cores
        self.delegate = check_choice("delegate", delegate, DELEGATES)
        self.threads, self.runs, self.trials = counts(("threads", threads), ("runs", runs), ("trials", trials))
        self.warmup = max(int(warmup), 0)
        self.min_time_s, self.max_time_s = check_time_limits(min_time_s, max_time_s)
        self.seq_len = seq_len
        self.vocab_size = vocab_size
        self.op_profile = bool(op_profile)
        self.peak_memory = bool(peak_memory)
        self.cooldown_timeout_s = int(cooldown_timeout_s)
        self.tolerance_mc = int(round(float(cooldown_tolerance_c) * 1000))
        self.poll_s = max(int(poll_s), 1)
        if lock_freq is not None and str(lock_freq) != "max" and not str(lock_freq).isdigit():
            raise ProfilerError(f"--lock-freq takes 'max' or a frequency in kHz, got {lock_freq!r}")
        self.lock_freq = None if lock_freq is None else str(lock_freq)
        self.benchmark_binary = benchmark_binary
        self.bench_script = bench_script or os.path.join(android_bench_dir(), "bench_loop.sh")
        if not os.path.isfile(self.bench_script):
            raise ProfilerError(
                f"device script {self.bench_script} not found; the adb target needs android_bench/bench_loop.sh from "
                "a source checkout of mobilebert-kit (or set MBK_ANDROID_BENCH_DIR)"
            )
        self.workdir = workdir
        self.flops = flops
        self.remote_dir = None
        self.info = None
        self.topology = None
        self.mask = None
        self.baseline_mc = None  # the idle temperature before the first trial (_setup), when it could be read
        self.cpus = None

    def device_info(self, extra_command=None):
        """Returns the device description (properties, ABI, matching profile); ``extra_command`` is a shell
        command run in the same adb call (it saves a round trip)."""
        if self.info is None:
            props = self.adb.props(self.serial, extra_command=extra_command)
            self._profile = match_profile(props)
            self.info = {"kind": "android", "serial": self.serial, **_describe(props),
                         "profile": self._profile["name"] if self._profile else None}
        return self.info

    def _q(self, *parts):
        return " ".join(shlex.quote(str(p)) for p in parts)

    def _shell(self, command, timeout_s=120):
        return self.adb.shell(self.serial, command, timeout_s=timeout_s)

    def _prepare(self):
        # Four adb round trips: properties (+ mkdir), two pushes, topology (+ chmod + thermal baseline).
        self.remote_dir = f"{self.workdir.rstrip('/')}/mbk-{uuid.uuid4().hex[:12]}"
        info = self.device_info(extra_command=f"mkdir -p {self._q(self.remote_dir)}")
        binary = BenchmarkBinary.locate(info["abi"] or "arm64-v8a", self.benchmark_binary)
        binary.check_abi(info["abilist"] or [info["abi"]], f"device {self.serial}")
        self.binary = binary
        self.adb.push(self.serial, self.bench_script, f"{self.remote_dir}/bench_loop.sh")
        self.tool = binary.tool
        if self.delegate not in self.tool.delegate_flags:
            other = next(t.name for t in BENCHMARK_TOOLS.values() if self.delegate in t.delegate_flags)
            raise ProfilerError(f"{self.tool.name} cannot run --delegate {self.delegate} (it takes "
                                f"{', '.join(self.tool.delegate_flags)}); pass a {other} binary with --benchmark-binary")
        self.adb.push(self.serial, binary.path, f"{self.remote_dir}/{self.tool.name}")
        out = self._shell(
            f"cd {self._q(self.remote_dir)} && chmod 755 ./{self.tool.name} && sh ./bench_loop.sh topology && "
            "echo @@MBK_SNAPSHOT && sh ./bench_loop.sh snapshot"
        )
        topo_text, _, snapshot = out.partition("@@MBK_SNAPSHOT")
        try:
            self.topology = CpuTopology.from_sysfs_lines(topo_text)
            info["topology_source"] = "sysfs"
        except ProfilerError:
            if not self._profile:
                raise
            self.topology = CpuTopology.from_profile(self._profile)
            info["topology_source"] = f"device profile {self._profile['name']} (sysfs unreadable)"
        info["topology"] = self.topology.summary()
        self.mask, self.cpus = self.topology.mask(self.cores)
        try:
            baseline = json.loads(snapshot.strip().splitlines()[-1])
        except (ValueError, IndexError, RecursionError):
            baseline = {}
        self.baseline_mc = checked_snapshot(baseline)["max_mc"]  # what the phone printed is data
        info["baseline_c"] = None if self.baseline_mc is None else self.baseline_mc / 1000.0

    def _cleanup(self):
        if not self.remote_dir:
            return
        with contextlib.suppress(MbkError):  # the device is gone; nothing left to clean from here
            self._shell(f"rm -rf {self._q(self.remote_dir)}", timeout_s=60)
        self.remote_dir = None

    def profile_all(self, paths, seq_lens=(None,)):
        """Profiles every model at every sequence length; returns result records. On any MbkError,
        ``err.partial_results`` holds the records finished before it (a disconnect keeps the finished trials of the
        model that was running, marked ``incomplete``)."""
        results = []
        current = None
        try:
            self._prepare()
            for path in paths:
                info = ModelInfo(path)
                for requested in seq_lens:
                    current = self._new_result(info, requested)
                    self._run_model(info, current)
                    results.append(finish_result(current))
                    current = None
        except MbkError as err:
            partial = list(results)
            if current is not None and current["trials"]:
                current["incomplete"] = True
                _summarize_trials(current)
                partial.append(finish_result(current))
            err.partial_results = partial
            raise
        finally:
            self._cleanup()
        return results

    def _new_result(self, info, requested):
        length = planned_length(info.metadata, info.static_seq_len, requested or self.seq_len)
        if info.static_seq_len and length != info.static_seq_len:
            raise fixed_length_error(info.path, info.static_seq_len, length)
        if not FORMATS[info.format].on_device:
            raise ProfilerError(f"{info.path}: the adb target runs .tflite files with benchmark_model; profile .onnx files with --target host")
        if not self.tool.input_flags and not info.static_seq_len:
            # It has no --input_layer_shape: a [1, -1] file would be timed at the length it was written with (1).
            raise ProfilerError(f"{info.path} has an open sequence axis and {self.tool.name} cannot set input shapes; "
                                "export it with --static-axes (and --seq-len) or pass a benchmark_model binary")
        result = new_result(info, target="adb", seq_len=length, flops_override=self.flops)
        result["device"] = dict(self.device_info())
        result["simulated"] = bool(self.info.get("simulated"))
        result["config"] = run_config(
            self,
            info.feed_vocab(self.vocab_size),
            trials=self.trials,
            cooldown_timeout_s=self.cooldown_timeout_s,
            cooldown_tolerance_c=self.tolerance_mc / 1000.0,
            lock_freq=self.lock_freq,
            inputs=("benchmark_model value ranges: ids [1, vocab-1], mask all ones, segment ids {0, 1}" if self.tool.input_flags
                    else f"{self.tool.name}'s own: every int32 input random in [0, 99] (the tool takes no input values)"),
        )
        result["runtime"] = {
            "name": self.tool.name,
            "api": self.tool.api,
            "binary": self.binary.path,
            "binary_abi": self.binary.abi,
            "delegate": self.delegate,
            "threads": self.threads,
        }
        if self.threads > len(self.cpus):
            result["warnings"].append(f"{self.threads} threads on {len(self.cpus)} pinned cores: threads share cores")
        if not self.tool.input_flags:
            result["warnings"].append(f"{self.tool.name} feeds random ids in [0, 99], not the vocabulary range "
                                      "benchmark_model is given: the work is the same, the values are not")
        return result

    def _run_model(self, info, result):
        remote_model = f"{self.remote_dir}/{os.path.basename(info.path)}"
        self.adb.push(self.serial, info.path, remote_model)
        # A tool without input flags fills its inputs itself.
        input_flags, value_data = (benchmark_input_flags(info.inputs, result["seq_len"], result["config"]["vocab_size"])
                                   if self.tool.input_flags else ([], {}))
        value_files = {}
        with tempfile.TemporaryDirectory(prefix="mbk-values-") as tmp:
            for name, data in value_data.items():
                local = Path(tmp, f"{name}.bin")
                local.write_bytes(data)
                value_files[name] = f"{self.remote_dir}/input_{name}.bin"
                self.adb.push(self.serial, local, value_files[name])
        result_file = [f"{self.tool.result_file_flag}={self._result_file()}"] if self.tool.result_file_flag else []
        args = benchmark_args(remote_model, self.threads, self.runs, self.warmup, (
            f"--min_secs={self.min_time_s:g}", f"--max_secs={self.max_time_s:g}",
            *self.tool.delegate_flags[self.delegate], *input_flags, *result_file), value_files)
        if self.peak_memory:
            args.append("--report_peak_memory_footprint=true")
        result["runtime"]["flags"] = args
        # On an error the model stays until _cleanup removes the whole run directory.
        for record, log in self._run_loop(args, self.trials, info):
            result["trials"].append(_trial(record, log, self.cpus))
            result["simulated"] = result["simulated"] or log.simulated
        _summarize_trials(result)
        if self.op_profile:
            # Op profiling slows every run, so it gets its own invocation, not counted in the latency.
            for _, log in self._run_loop(args + [self.tool.op_profile_flag], 1, info):
                result["op_profile"] = log.op_summary()
                result["op_profile_source"] = f"{self.tool.name} {self.tool.op_profile_flag} (separate invocation)"
            if not result.get("op_profile"):
                result["warnings"].append(empty_op_profile(self.tool.name))
        self._shell(f"rm -f {self._q(remote_model)}", timeout_s=60)

    def _result_file(self):
        return f"{self.remote_dir}/result.pb"

    def _run_loop(self, args, trials, info):
        """Runs bench_loop.sh and yields ``(record, parsed log)`` per finished trial."""
        command = (
            f"cd {self._q(self.remote_dir)} && sh ./bench_loop.sh run --bin ./{self.tool.name} --mask {self._q(self.mask)} "
            f"--trials {int(trials)} --tolerance-mc {self.tolerance_mc} --cooldown-timeout {self.cooldown_timeout_s} "
            f"--poll {self.poll_s}"
        )
        if self.baseline_mc is not None:
            command += f" --baseline-mc {int(self.baseline_mc)}"
        if self.lock_freq:
            command += f" --lock-freq {self._q(self.lock_freq)}"
        if self.tool.result_file_flag:
            command += f" --result-file {self._q(self._result_file())}"
        command += " -- " + self._q(*args)
        limit = trials * (self.cooldown_timeout_s + 2 * self.max_time_s + 120) + 60
        process = self.adb.shell_stream(self.serial, command)
        timer = threading.Timer(limit, process.kill)
        timer.start()
        log_lines, in_log, done, tail, result_hex = [], False, False, [], None
        finished = 0
        try:
            for raw in process.stdout:
                line = raw.rstrip("\r\n")
                if line.startswith("@@MBK_LOG_BEGIN"):
                    in_log, log_lines = True, []
                elif line.startswith("@@MBK_LOG_END"):
                    in_log = False
                elif in_log:
                    log_lines.append(line)
                elif line.startswith("@@MBK_RESULT_HEX "):
                    result_hex = line.split(" ", 2)[2] if line.count(" ") >= 2 else ""
                elif line.startswith("@@MBK_JSON "):
                    try:
                        record = json.loads(line[len("@@MBK_JSON "):])
                    except (ValueError, RecursionError) as err:
                        raise DeviceError(f"device script printed malformed trial data ({first_line(err)}); is android_bench/bench_loop.sh intact?") from None
                    if not isinstance(record, dict):
                        raise DeviceError("device script printed trial data that is not a JSON object; is "
                                          "android_bench/bench_loop.sh intact?")
                    text = "\n".join(log_lines)
                    # Every field is checked once here; later code reads only the checked values.
                    raw_code, record = record.get("exit_code"), {**record, **checked_record(record)}
                    if record["exit_code"] is None:
                        raise DeviceError(f"device script printed trial data whose exit_code is {escape(repr(raw_code)[:40])}, "
                                          "not an integer; is android_bench/bench_loop.sh intact?")
                    if record["exit_code"] != 0:
                        raise ProfilerError(_failure_message(info, text, record["exit_code"], self.tool))
                    try:
                        log = parse_benchmark_output(text)
                        if result_hex:
                            merge_benchmark_result(log, parse_benchmark_result(bytes.fromhex(result_hex)))
                    except (BenchmarkParseError, ValueError) as err:
                        raise ProfilerError(f"{self.tool.name} output for {os.path.basename(info.path)} was not understood: "
                                            f"{first_line(err)}") from err
                    result_hex = None
                    if log.failed:
                        raise ProfilerError(_failure_message(info, text, record.get("exit_code"), self.tool))
                    finished += 1
                    record["_log"] = text
                    yield record, log
                elif line.startswith("@@MBK_ERROR "):
                    raise DeviceError(f"device {self.serial}: {line[len('@@MBK_ERROR '):]}")
                elif line.startswith("@@MBK_DONE"):
                    done = True
                else:
                    tail = (tail + [line])[-5:]
            process.wait()
        finally:
            timer.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
        if not done:
            if self.adb.get_state(self.serial) != "device":
                raise DeviceDisconnectedError(
                    f"device {self.serial} disconnected during trial {finished + 1} of {trials} for {os.path.basename(info.path)}; "
                    f"{finished} finished trial(s) are kept in the report; reconnect the phone and re-run"
                )
            last = next((t for t in reversed(tail) if t.strip()), f"exit status {process.returncode}")
            raise DeviceError(f"the benchmark loop on {self.serial} stopped early ({last.strip()[:160]}); re-run, or run bench_loop.sh by hand to see why")


def _failure_message(info, text, code, tool):
    try:
        log = parse_benchmark_output(text, require_result=False)
        reason = log.errors[0] if log.errors else None
    except BenchmarkParseError:
        reason = None
    if reason is None:
        lines = [l.strip() for l in text.splitlines() if l.strip()]
        reason = lines[-1][:200] if lines else "no output"
    hint = next((meaning for needle, meaning in tool.failure_hints if needle in text), None)
    return f"{tool.name} failed on {os.path.basename(info.path)} (exit {code}): {reason}" + (f"; {hint}" if hint else "")


def _trial(record, log, cpus):
    """One trial's record: the tool's figures, thermal data and its raw output (for later checks)."""
    latency = log.latency_ms()
    trial = {
        "trial": record.get("trial"),
        "exit_code": record.get("exit_code"),
        "count": latency.get("count"),
        "latency_ms": latency,
        "init_ms": log.init_ms(),
        "first_inference_ms": log.first_inference_ms(),
        "warmup_avg_ms": None if "warmup_avg" not in log.timings_us else log.timings_us["warmup_avg"] / 1000.0,
        "memory": dict(log.memory),
        "delegation": list(log.delegation),
        "output_formats": sorted(log.formats),
        "log": record.get("_log"),
    }
    trial.update(trial_thermal(record, cpus))
    return trial


def _summarize_trials(result):
    trials = result["trials"]
    if not trials:
        return
    result["latency_ms"] = combine_trials([t["latency_ms"] for t in trials])
    notes = []
    if no_median := sum(1 for t in trials if (t.get("latency_ms") or {}).get("median") is None):
        # combine_trials stands a trial's average in for its median; the column is headed "median", so say so.
        notes.append(f"benchmark_model printed no median in {no_median} of {len(trials)} trial(s) (an older build): "
                     "the median column uses those trials' averages")
    config = result.get("config") or {}
    counts = [t.get("count") for t in trials if isinstance(t.get("count"), int)]
    if counts and config.get("runs"):
        notes.append(runs_warning(min(counts), config["runs"], config.get("max_time_s", 0.0), where=" in a trial"))
    # p90/p99/MAD are never printed by the tool (the report's own note); std and CV follow the host's rule.
    notes.append(too_few_runs(result["latency_ms"], figures=("std", "cv")))
    for note in notes:
        if note and note not in result["warnings"]:
            result["warnings"].append(note)
    for key in ("init_ms", "first_inference_ms"):
        values = [t[key] for t in trials if t.get(key) is not None]
        result[key] = float(np.median(values)) if values else None
    peaks = [t["memory"].get("peak_mb") or t["memory"].get("overall_mb") for t in trials]
    result["peak_rss_mb"] = max((p for p in peaks if p is not None), default=None)
    result["memory"] = dict(trials[-1]["memory"])
    result["memory"]["source"] = "benchmark_model memory lines (periodic peak if printed, else RSS delta)"
    result["throttled"] = any(t.get("throttled") for t in trials)


def profile_devices(adb, serials, paths, seq_lens=(None,), **options):
    """Profiles the models on several devices in parallel; returns all records. Raises the first failure (by serial
    order), its ``partial_results`` holding every record finished on any device."""
    profilers = [DeviceProfiler(adb, serial, **options) for serial in serials]
    results, errors = {}, {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(profilers)) as pool:
        futures = {pool.submit(p.profile_all, paths, seq_lens): p.serial for p in profilers}
        for future in concurrent.futures.as_completed(futures):
            serial = futures[future]
            try:
                results[serial] = future.result()
            except MbkError as err:
                errors[serial] = err
                results[serial] = getattr(err, "partial_results", [])
    ordered = [r for serial in serials for r in results.get(serial, [])]
    if errors:
        first = errors[next(s for s in serials if s in errors)]
        first.partial_results = ordered
        raise first
    return ordered
