"""The pipeline's report: one JSON document and one self-contained HTML page built from it.

JSON (``schema: "mobilebert_kit.pipeline"``, ``schema_version: 1``):

- ``artifacts``: one row per exported file: path, format, quantization, size,
  fidelity (the lowest mean cosine over the outputs against the Keras
  source), host (and phone) median latency, speed-up over the float32 export
  of the same format;
- ``validation``: one row per artifact and output (cosine, min cosine, SNR,
  max and mean absolute error, argmax agreement) with the thresholds' verdict;
- ``latency``: one row per artifact and target (median, p90, mean, CV, init);
- ``profile``: the profiler report (schema ``mobilebert_kit.profile``) of every
  measurement, from which the plots are drawn;
- ``stages``: which stages ran in this invocation and how long they took;
- ``evaluation`` (when the recipe names ``[evaluation] data``): the task metric of
  every artifact on that data, with its drop and ratio against the first (float)
  file and the pass/fail of ``min_ratio`` (``<name>.evaluation.json``), else None.

The HTML page has the summary, validation and latency tables and the
profiler's plots (PNG embedded as base64). Both files are written to a
temporary name and renamed.
"""

import datetime
import html
import json
import math

import mobilebert_kit
from mobilebert_kit.utils.atomic import write_text
from mobilebert_kit.utils.output_check import OutputKind, generator_meta, html_generator, json_field

SCHEMA = "mobilebert_kit.pipeline"
SCHEMA_VERSION = 1
EVALUATION_SCHEMA = "mobilebert_kit.evaluation"  # the "schema" of <name>.evaluation.json (runner.py writes it)
# The pipeline's outputs, each recognised by a later run as its own (utils.output_check): the directory by
# its marker, the reports by their schema and the page by its generator tag.
PIPELINE_OUTPUT = OutputKind("pipeline", True, "a pipeline output directory")
PIPELINE_JSON = OutputKind("pipeline-json", False, "a pipeline JSON report", json_field("schema", SCHEMA))
PIPELINE_HTML = OutputKind("pipeline-html", False, "a pipeline HTML page", html_generator("pipeline-html"))
EVALUATION_JSON = OutputKind("evaluation-json", False, "a task-metrics JSON report",
                             json_field("schema", EVALUATION_SCHEMA))


def build(recipe, planned, exports, profiles, timings=(), evaluation=None):
    """Returns the report document.

    Args:
        recipe: the :class:`~mobilebert_kit.convert.recipe.Recipe`.
        planned: the ExportOptions of every artifact, in order (baselines included).
        exports: the export reports (``<artifact>.report.json``), same order.
        profiles: profiler report documents (host and device), any order.
        timings: ``[{"stage", "skipped", "seconds"}]`` of this invocation.
        evaluation: the ``<name>.evaluation.json`` document, or None.
    """
    from mobilebert_kit.profiler.report import build_report

    records = []
    for profile in profiles:
        for record in profile["results"]:
            # Plot labels use the model name: keep the extension so .tflite and .onnx rows differ.
            model = dict(record["model"], name=record["model"]["path"].rsplit("/", 1)[-1])
            records.append(dict(record, model=model))
    by_path = {}
    for record in records:
        by_path.setdefault(record["model"]["path"], []).append(record)
    artifacts, validation, latency = [], [], []
    for opts, exported in zip(planned, exports):
        outputs = (exported.get("validation") or {}).get("outputs") or []
        cosines = [o["cosine"] for o in outputs]
        row = {
            "artifact": exported["path"], "name": exported["path"].rsplit("/", 1)[-1], "format": opts.format,
            "quantize": opts.quantize,
            # The export resolved the length (the task's default when the recipe names none).
            "seq_len": exported.get("seq_len") or opts.seq_len, "size_bytes": exported["size_bytes"],
            "fidelity_cosine": min(cosines) if cosines else None,
            "validation_passed": (exported.get("validation") or {}).get("passed"),
            "latency_ms": {}, "speedup_vs_float": {},
        }
        for out in outputs:
            validation.append({"artifact": row["name"], "output": out["name"], "cosine": out["cosine"],
                               "cosine_min": out["cosine_min"], "snr_db": out["snr_db"],
                               "max_abs_error": out["max_abs_error"], "mean_abs_error": out["mean_abs_error"],
                               "argmax_agreement": out.get("argmax_agreement"),
                               "passed": exported["validation"]["passed"]})
        for record in _records_for(by_path, exported["path"]):
            where = _where(record)
            lat = record.get("latency_ms") or {}
            row["latency_ms"][where] = lat.get("median")
            latency.append({"artifact": row["name"], "target": where, "simulated": record.get("simulated", False),
                            "median_ms": lat.get("median"), "p90_ms": lat.get("p90"), "mean_ms": lat.get("mean"),
                            "cv": lat.get("cv"), "count": lat.get("count"), "init_ms": record.get("init_ms"),
                            "threads": (record.get("config") or {}).get("threads")})
        artifacts.append(row)
    for row in artifacts:
        baseline = next((b for b in artifacts if b["format"] == row["format"] and b["quantize"] == "none"), None)
        for where, median in row["latency_ms"].items():
            base = (baseline or {}).get("latency_ms", {}).get(where)
            row["speedup_vs_float"][where] = base / median if base and median else None
    return _finite({
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tool": {"name": "mbk pipeline", "version": mobilebert_kit.__version__},
        "recipe": str(recipe.path), "source": recipe.source_spec(),
        "artifacts": artifacts, "validation": validation, "latency": latency,
        "profile": build_report(records, options={"pipeline": str(recipe.path)}),
        "stages": list(timings),
        "evaluation": evaluation,
    })


def _records_for(by_path, artifact):
    from pathlib import Path

    want = str(Path(artifact).resolve())
    return [r for path, records in by_path.items() if str(Path(path).resolve()) == want for r in records]


def _where(record):
    if record.get("target") == "host":
        return "host"
    serial = (record.get("device") or {}).get("serial") or "device"
    return f"{serial} (simulated)" if record.get("simulated") else serial


def _finite(value):
    """JSON has no NaN: non-finite numbers become null."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _fmt(value, digits=3):
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def summary_rows(report):
    """``[[artifact, size MB, fidelity, median ms, speed-up]]`` for every artifact and target."""
    rows = []
    for a in report["artifacts"]:
        targets = list(a["latency_ms"]) or [None]
        for where in targets:
            median = a["latency_ms"].get(where) if where else None
            speedup = a["speedup_vs_float"].get(where) if where else None
            rows.append([a["name"], f"{a['size_bytes'] / 1e6:.2f}",
                         _fmt(a["fidelity_cosine"], 6) + ("" if a["validation_passed"] is not False else " FAILED"),
                         ("n/a" if median is None else f"{median:.3f} ({where})"),
                         "n/a" if speedup is None else f"{speedup:.2f}x"])
    return rows


SUMMARY_HEADERS = ["artifact", "size MB", "fidelity (cosine)", "median latency ms", "speed-up over float"]


def print_summary(report, console):
    from rich.table import Table

    table = Table(title="mbk pipeline summary")
    for column in SUMMARY_HEADERS:
        table.add_column(column, justify="left" if column == "artifact" else "right")
    from mobilebert_kit.utils.terminal import escape

    for row in summary_rows(report):
        table.add_row(*(escape(cell, markup=True) for cell in row))  # artifact names come from the recipe
    console.print(table)
    evaluation = report.get("evaluation")
    if evaluation:
        from mobilebert_kit.evaluation.artifact_metrics import comparison_table

        console.print(comparison_table(evaluation["models"], evaluation["min_ratio"],
                                       title=f"task metrics on {evaluation['data']}"))


def to_html(report):
    """The report as one HTML page (tables and embedded plots)."""
    from mobilebert_kit.profiler.report_html import _table, plots

    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'>{generator_meta(PIPELINE_HTML.name)}"
        "<title>mbk pipeline report</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0;"
        "font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#eee}"
        ".warn{background:#fff3cd;padding:.6em;border:1px solid #e0c36b}img{max-width:100%}</style></head><body>",
        "<h1>mbk pipeline report</h1>",
        f"<p>Recipe {html.escape(report['recipe'])}, source {html.escape(str(report['source']))}. "
        f"Created {html.escape(report['created'])} by mbk {html.escape(report['tool']['version'])}; "
        f"schema v{report['schema_version']}.</p>",
    ]
    if report["profile"].get("simulated"):
        parts.append("<p class='warn'><b>SIMULATED</b>: device figures come from the device simulator, not a phone.</p>")
    parts.append("<h2>Summary</h2>")
    parts.append(_table(SUMMARY_HEADERS, summary_rows(report)))
    parts.append("<h2>Validation against the Keras source</h2>")
    parts.append(_table(
        ["artifact", "output", "cosine", "min cosine", "SNR dB", "max |err|", "mean |err|", "argmax", "passed"],
        [[v["artifact"], v["output"], _fmt(v["cosine"], 6), _fmt(v["cosine_min"], 6), _fmt(v["snr_db"], 1),
          f"{v['max_abs_error']:.3e}", f"{v['mean_abs_error']:.3e}", _fmt(v["argmax_agreement"], 4), _fmt(v["passed"])]
         for v in report["validation"]]))
    evaluation = report.get("evaluation")
    if evaluation:
        parts.append(f"<h2>Task metrics on {html.escape(evaluation['data'])}</h2>")
        parts.append(_table(
            ["artifact", *evaluation["models"][0]["metrics"], f"drop ({evaluation['primary']})", "ratio",
             f">= {evaluation['min_ratio']:g}"],
            [[m["model"], *(_fmt(v, 4) for v in m["metrics"].values()), _fmt(m["drop"], 4), _fmt(m["ratio"], 4),
              "ref" if i == 0 else ("pass" if m["passed"] else "FAIL")] for i, m in enumerate(evaluation["models"])]))
    parts.append("<h2>Latency</h2>")
    parts.append(_table(
        ["artifact", "target", "median ms", "p90 ms", "mean ms", "CV", "runs", "init ms", "threads"],
        [[r["artifact"], r["target"], _fmt(r["median_ms"]), _fmt(r["p90_ms"]), _fmt(r["mean_ms"]), _fmt(r["cv"]),
          _fmt(r["count"]), _fmt(r["init_ms"], 1), _fmt(r["threads"])] for r in report["latency"]]))
    for title, png in plots(report["profile"]):
        parts.append(f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' src='data:image/png;base64,{png}'>")
    stages = report.get("stages") or []
    if stages:
        parts.append("<h2>Stages of the last run</h2>")
        parts.append(_table(["stage", "result", "seconds"],
                            [[s["stage"], "unchanged, skipped" if s["skipped"] else "ran", f"{s['seconds']:.1f}"]
                             for s in stages]))
    parts.append("</body></html>")
    return "\n".join(parts)


def write(report, json_path, html_path, overwrite=False):
    """Writes the JSON document and the HTML page (each atomically, through ``utils.atomic``)."""
    write_text(json_path, json.dumps(report, indent=2, allow_nan=False) + "\n", kind=PIPELINE_JSON,
               overwrite=overwrite)
    write_text(html_path, to_html(report), kind=PIPELINE_HTML, overwrite=overwrite)
    return json_path, html_path
