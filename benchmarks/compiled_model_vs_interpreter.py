"""LiteRT's CompiledModel against its Interpreter on the same static ``.tflite``: interleaved rounds, ratios.

Both APIs are timed as the host profiler times them (inputs written once, then one run per sample), on one
pinned core and one thread, with XNNPACK (``--delegate xnnpack``) or the builtin kernels (``none``). A file
with an open axis is refused: CompiledModel cannot resize it (artifacts/runtimes.py says why). Only
the ratios within one run are meant to be compared (benchmarks/perf/timing.py says why); no timed asserts.

Usage:
  PYTHONPATH=$PWD python benchmarks/compiled_model_vs_interpreter.py FILE.tflite [...] \\
      [--delegate xnnpack|none] [--rounds 5] [--min-time 2]
"""

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.perf.timing import interleaved, pinned, stats  # noqa: E402
from mobilebert_kit.artifacts.runner import load_compiled_model, load_tflite  # noqa: E402


def _feeds(details):
    """Token ids in [1, 100), a full mask and segment ids 0: every file takes them, and both APIs get the same."""
    rng = np.random.default_rng(0)
    return {d["name"]: (rng.integers(1, 100, d["shape"]) if "input_ids" in d["name"] else
                        np.ones(d["shape"]) if "mask" in d["name"] else np.zeros(d["shape"])).astype(d["dtype"])
            for d in details}


def _calls(path, delegate):
    """``{"compiled_model": fn, "interpreter": fn}``: one inference each, inputs already written."""
    compiled = load_compiled_model(path, num_threads=1, delegate=delegate)
    feeds = _feeds(compiled.input_details)
    compiled.set_inputs(feeds)
    interpreter = load_tflite(path, num_threads=1, delegate=delegate)
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], feeds[detail["name"]])
    return {"compiled_model": compiled.invoke, "interpreter": interpreter.invoke}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="static .tflite files (mbk export --static-axes)")
    parser.add_argument("--delegate", choices=("xnnpack", "none"), default="xnnpack")
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=2.0, help="timed seconds per API and round, at least")
    args = parser.parse_args()

    print(f"core {args.core}, 1 thread, delegate {args.delegate}, {args.rounds} interleaved rounds")
    print("| file | Interpreter median ms | CompiledModel median ms | CompiledModel / Interpreter |\n|---|---|---|---|")
    for path in args.files:
        with pinned(args.core):
            samples = interleaved(_calls(path, args.delegate), args.rounds, 30, args.min_time, 5, 0.5)
        old, new = stats(samples["interpreter"])["median_ms"], stats(samples["compiled_model"])["median_ms"]
        print(f"| {os.path.basename(path)} | {old:.3f} | {new:.3f} | {new / old:.3f} |")


if __name__ == "__main__":
    main()
