"""A self-contained HTML report with matplotlib plots (PNG, embedded as base64 so the page is one file); what
it shows: docs/profiler.md ("Reports").

Example:
    >>> write_html(report, "report.html")  # doctest: +SKIP
"""

import base64
import html
import io

from mobilebert_kit.profiler.report import flat_rows, fmt, validate_report
from mobilebert_kit.profiler.table6 import table6
from mobilebert_kit.utils.atomic import write_text
from mobilebert_kit.utils.output_check import OutputKind, generator_meta, html_generator

# The page carries generator_meta("profile-html"), by which a later run recognises it and replaces it.
PROFILE_HTML = OutputKind("profile-html", False, "a profile HTML page", html_generator("profile-html"))


def _label(record):
    where = (record.get("device") or {}).get("serial") or record.get("target")
    return f"{record['model']['name']} [{record['precision']}] L={record['seq_len']} @{where}"


def _figure_png(fig):
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _box_stats(record):
    if samples := record.get("samples_ms"):
        return None, samples
    stats = []
    for trial in record.get("trials") or []:
        lat = trial.get("latency_ms") or {}
        if lat.get("avg") is None:
            continue
        med = lat.get("median") if lat.get("median") is not None else lat["avg"]
        stats.append(
            {
                "med": med,
                "q1": lat.get("p5") if lat.get("p5") is not None else lat.get("min", med),
                "q3": lat.get("p95") if lat.get("p95") is not None else lat.get("max", med),
                "whislo": lat.get("min", med),
                "whishi": lat.get("max", med),
                "fliers": [],
            }
        )
    return stats, None


def plots(report):
    """Returns ``[(title, base64 png)]`` for the report's records."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [r for r in report["results"] if r.get("latency_ms")]
    images = []
    if not records:
        return images
    suffix = " (SIMULATED)" if report.get("simulated") else ""

    fig, ax = plt.subplots(figsize=(9, 0.6 * len(records) + 1.8))
    labels, positions = [], []
    for i, record in enumerate(records):
        stats, samples = _box_stats(record)
        if samples:
            ax.boxplot([samples], positions=[i], vert=False, widths=0.6, showfliers=True)
        elif stats:
            # One box per trial, drawn on the same row (phone trials).
            for s in stats:
                ax.bxp([s], positions=[i], vert=False, widths=0.6, showfliers=False)
        labels.append(_label(record))
        positions.append(i)
    ax.set_yticks(positions)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("latency (ms)")
    ax.set_title("Latency distribution per model and precision" + suffix)
    images.append(("Latency distributions", _figure_png(fig)))

    fig, ax = plt.subplots(figsize=(9, 0.5 * len(records) + 1.8))
    medians = [r["latency_ms"]["median"] for r in records]
    upper = [(r["latency_ms"].get("p90") or r["latency_ms"].get("max") or r["latency_ms"]["median"]) - r["latency_ms"]["median"] for r in records]
    ax.barh(range(len(records)), medians, xerr=[[0] * len(records), upper], color="#4C78A8")
    ax.set_yticks(range(len(records)))
    ax.set_yticklabels([_label(r) for r in records], fontsize=8)
    ax.set_xlabel("median latency (ms); whisker to p90 (host) or max (device)")
    ax.set_title("Comparison across files" + suffix)
    images.append(("Comparison across files", _figure_png(fig)))

    series = {}
    for r in records:
        if r.get("text"):  # a real-text record has no one length: it is a row of the table, not a point here
            continue
        key = (r["model"]["name"], r["precision"], (r.get("device") or {}).get("serial") or r["target"])
        series.setdefault(key, []).append((r["seq_len"], r["latency_ms"]["median"]))
    if multi := {k: sorted(v) for k, v in series.items() if len({x for x, _ in v}) > 1}:
        fig, ax = plt.subplots(figsize=(7, 4))
        for (name, precision, where), points in sorted(multi.items()):
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o", label=f"{name} [{precision}] @{where}")
        ax.set_xlabel("sequence length")
        ax.set_ylabel("median latency (ms)")
        ax.set_title("Latency against sequence length" + suffix)
        ax.legend(fontsize=7)
        images.append(("Latency against sequence length", _figure_png(fig)))
    return images


def _table(headers, rows):
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape('' if c is None else str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page_head(kind, title, css=""):
    """The first parts of a report page: its generator tag (``kind``, an OutputKind), the shared style with ``css``
    added, and ``title`` as the page's title and heading."""
    return [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'>{generator_meta(kind.name)}<title>{title}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0;"
        "font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#eee}"
        ".warn{background:#fff3cd;padding:.6em;border:1px solid #e0c36b}"
        f"img{{max-width:100%}}{css}</style></head><body>",
        f"<h1>{title}</h1>",
    ]


def plot_parts(report):
    """The ``plots`` of ``report`` as headed, embedded images."""
    return [f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' src='data:image/png;base64,{png}'>"
            for title, png in plots(report)]


def to_html(report):
    """Returns the report as one HTML page."""
    validate_report(report)
    parts = page_head(PROFILE_HTML, "mbk profile report") + [
        f"<p>Created {html.escape(report['created'])} by mbk {html.escape(report['tool']['version'])}; schema v{report['schema_version']}.</p>",
    ]
    if report.get("simulated"):
        parts.append("<p class='warn'><b>SIMULATED</b>: figures from the device simulator (the host CPU), not from a phone.</p>")
    if report.get("incomplete"):
        parts.append(f"<p class='warn'><b>Incomplete run</b>: {html.escape(str(report.get('error') or 'some results are missing'))}</p>")
    parts.append("<h2>Summary</h2>")
    parts.append(
        _table(
            ["model", "precision", "variant", "target", "device", "cores", "threads", "seq", "median ms", "p90 ms", "p99 ms", "mean ms", "std ms", "MAD ms", "CV", "init ms", "first ms", "peak MB", "GFLOP/s", "throttled"],
            [
                [r["model"], r["precision"], r["variant"], r["target"], r["device"], f"{r['cores']} ({r['mask']})", r["threads"], r["seq"],
                 *(fmt(r[key], 3) for key in ("median_ms", "p90_ms", "p99_ms", "mean_ms", "std_ms", "mad_ms", "cv")),
                 fmt(r["init_ms"], 2), fmt(r["first_inference_ms"], 3), fmt(r["peak_rss_mb"], 1),
                 fmt(r["gflops_per_s"], 2),
                 fmt(bool(r["throttled"]))]
                for r in flat_rows(report)
            ],
        )
    )
    parts += plot_parts(report)
    if tables := table6(report):
        parts.append("<h2>Table 6 layout (LayerNorm/GELU vs NoNorm/ReLU)</h2>")
        for t in tables:
            parts.append(f"<h3>{html.escape(t['device'])}, sequence length {t['seq_len']}</h3>")
            body = []
            for row in t["rows"]:
                cells = [row["setting"], "n/a" if row["gflops"] is None else f"{row['gflops']:.3g}G"]
                for p in t["precisions"]:
                    c = row["cells"].get(p)
                    cells.append("-" if c is None else f"{c['median_ms']:.2f}" + ("" if not c["speedup"] else f" ({c['speedup']:.2f}x)"))
                body.append(cells)
            parts.append(_table(["Setting", "#FLOPs"] + [f"{p} (ms)" for p in t["precisions"]], body))
    for record in report["results"]:
        if record.get("target") == "adb" and record.get("trials"):
            parts.append(f"<h2>Trials: {html.escape(_label(record))}</h2>")
            parts.append(
                _table(
                    ["trial", "avg ms", "median ms", "min ms", "max ms", "cooldown s", "temp before C", "temp after C", "throttled", "reasons"],
                    [
                        [t.get("trial"),
                         *(fmt((t.get("latency_ms") or {}).get(key), 3) for key in ("avg", "median", "min", "max")),
                         t.get("cooldown_s"), t.get("temp_before_c"), t.get("temp_after_c"),
                         fmt(bool(t.get("throttled"))), "; ".join(t.get("throttle_reasons") or [])]
                        for t in record["trials"]
                    ],
                )
            )
        if record.get("op_profile"):
            parts.append(f"<h2>Top operators: {html.escape(_label(record))}</h2>")
            parts.append(f"<p>{html.escape(str(record.get('op_profile_source') or ''))}</p>")
            parts.append(
                _table(
                    ["node type", "count", "avg ms", "%", "times called"],
                    [[o.get("node_type"), o.get("count"), fmt(o.get("avg_ms"), 3), fmt(o.get("pct"), 2),
                      o.get("times_called")] for o in record["op_profile"][:15]],
                )
            )
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(report, path, overwrite=False):
    return write_text(path, to_html(report), kind=PROFILE_HTML, overwrite=overwrite)
