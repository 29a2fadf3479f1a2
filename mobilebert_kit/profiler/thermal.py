"""Thermal bookkeeping for device trials: temperatures, frequencies, throttling.

``bench_loop.sh`` records a snapshot before and after every trial::

    {"zones": {"thermal_zone3:cpu1-gold-usr": 41200, ...},   # millidegrees C
     "max_mc": 41200,                                          # hottest CPU/SoC zone
     "cpus": {"4": {"cur": 2803200, "max": 2803200, "cap": 2803200}, ...}}  # kHz

When a trial counts as throttled: docs/profiler.md ("Heat"). What the phone prints is data: :func:`checked_record`
validates every field of a trial record once, on arrival (a reading that is not one counts as no reading).

Example:
    >>> throttle_reasons(before, after, cpus=[4, 5, 6, 7])  # doctest: +SKIP
    ['cpu4 capped at 1996 MHz of 2803 MHz after the trial']
"""

from mobilebert_kit.utils.limits import Limit, within

# A temperature in millidegrees C (as the baseline snapshot, device.py), a frequency in kHz (0: not readable).
MILLIDEGREES = Limit(float, -1e9, 1e9)
_KHZ = Limit(int, 0, 100_000_000)  # 100 GHz
_SECONDS = Limit(int, 0, 10**9)
_TRIAL = Limit(int, 0, 10**6)
_EXIT_CODE = Limit(int, -(2**31), 2**31 - 1)
_MAX_ENTRIES = 4096  # zones or cores in one snapshot: far above any phone


def _reading(limit, value):
    return value if within(limit, value) else None


def checked_snapshot(snapshot):
    """A ``before``/``after`` snapshot with only valid readings: ``{zones, max_mc, cpus}``, never another type."""
    if not isinstance(snapshot, dict):
        return {"zones": {}, "max_mc": None, "cpus": {}}
    zones, cpus = (value if isinstance(value := snapshot.get(key), dict) and len(value) <= _MAX_ENTRIES else {}
                   for key in ("zones", "cpus"))
    return {
        "zones": {str(name)[:200]: _reading(MILLIDEGREES, value) for name, value in zones.items()},
        "max_mc": _reading(MILLIDEGREES, snapshot.get("max_mc")),
        "cpus": {
            str(cpu): {key: _reading(_KHZ, state.get(key)) for key in ("cur", "max", "cap")}
            for cpu, state in cpus.items()
            if isinstance(state, dict)
        },
    }


def exit_code(value):
    """The trial's exit status as an int (the script prints a number; a numeric string reads as that number), or None."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 20:
        value = int(value.strip())
    return _reading(_EXIT_CODE, value)


def checked_record(record):
    """Returns the fields of a trial record (``@@MBK_JSON``) the profiler reads, each of its type and range, else None
    (``exit_code`` too: the caller refuses such a record); a snapshot that is not an object is an empty one."""
    timed_out = record.get("cooldown_timed_out")
    return {
        "trial": _reading(_TRIAL, record.get("trial")),
        "exit_code": exit_code(record.get("exit_code")),
        "cooldown_s": _reading(_SECONDS, record.get("cooldown_s")),
        "cooldown_timed_out": timed_out is True or (within(_SECONDS, timed_out) and timed_out != 0),
        "baseline_mc": _reading(MILLIDEGREES, record.get("baseline_mc")),
        "before": checked_snapshot(record.get("before")),
        "after": checked_snapshot(record.get("after")),
    }


def celsius(millidegrees):
    return None if millidegrees is None else round(millidegrees / 1000.0, 2)


def throttle_reasons(before, after, cpus):
    """Returns human-readable reasons a trial pinned to ``cpus`` ran throttled ([] if it did not), from its checked
    ``before`` / ``after`` snapshots (:func:`checked_snapshot`; may be None)."""
    reasons = []
    for label, snapshot in (("before", before), ("after", after)):
        for cpu in cpus:
            state = ((snapshot or {}).get("cpus") or {}).get(str(cpu)) or {}
            cap, maximum = state.get("cap"), state.get("max")
            if cap is not None and maximum is not None and 0 < cap < maximum:
                reasons.append(f"cpu{cpu} capped at {cap // 1000} MHz of {maximum // 1000} MHz {label} the trial")
    return reasons


def trial_thermal(record, cpus):
    """Returns the report's thermal fields of a trial pinned to ``cpus``, from its ``@@MBK_JSON`` record (checked
    here, so any object is safe to pass)."""
    record = checked_record(record)
    before, after = record["before"], record["after"]
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
