"""Thermal bookkeeping for device trials: temperatures, frequencies, throttling.

``bench_loop.sh`` records a snapshot before and after every trial::

    {"zones": {"thermal_zone3:cpu1-gold-usr": 41200, ...},   # millidegrees C
     "max_mc": 41200,                                          # hottest CPU/SoC zone
     "cpus": {"4": {"cur": 2803200, "max": 2803200, "cap": 2803200}, ...}}  # kHz

A trial is flagged *throttled* when, before or after it, a pinned core's
policy cap (``scaling_max_freq``, which the kernel's thermal governor lowers)
is below the core's hardware maximum (``cpuinfo_max_freq``). A hot phone that
still runs at full clock is not throttled, but its temperature rise is
reported. The script itself waits before each trial until the hottest zone is
back within a tolerance of the session's baseline (or a time limit passes).

Example:
    >>> throttle_reasons(before, after, cpus=[4, 5, 6, 7])  # doctest: +SKIP
    ['cpu4 capped at 1996 MHz of 2803 MHz after the trial']
"""


def celsius(millidegrees):
    return None if millidegrees is None else round(millidegrees / 1000.0, 2)


def throttle_reasons(before, after, cpus):
    """Returns human-readable reasons a trial ran throttled ([] if it did not).

    Args:
        before, after: snapshots from ``bench_loop.sh`` (dicts, may be None).
        cpus: the cores the trial was pinned to.
    """
    reasons = []
    for label, snapshot in (("before", before), ("after", after)):
        for cpu in cpus:
            state = ((snapshot or {}).get("cpus") or {}).get(str(cpu)) or {}
            cap, maximum = state.get("cap"), state.get("max")
            if cap is not None and maximum is not None and 0 < cap < maximum:
                reasons.append(f"cpu{cpu} capped at {cap // 1000} MHz of {maximum // 1000} MHz {label} the trial")
    return reasons


def trial_thermal(record, cpus):
    """Returns the thermal fields of a trial record for the report.

    Args:
        record: the ``@@MBK_JSON`` object the script printed for the trial.
        cpus: the cores the trial was pinned to.
    """
    before, after = record.get("before") or {}, record.get("after") or {}
    reasons = throttle_reasons(before, after, cpus)
    temp_before, temp_after = before.get("max_mc"), after.get("max_mc")
    return {
        "cooldown_s": record.get("cooldown_s"),
        "cooldown_timed_out": bool(record.get("cooldown_timed_out")),
        "baseline_c": celsius(record.get("baseline_mc")),
        "temp_before_c": celsius(temp_before),
        "temp_after_c": celsius(temp_after),
        "temp_rise_c": None if temp_before is None or temp_after is None else celsius(temp_after - temp_before),
        "freq_before_khz": {c: ((before.get("cpus") or {}).get(str(c)) or {}).get("cur") for c in cpus},
        "freq_after_khz": {c: ((after.get("cpus") or {}).get(str(c)) or {}).get("cur") for c in cpus},
        "cap_after_khz": {c: ((after.get("cpus") or {}).get(str(c)) or {}).get("cap") for c in cpus},
        "zones_before_c": {k: celsius(v) for k, v in (before.get("zones") or {}).items()},
        "zones_after_c": {k: celsius(v) for k, v in (after.get("zones") or {}).items()},
        "throttled": bool(reasons),
        "throttle_reasons": reasons,
    }
