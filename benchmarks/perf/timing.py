"""Pinning, the timing loop, latency statistics and peak memory.

The machine is a shared 2-core VM: medians move 5-40% between passes
(shared/reference/performance-notes.md). So every candidate is timed in the
same process, on the same pinned core, in interleaved rounds (round r times
candidate A, then B, ... before round r+1), and only ratios from one run are
compared. Each round runs until both a minimum count and a minimum time are
reached, after a warm-up that is not recorded.
"""

import contextlib
import math
import os
import time

import numpy as np


@contextlib.contextmanager
def pinned(core):
    """Pins the calling thread (and threads it starts) to one CPU core; restores the old mask."""
    before = os.sched_getaffinity(0)
    if core not in before:
        raise ValueError(f"core {core} is not available to this process (allowed: {sorted(before)})")
    os.sched_setaffinity(0, {core})
    try:
        yield core
    finally:
        os.sched_setaffinity(0, before)


def stats(samples_ms):
    """Median, p90, min, mean and count of latencies in ms."""
    a = np.asarray(samples_ms, dtype=np.float64)
    return {
        "median_ms": float(np.median(a)),
        "p90_ms": float(np.percentile(a, 90)),
        "min_ms": float(a.min()),
        "mean_ms": float(a.mean()),
        "runs": int(a.size),
    }


def time_block(fn, min_runs, min_time_s, max_runs=100000, clock=time.perf_counter):
    """Calls ``fn`` until ``min_runs`` calls and ``min_time_s`` seconds are reached; returns ms per call.

    ``clock``: what a call's time is read from; ``time.process_time`` counts the CPU time of this process only,
    which a host shared with other jobs does not inflate while they hold the core (wall time did: the same file
    timed 0.98x and 1.29x the peer in two runs minutes apart at load 3.5 on 2 cores).
    """
    samples = []
    start = time.perf_counter()
    while len(samples) < max_runs and (len(samples) < min_runs or time.perf_counter() - start < min_time_s):
        t0 = clock()
        fn()
        samples.append((clock() - t0) * 1000.0)
    return samples


def warm_up(fn, runs, min_time_s=0.0):
    """Unrecorded calls: first-call allocation, XNNPACK weight packing, page faults, caches."""
    time_block(fn, runs, min_time_s)


def interleaved(candidates, rounds, min_runs, min_time_s, warmup_runs, warmup_time_s, log=None,
                clock=time.perf_counter):
    """Times every candidate in ``rounds`` interleaved rounds.

    Args:
        candidates: dict name -> zero-argument callable (one inference).
        rounds: number of rounds; each gets ``ceil(min_runs / rounds)`` calls and
            ``min_time_s / rounds`` seconds per candidate, at least.
        min_runs, min_time_s: totals per candidate over all rounds.
        warmup_runs, warmup_time_s: unrecorded calls per candidate before round 1.
        log: optional callable for progress lines.
        clock: the timer of each call (:func:`time_block`).

    Returns:
        dict name -> list of latencies (ms).
    """
    for name, fn in candidates.items():
        warm_up(fn, warmup_runs, warmup_time_s)
    per_round_runs = max(1, math.ceil(min_runs / rounds))
    per_round_time = min_time_s / rounds
    samples = {name: [] for name in candidates}
    for r in range(rounds):
        for name, fn in candidates.items():
            samples[name].extend(time_block(fn, per_round_runs, per_round_time, clock=clock))
        if log:
            log(f"  round {r + 1}/{rounds} done")
    return samples


def status_kb(field):
    """A ``/proc/self/status`` field (``VmRSS``, ``VmHWM``) in kB; None where it cannot be read."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


@contextlib.contextmanager
def peak_memory():
    """Measures the peak resident memory added inside the block, in MB (``box["peak_mb"]``; None if unknown)."""
    box = {"peak_mb": None}
    from mobilebert_kit.profiler.host import reset_peak_rss

    can_reset = reset_peak_rss()
    base = status_kb("VmRSS")
    try:
        yield box
    finally:
        peak = status_kb("VmHWM")
        if can_reset and base is not None and peak is not None:
            box["peak_mb"] = max(0.0, (peak - base) / 1024.0)
