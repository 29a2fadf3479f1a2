"""The paper's Table 6 layout (MobileBERT, Sun et al., 2020): median latency of LayerNorm or NoNorm and GELU or
ReLU per precision, with the speed-up over LayerNorm+GELU (docs/profiler.md, "Reports"); one table per device
and sequence length.

Example:
    >>> print(table6_markdown(report))  # doctest: +SKIP
"""

SETTINGS = ("LayerNorm+GELU", "NoNorm+GELU", "LayerNorm+ReLU", "NoNorm+ReLU")
PRECISIONS = ("float32", "float16", "dynamic-int8", "int8", "dynamic-int4", "int4-weight-only")
BASELINE = "LayerNorm+GELU"


def table6(report):
    """Returns the comparison tables as data: ``[{device, seq_len, precisions, rows}]``, each row
    ``{setting, gflops, cells: {precision: {median_ms, speedup, models}}}``."""
    groups = {}
    for record in report["results"]:
        if (record.get("latency_ms") or {}).get("median") is not None:
            device = record.get("device") or {}
            name = device.get("model") or device.get("cpu_model") or device.get("kind") or "unknown"
            where = f"{record.get('target')}: {name}" + (f" ({device['serial']})" if device.get("serial") else "")
            groups.setdefault((where, record.get("seq_len")), []).append(record)
    tables = []
    for (device, seq_len), records in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1] or 0)):
        present = {r["precision"] for r in records}
        precisions = [p for p in PRECISIONS if p in present] + sorted(present - set(PRECISIONS))
        settings = [s for s in SETTINGS if any(r["variant"] == s for r in records)]
        settings += sorted({r["variant"] for r in records} - set(SETTINGS))
        cells = {}
        for r in records:
            cells.setdefault((r["variant"], r["precision"]), []).append(r)
        rows = []
        for setting in settings:
            row = {"setting": setting, "gflops": None, "cells": {}}
            for precision in precisions:
                found = cells.get((setting, precision))
                if not found:
                    continue
                # Several files in one cell: the fastest is what the setting can reach.
                best = min(found, key=lambda r: r["latency_ms"]["median"])
                if best.get("flops"):
                    row["gflops"] = row["gflops"] or best["flops"] / 1e9
                base = cells.get((BASELINE, precision))
                base_ms = min(r["latency_ms"]["median"] for r in base) if base else None
                median = best["latency_ms"]["median"]
                row["cells"][precision] = {
                    "median_ms": median,
                    "speedup": base_ms / median if base_ms and median else None,
                    "models": [r["model"]["name"] for r in found],
                }
            rows.append(row)
        tables.append({"device": device, "seq_len": seq_len, "precisions": precisions, "rows": rows})
    return tables


def _ms(value):
    return f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def table6_markdown(report):
    """Returns the comparison tables as Markdown (one per device and sequence length)."""
    parts = []
    for table in table6(report):
        title = f"### Table 6 layout: {table['device']}, sequence length {table['seq_len']}"
        if report.get("simulated"):
            title += " (SIMULATED)"
        header = ["Setting", "#FLOPs"] + [f"{p} latency (ms)" for p in table["precisions"]]
        lines = [title, "", "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        for row in table["rows"]:
            cells = [row["setting"], "n/a" if row["gflops"] is None else f"{row['gflops']:.3g}G"]
            for precision in table["precisions"]:
                cell = row["cells"].get(precision)
                if cell is None:
                    cells.append("-")
                elif cell["speedup"] is None or row["setting"] == BASELINE:
                    cells.append(_ms(cell["median_ms"]))
                else:
                    cells.append(f"{_ms(cell['median_ms'])} ({cell['speedup']:.2f}x)")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines.append(f"Speed-ups are relative to {BASELINE} at the same precision; cells hold median latencies.")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) if parts else "No results with a latency to compare."
