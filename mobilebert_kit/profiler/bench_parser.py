"""Parser for the text LiteRT/TFLite ``benchmark_model`` prints, in every dialect the tool has printed (stats
lines, summaries, memory lines, LiteRT's results block, op-profiling tables, log prefixes): docs/profiler.md
lists them. Anything else is ignored. Text in which no result can be found raises :class:`BenchmarkParseError`
(never another exception), and so does a line that looks like a result but contradicts itself.

Example:
    >>> log = parse_benchmark_output(text)  # doctest: +SKIP
    >>> log.inference["avg"], log.timings_us["init"]  # doctest: +SKIP
    (2950340.0, 17187.0)
"""

import dataclasses
import functools
import math
import re

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from mobilebert_kit.profiler.errors import BenchmarkParseError

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"

# Prefixes stripped before a line is matched, tried repeatedly (INFO: then [file:line]).
_PREFIXES = [
    re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d+\s+\d+\s+\d+\s+[VDIWEF]\s+[\w.-]+\s*:\s?"),  # logcat threadtime
    re.compile(r"^[VDIWEF]/[\w.-]+\s*(?:\(\s*\d+\))?\s*:\s?"),  # logcat brief: I/tflite ( 123):
    re.compile(r"^(?:\.\.\.|[VDIWEF])\s+tflite\s*:\s?"),  # "I tflite  : ", docs' "... tflite  : "
    re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] \S+:\d+\]\s?"),  # TF1 benchmark tool
    re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+\s+\S+:\d+\]\s?"),  # glog / absl
    re.compile(r"^\[[^\]\s]+\.(?:cc|h|cpp|c):\d+\]\s?"),  # LiteRT [./litert/tools/x.h:81]
]
_LEVEL = re.compile(r"^(INFO|WARNING|WARN|ERROR|VERBOSE|DEBUG|FATAL): ?")

# Counts are matched with a sign so that "count=-5 ..." is refused by _check_stat, not skipped as unknown text
# (the summary line then stood in for it and the run was accepted).
_COUNT = r"[-+]?\d+"
_STAT_FULL = re.compile(
    rf"^count=({_COUNT}) first=({_NUM}) curr=({_NUM}) min=({_NUM}) max=({_NUM}) avg=({_NUM}) std=({_NUM})"
    rf"(?: p5=({_NUM}) median=({_NUM}) p95=({_NUM}))?\s*$"
)
_STAT_SAME = re.compile(rf"^count=({_COUNT}) curr=({_NUM})(\(all same\))?\s*$")
_STAT_OLD = re.compile(rf"^curr=({_NUM}) count=({_COUNT})(?: min=({_NUM}) max=({_NUM}) avg=({_NUM}) std=({_NUM}))?(\(all same\))?\s*$")
_STAT_EMPTY = re.compile(r"^count=[-+]?0+\s*$")

_SUMMARY = re.compile(
    rf"^Inference timings in us: Init: ({_NUM}), First inference: ({_NUM}), Warmup \(avg\): ({_NUM}), Inference \(avg\): ({_NUM})"
)
_LEGACY = re.compile(
    rf"^Average inference timings in us: Warmup: ({_NUM}), (?:Init: ({_NUM}), )?(?:no stats|Inference): ({_NUM})(?:, with stats: ({_NUM}))?"
)
_RUNNING = re.compile(
    rf"^Running benchmark for (?:at least )?(\d+) iterations?(?: and at least ({_NUM}) seconds)?(?: but terminate if exceeding ({_NUM}) seconds)?"
)
_INIT_SESSION = re.compile(rf"^Initialized session in ({_NUM}) ?ms\.?\s*$")
_MODEL_SIZE = re.compile(rf"^The input model file size \(MB\): ({_NUM})\s*$")
_MEM_DELTA = re.compile(rf"^(Memory footprint delta from the start of the tool|Peak memory footprint) \(MB\): init=({_NUM}) overall=({_NUM})\s*$")
_MEM_PEAK = re.compile(rf"^Overall peak memory footprint \(MB\) via periodic monitoring: ({_NUM})\s*$")
_MEM_STATUS = re.compile(rf"^([-+]) (VmRSS|RssAnnon|RssFile \+ RssShmem)\s*: ({_NUM}) MB\s*$")
_PARAM = re.compile(r"^([A-Za-z#][A-Za-z0-9#()_ ./-]*?)\s*:\s*\[(.*)\]\s*$")
_DELEGATION = re.compile(r"Replacing (\d+) out of (\d+) node\(s\) with delegate \(([^)]+)\) node, yielding (\d+) partitions")

_LITERT_BANNER = re.compile(r"^=+ BENCHMARK RESULTS =+$")
_LITERT_FIELDS = [
    ("init_ms", re.compile(rf"^Model initialization:\s*({_NUM}) ms")),
    ("warmup_first_ms", re.compile(rf"^Warmup \(first\):\s*({_NUM}) ms")),
    ("warmup_avg_ms", re.compile(rf"^Warmup \(avg\):\s*({_NUM}) ms(?: \((\d+) runs\))?")),
    ("inference_avg_ms", re.compile(rf"^Inference \(avg\):\s*({_NUM}) ms(?: \((\d+) runs\))?")),
    ("inference_min_ms", re.compile(rf"^Inference \(min\):\s*({_NUM}) ms")),
    ("inference_max_ms", re.compile(rf"^Inference \(max\):\s*({_NUM}) ms")),
    ("inference_std_ms", re.compile(rf"^Inference \(std\):\s*({_NUM})")),
    ("throughput_mb_s", re.compile(rf"^Throughput:\s*({_NUM}) MB/s")),
    ("init_footprint_mb", re.compile(rf"^Init footprint:\s*({_NUM}) MB")),
    ("overall_footprint_mb", re.compile(rf"^Overall footprint:\s*({_NUM}) MB")),
    # "Peak memory usage:" in early builds, "Peak memory:" in benchmark_litert_model.h of 2025.
    ("peak_memory_mb", re.compile(rf"^Peak memory(?: usage)?:\s*({_NUM}) MB")),
]

_SECTION = re.compile(r"^(Profiling Info for Benchmark Initialization|Operator-wise Profiling Info for Regular Benchmark Runs):?\s*$")
_TABLE_BANNER = re.compile(r"^=+ (Run Order|Top by Computation Time|Top by Memory Use|Summary by node type) =+$")
_TABLE_KEYS = {
    "Run Order": "run_order",
    "Top by Computation Time": "top_by_time",
    "Top by Memory Use": "top_by_memory",
    "Summary by node type": "by_node_type",
}
_NODES = re.compile(r"^(?:Number of nodes executed: (\d+)|(\d+) nodes observed)\s*$")
_TABLE_STAT = re.compile(r"^(Timings \(microseconds\)|Memory \(bytes\)): (.*)$")
# Column headers whose key is not the header in snake case (``_columns``: "times called" -> times_called).
_COLUMN_KEYS = {
    "start": "start_ms",
    "first": "first_ms",
    "%": "pct",
    "avg %": "pct",
    "cdf%": "cdf_pct",
    "cdf %": "cdf_pct",
}
_TEXT_COLUMNS = ("node_type", "name")
_FAILURE = re.compile(r"^(Benchmarking failed|Failed to |Aborted|Segmentation fault|.*: not found$|.*Exec format error|.*Permission denied)")


@dataclasses.dataclass
class BenchmarkLog:
    """What one benchmark_model run printed, in the tool's own units.

    Times are microseconds (``*_us`` and the stats dicts, as the tool prints
    them), except the LiteRT results block, which the tool prints in ms.

    Attributes:
        params: the ``Name: [value]`` parameter echo.
        phases: every ``Running benchmark ...`` phase with its stats, in order.
        warmup, inference: stats dicts (``count first curr min max avg std``
            and, when printed, ``p5 median p95``) of the warm-up and timed runs.
        timings_us: ``init``, ``first``, ``warmup_avg``, ``inference_avg``.
        init_session_ms: from ``Initialized session in X ms``.
        model_size_mb: from ``The input model file size (MB)``.
        memory: ``init_mb``, ``overall_mb`` (RSS delta), ``peak_mb`` (periodic
            monitoring), ``vm_rss_mb`` ..., whichever were printed.
        litert: the LiteRT ``BENCHMARK RESULTS`` fields (ms / MB).
        op_profiles: ``{"initialization"|"regular": {table key: rows, ...}}``.
        delegation: ``[{delegate, replaced, total, partitions}]``.
        errors: ``ERROR:`` lines and failure messages.
        formats: which output dialects were seen (for tests and reports).
        simulated: the output came from the device simulator's stand-in.
    """

    params: dict = dataclasses.field(default_factory=dict)
    phases: list = dataclasses.field(default_factory=list)
    warmup: dict | None = None
    inference: dict | None = None
    timings_us: dict = dataclasses.field(default_factory=dict)
    init_session_ms: float | None = None
    model_size_mb: float | None = None
    memory: dict = dataclasses.field(default_factory=dict)
    litert: dict = dataclasses.field(default_factory=dict)
    op_profiles: dict = dataclasses.field(default_factory=dict)
    delegation: list = dataclasses.field(default_factory=list)
    errors: list = dataclasses.field(default_factory=list)
    formats: set = dataclasses.field(default_factory=set)
    simulated: bool = False

    @property
    def failed(self):
        """True when the tool reported a failure and printed no timed result."""
        return bool(self.errors) and not self.has_result

    @property
    def has_result(self):
        return (
            bool(self.inference and self.inference.get("avg") is not None)
            or "inference_avg" in self.timings_us
            or "inference_avg_ms" in self.litert
            or self._profiler_timings() is not None
        )

    def _profiler_timings(self):
        # With op profiling on, the profiler's own "Timings (microseconds)" line
        # times every regular run; it is the result when the stats line is cut off.
        stat = (self.op_profiles.get("regular") or {}).get("timings_us")
        return stat if stat and stat.get("count") and stat.get("avg") is not None else None

    def latency_ms(self):
        """Returns the timed-run stats in milliseconds (keys of the tool's stats line).

        Falls back to the summary line or the LiteRT block when the stats line
        is missing; absent figures are None.
        """
        out = dict.fromkeys(("count", "first", "curr", "min", "max", "avg", "std", "p5", "median", "p95"))

        def in_ms(stats):
            return {key: value if key == "count" or value is None else value / 1000.0
                    for key, value in stats.items() if key in out}

        out.update(in_ms(self.inference or {}))
        if out["avg"] is None and self._profiler_timings() is not None:
            out.update(in_ms(self._profiler_timings()))
        if out["avg"] is None and "inference_avg" in self.timings_us:
            out["avg"] = self.timings_us["inference_avg"] / 1000.0
        if out["avg"] is None and "inference_avg_ms" in self.litert:
            out.update({key: self.litert.get(f"inference_{key}_ms") for key in ("avg", "min", "max", "std")},
                       count=self.litert.get("inference_runs"))
        for key in ("min", "max"):
            if out[key] is None:
                out[key] = out["avg"]
        return out

    def init_ms(self):
        if "init" in self.timings_us:
            return self.timings_us["init"] / 1000.0
        if "init_ms" in self.litert:
            return self.litert["init_ms"]
        return self.init_session_ms

    def first_inference_ms(self):
        if "first" in self.timings_us:
            return self.timings_us["first"] / 1000.0
        if "warmup_first_ms" in self.litert:
            return self.litert["warmup_first_ms"]
        if self.warmup and self.warmup.get("first") is not None:
            return self.warmup["first"] / 1000.0
        return None

    def op_summary(self):
        """Returns per-node-type rows of the timed runs (``Summary by node type``), or []."""
        return list((self.op_profiles.get("regular") or {}).get("by_node_type") or [])


def empty_op_profile(tool):
    """The warning of an --op-profile run whose ``tool`` printed no per-op table: its report's op profile is empty,
    not a model without ops."""
    return f"--op-profile: {tool} printed no per-op table (Summary by node type), so the op profile is empty"


def _number(text, line_number):
    value = float(text)
    if not math.isfinite(value):
        raise BenchmarkParseError(f"number {text!r} is not finite", line_number)
    return value


def _strip(line):
    """Removes log prefixes; returns ``(text, level)``."""
    text = line.strip()
    level = None
    for _ in range(4):
        before = text
        for prefix in _PREFIXES:
            text = prefix.sub("", text, count=1)
        if match := _LEVEL.match(text):
            level = match.group(1)
            text = text[match.end():]
        text = text.strip()
        if text == before:
            break
    return text, level


def _parse_stat(text, line_number):
    """Returns a checked stats dict for a stats line, or None if ``text`` is not one."""
    if _STAT_EMPTY.match(text):
        return {"count": 0}
    stat = _match_stat(text, line_number)
    if stat is not None:
        _check_stat(stat, line_number)
    return stat


def _match_stat(text, line_number):
    if match := _STAT_FULL.match(text):
        keys = ("first", "curr", "min", "max", "avg", "std", "p5", "median", "p95")
        return {"count": int(match.group(1)), **{key: None if value is None else _number(value, line_number)
                                                 for key, value in zip(keys, match.groups()[1:])}}
    if match := _STAT_SAME.match(text):
        count, curr = int(match.group(1)), _number(match.group(2), line_number)
        if match.group(3) is None and count != 1:
            raise BenchmarkParseError(f"stats line {text!r} has count={count} but only curr=", line_number)
        return _same_stat(count, curr)
    match = _STAT_OLD.match(text)
    if match is None:
        return None
    curr, count = _number(match.group(1), line_number), int(match.group(2))
    if match.group(5) is None:
        return _same_stat(count, curr)
    return {"count": count, "first": None, "curr": curr,
            "min": _number(match.group(3), line_number), "max": _number(match.group(4), line_number),
            "avg": _number(match.group(5), line_number), "std": _number(match.group(6), line_number)}


def _same_stat(count, curr):
    """The stats of a line whose runs all took ``curr``."""
    return {"count": count, "first": curr, "curr": curr, "min": curr, "max": curr, "avg": curr, "std": 0.0}


def _check_stat(stat, line_number):
    # avg is printed with 6 significant digits ("2.95034e+06"), so allow rounding.
    slack = 1e-5 * max(abs(stat["max"]), abs(stat["min"]), 1.0)
    if stat["count"] < 1:
        raise BenchmarkParseError(f"stats line with count={stat['count']} but values; a run count is at least 1", line_number)
    if stat["min"] > stat["max"] + slack or not stat["min"] - slack <= stat["avg"] <= stat["max"] + slack or stat["std"] < 0:
        raise BenchmarkParseError(
            f"inconsistent stats (min={stat['min']:g} avg={stat['avg']:g} max={stat['max']:g} std={stat['std']:g})", line_number
        )
    if stat["min"] < 0:
        raise BenchmarkParseError(f"negative latency in stats (min={stat['min']:g}); times are never below 0", line_number)
    percentiles = [stat.get(key) for key in ("p5", "median", "p95")]
    if all(p is not None for p in percentiles):
        p5, median, p95 = percentiles
        # The percentiles are ordered and lie within [min, max]: a median outside them is not a median of these runs.
        chain = (stat["min"], p5, median, p95, stat["max"])
        if any(low > high + slack for low, high in zip(chain, chain[1:])):
            raise BenchmarkParseError(
                f"inconsistent percentiles (min={stat['min']:g} p5={p5:g} median={median:g} p95={p95:g} max={stat['max']:g}); "
                "they must satisfy min <= p5 <= median <= p95 <= max", line_number
            )


def _duration(text, line_number, what):
    """A time the tool printed (init, first inference, an average): finite and not negative."""
    value = _number(text, line_number)
    if value < 0:
        raise BenchmarkParseError(f"negative time {what}: {text}; times are never below 0", line_number)
    return value


def _columns(header):
    names = re.findall(r"\[([^\]]+)\]", header)
    return [_COLUMN_KEYS.get(n.strip().lower(), re.sub(r"\W+", "_", n.strip().lower()).strip("_")) for n in names]


def _parse_row(line, columns, line_number):
    raw = line.strip()
    fields = [f.strip() for f in raw.split("\t") if f.strip()] if "\t" in raw else [f for f in re.split(r"\s{2,}", raw) if f]
    if len(fields) > len(columns) and columns and columns[-1] == "name":
        fields = fields[: len(columns) - 1] + ["  ".join(fields[len(columns) - 1:])]
    if len(fields) != len(columns):
        raise BenchmarkParseError(f"op-profiling row has {len(fields)} fields, the header has {len(columns)}: {raw[:80]!r}", line_number)
    row = {}
    for key, value in zip(columns, fields):
        if key in _TEXT_COLUMNS:
            row[key] = value
        else:
            try:
                row[key] = _number(value.rstrip("%"), line_number)
            except ValueError:
                raise BenchmarkParseError(f"op-profiling column {key!r} is not a number: {value[:40]!r}", line_number) from None
    for key in {"times_called", "count"} & row.keys():
        row[key] = int(row[key])
    return row


def parse_benchmark_output(text, *, require_result=True):
    """Parses benchmark_model output (docs/profiler.md lists the formats).

    Args:
        text: the tool's combined stdout/stderr (``str``; ``bytes`` are decoded
            as UTF-8 with replacement).
        require_result: if False, text without a timed result (a memory-only
            tail, a profile excerpt) is returned instead of rejected.

    Returns:
        A :class:`BenchmarkLog`. If the tool reported a failure, ``errors``
        says why and ``failed`` is True; the caller decides what to raise.

    Raises:
        BenchmarkParseError: no result and no failure message in the text, or
            a result line that contradicts itself.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise BenchmarkParseError(f"expected text, got {type(text).__name__}")
    log = BenchmarkLog()
    section = None  # op-profiling section name
    table = None  # (section, table key, columns) while reading rows
    pending_phase = None
    litert_block = False
    first_text = None
    for number, raw in enumerate(text.splitlines(), start=1):
        if "\x00" in raw:
            raise BenchmarkParseError("binary data (NUL bytes) in the output", number)
        stripped_raw = raw.strip()
        if stripped_raw.startswith(("INFO:", "WARNING:", "ERROR:", "VERBOSE:")):
            log.formats.add("level_prefix")
        line, level = _strip(raw)
        if line != raw.strip() and not stripped_raw.startswith(("INFO:", "WARNING:", "ERROR:", "VERBOSE:")):
            log.formats.add("log_prefix")
        if not line:
            table = None
            continue
        if first_text is None:
            first_text = line
        if "SIMULATOR" in line:
            log.simulated = True
        if level in ("ERROR", "FATAL"):
            log.errors.append(line)

        # --- op-profiling tables ---------------------------------------------
        if match := _SECTION.match(line):
            section = "initialization" if "Initialization" in match.group(1) else "regular"
            log.op_profiles.setdefault(section, {})
            table = None
            continue
        if match := _TABLE_BANNER.match(line):
            table = [section or "regular", _TABLE_KEYS[match.group(1)], None]
            log.op_profiles.setdefault(table[0], {})
            log.formats.add("op_profile")
            continue
        if table is not None:
            if table[2] is None:
                if "[" not in line:
                    raise BenchmarkParseError(f"expected a column header after the table banner, got {line[:80]!r}", number)
                table[2] = _columns(line)
                if len(table[2]) < 2 or table[2][0] != "node_type":
                    raise BenchmarkParseError(f"unrecognised op-profiling header {line[:80]!r}", number)
                log.op_profiles[table[0]].setdefault(table[1], [])
                continue
            if not (_NODES.match(line) or _TABLE_STAT.match(line)):
                log.op_profiles[table[0]][table[1]].append(_parse_row(raw, table[2], number))
                continue
            table = None
        if match := _NODES.match(line):
            key = "nodes_executed" if match.group(1) is not None else "nodes_observed"
            log.op_profiles.setdefault(section or "regular", {})[key] = int(match.group(1) or match.group(2))
            continue
        if match := _TABLE_STAT.match(line):
            stat = _parse_stat(match.group(2).strip(), number)
            if stat is None:
                raise BenchmarkParseError(f"unrecognised statistics after {match.group(1)!r}: {match.group(2)[:60]!r}", number)
            key = "timings_us" if match.group(1).startswith("Timings") else "memory_bytes"
            log.op_profiles.setdefault(section or "regular", {})[key] = stat
            continue

        # --- LiteRT results block ---------------------------------------------
        if _LITERT_BANNER.match(line):
            litert_block = True
            log.formats.add("litert_results")
            continue
        if litert_block:
            for key, pattern in _LITERT_FIELDS:
                if match := pattern.match(line):
                    # Times (*_ms) are never negative; footprints are deltas and may be.
                    log.litert[key] = (_duration(match.group(1), number, key) if key.endswith("_ms")
                                       else _number(match.group(1), number))
                    if key in ("warmup_avg_ms", "inference_avg_ms") and match.group(2):
                        log.litert[key.replace("avg_ms", "runs")] = int(match.group(2))
                    break
            else:
                litert_block = not line.startswith("=====")
            continue

        # --- run phases and summaries ------------------------------------------
        if match := _RUNNING.match(line):
            pending_phase = {
                "min_runs": int(match.group(1)),
                "min_secs": None if match.group(2) is None else _number(match.group(2), number),
                "max_secs": None if match.group(3) is None else _number(match.group(3), number),
                "stats": None,
            }
            log.phases.append(pending_phase)
            continue
        stat = _parse_stat(line, number)
        if stat is not None:
            if stat.get("count", 0) == 0:
                continue
            if "p95" in stat and stat.get("p95") is not None:
                log.formats.add("percentiles")
            if "(all same)" in line:
                log.formats.add("all_same")
            if pending_phase is not None and pending_phase["stats"] is None:
                pending_phase["stats"] = stat
            else:
                log.phases.append({"min_runs": None, "min_secs": None, "max_secs": None, "stats": stat})
            pending_phase = None
            continue
        if match := _SUMMARY.match(line):
            keys = ("init", "first", "warmup_avg", "inference_avg")
            labels = ("Init", "First inference", "Warmup (avg)", "Inference (avg)")
            log.timings_us.update({key: _duration(value, number, label)
                                   for key, label, value in zip(keys, labels, match.groups())})
            log.formats.add("summary")
            continue
        if match := _LEGACY.match(line):
            log.timings_us["warmup_avg"] = _duration(match.group(1), number, "Warmup")
            if match.group(2) is not None:
                log.timings_us["init"] = _duration(match.group(2), number, "Init")
            log.timings_us["inference_avg"] = _duration(match.group(3), number, "Inference")
            log.formats.add("legacy_summary")
            continue
        if match := _INIT_SESSION.match(line):
            log.init_session_ms = _duration(match.group(1), number, "Initialized session")
            continue
        if match := _MODEL_SIZE.match(line):
            log.model_size_mb = _number(match.group(1), number)
            continue
        if match := _MEM_DELTA.match(line):
            log.memory["init_mb"] = _number(match.group(2), number)
            log.memory["overall_mb"] = _number(match.group(3), number)
            log.formats.add("memory_delta" if match.group(1).startswith("Memory") else "memory_peak_legacy")
            continue
        if match := _MEM_PEAK.match(line):
            log.memory["peak_mb"] = _number(match.group(1), number)
            log.formats.add("memory_periodic")
            continue
        if match := _MEM_STATUS.match(line):
            key = {"VmRSS": "vm_rss_mb", "RssAnnon": "rss_anon_mb"}.get(match.group(2), "rss_file_shmem_mb")
            log.memory[key] = _number(match.group(3), number)
            continue
        if match := _DELEGATION.search(line):
            log.delegation.append(
                {"delegate": match.group(3), "replaced": int(match.group(1)), "total": int(match.group(2)), "partitions": int(match.group(4))}
            )
            continue
        match = _PARAM.match(line)
        if match and level != "ERROR":
            log.params[match.group(1).strip()] = match.group(2)
            continue
        if _FAILURE.match(line) and line not in log.errors:
            log.errors.append(line)

    _assign_phases(log)
    # LiteRT prints its footprints in the results block instead of the memory lines.
    for key, target in (("init_footprint_mb", "init_mb"), ("overall_footprint_mb", "overall_mb"), ("peak_memory_mb", "peak_mb")):
        if key in log.litert:
            log.memory.setdefault(target, log.litert[key])
    if require_result and not log.has_result and not log.errors:
        shown = (first_text or "")[:80]
        raise BenchmarkParseError(
            "no benchmark result found: expected a line like 'count=50 first=.. avg=.. std=..' or "
            f"'Inference timings in us: ...'; the text starts with {shown!r}"
        )
    return log


# benchmark_litert_model's --result_file_path: a binary tflite.tools.benchmark.BenchmarkResult (proto2,
# tflite/tools/benchmark/proto/benchmark_result.proto). No installed package ships its generated module, so the
# message classes are made by protobuf from this descriptor of the fields we read: field number -> (our key,
# proto type); protobuf parses the wire format and skips unknown fields.
_RESULT_FIELDS = {
    "latency": {1: ("avg_ms", "float"), 2: ("min_ms", "float"), 3: ("max_ms", "float"), 4: ("std_ms", "float"),
                5: ("median_ms", "float"), 6: ("p5_ms", "float"), 7: ("p95_ms", "float"), 8: ("init_ms", "float"),
                9: ("first_inference_ms", "float"), 10: ("warmup_avg_ms", "float")},
    "memory": {1: ("init_footprint_kb", "int64"), 2: ("overall_footprint_kb", "int64"), 3: ("peak_mem_mb", "float")},
    "misc": {1: ("model_size_mb", "float"), 2: ("num_runs", "int32"), 3: ("num_warmup_runs", "int32"),
             4: ("throughput_mb_per_s", "float"), 5: ("throughput_fps", "float")},
}
_RESULT_MESSAGES = {2: "latency", 3: "memory", 4: "misc"}


@functools.lru_cache(maxsize=None)
def _result_message():
    """The ``BenchmarkResult`` message class, built once from the fields above."""
    field = descriptor_pb2.FieldDescriptorProto
    optional = field.LABEL_OPTIONAL
    types = {"float": field.TYPE_FLOAT, "int64": field.TYPE_INT64, "int32": field.TYPE_INT32}
    proto = descriptor_pb2.FileDescriptorProto(name="mbk_benchmark_result.proto", package="mbk.benchmark",
                                               syntax="proto2")
    result = proto.message_type.add(name="BenchmarkResult")
    result.field.add(name="name", number=1, label=optional, type=field.TYPE_STRING)
    for number, group in _RESULT_MESSAGES.items():
        message = proto.message_type.add(name=group.capitalize())
        for inner, (key, kind) in _RESULT_FIELDS[group].items():
            message.field.add(name=key, number=inner, label=optional, type=types[kind])
        result.field.add(name=group, number=number, label=optional, type=field.TYPE_MESSAGE,
                         type_name=f".mbk.benchmark.{group.capitalize()}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("mbk.benchmark.BenchmarkResult"))


def parse_benchmark_result(data):
    """Reads benchmark_litert_model's binary ``BenchmarkResult`` result file (``--result_file_path``) into
    ``{"name", "latency": {...}, "memory": {...}, "misc": {...}}`` with the fields present; BenchmarkParseError
    when the bytes are not a well-formed message or a figure is impossible.

    Example:
        >>> parse_benchmark_result(bytes.fromhex("12050d0000803f"))["latency"]
        {'avg_ms': 1.0}
    """
    message = _result_message()()
    try:
        message.ParseFromString(bytes(data))
    except DecodeError as err:
        raise BenchmarkParseError(f"benchmark result file: not a BenchmarkResult message ({err})") from err
    out = {"name": message.name if message.HasField("name") else None, "latency": {}, "memory": {}, "misc": {}}
    for group, fields in _RESULT_FIELDS.items():
        inner = getattr(message, group)
        out[group] = {key: getattr(inner, key) for key, _ in fields.values() if inner.HasField(key)}
        for key, value in out[group].items():
            # A time, size or count is finite and not negative: a NaN or -5 ms median was reported as measured.
            if not math.isfinite(value) or value < 0:
                raise BenchmarkParseError(f"benchmark result file: {group}.{key} is {value!r}; a measured figure is "
                                          "finite and never below 0")
    latency = out["latency"]
    chain = [(key, latency[key]) for key in ("min_ms", "p5_ms", "median_ms", "p95_ms", "max_ms") if key in latency]
    for (low_key, low), (high_key, high) in zip(chain, chain[1:]):
        if low > high * (1 + 1e-5) + 1e-9:
            raise BenchmarkParseError(f"benchmark result file: latency {low_key} = {low:g} above {high_key} = {high:g}; "
                                      "they must satisfy min <= p5 <= median <= p95 <= max")
    return out


def merge_benchmark_result(log, result):
    """Fills ``log`` (:func:`parse_benchmark_output`) with what only the result file (:func:`parse_benchmark_result`)
    holds: median, p5, p95 (in microseconds, as the stats lines give them); returns ``log``."""
    latency = result.get("latency") or {}
    if not latency:
        return log
    stats = dict(log.inference or {})
    for key, ms_key in (("avg", "avg_ms"), ("min", "min_ms"), ("max", "max_ms"), ("std", "std_ms"),
                        ("median", "median_ms"), ("p5", "p5_ms"), ("p95", "p95_ms")):
        if stats.get(key) is None and latency.get(ms_key) is not None:
            stats[key] = latency[ms_key] * 1000.0
    # The file's percentiles must lie within the printed runs' range: a median of 1e6 ms beside a 2 ms average
    # run was reported as that run's median.
    low, high = stats.get("min"), stats.get("max")
    if low is None:
        low = log.litert["inference_min_ms"] * 1000.0 if log.litert.get("inference_min_ms") is not None else 0.0
    if high is None:
        high = log.litert["inference_max_ms"] * 1000.0 if log.litert.get("inference_max_ms") is not None else math.inf
    for key in ("p5", "median", "p95"):
        value = stats.get(key)
        if value is not None and not low * (1 - 1e-5) - 1e-6 <= value <= high * (1 + 1e-5) + 1e-6:
            raise BenchmarkParseError(f"benchmark result file: latency {key} {value / 1000.0:g} ms lies outside the "
                                      f"printed runs' range ({low / 1000.0:g} to {high / 1000.0:g} ms)")
    if stats.get("count") is None:
        stats["count"] = (result.get("misc") or {}).get("num_runs") or log.litert.get("inference_runs")
    log.inference = stats
    log.formats.add("result_file")
    for key, target in (("init_ms", "init"), ("first_inference_ms", "first")):
        if target not in log.timings_us and latency.get(key) is not None:
            log.timings_us[target] = latency[key] * 1000.0
    if (result.get("name") or "").startswith("SIMULATED"):
        log.simulated = True
    return log


def _assign_phases(log):
    """Picks the warm-up and timed phases among the stats lines seen."""
    with_stats = [p for p in log.phases if p["stats"]]
    if not with_stats:
        return
    regular = with_stats[-1]
    target = log.timings_us.get("inference_avg")
    if target is not None:
        # The summary's "Inference (avg)" names the timed phase exactly.
        for phase in with_stats:
            avg = phase["stats"].get("avg")
            if avg is not None and abs(avg - target) <= 1e-4 * max(abs(target), 1.0):
                regular = phase
    log.inference = regular["stats"]
    if earlier := [p for p in with_stats if p is not regular and with_stats.index(p) < with_stats.index(regular)]:
        log.warmup = earlier[-1]["stats"] if len(earlier) == 1 else earlier[0]["stats"]
