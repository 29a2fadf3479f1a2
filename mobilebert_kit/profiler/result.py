"""The result record of one model file, sequence length and target, shared by the host and device runners; its
fields: docs/profiler.md, checked by :func:`mobilebert_kit.profiler.report.validate_report`.
"""

import math

from mobilebert_kit.profiler.errors import ProfilerError
from mobilebert_kit.utils.limits import Limit

_DAY_S = 86400.0
# The profiler's numeric options (`mbk profile`, and `mbk pipeline`'s timing of every file).
PROFILE_LIMITS = {
    "runs": Limit(int, 1, 1_000_000),
    "warmup": Limit(int, 1, 1_000_000),  # the profiler needs one untimed run (host.py)
    "threads": Limit(int, 1, 1024),
    "inter_op_threads": Limit(int, 1, 1024),
    "trials": Limit(int, 1, 1000),
    "min_time": Limit(float, 0.0, _DAY_S),
    "max_time": Limit(float, 0.0, _DAY_S, lo_open=True),
    "cooldown_timeout": Limit(int, 0, 86400),
    "cooldown_tolerance": Limit(float, 0.0, 100.0),
    "poll": Limit(int, 1, 3600),
    "flops": Limit(float, 0.0, 1e18, lo_open=True),
}


def new_result(info, *, target, seq_len, flops_override=None):
    """Returns a ``target`` (``"host"`` / ``"adb"``) result record of ``info`` (a ModelInfo) at ``seq_len``, with the
    model facts and the work of one inference filled in: ``flops_override`` (``--flops``) wins over the file's count;
    an unknown count leaves ``flops`` None and ``flops_source`` says why."""
    if flops_override is not None:
        if flops_override <= 0:
            raise ProfilerError(f"--flops must be positive, got {flops_override}")
        flops, by_type, source = int(flops_override), {}, "override (--flops)"
    else:
        flops, by_type, source = info.count_flops(seq_len)
    return {
        "target": target,
        "simulated": False,
        "model": info.summary(),
        "precision": info.precision,
        "variant": info.variant,
        "seq_len": int(seq_len),
        "device": {},
        "runtime": {},
        "config": {},
        "trials": [],
        **dict.fromkeys(("latency_ms", "samples_ms", "init_ms", "first_inference_ms", "peak_rss_mb")),
        "memory": {},
        "flops": flops,
        "flops_by_op": by_type,
        "flops_source": source,
        **dict.fromkeys(("gflops_per_s", "op_profile", "op_profile_source")),
        "throttled": False,
        "incomplete": False,
        "warnings": [],
    }


# The minimum time of timed runs when none is asked for (``mbk profile --min-time``'s default).
DEFAULT_MIN_TIME_S = 1.0


def check_time_limits(min_time_s, max_time_s):
    """Returns ``(min_time_s, max_time_s)`` as floats; ProfilerError when the minimum exceeds the maximum (the runs stop
    at ``max_time_s``). ``min_time_s`` None is :data:`DEFAULT_MIN_TIME_S`, which yields to a shorter maximum."""
    max_time_s = float(max_time_s)
    if min_time_s is None:
        return min(DEFAULT_MIN_TIME_S, max_time_s), max_time_s
    min_time_s = float(min_time_s)
    if min_time_s > max_time_s:
        raise ProfilerError(f"--min-time {min_time_s:g} exceeds --max-time {max_time_s:g}: runs stop at --max-time, so the "
                            "minimum can never be met; pass a --max-time at least as large as --min-time")
    return min_time_s, max_time_s


def counts(*named):
    """The ``(name, value)`` counts as ints; ProfilerError naming the first below 1 (host and adb profilers)."""
    for name, value in named:
        if int(value) < 1:
            raise ProfilerError(f"{name} must be at least 1, got {value}")
    return [int(value) for _, value in named]


def runs_warning(done, requested, max_time_s, where=""):
    """The warning for a run cut short by ``max_time_s`` before ``requested`` runs (None if they were all done)."""
    if done is None or done >= requested:
        return None
    return (f"only {done} of the {requested} requested runs were timed{where}: --max-time {max_time_s:g} s was reached "
            "first; raise --max-time or lower --runs")


def run_config(profiler, vocab_size, **extra):
    """The ``config`` block every result carries: ``profiler``'s pinning and run-length settings (host and adb
    profilers share them), with target-specific ``extra`` keys."""
    return {"cores": str(profiler.cores), "mask": profiler.mask, "cpus": list(profiler.cpus),
            **{key: getattr(profiler, key) for key in ("threads", "runs", "warmup", "min_time_s", "max_time_s")},
            **extra, "vocab_size": vocab_size}


def finish_result(result):
    """Fills the achieved GFLOP/s from the median latency; returns the record."""
    median = (result.get("latency_ms") or {}).get("median")
    if result.get("flops") and median and median > 0 and math.isfinite(median):
        result["gflops_per_s"] = result["flops"] / (median / 1000.0) / 1e9
    return result
