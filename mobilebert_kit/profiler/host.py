"""Latency of ``.tflite`` / ``.onnx`` files on this machine: docs/profiler.md ("On this machine") describes the
runtimes (``artifacts/runtimes.py`` picks LiteRT's API), the pinning to cores, the loop, the figures and the
per-op profiles.

Example:
    >>> result = HostProfiler(threads=1, cores="big").profile("mobilebert.tflite")  # doctest: +SKIP
    >>> result["latency_ms"]["median"]  # doctest: +SKIP
    58.2
"""

import contextlib
import itertools
import json
import os
import platform
import resource
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from ai_edge_litert import __version__ as litert_version

from mobilebert_kit.artifacts.metadata import planned_length
from mobilebert_kit.artifacts.errors import RuntimeLoadError
from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.artifacts.runner import TFLITE_RESOLVERS, load_compiled_model, load_onnx, load_tflite
from mobilebert_kit.artifacts.runtimes import RUNTIME_CHOICES, choose_tflite_runtime
from mobilebert_kit.artifacts.text_session import TextSession
from mobilebert_kit.errors import check_choice, first_line
from mobilebert_kit.profiler.bench_parser import empty_op_profile, parse_benchmark_output
from mobilebert_kit.profiler.benchmark_binary import BenchmarkBinary, benchmark_args
from mobilebert_kit.profiler.errors import BenchmarkParseError, ProfilerError
from mobilebert_kit.profiler.inputs import benchmark_input_flags, make_feeds
from mobilebert_kit.profiler.model_info import ModelInfo
from mobilebert_kit.profiler.result import (check_time_limits, counts, finish_result, new_result, run_config,
                                            runs_warning)
from mobilebert_kit.profiler.stats import summarize, too_few_runs
from mobilebert_kit.profiler.topology import CpuTopology

DELEGATES = tuple(TFLITE_RESOLVERS)  # "xnnpack", "none"
_ORT_LEVELS = {"all": "ORT_ENABLE_ALL", "extended": "ORT_ENABLE_EXTENDED", "basic": "ORT_ENABLE_BASIC",
               "disabled": "ORT_DISABLE_ALL"}
GRAPH_OPTIMIZATIONS = tuple(_ORT_LEVELS)
_HOST_ABIS = {"x86_64": "x86_64", "AMD64": "x86_64", "aarch64": "arm64-v8a", "arm64": "arm64-v8a", "i686": "x86", "armv7l": "armeabi-v7a"}


class HostProfiler:
    """Times models on this machine.

    Args:
        threads: intra-op threads (TFLite ``num_threads``, ORT ``intra_op_num_threads``).
        cores: ``big``, ``little``, ``prime``, ``all`` or a hex mask (see
            :mod:`~mobilebert_kit.profiler.topology`).
        delegate: ``"xnnpack"`` (TFLite default delegates) or ``"none"``
            (builtin kernels, ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``).
        runs: minimum number of timed runs.
        warmup: warm-up runs before timing (at least 1).
        min_time_s: minimum total time of the timed runs (None: 1 s, or ``max_time_s`` when shorter).
        max_time_s: stop starting new runs after this long.
        seq_len: sequence length; None uses the length fixed in the file, else 128.
        vocab_size: token ids stay below this; None reads it from the model.
        inter_op_threads: ONNX Runtime inter-op threads.
        graph_optimization: ONNX Runtime level: ``all``, ``extended``, ``basic``, ``disabled``.
        op_profile: collect a per-op profile.
        profile_runs: runs of the separate profiling session.
        benchmark_binary: a benchmark_model built for this host, used for the
            TFLite per-op profile.
        flops: FLOPs per inference overriding the count from the file.
        seed: seed of the input token ids.
        runtime (str): the LiteRT API of ``.tflite`` files: ``auto`` (CompiledModel where it serves, else the
            Interpreter), ``interpreter`` or ``compiled_model`` (``compiled-model``); see :data:`RUNTIME_CHOICES`.
    """

    def __init__(
        self,
        *,
        threads=1,
        cores="all",
        delegate="xnnpack",
        runs=50,
        warmup=5,
        min_time_s=None,
        max_time_s=150.0,
        seq_len=None,
        vocab_size=None,
        inter_op_threads=1,
        graph_optimization="all",
        op_profile=False,
        profile_runs=10,
        benchmark_binary=None,
        flops=None,
        seed=0,
        runtime="auto",
    ):
        if delegate in ("gpu", "nnapi"):
            raise ProfilerError(f"delegate {delegate!r} runs on a phone only; use --target adb, or --delegate xnnpack|none on the host")
        self.delegate = check_choice("delegate", delegate, DELEGATES)
        self.runtime = choose_tflite_runtime(runtime).requested  # checked here, decided per file in _choose_runtime
        self.graph_optimization = check_choice("graph optimization level", graph_optimization, GRAPH_OPTIMIZATIONS)
        self.threads, self.runs, self.warmup, self.inter_op_threads = counts(
            ("threads", threads), ("runs", runs), ("warmup", warmup), ("inter-op threads", inter_op_threads))
        self.min_time_s, self.max_time_s = check_time_limits(min_time_s, max_time_s)
        self.seq_len = seq_len
        self.vocab_size = vocab_size
        self.op_profile = bool(op_profile)
        self.profile_runs = int(profile_runs)
        self.benchmark_binary = benchmark_binary
        self.flops = flops
        self.seed = seed
        self.topology = CpuTopology.from_host()
        self.mask, self.cpus = self.topology.mask(cores)
        self.cores = cores

    def device_info(self):
        return {
            "kind": "host",
            "hostname": platform.node(),
            "machine": platform.machine(),
            "os": f"{platform.system()} {platform.release()}",
            "cpu_model": _cpu_model(),
            "cpu_count": os.cpu_count(),
            "topology": self.topology.summary(),
            "python": platform.python_version(),
        }

    def profile(self, path, seq_len=None):
        """Times one model file; returns its result record.

        Args:
            path: a ``.tflite`` or ``.onnx`` file.
            seq_len: overrides the profiler's ``seq_len`` for this call.

        Raises:
            ProfilerError: the file cannot be read or run.
        """
        info = ModelInfo(path)
        length = planned_length(info.metadata, info.static_seq_len, seq_len or self.seq_len)
        vocab = info.feed_vocab(self.vocab_size)
        result = self._new_result(info, length, vocab,
                                  "sentence pair: ids in [1, vocab), prefix attention mask, segment ids 0/1")
        feeds = make_feeds(info.inputs, length, vocab, seed=self.seed)
        reset_peak_rss()
        with _pinned(self.cpus):
            timing = (self._run_tflite(info, feeds, length) if FORMATS[info.format].litert
                      else self._run_onnx(info, feeds))
        _add_timing(result, timing, self.runs, self.max_time_s)
        if self.op_profile:
            self._add_op_profile(result, info, feeds, length, vocab)
        return finish_result(result)

    def profile_text(self, path, text):
        """Times one model file on real sentences, one sentence per call, as its app feeds them.

        A file with an open sequence axis gets each sentence at its own token count (resized as MediaPipe
        does), a static file each sentence padded; every call copies its inputs in. The runs cycle through the
        sentences, at least once through all.

        Args:
            path: a ``.tflite`` or ``.onnx`` file.
            text (RealText): the sentences (``profiler.real_text``).

        Raises:
            ProfilerError: the file cannot be read or run.
        """
        info = ModelInfo(path)
        static = info.static_seq_len
        feeds = text.feeds(info.inputs, static_len=static)
        result = self._new_result(info, static or (text.max_tokens if info.takes_text else int(text.lengths.max())),
                                  info.feed_vocab(self.vocab_size),
                                  f"real text: {len(feeds)} sentence(s) of {text.source}, one per call")
        if self.flops is None:
            result["flops"], result["flops_by_op"] = None, {}
            result["flops_source"] = "real text: the work differs per sentence"
        result["text"] = text.summary(fed=f"padded to {static}" if static else "own length")
        runs = max(self.runs, len(feeds))
        reset_peak_rss()
        with _pinned(self.cpus):
            if info.takes_text:
                timing = self._run_text_in(info, feeds, runs)
            elif FORMATS[info.format].litert:
                timing = self._run_tflite_rows(info, feeds, runs)
            else:
                timing = self._run_onnx(info, feeds, runs)
        _add_timing(result, timing, runs, self.max_time_s)
        if text.truncated:
            result["warnings"].append(f"{text.truncated} sentence(s) of {text.source} are longer than the "
                                      f"{text.max_tokens} tokens the file takes and were cut, as the app cuts them")
        return finish_result(result)

    def _new_result(self, info, seq_len, vocab, inputs):
        result = new_result(info, target="host", seq_len=seq_len, flops_override=self.flops)
        result["device"] = self.device_info()
        result["config"] = run_config(self, vocab, inputs=inputs)
        if self.threads > len(self.cpus):  # both the synthetic and the real-text timings
            result["warnings"].append(f"{self.threads} threads on {len(self.cpus)} pinned cores: threads share cores")
        if FORMATS[info.format].litert:
            result["config"]["runtime"] = self.runtime
        return result

    def _run_tflite_rows(self, info, feeds, runs):
        choice = self._choose_runtime(info)
        if choice.runtime.name == "compiled_model":
            rows = itertools.cycle(feeds)

            def feed_next(compiled):  # a static file: every sentence is padded to the same shape, no resize
                compiled.set_inputs(next(rows))
                compiled.invoke()

            return self._run_compiled(info, choice, feed_next, None, runs)
        interpreter, init_ms = self._timed_load(info, "ai-edge-litert", lambda: load_tflite(
            info.path, num_threads=self.threads, delegate=self.delegate))
        _check_inputs(info, [d["name"] for d in interpreter.get_input_details()], feeds[0])
        return self._interpreter_timing(self._timed_loop(info, "ai-edge-litert", app_calls(interpreter, feeds), runs),
                                        init_ms, interpreter, choice)

    def _choose_runtime(self, info):
        """The LiteRT API for ``info``'s file, decided once from what the file needs (runtimes)."""
        return choose_tflite_runtime(self.runtime, delegate=self.delegate, **info.runtime_needs)

    def _timed_load(self, info, runtime, load, length=None):
        """``(loaded, init_ms)`` of ``load()``: the one path by which every runtime loads a file here. A loader's
        own finding (no ``__cause__``) is said as it is; a runtime's error gets :func:`_runtime_message`'s hint."""
        start = time.perf_counter()
        try:
            loaded = load()
        except RuntimeLoadError as err:
            raise ProfilerError(str(err) if err.__cause__ is None else
                                _runtime_message(info, runtime, err.__cause__, length)) from err
        return loaded, (time.perf_counter() - start) * 1000.0

    def _timed_loop(self, info, runtime, call, runs=None, errors=(RuntimeError, ValueError), length=None,
                    self_timed=False):
        """:meth:`_loop` of ``call``; a runtime's failure (``errors``) is one ProfilerError line with its hint."""
        try:
            return self._loop(call, runs, self_timed)
        except errors as err:
            raise ProfilerError(_runtime_message(info, runtime, err, length)) from err

    def _litert_timing(self, timing, init_ms, choice, **runtime):
        """``timing`` of a loop on a LiteRT API, with its load time and runtime record (``runtime``: the API's own)."""
        return {**timing, "init_ms": init_ms, "runtime_warnings": choice.warnings,
                "runtime": {"name": "ai-edge-litert", "api": choice.runtime.name, "api_class": choice.runtime.api,
                            "version": litert_version, "delegate": self.delegate, **runtime, "threads": self.threads}}

    def _interpreter_timing(self, timing, init_ms, interpreter, choice):
        return self._litert_timing(timing, init_ms, choice, delegate_nodes=_delegate_nodes(interpreter),
                                   op_resolver=TFLITE_RESOLVERS[self.delegate].name)

    def _run_compiled(self, info, choice, call, feeds, runs=None):
        """Times ``call(compiled)`` on a CompiledModel (inputs written once first when ``feeds`` is given)."""
        compiled, init_ms = self._timed_load(info, "LiteRT CompiledModel", lambda: load_compiled_model(
            info.path, num_threads=self.threads, delegate=self.delegate))
        if feeds is not None:
            _check_inputs(info, [d["name"] for d in compiled.input_details], feeds)
            compiled.set_inputs(feeds)
        timing = self._timed_loop(info, "LiteRT CompiledModel", lambda: call(compiled), runs)
        return self._litert_timing(timing, init_ms, choice, accelerator="CPU",
                                   kernel_mode="BUILTIN" if self.delegate == "none" else "XNNPACK")

    def _run_tflite(self, info, feeds, length):
        choice = self._choose_runtime(info)
        if choice.runtime.name == "compiled_model":
            return self._run_compiled(info, choice, lambda compiled: compiled.invoke(), feeds)
        interpreter, init_ms = self._timed_load(info, "ai-edge-litert", lambda: load_tflite(
            info.path, num_threads=self.threads, delegate=self.delegate,
            input_shapes={name: list(value.shape) for name, value in feeds.items()}), length)
        _check_inputs(info, [d["name"] for d in interpreter.get_input_details()], feeds)
        for detail in interpreter.get_input_details():
            interpreter.set_tensor(detail["index"], feeds[detail["name"]])
        timing = self._timed_loop(info, "ai-edge-litert", interpreter.invoke, errors=RuntimeError, length=length)
        return self._interpreter_timing(timing, init_ms, interpreter, choice)

    def _onnx_options(self, profile_prefix=None):
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = self.inter_op_threads
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _ORT_LEVELS[self.graph_optimization])
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 4  # a failing kernel is reported once, by _run_onnx, in one line
        if profile_prefix:
            options.enable_profiling = True
            options.profile_file_prefix = profile_prefix
        return options

    def _run_onnx(self, info, feeds, runs=None):
        """Times ``feeds`` (one ``{name: array}``, or a list of them run one per call, cycling) in a session."""
        rows = feeds if isinstance(feeds, list) else [feeds]
        session, init_ms = self._timed_load(info, "onnxruntime", lambda: load_onnx(info.path, self._onnx_options()))
        names = [i.name for i in session.get_inputs()]
        _check_inputs(info, names, rows[0])
        run_feeds = [{n: row[n] for n in names} for row in rows]
        shape = getattr(next(iter(run_feeds[0].values()), None), "shape", ())
        cycle = itertools.cycle(run_feeds)
        timing = self._timed_loop(info, "onnxruntime", lambda: session.run(None, next(cycle)), runs,
                                  errors=Exception, length=shape[1] if len(shape) == 2 else None)
        return {**timing, "init_ms": init_ms, "runtime": self._ort_runtime(
            inter_op_threads=self.inter_op_threads, graph_optimization=self.graph_optimization)}

    def _ort_runtime(self, **runtime):
        """The runtime record of an ONNX Runtime session on the CPU provider, with the session's own ``runtime``."""
        return {"name": "onnxruntime", "version": ort.__version__, "provider": "CPUExecutionProvider",
                "threads": self.threads, **runtime}

    def _run_text_in(self, info, feeds, runs):
        """Times a text-in ``.onnx`` on sentences (``{"text": [sentence]}`` per call) where an app runs it: in a
        process holding onnxruntime and onnxruntime-extensions only (artifacts.text_session), which times each
        ``session.run`` itself, so the pipes to it are not counted."""
        session, _ = self._timed_load(info, "onnxruntime with onnxruntime-extensions",
                                      lambda: TextSession(info.path, self.threads))
        rows = itertools.cycle(feeds)
        timing = self._timed_loop(info, "onnxruntime with onnxruntime-extensions",
                                  lambda: session.timed_run(next(rows)), runs, errors=RuntimeError, self_timed=True)
        timing["peak_rss"] = _peak_rss_mb(session.pid, "of the process that ran the file")
        timing["init_ms"] = session.load_ms  # the session's creation, not the child's start
        timing["runtime"] = self._ort_runtime(graph_optimization="all",
                                              extensions=info.metadata["tokenizer_in_graph"].get("library"),
                                              process="a child holding onnxruntime and onnxruntime-extensions only")
        return timing

    def _loop(self, call, runs=None, self_timed=False):
        """Warm-up, then timed calls until ``runs`` (default: the profiler's) and ``min_time_s`` are both reached; a
        ``self_timed`` call returns the nanoseconds of its own work (the sample), the wall clock decides the stop."""
        runs = self.runs if runs is None else runs
        clock = time.perf_counter_ns
        start = clock()
        own = call()
        first_ms = (own if self_timed else clock() - start) / 1e6
        for _ in range(self.warmup - 1):
            call()
        samples = []
        begin = clock()
        min_ns, max_ns = self.min_time_s * 1e9, self.max_time_s * 1e9
        while True:
            t0 = clock()
            own = call()
            t1 = clock()
            samples.append((own if self_timed else t1 - t0) / 1e6)
            elapsed = t1 - begin
            if (len(samples) >= runs and elapsed >= min_ns) or elapsed >= max_ns:
                break
        return {"samples_ms": samples, "first_ms": first_ms, "timed_s": (clock() - begin) / 1e9}

    def _add_op_profile(self, result, info, feeds, length, vocab):
        if not FORMATS[info.format].litert:
            result["op_profile"] = self._onnx_op_profile(info, feeds)
            result["op_profile_source"] = f"onnxruntime profiler, {self.profile_runs} runs in a separate session"
            return
        if not self.benchmark_binary:
            result["warnings"].append("TFLite per-op profile needs a benchmark_model built for this host (--benchmark-binary)")
            return
        binary = BenchmarkBinary(self.benchmark_binary)
        binary.check_abi([_HOST_ABIS.get(platform.machine(), platform.machine())], "this host")
        input_flags, value_files = benchmark_input_flags(info.inputs, length, vocab)
        with tempfile.TemporaryDirectory(prefix="mbk-profile-") as tmp:
            files = {name: Path(tmp, f"{name}.bin") for name in value_files}
            for name, data in value_files.items():
                files[name].write_bytes(data)
            command = [binary.path, *benchmark_args(info.path, self.threads, self.profile_runs, self.warmup, (
                f"--use_xnnpack={'true' if self.delegate == 'xnnpack' else 'false'}", "--enable_op_profiling=true",
                *input_flags), files)]
            cpus = list(self.cpus)
            try:
                completed = subprocess.run(
                    command, capture_output=True, text=True, timeout=self.max_time_s + 60, preexec_fn=lambda: os.sched_setaffinity(0, cpus)
                )
            except subprocess.TimeoutExpired:
                raise ProfilerError(f"{binary.path} did not finish within {self.max_time_s + 60:.0f} s") from None
        try:
            log = parse_benchmark_output(completed.stdout + completed.stderr)
        except BenchmarkParseError as err:
            raise ProfilerError(f"{binary.path} printed no usable result ({err}); run it by hand with --graph to see why") from err
        if log.failed or completed.returncode != 0:
            reason = log.errors[0] if log.errors else f"exit status {completed.returncode}"
            raise ProfilerError(f"{binary.path} failed on {info.path}: {reason}")
        result["op_profile"] = log.op_summary()
        result["op_profile_source"] = f"benchmark_model --enable_op_profiling ({binary.path})"
        if not result["op_profile"]:
            result["warnings"].append(empty_op_profile(binary.path))
        result["runtime"]["benchmark_model_avg_ms"] = log.latency_ms()["avg"]

    def _onnx_op_profile(self, info, feeds):
        with tempfile.TemporaryDirectory(prefix="mbk-ort-profile-") as tmp:
            session, _ = self._timed_load(info, "onnxruntime",
                                          lambda: load_onnx(info.path, self._onnx_options(os.path.join(tmp, "ort"))))
            run_feeds = {i.name: feeds[i.name] for i in session.get_inputs()}
            with _pinned(self.cpus):
                for _ in range(self.warmup + self.profile_runs):
                    session.run(None, run_feeds)
            with open(session.end_profiling()) as f:
                events = json.load(f)
        return onnx_op_summary(events, self.profile_runs, skip_runs=self.warmup)


def app_calls(interpreter, feeds):
    """A zero-argument callable that runs the next of ``feeds`` (``{input name: array}`` per call, cycling) on an
    allocated LiteRT ``interpreter`` as a client app does: a feed of a new length resizes and re-allocates (as
    MediaPipe's inference runner does), every call copies its inputs in."""
    details = interpreter.get_input_details()
    rows, state = itertools.cycle(feeds), {"shape": None}

    def call():
        feed = next(rows)
        shape = feed[details[0]["name"]].shape
        if shape != state["shape"]:
            for detail in details:
                interpreter.resize_tensor_input(detail["index"], list(shape), strict=True)
            interpreter.allocate_tensors()
            state["shape"] = shape
        for detail in details:
            interpreter.set_tensor(detail["index"], feed[detail["name"]])
        interpreter.invoke()

    return call


def onnx_op_summary(events, runs, skip_runs=0):
    """Aggregates ONNX Runtime profiler ``events`` (its Chrome trace) over ``runs`` profiled calls, after
    ``skip_runs`` warm-up calls, into benchmark_model's "Summary by node type" rows: ``node_type``, ``count``,
    ``avg_ms`` (per inference: the sum of each node's median duration), ``pct``, ``times_called``; slowest first."""
    model_runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"), key=lambda e: e.get("ts", 0))
    start_ts = None
    if skip_runs and len(model_runs) > skip_runs:
        start_ts = model_runs[skip_runs - 1].get("ts", 0) + model_runs[skip_runs - 1].get("dur", 0)
    durations, kinds = {}, {}
    for event in events:
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith("_kernel_time"):
            continue
        if start_ts is not None and event.get("ts", 0) < start_ts:
            continue
        name = event["name"]
        durations.setdefault(name, []).append(float(event.get("dur", 0)))
        kinds[name] = (event.get("args") or {}).get("op_name") or "unknown"
    # The median per node resists the odd preempted run (a 3 ms Add in a 0.4 ms run on a busy host).
    totals, calls, nodes = {}, {}, {}
    for name, values in durations.items():
        op = kinds[name]
        totals[op] = totals.get(op, 0.0) + float(np.median(values))
        calls[op] = calls.get(op, 0) + max(1, round(len(values) / max(runs, 1)))
        nodes[op] = nodes.get(op, 0) + 1
    grand = sum(totals.values()) or 1.0
    rows = [
        {
            "node_type": op,
            "count": nodes[op],
            "avg_ms": totals[op] / 1000.0,
            "pct": 100.0 * totals[op] / grand,
            "times_called": calls[op],
        }
        for op in totals
    ]
    return sorted(rows, key=lambda r: r["avg_ms"], reverse=True)


def _delegate_nodes(interpreter):
    """Number of delegate kernels in the execution plan (> 0: XNNPACK took part), through the private
    ``_get_ops_details``; None if a later ai-edge-litert drops it."""
    try:
        return sum(1 for op in interpreter._get_ops_details() if op.get("op_name") == "DELEGATE")
    except (AttributeError, RuntimeError, TypeError):
        return None


@contextlib.contextmanager
def _pinned(cpus):
    """Pins every thread of this process to ``cpus`` (threads created inside inherit the mask); restores each
    thread's mask afterwards."""
    saved = {}
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cpus)
    try:
        yield
    finally:
        for tid, mask in saved.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, mask)


def reset_peak_rss():
    """Resets this process's peak-RSS mark (VmHWM, Linux >= 4.0) to the current RSS, so the figure is this
    model's; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss_mb(pid="self", whose="since reset (/proc/self/clear_refs)"):
    with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0, f"VmHWM {whose}"
    if pid != "self":
        return None, f"not measured ({whose})"
    # ru_maxrss: kilobytes on Linux, the whole process lifetime.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, "ru_maxrss (process lifetime)"


def _cpu_model():
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _runtime_message(info, runtime, err, length):
    first = first_line(err)
    if length and info.static_seq_len and length != info.static_seq_len:
        hint = f"; the model may not accept sequence length {length} (try --seq-len {info.static_seq_len})"
    elif length and not info.static_seq_len and not info.max_seq_len:  # a file from outside mbk, run at the default
        hint = (f"; it ran at {length} tokens and the file records no position table (no mbk_metadata): pass "
                "--seq-len within the model's positions, or re-export the model")
    else:
        hint = "; re-export the model"
    return f"{runtime} cannot run {info.path}: {first[:200]}{hint}"


def _check_inputs(info, names, feed):
    if missing := [name for name in names if name not in feed]:
        raise ProfilerError(f"{info.path}: inputs {missing} are not among the model inputs read from the file")


def _add_timing(result, timing, runs, max_time_s):
    """Fills ``result`` with a timing loop's samples, statistics, warnings, init and memory figures."""
    samples = timing.pop("samples_ms")
    result["runtime"] = timing.pop("runtime")
    result["warnings"].extend(timing.pop("runtime_warnings", ()))
    result["samples_ms"] = samples
    result["latency_ms"] = summarize(samples)
    for warning in (runs_warning(len(samples), runs, max_time_s), too_few_runs(result["latency_ms"])):
        if warning:
            result["warnings"].append(warning)
    result["init_ms"] = timing["init_ms"]
    result["first_inference_ms"] = timing["first_ms"]
    result["peak_rss_mb"], result["memory"]["peak_rss_source"] = timing.pop("peak_rss", None) or _peak_rss_mb()
    result["trials"] = [{"trial": 0, "count": len(samples), "duration_s": timing["timed_s"],
                         "latency_ms": result["latency_ms"], "init_ms": timing["init_ms"],
                         "first_inference_ms": timing["first_ms"], "throttled": False}]
