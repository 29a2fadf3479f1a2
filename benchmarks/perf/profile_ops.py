"""Op profile of a ``.tflite`` file: which ops XNNPACK takes, which run on LiteRT's builtin kernels.

LiteRT 2.x has no per-op profiler in Python, so this reads the graph three ways:

1. census: every op by type with its input/output dtypes (from the flatbuffer);
2. delegation: an interpreter with XNNPACK and delegate node fusion *off*
   (``experimental_disable_delegate_node_fusion``) turns every delegated op
   into its own delegate node, whose outputs are that op's outputs; an op is
   left to the builtin kernels when no delegate node produces its outputs;
3. partitions: the normal interpreter's "Replacing N out of M node(s) with
   delegate ... yielding K partitions" line (the C++ log, read from fd 2).

plus the latency with XNNPACK on and off. Findings for the MobileBERT exports
are in ``benchmarks/perf/NOTES.md``.

Usage:
    python -m benchmarks.perf.profile_ops FILE.tflite [FILE.tflite ...] [--runs 20]
"""

import argparse
import collections
import contextlib
import os
import re
import sys
import tempfile
import time

import numpy as np

_SHORT = {"float32": "f32", "float16": "f16", "int32": "i32", "uint8": "u8", "int64": "i64", "bool": "bool",
          "int16": "i16", "int8": "i8"}


def census(path):
    """List of ops: dicts {index, op, inputs: [dtype], outputs: [dtype], output_tensors: [index]}."""
    from mobilebert_kit.artifacts.reader import read_artifact

    graph = read_artifact(path, fmt="tflite")
    ops = []
    for i, op in enumerate(graph.ops):
        ins = [t for t in op["inputs"] if t >= 0]
        outs = op["outputs"]
        ops.append({
            "index": i,
            "op": op["type"],
            "inputs": [_SHORT.get(graph.tensors[t]["dtype"], "?") for t in ins],
            "outputs": [_SHORT.get(graph.tensors[t]["dtype"], "?") for t in outs],
            "output_tensors": outs,
            "name": graph.tensors[outs[0]]["name"] if outs else "",
            "shape": list(graph.tensors[outs[0]]["shape"]) if outs else [],
            "const_inputs": [graph.tensors[t]["constant"] for t in ins],
        })
    return ops


@contextlib.contextmanager
def _captured_fd2():
    """Captures what C++ code writes to file descriptor 2 (stderr) inside the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    box = {"text": ""}
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield box
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            box["text"] = tmp.read().decode(errors="replace")


def delegation(path):
    """Returns (op indices XNNPACK takes, number of delegate partitions, delegate log lines).

    The converter's own check (``mobilebert_kit.artifacts.xnnpack_coverage``, behind
    ``mbk inspect --xnnpack``) does the reading; this adds the delegate's log lines.
    """
    from ai_edge_litert.interpreter import Interpreter

    from mobilebert_kit.artifacts.xnnpack_coverage import xnnpack_coverage

    with _captured_fd2() as log:  # first: LiteRT logs the delegate's "Replacing ..." line once per process
        Interpreter(model_path=path, num_threads=1).allocate_tensors()
    coverage = xnnpack_coverage(path)
    lines = [line.strip() for line in log["text"].splitlines() if "Replacing" in line or "partition" in line]
    return set(coverage["delegated_indices"]), coverage["partitions"], lines


def latency(path, xnnpack, runs):
    from benchmarks.perf.runners import TfliteRunner, realistic_inputs

    from ai_edge_litert.interpreter import Interpreter

    seq_len = int(Interpreter(model_path=path).get_input_details()[0]["shape"][-1])
    # ids 1, 2 and 5 only: inside any vocabulary (the file does not say its size)
    runner = TfliteRunner(path, realistic_inputs(6, seq_len), xnnpack=xnnpack)
    runner()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        runner()
        times.append((time.perf_counter() - start) * 1000)
    return float(np.median(times))


def _signature(op):
    return f"{op['op']} ({','.join(op['inputs'])} -> {','.join(op['outputs'])})"


def profile(path, runs=20, core=None, detail=False):
    """Markdown report for one file."""
    ops = census(path)
    taken, partitions, log_lines = delegation(path)
    total = collections.Counter(_signature(op) for op in ops)
    left = collections.Counter(_signature(op) for op in ops if op["index"] not in taken)
    core = core if core is not None else max(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        on, off = latency(path, True, runs), latency(path, False, runs)
    finally:
        os.sched_setaffinity(0, before)
    logged = next((m.group(0) for line in log_lines for m in [re.search(r"Replacing.*", line)] if m), None)
    out = [
        f"#### `{os.path.basename(path)}` ({os.path.getsize(path) / 1e6:.1f} MB)",
        "",
        f"- {len(ops)} ops, {len(taken)} taken by XNNPACK, {len(ops) - len(taken)} on builtin kernels",
        f"- XNNPACK partitions (delegate nodes): {partitions}" + (f"; log: {logged}" if logged else ""),
        f"- median latency, core {core}, {runs} runs: XNNPACK {on:.2f} ms, builtin kernels only {off:.2f} ms",
        "",
        "| op (input dtypes -> output dtypes) | count | left to builtin kernels |",
        "|---|---|---|",
    ]
    for signature, count in sorted(total.items(), key=lambda kv: (-left.get(kv[0], 0), -kv[1])):
        out.append(f"| {signature} | {count} | {left.get(signature, 0)} |")
    if detail:
        out += ["", "Ops on builtin kernels (index, op, output shape, output tensor):", ""]
        out += [f"- {op['index']} {_signature(op)} {op['shape']} `{op['name'][:110]}`" for op in ops if op["index"] not in taken]
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--core", type=int, default=None)
    p.add_argument("--detail", action="store_true", help="list every op left to the builtin kernels")
    args = p.parse_args(argv)
    for path in args.files:
        print(profile(path, args.runs, args.core, args.detail))
    return 0


if __name__ == "__main__":
    sys.exit(main())
