"""Latency against sequence length, and the paper's Table 6 layout, as PNG files."""

import os

from benchmarks.perf.report import PEER_LABEL, SETTINGS


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def latency_vs_seq_len(records, path, subtitle):
    """One line per export (family, format, precision): median ms at each sequence length, p90 as error bar."""
    sweep = [r for r in records if r["set"] == "sweep" and r["status"] == "ok"]
    if not sweep:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    for key in sorted({(r["family"], r["format"], r["precision"]) for r in sweep}):
        rows = sorted((r for r in sweep if (r["family"], r["format"], r["precision"]) == key), key=lambda r: r["seq_len"])
        xs = [r["seq_len"] for r in rows]
        ys = [r["median_ms"] for r in rows]
        err = [[0] * len(rows), [r["p90_ms"] - r["median_ms"] for r in rows]]
        style = "-" if key[0] == "ours" else "--"
        ax.errorbar(xs, ys, yerr=err, fmt=style + "o", capsize=3, label=f"{PEER_LABEL.get(key[0], key[0])} {key[1]} {key[2]}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    lens = sorted({r["seq_len"] for r in sweep})
    ax.set_xticks(lens)
    ax.set_xticklabels([str(s) for s in lens])
    ax.set_xlabel("sequence length")
    ax.set_ylabel("median latency, ms (bar: p90)")
    ax.set_title(f"MobileBERT latency, 1 pinned core, batch 1\n{subtitle}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path


def table6(records, path, subtitle):
    """Grouped bars: precision groups, one bar per setting, labelled with the speed-up over LayerNorm+GELU."""
    rows = [r for r in records if r["set"] == "table6" and r["status"] == "ok"]
    if not rows:
        return None
    plt = _pyplot()
    precisions = [p for p in ("float32", "float16", "dynamic-int8", "int8") if any(r["precision"] == p for r in rows)]
    cell = {(r["setting"], r["precision"]): r for r in rows}
    fig, ax = plt.subplots(figsize=(8, 5))
    width = 0.8 / len(SETTINGS)
    for i, setting in enumerate(SETTINGS):
        xs, ys, labels = [], [], []
        for j, p in enumerate(precisions):
            r = cell.get((setting, p))
            if r is None:
                continue
            base = cell.get(("LayerNorm+GELU", p))
            xs.append(j + (i - (len(SETTINGS) - 1) / 2) * width)
            ys.append(r["median_ms"])
            labels.append(f"{base['median_ms'] / r['median_ms']:.2f}x" if base else "")
        bars = ax.bar(xs, ys, width, label=setting)
        for bar, text in zip(bars, labels):
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(precisions)))
    ax.set_xticklabels(precisions)
    ax.set_ylabel("median latency, ms")
    ax.set_title(f"Table 6 layout: operational optimisations by precision (TFLite)\n{subtitle}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path


def _save(fig, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)
