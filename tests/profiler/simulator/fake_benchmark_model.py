#!/usr/bin/env python3
"""DEVICE SIMULATOR: a ``benchmark_model`` stand-in that really runs the model on the host.

Pushed to a simulated phone in place of LiteRT's binary. It takes the real
tool's flags (``--graph --num_threads --num_runs --warmup_runs --min_secs
--max_secs --warmup_min_secs --use_xnnpack --input_layer --input_layer_shape
--input_layer_value_range --input_layer_value_files
--report_peak_memory_footprint``), runs the ``.tflite`` file with
ai-edge-litert's Interpreter on the host CPU, and prints what the current
tool prints (``INFO:`` lines, stats with ``p5/median/p95``, the
``Inference timings in us`` summary, the memory line), plus one line marking
the run as SIMULATED. Its inferences heat the simulated phone (see
``sim_device.py``); while the big cluster is throttled, each run is slowed by
the frequency cap, as on a phone.

Per-op profiling is not simulated: with ``--enable_op_profiling=true`` it says
so and prints no table (the parser is tested on real tables instead).
"""

import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.environ.get("MBK_SIM_HOME", os.path.dirname(os.path.abspath(__file__))))


def _flags(argv):
    flags = {}
    for arg in argv:
        if not arg.startswith("--") or "=" not in arg:
            print(f"ERROR: Unconsumed or malformed flag {arg}", flush=True)
            continue
        key, value = arg[2:].split("=", 1)
        flags[key] = value
    return flags


def _g(value):
    # C++ iostream's default: 6 significant digits ("2.95034e+06", "3243.58").
    return f"{value:g}"


def _stat(values):
    values = np.asarray(values, dtype=np.int64)
    if values.size == 1 or values.min() == values.max():
        same = "(all same)" if values.size > 1 else ""
        return f"count={values.size} curr={values[-1]}{same}"
    ordered = np.sort(values)

    def pct(p):
        return int(ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))])

    return (
        f"count={values.size} first={values[0]} curr={values[-1]} min={values.min()} max={values.max()} "
        f"avg={_g(values.mean())} std={int(round(values.std()))} p5={pct(5)} median={pct(50)} p95={pct(95)}"
    )


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv):
    flags = _flags(argv)
    graph = flags.get("graph")
    threads = int(flags.get("num_threads", "-1"))
    num_runs = int(flags.get("num_runs", "50"))
    warmup_runs = int(flags.get("warmup_runs", "1"))
    min_secs = float(flags.get("min_secs", "1"))
    max_secs = float(flags.get("max_secs", "150"))
    warmup_min_secs = float(flags.get("warmup_min_secs", os.environ.get("MBK_SIM_WARMUP_MIN_SECS", "0.5")))
    use_xnnpack = flags.get("use_xnnpack", "true") != "false"
    print("INFO: STARTING!")
    print("INFO: Log parameter values verbosely: [0]")
    print(f"INFO: Min num runs: [{num_runs}]")
    print(f"INFO: Num threads: [{threads}]")
    print(f"INFO: Min warmup runs: [{warmup_runs}]")
    print(f"INFO: Graph: [{graph}]")
    for key, label in (("input_layer", "Input layers"), ("input_layer_shape", "Input shapes"), ("input_layer_value_range", "Input value ranges")):
        if key in flags:
            print(f"INFO: {label}: [{flags[key]}]")
    print(f"INFO: Use xnnpack: [{1 if use_xnnpack else 0}]")
    print("INFO: SIMULATOR: mobilebert-kit device simulator; this runs on the host CPU with ai-edge-litert, not on a phone")
    sys.stdout.flush()
    if not graph or not os.path.isfile(graph):
        print(f"ERROR: Could not open '{graph}'.")
        print("ERROR: Failed to mmap model " + str(graph))
        return 1
    rss_start = _rss_mb()
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    print(f"INFO: Loaded model {graph}")
    start = time.perf_counter()
    try:
        interpreter = Interpreter(
            model_path=graph,
            num_threads=threads if threads > 0 else None,
            experimental_op_resolver_type=OpResolverType.AUTO if use_xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        )
        details = interpreter.get_input_details()
        names = flags.get("input_layer", "").split(",") if flags.get("input_layer") else []
        shapes = [[int(d) for d in s.split(",")] for s in flags["input_layer_shape"].split(":")] if flags.get("input_layer_shape") else []
        for i, detail in enumerate(details):
            if i < len(shapes) and list(detail["shape"]) != shapes[i]:
                interpreter.resize_tensor_input(detail["index"], shapes[i])
        interpreter.allocate_tensors()
    except (RuntimeError, ValueError) as err:
        print(f"ERROR: {str(err).strip().splitlines()[0]}")
        print("Benchmarking failed.")
        return 1
    init_us = int((time.perf_counter() - start) * 1e6)
    print(f"INFO: The input model file size (MB): {_g(os.path.getsize(graph) / 1e6)}")
    print(f"INFO: Initialized session in {_g(init_us / 1000.0)}ms.")
    ranges = {}
    for item in flags.get("input_layer_value_range", "").split(":"):
        parts = item.split(",")
        if len(parts) == 3:
            ranges[parts[0]] = (int(parts[1]), int(parts[2]))
    files = {}
    for item in flags.get("input_layer_value_files", "").split(","):
        if ":" in item:
            name, path = item.split(":", 1)
            files[name] = path
    rng = np.random.default_rng(0)
    for i, detail in enumerate(interpreter.get_input_details()):
        name = names[i] if i < len(names) else detail["name"]
        if name in files:
            data = np.fromfile(files[name], dtype=detail["dtype"]).reshape(detail["shape"])
        elif name in ranges:
            low, high = ranges[name]
            data = rng.integers(low, high + 1, size=detail["shape"]).astype(detail["dtype"])
        else:
            # The real tool fills unspecified integer inputs with random values too.
            data = rng.integers(0, 2, size=detail["shape"]).astype(detail["dtype"])
        interpreter.set_tensor(detail["index"], data)

    from sim_device import heat, load_state

    fs, device_dir = os.environ.get("MBK_SYSROOT"), os.environ.get("MBK_SIM_DEVICE_DIR")
    mask = int(os.environ.get("MBK_SIM_MASK", "ff"), 16)

    def slow_down():
        # A throttled big core runs at a fraction of its clock.
        if not device_dir:
            return 1.0
        state = load_state(device_dir)
        pinned_big = any(mask >> c & 1 for c in state["big_cpus"])
        return 1.0 / state["throttled_fraction"] if state["throttled"] and pinned_big else 1.0

    def phase(min_runs, min_s):
        print(f"INFO: Running benchmark for at least {min_runs} iterations and at least {_g(min_s)} seconds but terminate if exceeding {_g(max_secs)} seconds.")
        factor = slow_down()
        times, begin = [], time.perf_counter()
        while (len(times) < min_runs or time.perf_counter() - begin < min_s) and time.perf_counter() - begin <= max_secs:
            t0 = time.perf_counter()
            interpreter.invoke()
            elapsed = time.perf_counter() - t0
            if factor > 1.0:
                time.sleep(elapsed * (factor - 1.0))
                elapsed *= factor
            times.append(int(elapsed * 1e6))
        if fs and device_dir:
            heat(fs, device_dir, len(times))
        print(f"INFO: {_stat(times)}")
        print("")
        sys.stdout.flush()
        return times

    init_rss = _rss_mb() - rss_start
    warm = phase(max(warmup_runs, 1), warmup_min_secs)
    timed = phase(num_runs, min_secs)
    print(
        f"INFO: Inference timings in us: Init: {init_us}, First inference: {warm[0]}, "
        f"Warmup (avg): {_g(float(np.mean(warm)))}, Inference (avg): {_g(float(np.mean(timed)))}"
    )
    print("INFO: Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the actual memory footprint of the model at runtime. Take the information at your discretion.")
    print(f"INFO: Memory footprint delta from the start of the tool (MB): init={_g(init_rss)} overall={_g(_rss_mb() - rss_start)}")
    if flags.get("report_peak_memory_footprint") == "true":
        print(f"INFO: Overall peak memory footprint (MB) via periodic monitoring: {_g(_rss_mb())}")
    if flags.get("enable_op_profiling") == "true":
        print("INFO: SIMULATOR: per-op profiling is not simulated; no op table printed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
