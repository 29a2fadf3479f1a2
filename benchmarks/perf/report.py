"""Tables, targets and the RESULTS.md section from one run's records.

A record is a dict: ``set`` (main / sweep / table6 / gemm), ``family``
(ours, model-garden, hugging-face, executorch, litert-torch, gemm,
baseline), ``format`` (tflite, onnx, pte, kernel), ``precision``,
``seq_len``, ``setting`` (Table 6 row), ``status`` (ok / skipped) and, when
timed, ``median_ms``, ``p90_ms``, ``runs``, ``size_mb``, ``peak_mb``,
``gflops_per_s``, ``peak_fraction``, and with ``--cold-start`` a
``cold_start`` dict (``cold_start.FIELDS``).
"""

import datetime
import math
import os
import platform

PEERS = ("model-garden", "hugging-face", "executorch", "litert-torch")
INT8 = ("dynamic-int8", "int8")
PEER_LABEL = {"model-garden": "Model Garden", "hugging-face": "Hugging Face", "executorch": "ExecuTorch",
              "litert-torch": "litert-torch", "ours": "ours"}


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
    """The issue's targets that this run can evaluate: list of (target, value, met) with value None if not measured.

    Issue 17: our best int8 <= 0.8x the best int8 of every peer; our full int8
    <= 0.8x our dynamic int8; our float32 <= 1.0x every peer; the student >= 4x
    faster than bert-base at float32 at every sequence length measured (main
    and sweep). The share of the GEMM peak is kept as the float32 floor's witness.
    """
    main = [r for r in records if r["set"] == "main"]
    out = []
    by = {(row["format"], row["precision"]): row for row in ratios(records)}
    row = by.get(("tflite", "best-int8"))
    value = row["ratio"] if row else None
    out.append(("ours best int8 / best int8 of every peer <= 0.8", value, value is not None and value <= 0.8))
    full = _best(_ok(main, family="ours", format="tflite", precision="int8"))
    dyn = _best(_ok(main, family="ours", format="tflite", precision="dynamic-int8"))
    value = full["median_ms"] / dyn["median_ms"] if full and dyn else None
    out.append(("ours tflite full int8 / dynamic int8 <= 0.8", value, value is not None and value <= 0.8))
    row = by.get(("tflite", "float32"))
    value = row["ratio"] if row else None
    out.append(("ours float32 / every peer's float32 <= 1.0", value, value is not None and value <= 1.0))
    speedups = []
    for set_name in ("main", "sweep"):
        rows = [r for r in records if r["set"] == set_name]
        for seq_len in sorted({r.get("seq_len") for r in rows if r.get("seq_len")}):
            base = _best(_ok(rows, family="baseline", precision="float32", model="bert-base", seq_len=seq_len))
            ours32 = _best(_ok(rows, family="ours", format="tflite", precision="float32", seq_len=seq_len))
            if base and ours32:
                speedups.append(base["median_ms"] / ours32["median_ms"])
    value = min(speedups) if speedups else None
    out.append(("bert-base / ours tflite float32 >= 4.0 at every length (the smallest)", value,
                value is not None and value >= 4.0))
    f32 = _best(_ok(main, family="ours", precision="float32"))
    value = f32.get("peak_fraction") if f32 else None
    out.append(("ours float32 >= 75% of the float32 GEMM peak", value, value is not None and value >= 0.75))
    return out


def _ms(r):
    return f"{r['median_ms']:.2f}" if r and r.get("median_ms") is not None else "-"


def _fmt(value, spec=".2f"):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, spec)


def markdown(records, meta):
    """The RESULTS.md section for this run."""
    lines = [f"## Performance against the peers: {meta['date']} ({meta['title']})", ""]
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
    lines += ["", "### Targets (issue 17)", "", f"| target | measured | {verdict} |", "|---|---|---|"]
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
    cold = table_cold_start(records)
    if cold:
        lines += ["", "### Cold start and memory (a fresh process per file; medians of the launches)", "",
                  "Import: the runtime's Python package (ExecuTorch's imports torch, which an Android app does not "
                  "load). Load: file to a model ready to run. Peak RSS: the whole process; model RSS: the peak "
                  "minus the resident memory after the import.", ""] + cold
    sweep = table_sweep(records)
    if sweep:
        lines += ["", "### Latency (median ms) against sequence length", ""] + sweep
    t6 = table6(records)
    if t6:
        lines += ["", f"### Table 6 layout (median ms; speed-up over LayerNorm+GELU), seq {meta['seq_len']}", ""] + t6
    if meta.get("plots"):
        lines += ["", "Plots: " + ", ".join(f"`{p}`" for p in meta["plots"])]
    return "\n".join(lines) + "\n"


def table_cold_start(records):
    rows = [r for r in _ok(records, set="main") if r.get("cold_start")]
    failed = [r for r in _ok(records, set="main") if r.get("cold_start_error")]
    if not rows and not failed:
        return []
    lines = ["| export | launches | import ms | load ms | first inference ms | second ms | peak RSS MB | model RSS MB |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["cold_start"]
        lines.append(f"| {_label(r)} | {c['launches']} | {_fmt(c['import_ms'], '.0f')} | {_fmt(c['load_ms'], '.0f')} | "
                     f"{_fmt(c['first_ms'], '.1f')} | {_fmt(c['second_ms'], '.1f')} | {_fmt(c['peak_rss_mb'], '.0f')} | "
                     f"{_fmt(c['model_rss_mb'], '.0f')} |")
    lines += [f"- {_label(r)}: {r['cold_start_error']}" for r in failed]
    return lines


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

    names = ("tensorflow", "ai-edge-litert", "onnxruntime", "onnx", "tf-models-official", "torch", "transformers",
             "executorch", "litert-torch")
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
