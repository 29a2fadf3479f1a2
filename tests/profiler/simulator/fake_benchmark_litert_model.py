#!/usr/bin/env python3
"""DEVICE SIMULATOR: a ``benchmark_litert_model`` stand-in that really runs the model on the host.

Pushed to a simulated phone in place of LiteRT's CompiledModel benchmark tool.
It takes that tool's flags and no others (``--graph --use_cpu --use_gpu
--use_npu --num_threads --num_runs --warmup_runs --min_secs --max_secs
--warmup_min_secs --result_file_path --use_profiler
--report_peak_memory_footprint``; the real tool has no ``--input_layer*``
flags, so an unknown flag fails here as a flag the tool does not take), runs
the ``.tflite`` with ai-edge-litert's CompiledModel on the host CPU, fills every
int32 input with random values in [0, 99] as the tool does, prints the
``count=..`` stats of each phase and the ``BENCHMARK RESULTS`` block, and
writes ``--result_file_path`` as the binary ``BenchmarkResult`` proto the tool
writes, whose ``name`` says SIMULATED. GPU and NPU are not simulated.
"""

import os
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.environ.get("MBK_SIM_HOME", os.path.dirname(os.path.abspath(__file__))))

from fake_benchmark_model import _g, _rss_mb, _stat  # noqa: E402  (the shared print format of the stats lines)

TAKES = {"graph", "use_cpu", "use_gpu", "use_npu", "num_threads", "num_runs", "warmup_runs", "min_secs", "max_secs",
         "warmup_min_secs", "result_file_path", "use_profiler", "report_peak_memory_footprint", "signature_to_run_for"}
HEADER = "[benchmark_litert_model.h:94]"


def _varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _message(fields):
    """proto2 wire format of ``[(field, kind, value)]``; kind ``f`` float, ``i`` integer, ``b`` bytes."""
    out = bytearray()
    for field, kind, value in fields:
        if kind == "f":
            out += _varint(field << 3 | 5) + struct.pack("<f", value)
        elif kind == "i":
            out += _varint(field << 3 | 0) + _varint(int(value))
        else:
            out += _varint(field << 3 | 2) + _varint(len(value)) + value
    return bytes(out)


def main(argv):
    flags = {}
    for arg in argv:
        key, _, value = arg[2:].partition("=")
        if not arg.startswith("--") or key not in TAKES:
            print(f"ERROR: Unconsumed cmdline flags: {arg}")
            print("Benchmarking failed.")
            return 1
        flags[key] = value
    graph = flags.get("graph")
    threads = int(flags.get("num_threads", "-1"))
    num_runs, warmup_runs = int(flags.get("num_runs", "50")), int(flags.get("warmup_runs", "1"))
    min_secs, max_secs = float(flags.get("min_secs", "1")), float(flags.get("max_secs", "150"))
    warmup_min_secs = float(flags.get("warmup_min_secs", os.environ.get("MBK_SIM_WARMUP_MIN_SECS", "0.5")))
    print("INFO: SIMULATOR: mobilebert-kit device simulator; benchmark_litert_model stand-in on the host CPU with "
          "ai-edge-litert's CompiledModel, not on a phone")
    print(f"INFO: {HEADER} Loading model from: {graph}")
    if flags.get("use_gpu") == "true" or flags.get("use_npu") == "true":
        print("ERROR: SIMULATOR: GPU and NPU accelerators are not simulated")
        return 1
    if not graph or not os.path.isfile(graph):
        print(f"ERROR: {HEADER} Failed to load model.")
        return 1
    sys.stdout.flush()
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import CpuOptions, Options

    rss_start = _rss_mb()
    start = time.perf_counter()
    model = CompiledModel.from_file(graph, options=Options(HardwareAccelerator.CPU,
                                                           cpu_options=CpuOptions(num_threads=max(threads, 0))))
    key = model.get_signature_by_index(0)["key"]
    inputs, outputs = model.create_input_buffers(0), model.create_output_buffers(0)
    rng = np.random.default_rng(0)
    for buffer, detail in zip(inputs, model.get_input_tensor_details(key).values()):
        # The real tool's fill: ints in [0, 99], floats in [-0.5, 0.5] (tflite::utils::GetDataRangesForType).
        integer = np.issubdtype(np.dtype(detail["dtype"]), np.integer)
        data = rng.integers(0, 100, detail["shape"]) if integer else rng.uniform(-0.5, 0.5, detail["shape"])
        buffer.write(np.asarray(data, dtype=detail["dtype"]))
    init_ms = (time.perf_counter() - start) * 1000.0
    init_rss = _rss_mb() - rss_start

    from sim_device import heat

    fs, device_dir = os.environ.get("MBK_SYSROOT"), os.environ.get("MBK_SIM_DEVICE_DIR")

    def phase(min_runs, min_s):
        print(f"INFO: Running benchmark for at least {min_runs} iterations and at least {_g(min_s)} seconds but "
              f"terminate if exceeding {_g(max_secs)} seconds.")
        times, begin = [], time.perf_counter()
        while (len(times) < min_runs or time.perf_counter() - begin < min_s) and time.perf_counter() - begin <= max_secs:
            t0 = time.perf_counter()
            try:
                model.run_by_index(0, inputs, outputs)
            except RuntimeError as err:
                print(f"ERROR: {HEADER} Run failed: {str(err).strip().splitlines()[-1]}")
                return None
            times.append(int((time.perf_counter() - t0) * 1e6))
        if fs and device_dir:
            heat(fs, device_dir, len(times))
        print(f"INFO: {_stat(times)}")
        sys.stdout.flush()
        return times

    warm = phase(max(warmup_runs, 1), warmup_min_secs)
    timed = warm and phase(num_runs, min_secs)
    if not timed:
        print("Benchmarking failed.")
        return 1
    ms = np.asarray(timed) / 1000.0
    print(f"INFO: {HEADER} ========== BENCHMARK RESULTS ==========")
    print(f"INFO: {HEADER} Model initialization: {init_ms:.2f} ms")
    print(f"INFO: {HEADER} Warmup (first):       {warm[0] / 1000.0:.2f} ms")
    print(f"INFO: {HEADER} Warmup (avg):         {np.mean(warm) / 1000.0:.2f} ms ({len(warm)} runs)")
    print(f"INFO: {HEADER} Inference (avg):      {ms.mean():.2f} ms ({len(ms)} runs)")
    print(f"INFO: {HEADER} Inference (min):      {ms.min():.2f} ms")
    print(f"INFO: {HEADER} Inference (max):      {ms.max():.2f} ms")
    print(f"INFO: {HEADER} Inference (std):      {ms.std():.2f}")
    print(f"INFO: {HEADER} Memory Usage:")
    print(f"INFO: {HEADER} Init footprint:       {init_rss:.2f} MB")
    print(f"INFO: {HEADER} Overall footprint:    {_rss_mb() - rss_start:.2f} MB")
    print(f"INFO: {HEADER} ======================================")
    if flags.get("result_file_path"):
        latency = _message([(1, "f", ms.mean()), (2, "f", ms.min()), (3, "f", ms.max()), (4, "f", ms.std()),
                            (5, "f", float(np.percentile(ms, 50))), (6, "f", float(np.percentile(ms, 5))),
                            (7, "f", float(np.percentile(ms, 95))), (8, "f", init_ms), (9, "f", warm[0] / 1000.0),
                            (10, "f", np.mean(warm) / 1000.0)])
        misc = _message([(1, "f", os.path.getsize(graph) / 1e6), (2, "i", len(ms)), (3, "i", len(warm))])
        with open(flags["result_file_path"], "wb") as f:
            f.write(_message([(1, "b", b"SIMULATED benchmark_litert_model"), (2, "b", latency), (4, "b", misc)]))
        print(f"INFO: {HEADER} Saved benchmark result to: {flags['result_file_path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
