"""The pipeline's report: one JSON document and one self-contained HTML page built from it, each written to a
temporary name and renamed; docs/pipeline.md ("The report") explains every field and table.
"""

import datetime
import html
import json
from pathlib import Path

import mobilebert_kit
from mobilebert_kit.artifacts.clients import client_readiness
from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.profiler.report import build_report, fmt, jsonable
from mobilebert_kit.profiler.stats import median_interval
from mobilebert_kit.utils.atomic import write_text
from mobilebert_kit.utils.output_check import OutputKind, html_generator, json_field
from mobilebert_kit.utils.terminal import escape

SCHEMA = "mobilebert_kit.pipeline"
SCHEMA_VERSION = 2
# A timing is reported as a speed-up only when the 95% interval of its median is within this fraction of it
# (the pipeline reruns a wider one with more runs first: runner.MAX_ATTEMPTS).
NOISE_TOLERANCE = 0.05
# What the report says of arm64 when the emulation cache is not built.
ARM64_HOWTO = ("not checked: the arm64 emulation cache is not built; `mbk validate FILE --arch arm64` builds it once "
               "(Debian's arm64 Python and the runtimes' aarch64 wheels), then every `mbk pipeline` checks the "
               "recipe's files")
# ... and of the float32 baselines the pipeline adds for the speed-up column, which it does not emulate.
ARM64_BASELINE = ("not checked: the float32 baseline of the speed-up column (emulated float kernels take minutes a "
                  "file); `mbk validate FILE --arch arm64` checks it")
# ... and of a text-in file, which the emulated runtimes cannot tokenize for.
ARM64_TEXT_IN = ("not checked: the emulated runtimes hold no onnxruntime-extensions to run the tokenizer inside the "
                 "file; the same export without tokenizer_in_graph checks the model after it")
EVALUATION_SCHEMA = "mobilebert_kit.evaluation"  # the "schema" of <name>.evaluation.json (runner.py writes it)
# The pipeline's outputs, each recognised by a later run as its own (utils.output_check): the directory by
# its marker, the reports by their schema and the page by its generator tag.
PIPELINE_OUTPUT = OutputKind("pipeline", True, "a pipeline output directory")
PIPELINE_JSON = OutputKind("pipeline-json", False, "a pipeline JSON report", json_field("schema", SCHEMA))
PIPELINE_HTML = OutputKind("pipeline-html", False, "a pipeline HTML page", html_generator("pipeline-html"))
EVALUATION_JSON = OutputKind("evaluation-json", False, "a task-metrics JSON report",
                             json_field("schema", EVALUATION_SCHEMA))


def build(recipe, planned, exports, profiles, timings=(), evaluation=None, arm64_ready=False):
    """Returns the report document of ``recipe`` from the ExportOptions of every artifact in order (``planned``,
    baselines included), their export reports (``exports``, same order), the profiler report documents
    (``profiles``, any order; a host report's options carry each timing's ``attempts`` and why a file was not timed
    on real text), this invocation's stage ``timings``, the ``evaluation`` document (or None) and whether the arm64
    emulation cache exists (``arm64_ready``: the recipe's files were run on it)."""
    records, attempts, skipped, by_path = [], {}, {}, {}
    for profile in profiles:
        options = profile.get("options") or {}
        attempts.update(options.get("attempts") or {})
        if (options.get("real_text") or {}).get("skipped"):
            skipped[options["real_text"]["artifact"]] = options["real_text"]["skipped"]
        for record in profile["results"]:
            # Plot labels use the model name: keep the extension so .tflite and .onnx rows differ.
            model = dict(record["model"], name=record["model"]["path"].rsplit("/", 1)[-1])
            records.append(dict(record, model=model))
            by_path.setdefault(str(Path(model["path"]).resolve()), []).append(records[-1])
    artifacts, validation, latency = [], [], []
    for opts, exported in zip(planned, exports):
        outputs = (exported.get("validation") or {}).get("outputs") or []
        cosines = [o["cosine"] for o in outputs]
        row = {
            "artifact": exported["path"], "name": exported["path"].rsplit("/", 1)[-1], "format": opts.format,
            "quantize": exported.get("quantize") or opts.quantize,  # what quantize = "auto" chose
            # The export resolved the length (the task's default when the recipe names none).
            "seq_len": exported.get("seq_len") or opts.seq_len, "size_bytes": exported["size_bytes"],
            "fidelity_cosine": min(cosines) if cosines else None,
            "validation_passed": (exported.get("validation") or {}).get("passed"),
            "clients": clients_of(exported["path"]),
            "latency_ms": {}, "latency_ci95_ms": {}, "noisy": {}, "speedup_vs_float": {}, "speedup_withheld": {},
            "real_text": None,
            "arm64": arm64_of(exported, ARM64_TEXT_IN if opts.tokenizer_in_graph else
                              ARM64_BASELINE if arm64_ready else ARM64_HOWTO),
        }
        for out in outputs:
            validation.append({"artifact": row["name"], "output": out["name"],
                               **{key: out.get(key) for key in ("cosine", "cosine_min", "snr_db", "max_abs_error",
                                                                "mean_abs_error", "argmax_agreement")},
                               "passed": exported["validation"]["passed"]})
        for record in by_path.get(str(Path(exported["path"]).resolve()), []):
            where, timing = _where(record), _timing(record, attempts)
            latency.append({"artifact": row["name"], "target": where, **timing})
            if record.get("text"):
                text = record["text"]
                row["real_text"] = {"source": text.get("source"), "sentences": text.get("sentences"),
                                    "tokens_median": (text.get("tokens") or {}).get("median"), "fed": text.get("fed"),
                                    # a text-in file counts its tokens inside: its sentences by their characters
                                    "characters_median": (text.get("characters") or {}).get("median"),
                                    "target": where, "median_ms": timing["median_ms"],
                                    "ci95_ms": [timing["ci95_low_ms"], timing["ci95_high_ms"]], "cv": timing["cv"],
                                    "noisy": timing["noisy"]}
                continue
            row["latency_ms"][where] = timing["median_ms"]
            row["latency_ci95_ms"][where] = [timing["ci95_low_ms"], timing["ci95_high_ms"]]
            row["noisy"][where] = timing["noisy"]
        if row["real_text"] is None:
            row["real_text"] = {"skipped": skipped.get(row["name"], "not timed")}
        artifacts.append(row)
    for row in artifacts:
        baseline = next((b for b in artifacts if b["format"] == row["format"] and b["quantize"] == "none"), None)
        for where, median in row["latency_ms"].items():
            base = (baseline or {}).get("latency_ms", {}).get(where)
            steady = not row["noisy"].get(where) and not (baseline or {}).get("noisy", {}).get(where)
            # A ratio of two figures either of which is noise is not printed as a speed-up (it is None).
            row["speedup_vs_float"][where] = base / median if base and median and steady else None
            row["speedup_withheld"][where] = bool(base and median and not steady)
    return jsonable({  # JSON has no NaN: non-finite numbers become null
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tool": {"name": "mbk pipeline", "version": mobilebert_kit.__version__},
        "recipe": str(recipe.path), "source": recipe.source_spec(),
        "artifacts": artifacts, "validation": validation, "latency": latency,
        "profile": build_report(records, options={"pipeline": str(recipe.path)}),
        "stages": list(timings),
        "evaluation": evaluation,
    })


def median_spread(record):
    """``(95% interval of the median or None, noisy)`` of a timing record (noisy: wider than NOISE_TOLERANCE)."""
    interval = median_interval(record.get("samples_ms") or []) if record.get("samples_ms") else None
    median = (record.get("latency_ms") or {}).get("median")
    return interval, interval is None or not median or (interval[1] - interval[0]) / 2 > NOISE_TOLERANCE * median


def _timing(record, attempts):
    """One latency row's figures: the median with its 95% interval, the spread, and whether it is noise."""
    lat = record.get("latency_ms") or {}
    (interval, noisy), median = median_spread(record), lat.get("median")
    kind = "real text" if record.get("text") else "padded"
    return {"kind": kind, "seq_len": None if record.get("text") else record.get("seq_len"),
            "simulated": record.get("simulated", False), "median_ms": median,
            "ci95_low_ms": interval[0] if interval else None, "ci95_high_ms": interval[1] if interval else None,
            "noisy": bool(noisy) if record.get("samples_ms") else None, "p90_ms": lat.get("p90"),
            "mean_ms": lat.get("mean"), "cv": lat.get("cv"), "count": lat.get("count"),
            "attempts": attempts.get(f"{record['model']['name']} {kind}"), "init_ms": record.get("init_ms"),
            "threads": (record.get("config") or {}).get("threads")}


def clients_of(path):
    """``{"ready": [client], "not_ready": {client: first reason}}`` as ``mbk inspect`` reads the file."""
    try:
        readiness = client_readiness(path)
    except ArtifactError as err:
        return {"ready": [], "not_ready": {}, "error": str(err)}
    return {"ready": [name for name, reasons in readiness.items() if not reasons],
            "not_ready": {name: reasons[0] for name, reasons in readiness.items() if reasons}}


def arm64_of(exported, unchecked=ARM64_HOWTO):
    """The arm64 line of one export: its emulated run against x86-64 (``mbk validate --arch arm64``'s figures),
    or ``unchecked``: why there is none and how to get one."""
    arch = (exported.get("validation") or {}).get("arch")
    if not arch:
        return {"checked": False, "line": unchecked}
    worst = min((o["vs_x86"]["cosine_min"] for o in arch.get("outputs") or []), default=None)
    passed = not arch.get("failures")
    line = (f"{arch['arch']} ({arch['cpu']}, emulated): min cosine vs x86-64 "
            f"{'n/a' if worst is None else f'{worst:.6f}'}, {'within' if passed else 'OUTSIDE'} the mode's thresholds")
    return {"checked": True, "arch": arch["arch"], "cpu": arch["cpu"], "runtime": arch.get("runtime"),
            "min_cosine_vs_x86": worst, "passed": passed, "line": line}


def _where(record):
    if record.get("target") == "host":
        return "host"
    serial = (record.get("device") or {}).get("serial") or "device"
    return f"{serial} (simulated)" if record.get("simulated") else serial


def _ms(median, cv, noisy):
    """``4.946 (CV 0.02)``: a median and its coefficient of variation, NOISY where its 95% interval is too wide."""
    if median is None:
        return "n/a"
    return f"{median:.3f} (CV {fmt(cv, 2)})" + (" NOISY" if noisy else "")


def summary_rows(report):
    """``[[artifact, size MB, fidelity, ready clients, ms @tokens, real-text ms, speed-up, arm64]]`` per target."""
    cvs = {(r["artifact"], r["target"], r["kind"]): r["cv"] for r in report["latency"]}
    rows = []
    for a in report["artifacts"]:
        targets = list(a["latency_ms"]) or [None]
        text = a.get("real_text") or {}
        real = "n/a" if text.get("skipped") else (
            f"{_ms(text.get('median_ms'), text.get('cv'), text.get('noisy'))}, " + (
                f"{fmt(text.get('tokens_median'), 0)} tok" if text.get("characters_median") is None else
                f"{fmt(text.get('characters_median'), 0)} chars"))
        arm = a.get("arm64") or {}
        arm_cell = (fmt(arm.get("min_cosine_vs_x86"), 6) + ("" if arm.get("passed") else " FAILED")
                    if arm.get("checked") else "not checked")
        for where in targets:
            median = a["latency_ms"].get(where) if where else None
            speedup = a["speedup_vs_float"].get(where) if where else None
            at = f" @{a['seq_len']}" if a.get("seq_len") else ""
            rows.append([a["name"], f"{a['size_bytes'] / 1e6:.2f}",
                         fmt(a["fidelity_cosine"], 6) + ("" if a["validation_passed"] is not False else " FAILED"),
                         ", ".join(a.get("clients", {}).get("ready") or []) or "none",
                         "n/a" if median is None else
                         f"{_ms(median, cvs.get((a['name'], where, 'padded')), a['noisy'].get(where))}{at} ({where})",
                         real,
                         "noisy: not compared" if a["speedup_withheld"].get(where) else
                         "n/a" if speedup is None else f"{speedup:.2f}x",
                         arm_cell])
    return rows


SUMMARY_HEADERS = ["artifact", "size MB", "fidelity (cosine)", "ready clients", "median ms @tokens",
                   "real text median ms", "speed-up over float", "arm64 vs x86-64 (min cosine)"]


def print_summary(report, console):
    from rich.table import Table

    table = Table(title="mbk pipeline summary")
    for column in SUMMARY_HEADERS:
        table.add_column(column, justify="left" if column == "artifact" else "right")
    for row in summary_rows(report):
        table.add_row(*(escape(cell, markup=True) for cell in row))  # artifact names come from the recipe
    console.print(table)
    for why in dict.fromkeys(a["real_text"]["skipped"] for a in report["artifacts"] if a["real_text"].get("skipped")):
        console.print(f"real text not timed: {escape(why, markup=True)}", highlight=False)
    if arm := next((a["arm64"] for a in report["artifacts"] if not a["arm64"]["checked"]), None):
        console.print(f"arm64: {escape(arm['line'], markup=True)}", highlight=False)
    if evaluation := report.get("evaluation"):
        from mobilebert_kit.evaluation.artifact_metrics import comparison_table

        console.print(comparison_table(evaluation["models"], evaluation["min_ratio"],
                                       title=f"task metrics on {evaluation['data']}"))


def to_html(report):
    """The report as one HTML page (tables and embedded plots)."""
    from mobilebert_kit.profiler.report_html import _table, page_head, plot_parts

    parts = page_head(PIPELINE_HTML, "mbk pipeline report", "td:first-child,th:first-child{text-align:left}") + [
        f"<p>Recipe {html.escape(report['recipe'])}, source {html.escape(str(report['source']))}. "
        f"Created {html.escape(report['created'])} by mbk {html.escape(report['tool']['version'])}; "
        f"schema v{report['schema_version']}.</p>",
    ]
    if report["profile"].get("simulated"):
        parts.append("<p class='warn'><b>SIMULATED</b>: device figures come from the device simulator, not a phone.</p>")
    parts.append("<h2>Summary</h2>")
    parts.append(_table(SUMMARY_HEADERS, summary_rows(report)))
    parts.append("<h2>App clients</h2><p>Read from each file as <code>mbk inspect</code> reads it: the clients "
                 "that load it as it is, and the first reason for each that would not.</p>")
    parts.append(_table(["artifact", "ready for", "not ready (first reason)"],
                        [[a["name"], ", ".join(a["clients"].get("ready") or []) or "none",
                          "; ".join(f"{c}: {r}" for c, r in a["clients"].get("not_ready", {}).items()) or "-"]
                         for a in report["artifacts"]]))
    parts.append("<h2>The phone's kernels (arm64)</h2>")
    parts.append(_table(["artifact", "arm64"], [[a["name"], a["arm64"]["line"]] for a in report["artifacts"]]))
    parts.append("<h2>Validation against the Keras source</h2>")
    parts.append(_table(
        ["artifact", "output", "cosine", "min cosine", "SNR dB", "max |err|", "mean |err|", "argmax", "passed"],
        [[v["artifact"], v["output"], fmt(v["cosine"], 6), fmt(v["cosine_min"], 6), fmt(v["snr_db"], 1),
          f"{v['max_abs_error']:.3e}", f"{v['mean_abs_error']:.3e}", fmt(v["argmax_agreement"], 4), fmt(v["passed"])]
         for v in report["validation"]]))
    if evaluation := report.get("evaluation"):
        parts.append(f"<h2>Task metrics on {html.escape(evaluation['data'])}</h2>")
        parts.append(_table(
            ["artifact", *evaluation["models"][0]["metrics"], f"drop ({evaluation['primary']})", "ratio",
             f">= {evaluation['min_ratio']:g}"],
            [[m["model"], *(fmt(v, 4) for v in m["metrics"].values()), fmt(m["drop"], 4), fmt(m["ratio"], 4),
              "ref" if i == 0 else ("pass" if m["passed"] else "FAIL")] for i, m in enumerate(evaluation["models"])]))
    parts.append("<h2>Latency</h2><p>Padded: every run at the file's planned length. Real text: the sentences one "
                 "per call, each at its own length (a static file: padded to it), as the app feeds them. The 95% "
                 f"interval of the median is distribution-free; wider than &plusmn;{NOISE_TOLERANCE:.0%} after the "
                 "reruns, a figure is NOISY and gets no speed-up.</p>")
    parts.append(_table(
        ["artifact", "target", "input", "median ms", "95% CI ms", "noisy", "p90 ms", "mean ms", "CV", "runs",
         "attempts", "init ms", "threads"],
        [[r["artifact"], r["target"], r["kind"] + (f" @{r['seq_len']}" if r.get("seq_len") else ""),
          fmt(r["median_ms"], 3),
          "n/a" if r.get("ci95_low_ms") is None else f"{r['ci95_low_ms']:.3f}-{r['ci95_high_ms']:.3f}",
          fmt(r.get("noisy")), fmt(r["p90_ms"], 3), fmt(r["mean_ms"], 3), fmt(r["cv"], 3), fmt(r["count"]),
          fmt(r.get("attempts")), fmt(r["init_ms"], 1), fmt(r["threads"])] for r in report["latency"]]))
    parts += plot_parts(report["profile"])
    if stages := report.get("stages") or []:
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
