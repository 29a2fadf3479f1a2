"""What the distillation step benchmarks share: their options, a timed call, alternating rounds, the RESULTS section.

Candidates are zero-argument callables (one training step each). Rounds
alternate between them so that a change of machine load hits every candidate
alike; ratios are taken within a round, then the median over rounds.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def step_parser(description, steps):
    """The options every distillation step benchmark takes (``--steps`` defaults to ``steps``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--work", type=Path, default=Path("/tmp/mbk-bench/distillation_ablation"))
    parser.add_argument("--append-results", action="store_true")
    return parser


def command_line(script, argv):
    """The command that reproduces this run, for the RESULTS section."""
    return f"python benchmarks/{script} " + " ".join(argv if argv is not None else sys.argv[1:])


def _finish(value):
    """Waits for a step's outputs (TensorFlow tensors, nested, or a torch tensor)."""
    if hasattr(value, "item"):
        value.item()
        return
    from mobilebert_kit.backend import tf

    for v in tf.nest.flatten(value):
        v.numpy()


def steps_per_second(fn, steps):
    """Steps per second of ``steps`` calls of ``fn``, pending work finished before and after."""
    _finish(fn())
    start = time.perf_counter()
    for _ in range(steps):
        out = fn()
    _finish(out)
    return steps / (time.perf_counter() - start)


def alternate(candidates, rounds, steps, baselines):
    """Warms every candidate up, then ``rounds`` alternating rounds.

    Returns:
        ``(rates, ratios)``: ``{name: [steps/s per round]}`` and
        ``{baseline: {name: [ratio to the baseline in the same round]}}``.
    """
    for name, fn in candidates.items():
        start = time.perf_counter()
        steps_per_second(fn, 1)
        print(f"warmed up {name} ({time.perf_counter() - start:.1f} s)", flush=True)
    rates = {name: [] for name in candidates}
    ratios = {base: {name: [] for name in candidates} for base in baselines}
    for r in range(rounds):
        this = {name: steps_per_second(fn, steps) for name, fn in candidates.items()}
        for name, value in this.items():
            rates[name].append(value)
            for base in baselines:
                ratios[base][name].append(value / this[base])
        print(f"round {r + 1}: " + ", ".join(f"{k} {v:.2f} step/s" for k, v in this.items()), flush=True)
    return rates, ratios


def median(values):
    return statistics.median(values)


def emit(section, append):
    """Prints the section and, with ``append``, adds it to benchmarks/RESULTS.md."""
    print(section)
    if append:
        with open(REPO / "benchmarks" / "RESULTS.md", "a") as handle:
            handle.write(section)
