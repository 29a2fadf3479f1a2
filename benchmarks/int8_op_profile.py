"""Where a .tflite file's time goes, by XNNPACK kernel: interleaved latency, then a `perf` profile per file.

LiteRT's Python API has no per-op profiler and XNNPACK runs the whole graph as one delegate node, but
ai-edge-litert's shared library keeps its symbol table: `perf record` on a loop of `invoke()` names each
XNNPACK micro-kernel (`xnn_qs8_qc8w_gemm_..._7x16c8__avx512vnni_prfm`, `xnn_f32_qu8_vcvt_...`), which this
groups by what it does in the graph (int8 GEMM of FULLY_CONNECTED and BATCH_MATMUL, dynamic-range GEMM, the
on-the-fly quantization of dynamic int8, QUANTIZE / DEQUANTIZE, element-wise ADD / MUL, softmax, ...).
Each group's share of the samples is turned into milliseconds at the file's interleaved median, so the
groups of two files compare within one run. Needs `perf` (linux-tools) where the kernel allows it
(`perf_event_paranoid` <= 2, the `cpu-clock` software event works in a VM).

Usage:
  PYTHONPATH=$PWD python benchmarks/int8_op_profile.py DYNAMIC.tflite INT8.tflite [...] --core 1 --rounds 6
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.perf.timing import interleaved, pinned, stats  # noqa: E402

# (group, symbol pattern), first match wins. Patterns name XNNPACK's micro-kernel families (ai-edge-litert 2.3).
GROUPS = (
    ("GEMM dynamic int8 (qd8: FULLY_CONNECTED)", r"qd8_f32_qc8w_(i)?gemm"),
    ("GEMM int8 (qs8: FULLY_CONNECTED, BATCH_MATMUL)", r"qs8_qc8w_(i)?gemm|qs8_(i)?gemm|qu8_(i)?gemm"),
    ("GEMM float (f32: BATCH_MATMUL)", r"f32_(i)?gemm|f32_ppmm"),
    ("on-the-fly quantization (dynamic int8)", r"pack_lh|rminmax|qdu8|f32_qu8_vcvt|llrint"),
    ("QUANTIZE (f32 -> int8)", r"f32_qs8_vcvt"),
    ("DEQUANTIZE (int8 -> f32)", r"qs8_f32_vcvt|qu8_f32_vcvt"),
    ("ADD / MUL int8", r"q[su]8_v(add|mul)"),
    ("ADD / MUL float", r"f32_v(add|mul|sub)"),
    ("SOFTMAX float", r"raddstoreexpminusmax|f32_rmax|floating_point_softmax|compute_reciprocal|f32_raddexp"),
    ("runtime packing of BATCH_MATMUL operands", r"pack_qs8_to_qu8|packw|xnn_pack_"),
    ("TRANSPOSE / RESHAPE / copies", r"transpose|memmove|memcpy|copy"),
    ("builtin (non-XNNPACK) kernels", r"tflite::|optimized_ops|reference_ops|optimized_integer_ops|ruy"),
    ("XNNPACK runtime", r"xnn_|pthreadpool"),
)
OTHER = "Python, kernel, other"

_LOOP = r'''
import sys, time, numpy as np
from ai_edge_litert.interpreter import Interpreter
it = Interpreter(model_path=sys.argv[1], num_threads=1)
for d in it.get_input_details():  # a dynamic-length file runs at the timed length, not at its placeholder 1
    if -1 in list(d["shape_signature"]):
        it.resize_tensor_input(d["index"], [1, int(sys.argv[3])])
it.allocate_tensors()
rng = np.random.default_rng(0)
for d in it.get_input_details():
    name, shape, dtype = d["name"], d["shape"], d["dtype"]
    if "input_ids" in name:
        value = rng.integers(1000, 20000, size=shape).astype(dtype)
    elif "token_type" in name:
        value = np.zeros(shape, dtype)
    else:
        value = np.ones(shape, dtype)
    it.set_tensor(d["index"], value)
for _ in range(5):
    it.invoke()
end = time.perf_counter() + float(sys.argv[2])
while time.perf_counter() < end:
    it.invoke()
'''


def group_of(symbol, dso):
    if not any(lib in dso for lib in ("litert", "libc.so", "libm.so")):
        return OTHER
    for name, pattern in GROUPS:
        if re.search(pattern, symbol):
            return name
    return OTHER


def perf_groups(path, core, seconds, seq_len):
    """``{group: share of samples}`` of a loop of ``invoke()`` on ``path`` (one thread, pinned)."""
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        loop = os.path.join(tmp, "loop.py")
        Path(loop).write_text(_LOOP)
        subprocess.run(["taskset", "-c", str(core), "perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-o",
                        data, sys.executable, loop, path, str(seconds), str(seq_len)], check=True, capture_output=True)
        report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol", "--stdio"],
                                check=True, capture_output=True, text=True).stdout
    shares, top = {}, {}
    for line in report.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(\S.*?)\s*$", line)
        if not m:
            continue
        share, dso, symbol = float(m.group(1)) / 100.0, m.group(2), m.group(3).split()[0]
        group = group_of(symbol, dso)
        shares[group] = shares.get(group, 0.0) + share
        top.setdefault(group, []).append((share, symbol))
    return shares, top


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help=".tflite files; the first is the reference of the ratios")
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--min-time", type=float, default=12.0, help="timed seconds per file, at least")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--perf-seconds", type=float, default=15.0, help="profiled seconds per file (0: no profile)")
    args = parser.parse_args()

    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.convert.plan.input_set import InputSet

    row = {k: np.asarray(v[:1]) for k, v in InputSet.random(30522, 1, args.seq_len).arrays.items()}
    with pinned(args.core):
        runners = {path: ArtifactRunner(path, num_threads=1) for path in args.files}
        samples = interleaved({path: (lambda r=r: r.run(row)) for path, r in runners.items()}, args.rounds,
                              30, args.min_time, 5, 1.0)
    medians = {path: stats(samples[path])["median_ms"] for path in args.files}
    reference = medians[args.files[0]]
    print(f"core {args.core}, 1 thread, seq {args.seq_len}, {args.rounds} interleaved rounds, "
          f"load {os.getloadavg()[0]:.2f}")
    print("| file | median ms | min ms | x first |\n|---|---|---|---|")
    for path in args.files:
        s = stats(samples[path])
        print(f"| {os.path.basename(path)} | {s['median_ms']:.2f} | {s['min_ms']:.2f} | "
              f"{s['median_ms'] / reference:.3f} |")
    if args.perf_seconds <= 0:
        return
    if not shutil.which("perf"):
        print("\nno `perf` on PATH: no per-kernel profile")
        return
    profiles = {path: perf_groups(path, args.core, args.perf_seconds, args.seq_len) for path in args.files}
    names = [g for g, _ in GROUPS] + [OTHER]
    print("\nms per inference by kernel group (share of perf samples x the interleaved median)\n")
    print("| group | " + " | ".join(os.path.basename(p) for p in args.files) + " |")
    print("|---|" + "---|" * len(args.files))
    for group in names:
        if all(profiles[p][0].get(group, 0.0) < 0.001 for p in args.files):
            continue
        cells = [f"{profiles[p][0].get(group, 0.0) * medians[p]:.2f} ({100 * profiles[p][0].get(group, 0.0):.1f}%)"
                 for p in args.files]
        print(f"| {group} | " + " | ".join(cells) + " |")
    print("\nheaviest kernel of each group:")
    for path in args.files:
        for group in names:
            kernels = sorted(profiles[path][1].get(group, []), reverse=True)
            if kernels and kernels[0][0] >= 0.005:
                print(f"  {os.path.basename(path)}: {group}: {kernels[0][1]} ({100 * kernels[0][0]:.1f}%)")


if __name__ == "__main__":
    main()
