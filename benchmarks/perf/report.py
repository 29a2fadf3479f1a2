"""Tables, targets and the RESULTS.md section from one run's records.

A record is a dict: ``set`` (main / sweep / table6 / gemm), ``family``
(ours, model-garden, hugging-face, gemm, baseline), ``format`` (tflite,
onnx, kernel), ``precision``, ``seq_len``, ``setting`` (Table 6 row),
``status`` (ok / skipped) and, when timed, ``median_ms``, ``p90_ms``,
``runs``, ``size_mb``, ``peak_mb``, ``gflops_per_s``, ``peak_fraction``.
"""

import datetime
import math
import os
import platform

PEERS = ("model-garden", "hugging-face")
INT8 = ("dynamic-int8", "int8")
PEER_LABEL = {"model-garden": "Model Garden", "hugging-face": "Hugging Face", "ours": "ours"}


def _ok(records, **match):
    return [r for r in records if r["status"] == "ok" and all(r.get(k) == v for k, v in match.items())]


def _best(records):
    return min(records, key=lambda r: r["median_ms"]) if records else None


def _label(r):
    return f"{PEER_LABEL.get(r['family'], r['family'])} {r['format']} {r['precision']}"


def ratios(records):
    """Ours / best peer per (format, precision), per format's best int8, and across formats.

    Returns:
        list of dicts {format, precision, ours, peer, ratio, peer_same_format}; ``ours``
        and ``peer`` are records (peer = fastest peer at that precision in any
        format; ``peer_same_format`` the fastest in our format, or None).
    """
    main = [r for r in records if r["set"] == "main"]
    rows = []
    for fmt in ("tflite", "onnx"):
        for precision in ("float32", "float16", "dynamic-int8", "int8", "best-int8"):
            wanted = INT8 if precision == "best-int8" else (precision,)
            ours = _best([r for r in _ok(main, family="ours", format=fmt) if r["precision"] in wanted])
            if ours is None:
                continue
            peers = [r for r in _ok(main) if r["family"] in PEERS and r["precision"] in wanted]
            peer = _best(peers)
            same = _best([r for r in peers if r["format"] == fmt])
            rows.append({
                "format": fmt,
                "precision": precision,
                "ours": ours,
                "peer": peer,
                "peer_same_format": same,
                "ratio": ours["median_ms"] / peer["median_ms"] if peer else None,
                "ratio_same_format": ours["median_ms"] / same["median_ms"] if same else None,
                # Minima resist the bursts of a shared machine better than medians do (see RESULTS.md).
                "min_ratio": ours["min_ms"] / peer["min_ms"] if peer and ours.get("min_ms") and peer.get("min_ms") else None,
            })
    return rows


def targets(records):
    """The issue's targets that this run can evaluate: list of (target, value, met) with value None if not measured."""
    main = [r for r in records if r["set"] == "main"]
    out = []
    by = {(row["format"], row["precision"]): row for row in ratios(records)}
    for fmt in ("tflite", "onnx"):
        for precision in ("float32", "best-int8"):
            row = by.get((fmt, precision))
            value = row["ratio"] if row else None
            out.append((f"ours/best peer, {fmt} {precision} <= 0.9", value, value is not None and value <= 0.9))
    full = _best(_ok(main, family="ours", format="tflite", precision="int8"))
    dyn = _best(_ok(main, family="ours", format="tflite", precision="dynamic-int8"))
    value = full["median_ms"] / dyn["median_ms"] if full and dyn else None
    out.append(("ours tflite full int8 / dynamic int8 <= 0.8", value, value is not None and value <= 0.8))
    for fmt in ("tflite", "onnx"):
        f32 = _best(_ok(main, family="ours", format=fmt, precision="float32"))
        int8 = _best([r for r in _ok(main, family="ours", format=fmt) if r["precision"] in INT8])
        value = int8["median_ms"] / f32["median_ms"] if int8 and f32 else None
        out.append((f"ours {fmt} best int8 / float32 <= 0.35", value, value is not None and value <= 0.35))
    f32 = _best(_ok(main, family="ours", precision="float32"))
    value = f32.get("peak_fraction") if f32 else None
    out.append(("ours float32 >= 75% of the float32 GEMM peak", value, value is not None and value >= 0.75))
    timed = [r for r in main if r["family"] == "ours" and r.get("validated") and r.get("export_s") is not None]
    value = max(r["export_s"] for r in timed) if timed else None
    out.append(("slowest export + validation of the preset, s <= 120", value, value is not None and value <= 120))
    base = _best(_ok(main, family="baseline", precision="float32", model="bert-base"))
    ours32 = _best(_ok(main, family="ours", format="tflite", precision="float32"))
    value = base["median_ms"] / ours32["median_ms"] if base and ours32 else None
    out.append(("bert-base / ours tflite float32 >= 4.0 (speed-up)", value, value is not None and value >= 4.0))
    return out


def _ms(r):
    return f"{r['median_ms']:.2f}" if r and r.get("median_ms") is not None else "-"


def _fmt(value, spec=".2f"):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, spec)


def markdown(records, meta):
    """The RESULTS.md section for this run."""
    lines = [f"## Issue 7 performance: {meta['date']} ({meta['title']})", ""]
    if meta.get("noisy"):
        lines += [f"> **PRELIMINARY, NOISY MACHINE.** {meta['noise']} Absolute figures are not clean; "
                  "compare only ratios within this run. The lead re-runs on a quiet machine.", ""]
    lines += [
        f"- command: `{meta['command']}`",
        f"- machine: {meta['machine']}",
        f"- runtimes: {meta['versions']}",
        f"- setting: core {meta['core']} pinned (sched_setaffinity), 1 thread, batch 1, sequence length "
        f"{meta['seq_len']}, preset `{meta['preset']}` ({meta['gflop']:.3f} GFLOP), same realistic inputs for all; "
        f"{meta['timing']}",
        "",
        "### Ours / best peer (same precision, same run)",
        "",
        "| our export | ours ms | best peer (any format) | peer ms | ratio | ratio of minima | best peer same format | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in ratios(records):
        peer, same = row["peer"], row["peer_same_format"]
        lines.append(
            f"| {row['format']} {row['precision']} ({row['ours']['precision']}) | {_ms(row['ours'])} | "
            f"{_label(peer) if peer else '-'} | {_ms(peer)} | {_fmt(row['ratio'])} | {_fmt(row['min_ratio'])} | "
            f"{_label(same) if same else '-'} | {_fmt(row['ratio_same_format'])} |"
        )
    verdict = "met (noisy run: not a verdict)" if meta.get("noisy") else "met"
    lines += ["", "### Targets (issue 7)", "", f"| target | measured | {verdict} |", "|---|---|---|"]
    for name, value, met in targets(records):
        lines.append(f"| {name} | {_fmt(value, '.3f')} | {'yes' if met else ('no' if value is not None else 'not measured')} |")
    lines += [
        "",
        "### All measurements",
        "",
        "| set | family | model | format | precision | seq | median ms | p90 ms | min ms | runs | size MB | peak MB | GFLOP/s | % of peak | export s | fidelity (mbk validate) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        if r["status"] != "ok":
            continue
        lines.append(
            f"| {r['set']} | {r['family']} | {r.get('model', '')} | {r['format']} | {r['precision']} | {r.get('seq_len', '')} | "
            f"{_ms(r)} | {_fmt(r.get('p90_ms'))} | {_fmt(r.get('min_ms'))} | {r.get('runs', '')} | {_fmt(r.get('size_mb'), '.1f')} | "
            f"{_fmt(r.get('peak_mb'), '.0f')} | {_fmt(r.get('gflops_per_s'), '.1f')} | "
            f"{_fmt(100 * r['peak_fraction'] if r.get('peak_fraction') is not None else None, '.0f')} | "
            f"{_fmt(r.get('export_s'), '.0f')} | {r.get('fidelity') or ''} |"
        )
    skipped = [r for r in records if r["status"] != "ok"]
    if skipped:
        lines += ["", "Skipped:", ""]
        lines += [f"- {r['family']} {r['format']} {r['precision']} (seq {r.get('seq_len')}, {r.get('model', '')}): "
                  f"{r['reason']}" for r in skipped]
    sweep = table_sweep(records)
    if sweep:
        lines += ["", "### Latency (median ms) against sequence length", ""] + sweep
    t6 = table6(records)
    if t6:
        lines += ["", f"### Table 6 layout (median ms; speed-up over LayerNorm+GELU), seq {meta['seq_len']}", ""] + t6
    if meta.get("plots"):
        lines += ["", "Plots: " + ", ".join(f"`{p}`" for p in meta["plots"])]
    return "\n".join(lines) + "\n"


def table_sweep(records):
    sweep = _ok(records, set="sweep")
    if not sweep:
        return []
    lens = sorted({r["seq_len"] for r in sweep})
    keys = sorted({(r["family"], r["format"], r["precision"]) for r in sweep})
    lines = ["| export | " + " | ".join(str(s) for s in lens) + " |", "|---|" + "---|" * len(lens)]
    for key in keys:
        cells = {r["seq_len"]: r for r in sweep if (r["family"], r["format"], r["precision"]) == key}
        lines.append(f"| {PEER_LABEL.get(key[0], key[0])} {key[1]} {key[2]} | " + " | ".join(_ms(cells.get(s)) for s in lens) + " |")
    return lines


SETTINGS = ("LayerNorm+GELU", "NoNorm+GELU", "LayerNorm+ReLU", "NoNorm+ReLU")


def table6(records):
    rows = _ok(records, set="table6")
    if not rows:
        return []
    precisions = [p for p in ("float32", "float16", "dynamic-int8", "int8") if any(r["precision"] == p for r in rows)]
    cell = {(r["setting"], r["precision"]): r for r in rows}
    lines = ["| setting | " + " | ".join(precisions) + " |", "|---|" + "---|" * len(precisions)]
    for setting in SETTINGS:
        parts = []
        for p in precisions:
            r, base = cell.get((setting, p)), cell.get(("LayerNorm+GELU", p))
            if r is None:
                parts.append("-")
                continue
            parts.append(f"{_ms(r)} ({base['median_ms'] / r['median_ms']:.2f}x)" if base else _ms(r))
        lines.append(f"| {setting} | " + " | ".join(parts) + " |")
    return lines


def machine():
    """CPU model, SIMD features that matter here, cores, kernel."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    simd = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni") if f in flags]
    return f"{model}, {os.cpu_count()} cores, {'/'.join(simd) or 'no AVX'}, {platform.system()} {platform.release()}"


def versions():
    import importlib.metadata as md

    names = ("tensorflow", "ai-edge-litert", "onnxruntime", "onnx", "tf-models-official", "torch", "transformers")
    parts = []
    for name in names:
        try:
            parts.append(f"{name} {md.version(name)}")
        except md.PackageNotFoundError:
            parts.append(f"{name} (not installed)")
    return ", ".join(parts)


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def now():
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M")


def append_section(path, text):
    """Appends ``text`` to the results file in one write; never rewrites what is there."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if os.path.exists(path):
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 2))
            tail = f.read()
        header = "" if tail.endswith(b"\n\n") else ("\n" if tail.endswith(b"\n") else "\n\n")
    else:
        header = "# Benchmark results\n\nEach section is one run, appended; compare figures only within a section.\n\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(header + text)
