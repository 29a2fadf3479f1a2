"""Latency statistics: the figures every profiler report carries (docs/profiler.md says which and when they are n/a).

Percentiles interpolate linearly (``numpy.percentile``'s default); ``std`` is the population's (ddof=0, as
benchmark_model prints it). The ``q``-th percentile needs ``100 / (100 - q)`` runs (:func:`estimable`), so that at
least one run is expected above it.

Example:
    >>> summarize([10.0, 11.0, 12.0])["median"]
    11.0
"""

import math

import numpy as np

STAT_KEYS = ("count", "mean", "std", "min", "max", "median", "p90", "p99", "mad", "cv")
# The fewest runs each figure needs (see the module docstring); the others need one.
MIN_COUNT = {"std": 2, "mad": 2, "cv": 2, "p90": 10, "p99": 100}


def estimable(key, count):
    """Whether ``count`` runs are enough to report figure ``key`` (a :data:`STAT_KEYS` name)."""
    return int(count or 0) >= MIN_COUNT.get(key, 1)


def too_few_runs(stats, figures=("p90", "p99", "std", "mad", "cv")):
    """Returns a one-line warning naming the ``figures`` left n/a for lack of runs, or None."""
    count = int(stats.get("count") or 0)
    missing = [key for key in figures if not estimable(key, count)]
    if not missing:
        return None
    needs = ", ".join(f"{key} {MIN_COUNT[key]}" for key in missing)
    return f"{', '.join(missing)} n/a: {count} timed run(s) are too few to estimate them (runs needed: {needs}); raise --runs"


def summarize(samples_ms):
    """Returns the latency statistics of ``samples_ms`` (single inferences, ms) as a dict (see module docstring);
    raises ValueError when there are none or one is not a finite number."""
    values = np.asarray(list(samples_ms), dtype=np.float64)
    if values.size == 0:
        raise ValueError("no latency samples to summarize")
    if not np.all(np.isfinite(values)):
        raise ValueError("latency samples must be finite numbers")
    median = float(np.percentile(values, 50))
    mean = float(values.mean())
    std = float(values.std())
    figures = {
        "count": int(values.size),
        "mean": mean,
        "std": std,
        "min": float(values.min()),
        "max": float(values.max()),
        "median": median,
        "p90": float(np.percentile(values, 90)),
        "p99": float(np.percentile(values, 99)),
        "mad": float(np.median(np.abs(values - median))),
        "cv": std / mean if mean > 0 else math.nan,
    }
    return {key: value if estimable(key, figures["count"]) else None for key, value in figures.items()}


# The confidence a timing is reported with: the 95% interval of the median, distribution-free.
CONFIDENCE = 0.95


def median_interval(samples_ms, confidence=CONFIDENCE):
    """The distribution-free ``confidence`` interval of the median of ``samples_ms``, or None for too few runs.

    The interval runs from the ``k``-th smallest to the ``k``-th largest sample, with ``k`` the largest rank for
    which ``P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2``: the probability that fewer than ``k`` samples fall
    below the true median (David & Nagaraja, *Order Statistics*, 3rd ed., Sec. 7.1). Latencies are skewed and
    have outliers, so no normal approximation of the samples is assumed; 95% needs at least 6 runs.

    Example:
        >>> median_interval([10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0])
        (11.0, 18.0)
        >>> median_interval([1.0, 2.0]) is None
        True
    """
    values = np.sort(np.asarray(list(samples_ms), dtype=np.float64))
    n = int(values.size)
    tail = (1.0 - confidence) / 2
    k, below = 0, 0.0  # below: P(Binomial(n, 1/2) < k + 1), summed term by term in log space (n may be large)
    log_half = n * math.log(0.5)
    while k < n // 2:
        term = math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + log_half)
        if below + term > tail:
            break
        below += term
        k += 1
    if k == 0:
        return None
    return float(values[k - 1]), float(values[n - k])


def combine_trials(trial_stats):
    """Summarizes device trials, each the tool's own statistics (``count``, ``avg``, ``std``, ``min``, ``max``,
    optionally ``median``; ms), into a dict with the keys of :data:`STAT_KEYS` plus ``trials``, as docs/profiler.md
    says (the median of the trial medians, or averages; the pooled std; no p90, p99 or MAD)."""
    trials = [t for t in trial_stats if t and t.get("avg") is not None]
    if not trials:
        raise ValueError("no finished trials to combine")
    # Old builds print only an average; such a trial counts as one sample.
    counts = np.array([t.get("count") or 1 for t in trials], dtype=np.float64)
    avgs = np.array([t["avg"] for t in trials], dtype=np.float64)
    stds = np.array([t.get("std") or 0.0 for t in trials], dtype=np.float64)
    mean = float((counts * avgs).sum() / counts.sum())
    # Pooled variance: within-trial variance plus the spread of trial means.
    variance = float((counts * (stds**2 + (avgs - mean) ** 2)).sum() / counts.sum())
    std = math.sqrt(max(variance, 0.0))
    medians = [t["median"] if t.get("median") is not None else t["avg"] for t in trials]
    count = int(counts.sum())
    spread = estimable("std", count)
    return {
        "count": count,
        "mean": mean,
        "std": std if spread else None,
        "min": float(min(t["min"] if t.get("min") is not None else t["avg"] for t in trials)),
        "max": float(max(t["max"] if t.get("max") is not None else t["avg"] for t in trials)),
        "median": float(np.median(medians)),
        **dict.fromkeys(("p90", "p99", "mad")),  # never printed by the tool
        "cv": (std / mean if mean > 0 else math.nan) if spread else None,
        "trials": len(trials),
    }
