"""Cold start and memory of one exported file, measured the way an app pays them: in a fresh process.

An app pays, at every launch, the runtime's import, the model's load and
preparation (LiteRT's ``allocate_tensors`` and XNNPACK's weight packing, ONNX
Runtime's graph optimisation, ExecuTorch's method load) and a first inference
that is slower than the rest (first-touch page faults, lazy kernel set-up).
None of that shows in a warm timing loop, so each file gets a child process of
its own, pinned to the same core as the timing loop, and reports:

- ``import_ms``: importing the runtime's Python package (LiteRT, ONNX Runtime,
  ExecuTorch): what a Python app pays once, an Android app pays it in its
  native library load instead;
- ``load_ms``: from nothing to a model ready to run (file read, prepare,
  allocate, inputs set);
- ``first_ms`` and ``second_ms``: the first and second inference;
- ``peak_rss_mb``: the process's peak resident memory (``VmHWM``) once the
  model has run, runtime included: what the phone's memory killer sees;
- ``model_rss_mb``: that peak minus the resident memory right after the
  runtime's import: what the model itself costs.

The child imports only NumPy, the runner module and the runtime, never
TensorFlow, so the figures are not inflated by the benchmark's own imports.

Usage (one file, prints one JSON object)::

    python -m benchmarks.perf.cold_start FILE [--vocab 30522] [--seq-len 128] [--core 1] [--repeat 3]
"""

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIELDS = ("import_ms", "load_ms", "first_ms", "second_ms", "peak_rss_mb", "model_rss_mb")
# The runtime module each suffix needs: imported and timed on its own, before the model.
RUNTIME_MODULE = {".tflite": "ai_edge_litert.interpreter", ".onnx": "onnxruntime", ".pte": "executorch.runtime"}


def _status_mb(field):
    from benchmarks.perf.timing import status_kb

    kb = status_kb(field)
    if kb is None:
        raise RuntimeError(f"/proc/self/status has no {field}")
    return kb / 1024.0


def child(path, vocab, seq_len):
    """Runs in the fresh process: import, load, two inferences; returns the figures (dict)."""
    import importlib

    import numpy as np  # noqa: F401  (the app's own NumPy is not the model's cost)

    from benchmarks.perf.runners import load_runner, realistic_inputs

    suffix = os.path.splitext(path)[1]
    if suffix not in RUNTIME_MODULE:
        raise ValueError(f"{path}: not a {', '.join(sorted(RUNTIME_MODULE))} file")
    inputs = realistic_inputs(vocab, seq_len)
    t0 = time.perf_counter()
    importlib.import_module(RUNTIME_MODULE[suffix])
    t1 = time.perf_counter()
    base = _status_mb("VmRSS")
    runner = load_runner(path, inputs)
    t2 = time.perf_counter()
    runner()
    t3 = time.perf_counter()
    runner()
    t4 = time.perf_counter()
    peak = _status_mb("VmHWM")
    return {
        "import_ms": (t1 - t0) * 1000.0,
        "load_ms": (t2 - t1) * 1000.0,
        "first_ms": (t3 - t2) * 1000.0,
        "second_ms": (t4 - t3) * 1000.0,
        "peak_rss_mb": peak,
        "model_rss_mb": max(0.0, peak - base),
    }


def measure(path, vocab, seq_len, core=None, repeat=3, timeout_s=600):
    """Cold start of ``path`` in ``repeat`` fresh processes; the median of each figure.

    Args:
        path: a ``.tflite``, ``.onnx`` or ``.pte`` file.
        vocab: vocabulary size (the inputs' ids stay inside it).
        seq_len: sequence length of the inputs.
        core: CPU core the child pins itself to (None: not pinned).
        repeat: fresh processes; the page cache is warm after the first, as it
            is for an app launched again, so the median is the warm-launch figure.
        timeout_s: per child.

    Returns:
        dict of :data:`FIELDS` (medians) plus ``launches``.

    Raises:
        RuntimeError: a child failed; the message is its last stderr line.

    Example:
        >>> measure("/tmp/model.tflite", 30522, 128, core=1)  # doctest: +SKIP
        {'import_ms': 61.0, 'load_ms': 210.3, 'first_ms': 75.2, ...}
    """
    import statistics

    argv = [sys.executable, "-m", "benchmarks.perf.cold_start", str(path), "--vocab", str(vocab),
            "--seq-len", str(seq_len)]
    if core is not None:
        argv += ["--core", str(core)]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    runs = []
    for _ in range(max(1, repeat)):
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout_s)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            err = [line for line in proc.stderr.splitlines() if line.strip()]
            raise RuntimeError(f"cold start of {os.path.basename(str(path))} failed: {err[-1] if err else 'no output'}")
        runs.append(json.loads(lines[-1]))
    out = {k: statistics.median(r[k] for r in runs) for k in FIELDS}
    out["launches"] = len(runs)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.perf.cold_start", description=__doc__.split("\n\n")[0])
    p.add_argument("path")
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--core", type=int, default=None)
    args = p.parse_args(argv)
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})
    print(json.dumps(child(args.path, args.vocab, args.seq_len)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
