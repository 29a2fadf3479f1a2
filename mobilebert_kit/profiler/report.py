"""Profiler reports (docs/profiler.md, "Reports"): a versioned JSON document of one record per model file,
sequence length and device, and CSV and Markdown tables that are flat views of the same records.
"""

import csv
import datetime
import io
import json
import math
import platform
from pathlib import Path

import mobilebert_kit
from mobilebert_kit.profiler.errors import ProfilerError
from mobilebert_kit.profiler.stats import STAT_KEYS
from mobilebert_kit.utils.atomic import write_text
from mobilebert_kit.utils.output_check import OutputKind, json_field, text_starts
from mobilebert_kit.utils.structured import load_json

SCHEMA = "mobilebert_kit.profile"
SCHEMA_VERSION = 1
# A later run recognises its own JSON report by the schema and replaces it (utils.output_check).
PROFILE_JSON = OutputKind("profile-json", False, "a profile JSON report", json_field("schema", SCHEMA))
MARKDOWN_TITLE = "# mbk profile report"  # the first line of the Markdown table
PROFILE_MD = OutputKind("profile-md", False, "a profile Markdown table", text_starts(MARKDOWN_TITLE + "\n"))

# Required record fields and their JSON types (None allowed where noted).
_RECORD_FIELDS = {
    "target": str,
    "simulated": bool,
    "model": dict,
    "precision": str,
    "variant": str,
    "seq_len": int,
    "device": dict,
    "runtime": dict,
    "config": dict,
    "trials": list,
    "latency_ms": (dict, type(None)),
    "init_ms": (float, int, type(None)),
    "first_inference_ms": (float, int, type(None)),
    "peak_rss_mb": (float, int, type(None)),
    "flops": (int, type(None)),  # None: the count is unknown (see flops_source)
    "gflops_per_s": (float, int, type(None)),
    "op_profile": (list, type(None)),
    "throttled": bool,
    "incomplete": bool,
    "warnings": list,
}

CSV_COLUMNS = (
    "model", "format", "precision", "variant", "target", "device", "serial", "simulated", "cores", "mask", "threads",
    "runtime", "delegate", "seq_len", "trials", "count", "median_ms", "p90_ms", "p99_ms", "mean_ms", "std_ms", "mad_ms",
    "cv", "min_ms", "max_ms", "init_ms", "first_inference_ms", "peak_rss_mb", "flops", "gflops_per_s", "throttled",
    "incomplete",
)


def csv_header():
    """The first line of every profile CSV: its column names, as :func:`to_csv` writes them."""
    return ",".join(CSV_COLUMNS) + "\n"


# Recognised by the header the writer writes now (read when asked, so the two never disagree).
PROFILE_CSV = OutputKind("profile-csv", False, "a profile CSV table", lambda path: text_starts(csv_header())(path))


def build_report(results, *, options=None, error=None):
    """Wraps result records (host or device) into the versioned report document, with the command's ``options``
    recorded for reproduction and ``error``, the one line that stopped the run early, if any."""
    report = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tool": {"name": "mbk profile", "version": mobilebert_kit.__version__, "python": platform.python_version()},
        "options": dict(options or {}),
        "simulated": any(r.get("simulated") for r in results),
        "incomplete": bool(error) or any(r.get("incomplete") for r in results),
        "error": error,
        "results": [jsonable(r) for r in results],
    }
    validate_report(report)
    return report


def validate_report(report):
    """Checks a report document against schema version 1; one ProfilerError lists every field missing or of the
    wrong type."""
    problems = []
    if not isinstance(report, dict):
        raise ProfilerError("report is not a JSON object")
    if report.get("schema") != SCHEMA:
        problems.append(f"schema is {report.get('schema')!r}, expected {SCHEMA!r}")
    if report.get("schema_version") != SCHEMA_VERSION:
        problems.append(f"schema_version is {report.get('schema_version')!r}; this mbk reads version {SCHEMA_VERSION}")
    for key, kind in (("simulated", bool), ("incomplete", bool), ("results", list), ("created", str)):
        if not isinstance(report.get(key), kind):
            problems.append(f"{key} must be {kind.__name__}")
    for index, record in enumerate(report.get("results") or []):
        if not isinstance(record, dict):
            problems.append(f"results[{index}] is not an object")
            continue
        for key, kind in _RECORD_FIELDS.items():
            if key not in record:
                problems.append(f"results[{index}].{key} is missing")
            elif not isinstance(record[key], kind) or (isinstance(record[key], bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))):
                problems.append(f"results[{index}].{key} has type {type(record[key]).__name__}")
        if isinstance(latency := record.get("latency_ms"), dict):
            problems += [f"results[{index}].latency_ms.{key} is missing" for key in STAT_KEYS if key not in latency]
        if record.get("target") not in ("host", "adb"):
            problems.append(f"results[{index}].target must be 'host' or 'adb'")
    if problems:
        raise ProfilerError("invalid profile report: " + "; ".join(problems[:8]) + (" ..." if len(problems) > 8 else ""))
    return report


def load_report(path):
    """Reads and validates a JSON report written by :func:`write_json`."""
    report = load_json(Path(path), "the report", expect=dict, error=ProfilerError,
                       fix="profile again with --json to write one")
    return validate_report(report)


def jsonable(value):
    """``value`` as JSON holds it: str keys, lists, numpy scalars as numbers, non-finite floats as null."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return jsonable(value.item())  # numpy scalars
    return value


def write_json(report, path, overwrite=False):
    """Writes the JSON report atomically (``utils.atomic``: never over a file that is not a profile report
    unless ``overwrite``); returns the path."""
    validate_report(report)
    return write_text(path, json.dumps(report, indent=2, sort_keys=False, allow_nan=False) + "\n",
                      kind=PROFILE_JSON, overwrite=overwrite)


def flat_rows(report):
    """One flat dict per record with the :data:`CSV_COLUMNS` keys."""
    rows = []
    for r in report["results"]:
        lat = r.get("latency_ms") or {}
        device = r.get("device") or {}
        runtime = r.get("runtime") or {}
        config = r.get("config") or {}
        rows.append({
            "model": r["model"].get("name"),
            "format": r["model"].get("format"),
            "device": device.get("model") or device.get("cpu_model") or device.get("kind"),
            "serial": device.get("serial", ""),
            **{key: config.get(key) for key in ("cores", "mask", "threads")},
            "runtime": runtime.get("name"),
            "delegate": runtime.get("delegate", runtime.get("graph_optimization", "")),
            "seq": _seq_cell(r),
            "trials": len(r.get("trials") or []),
            "count": lat.get("count"),
            "cv": lat.get("cv"),
            **{f"{key}_ms": lat.get(key) for key in ("median", "p90", "p99", "mean", "std", "mad", "min", "max")},
            **{key: r.get(key) for key in ("precision", "variant", "target", "simulated", "seq_len", "init_ms",
                                           "first_inference_ms", "peak_rss_mb", "flops", "gflops_per_s", "throttled",
                                           "incomplete")},
        })
    return rows


def _seq_cell(record):
    """The sequence length a record ran at, or for real text the token counts fed (``median/max``)."""
    text = record.get("text")
    if isinstance(text, dict) and isinstance(text.get("tokens"), dict):
        tokens = text["tokens"]
        return f"text {tokens.get('median', 0):g}/{tokens.get('max')}" + (" pad" if text.get("fed") != "own length" else "")
    if isinstance(text, dict) and isinstance(text.get("characters"), dict):  # a text-in file: counted in characters
        return f"text {text['characters'].get('median', 0):g}/{text['characters'].get('max')} chars"
    return fmt(record.get("seq_len"))


def to_csv(report):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n", extrasaction="ignore")
    buffer.write(csv_header())  # the very line PROFILE_CSV recognises
    for row in flat_rows(report):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def write_csv(report, path, overwrite=False):
    return write_text(path, to_csv(report), kind=PROFILE_CSV, overwrite=overwrite)


def fmt(value, digits=2):
    """A table cell: ``n/a``, ``yes``/``no``, a float to ``digits`` places, or the value as text."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def to_markdown(report):
    """Returns the report as a Markdown document (summary table, notes)."""
    lines = [MARKDOWN_TITLE, ""]
    if report.get("simulated"):
        lines += ["> **SIMULATED**: these figures come from the device simulator (host CPU), not a phone.", ""]
    if report.get("incomplete"):
        lines += [f"> **Incomplete run**: {report.get('error') or 'some results are missing'}", ""]
    header = ("model", "precision", "variant", "target", "device", "cores", "thr", "seq", "median ms", "p90 ms", "p99 ms", "mean ms", "std ms", "CV", "init ms", "first ms", "peak MB", "GFLOP/s", "throttled")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" for _ in header) + "|")
    for row in flat_rows(report):
        device = row["device"] + (f" ({row['serial']})" if row["serial"] else "")
        cells = (
            row["model"], row["precision"], row["variant"], row["target"], device, f"{row['cores']} ({row['mask']})",
            fmt(row["threads"]), row["seq"], fmt(row["median_ms"], 3), fmt(row["p90_ms"], 3), fmt(row["p99_ms"], 3),
            fmt(row["mean_ms"], 3), fmt(row["std_ms"], 3), fmt(row["cv"], 3), fmt(row["init_ms"]), fmt(row["first_inference_ms"], 3),
            fmt(row["peak_rss_mb"], 1), fmt(row["gflops_per_s"]), fmt(row["throttled"]),
        )
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    notes = []
    for r in report["results"]:
        notes += [f"- {r['model']['name']}: {warning}" for warning in r.get("warnings") or []]
        if r.get("target") == "adb":
            notes.append(f"- {r['model']['name']}: p90/p99/MAD are n/a on the device: benchmark_model prints aggregates, not single latencies.")
    if notes:
        lines += ["Notes:", ""] + sorted(set(notes)) + [""]
    return "\n".join(lines)


def write_markdown(report, path, overwrite=False, extra=""):
    """Writes :func:`to_markdown` (plus ``extra`` text, e.g. Table 6) atomically; returns the path."""
    return write_text(path, to_markdown(report) + extra, kind=PROFILE_MD, overwrite=overwrite)
