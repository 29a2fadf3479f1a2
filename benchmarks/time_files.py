"""Latency of exported files side by side: one pinned core, one thread, interleaved rounds, ratios to the first.

Every file gets the same single row of real text (tokenized with ``--tokenizer``'s vocabulary at ``--seq-len``),
so the figures compare files, not inputs. Only the ratios within one run are meant to be compared
(benchmarks/perf/timing.py says why).

Usage:
  PYTHONPATH=$PWD python benchmarks/time_files.py --tokenizer MODEL_DIR --text held_out.txt --seq-len 64 \\
      REFERENCE.tflite OTHER.tflite [...]
"""

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.perf.timing import interleaved, pinned, stats  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="the first is the reference of the ratios")
    parser.add_argument("--tokenizer", required=True, help="a model directory with a vocabulary")
    parser.add_argument("--text", required=True, help="a text file; its first non-empty line is the input")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=10.0, help="timed seconds per file, at least")
    args = parser.parse_args()

    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.convert.plan.input_set import InputSet
    from mobilebert_kit.sources.model_source import ModelSource

    line = next(t for t in Path(args.text).read_text(encoding="utf-8").splitlines() if t.strip())
    tokenizer = ModelSource.load(args.tokenizer).tokenizer
    row = {k: np.asarray(v) for k, v in InputSet.from_text([line], tokenizer, args.seq_len).arrays.items()}
    with pinned(args.core):
        runners = {path: ArtifactRunner(path, num_threads=1) for path in args.files}
        samples = interleaved({path: (lambda r=r: r.run(row)) for path, r in runners.items()}, args.rounds,
                              30, args.min_time, 5, 1.0)
    reference = stats(samples[args.files[0]])["median_ms"]
    print(f"core {args.core}, 1 thread, seq {args.seq_len}, {args.rounds} interleaved rounds")
    print("| file | median ms | min ms | x first |\n|---|---|---|---|")
    for path in args.files:
        s = stats(samples[path])
        print(f"| {os.path.basename(path)} | {s['median_ms']:.2f} | {s['min_ms']:.2f} | {s['median_ms'] / reference:.3f} |")


if __name__ == "__main__":
    main()
