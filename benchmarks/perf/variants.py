"""Issue 17: the paper variants against BERT twins of the same shape, on one pinned core.

For each variant preset (ConvBERT small and medium-small, NEZHA-base, the
composite-attention BERT-small) a *BERT twin* is built: the ``bert-base``
preset (LayerNorm, GELU, absolute positions, standard attention) with the
variant's hidden size, layers, heads, intermediate size, embedding size (when
it has one) and vocabulary, so the two differ only by the variant's attention
and position scheme (and ConvBERT-medium-small's grouped FFN). Both are
exported with ``mbk export`` (``ours.py``: trained-like weights) to TFLite
float32, dynamic-range int8 and full int8, and timed in one process on one
pinned core, interleaved (``timing.py``). The question: does a variant's FLOP
count (``mobilebert_kit.models.flops``) predict its phone-CPU latency?

``--before`` adds the same variants exported with the layer formulations issue
17 replaced (:func:`formulation_before_issue_17`), timed beside the current
ones: ConvBERT's span convolution as a Pack of shifted slices plus a batched
matmul, and the relative-position Gather of NEZHA and composite attention.

Output: a markdown table (GFLOP, float32 ms, best int8 ms and which, ratios
of milliseconds and of FLOPs to the twin), every measurement with the
file's XNNPACK coverage, appended to ``benchmarks/RESULTS.md`` with the
command unless ``--no-results``. A failed export is a row with its reason.

Usage:
    python -m benchmarks.perf.variants --core 0                  # full run, seq 128
    python -m benchmarks.perf.variants --quick --no-results --presets tiny-convbert --seq-len 32
"""

import os
import sys

# One thread everywhere before NumPy/BLAS load, as run.py does.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
if not __package__:  # run as a file: make `benchmarks.perf` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import shlex  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import mobilebert_kit  # noqa: E402,F401  (TF_USE_LEGACY_KERAS before TensorFlow loads)
from mobilebert_kit.errors import first_line  # noqa: E402
from benchmarks.perf import ours, peers, report, timing  # noqa: E402
from benchmarks.perf.runners import load_runner, realistic_inputs  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANTS = ("convbert-small", "convbert-medium-small", "nezha-base", "composite-bert-small")
PRECISIONS = ("float32", "dynamic-int8", "int8")
INT8 = ("dynamic-int8", "int8")
# What a twin copies from its variant: everything that sets the matrix sizes. The rest
# (attention type, positions, norm, activation) comes from ``bert-base``.
TWIN_KEYS = ("hidden_size", "num_layers", "num_heads", "intermediate_size", "embedding_size", "vocab_size")
TWIN_BASE = "bert-base"


def _csv(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.perf.variants", description=__doc__.split("\n\n")[0])
    p.add_argument("--presets", type=_csv, default=list(VARIANTS), help="variant presets (default: the four of issue 17)")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--precisions", type=_csv, default=list(PRECISIONS), help="subset of " + ",".join(PRECISIONS))
    p.add_argument("--before", type=_csv, default=None,
                   help="variants also exported with the pre-issue-17 formulation (default: all of --presets; "
                        "'none' for none)")
    p.add_argument("--core", type=int, default=None, help="CPU core to pin to (default: the last allowed one)")
    p.add_argument("--min-runs", type=int, default=None, help="timed calls per model, at least (default 20; --quick 5)")
    p.add_argument("--min-time", type=float, default=None, help="timed seconds per model, at least (default 6; --quick 1)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 4; --quick 2)")
    p.add_argument("--warmup", type=int, default=None, help="unrecorded calls per model (default 3; --quick 1)")
    p.add_argument("--calibration-count", type=int, default=None, help="full-int8 calibration inputs (default 16; --quick 4)")
    p.add_argument("--quick", action="store_true", help="few runs: proves the module, figures are rough")
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "mbk-variants-work"), help="exports and caches")
    p.add_argument("--reuse", action="store_true",
                   help="time files already in --workdir instead of re-exporting (only while the layers are unchanged)")
    p.add_argument("--results", default=os.path.join(REPO, "benchmarks", "RESULTS.md"), help="file the section is appended to")
    p.add_argument("--no-results", action="store_true", help="print the section, append nothing")
    p.add_argument("--note", default="", help="a sentence recorded with the run (e.g. what else was running)")
    p.add_argument("--debug", action="store_true", help="print tracebacks of failed exports")
    args = p.parse_args(argv)
    defaults = dict(min_runs=(5, 20), min_time=(1.0, 6.0), rounds=(2, 4), warmup=(1, 3), calibration_count=(4, 16))
    for name, (quick, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if args.before is None:
        args.before = list(args.presets)
    elif args.before == ["none"]:
        args.before = []
    bad = sorted(set(args.precisions) - set(PRECISIONS))
    if bad:
        p.error(f"unknown precision(s) {', '.join(bad)}; valid: {', '.join(PRECISIONS)}")
    if set(args.before) - set(args.presets):
        p.error(f"--before names presets not in --presets: {', '.join(sorted(set(args.before) - set(args.presets)))}")
    return args


def preset_config(name):
    """The preset's Encoder arguments (a copy)."""
    from mobilebert_kit.models.presets import PRESETS

    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}")
    return dict(PRESETS[name]["config"])


def twin_overrides(variant):
    """Overrides of ``bert-base`` that give ``variant``'s BERT twin (same matrix sizes, plain BERT layers).

    Args:
        variant (str): a preset name.

    Returns:
        dict: the ``TWIN_KEYS`` values of the variant; ``embedding_size`` only
        when the variant sets one (else BERT's default, the hidden size).
    """
    config = preset_config(variant)
    return {k: config[k] for k in TWIN_KEYS if config.get(k) is not None}


# -- the formulations issue 17 replaced, for the before/after rows --------------------------------

def _pack_unfold_call(self, query, key, value):
    """``SpanDynamicConvolution.call`` before issue 17 (verbatim): Pack of k shifted slices, batched matmul."""
    from mobilebert_kit.backend import tf

    batch, seq = tf.shape(value)[0], tf.shape(value)[1]
    k, pad = self.kernel_size, (self.kernel_size - 1) // 2
    kernels = self.conv_kernel(query * self.key_conv(key))  # (B, S, N*k), Eq. 4 before softmax
    kernels = tf.nn.softmax(tf.reshape(kernels, [batch, seq, self.num_heads, k]), axis=-1)
    values = self.conv_value(value)  # (B, S, N*D)
    padded = tf.pad(values, [[0, 0], [pad, pad], [0, 0]])  # (B, S + k - 1, N*D)
    length = value.shape[1] if value.shape[1] is not None else seq
    taps = tf.stack([padded[:, t : t + length] for t in range(k)], axis=-1)  # (B, S, N*D, k)
    taps = tf.reshape(taps, [batch, seq * self.num_heads, self.head_size, k])  # (B, S*N, D, k)
    kernels = tf.reshape(kernels, [batch, seq * self.num_heads, k, 1])  # (B, S*N, k, 1)
    out = tf.matmul(taps, kernels)  # (B, S*N, D, 1), Eq. 5
    return tf.reshape(out, [batch, seq, self.num_heads * self.head_size])


def _gather_offsets(per_offset, index):
    """``relative_positions.expand_offsets`` before issue 17: always a Gather."""
    from mobilebert_kit.backend import tf

    return tf.gather(per_offset, index, axis=-1)


@contextlib.contextmanager
def formulation_before_issue_17():
    """Models traced inside the block use the layer formulations issue 17 replaced.

    Same weights, same outputs (within float rounding): only the TFLite graph
    differs. Patches the class and module attributes the layers look up at
    trace time, and restores them on exit.
    """
    from mobilebert_kit.layers import relative_positions
    from mobilebert_kit.layers.span_dynamic_convolution import SpanDynamicConvolution

    saved = SpanDynamicConvolution.call, relative_positions.expand_offsets
    SpanDynamicConvolution.call = _pack_unfold_call
    relative_positions.expand_offsets = _gather_offsets
    try:
        yield
    finally:
        SpanDynamicConvolution.call, relative_positions.expand_offsets = saved


# -- the run ---------------------------------------------------------------------------------------

class Bench:
    """Exports (all cores), then times every file interleaved on one pinned core."""

    def __init__(self, args, log=print):
        self.args = args
        self.log = log
        self.work = os.path.abspath(args.workdir)
        os.makedirs(self.work, exist_ok=True)
        self.records = []
        self._flops = {}

    def models(self):
        """``(group, role, label, preset, overrides)`` of every model, in table order."""
        out = []
        for variant in self.args.presets:
            out.append((variant, "variant", variant, variant, {}))
            if variant in self.args.before:
                out.append((variant, "before", f"{variant} (before)", variant, {}))
            out.append((variant, "twin", f"BERT twin of {variant}", TWIN_BASE, twin_overrides(variant)))
        return out

    def flops(self, preset, overrides):
        key = (preset, tuple(sorted(overrides.items())))
        if key not in self._flops:
            import mobilebert_kit as mbk

            self._flops[key] = mbk.count_flops(mbk.build(preset, **overrides), self.args.seq_len)
        return self._flops[key]

    def calibration_file(self, vocab_size):
        """``.npz`` full-int8 calibration inputs: the rows run.py calibrates on (peers.calibration_rows)."""
        seq_len, count = self.args.seq_len, self.args.calibration_count
        path = os.path.join(self.work, f"calibration_v{vocab_size}_s{seq_len}_n{count}.npz")
        return peers.calibration_npz(path, vocab_size, seq_len, count)

    def collect(self):
        a = self.args
        self.log(f"exports (work dir {self.work})")
        for group, role, label, preset, overrides in self.models():
            vocab = dict(preset_config(preset), **overrides)["vocab_size"]
            try:
                flops = self.flops(preset, overrides)
            except Exception as err:  # noqa: BLE001  (a preset that does not build is a row, not a crash)
                flops = None
                self.log(f"  {label}: FLOP count failed: {first_line(err)}")
            for precision in a.precisions:
                record = dict(group=group, role=role, model=label, preset=preset, overrides=overrides,
                              precision=precision, seq_len=a.seq_len, flops=flops, vocab=vocab, status="ok")
                self.records.append(record)
                self._export(record)

    def _export(self, r):
        a = self.args
        tag = f"{r['role']}_{r['group']}_{r['precision']}_s{a.seq_len}"
        path = os.path.join(self.work, tag + ".tflite")
        if a.reuse and os.path.isfile(path):
            r.update(path=path, how="reused file (--reuse)")
            return
        try:
            src = ours.source_for(r["preset"], r["overrides"], self.work)
            calibration = self.calibration_file(r["vocab"]) if r["precision"] == "int8" else None
            start = time.perf_counter()
            with formulation_before_issue_17() if r["role"] == "before" else contextlib.nullcontext():
                how, _ = ours.export(src, "tflite", r["precision"], a.seq_len, path, calibration=calibration)
            r.update(path=path, how=how, export_s=time.perf_counter() - start)
            self.log(f"  {r['model']} {r['precision']}: {r['export_s']:.0f} s")
        except Exception as err:  # noqa: BLE001  (one failed export must not lose the others' figures)
            r.update(status="skipped", path=None, reason=f"export failed: {type(err).__name__}: {first_line(err)}")
            self.log(f"  {r['model']} {r['precision']}: {r['reason']}")
            if a.debug:
                traceback.print_exc()

    def coverage(self):
        """XNNPACK partitions and ops left to builtin kernels, per file (read before timing)."""
        from mobilebert_kit.artifacts.xnnpack_coverage import xnnpack_coverage

        for r in self.records:
            if r["status"] == "ok":
                try:
                    c = xnnpack_coverage(r["path"])
                    r.update(ops=c["ops"], partitions=c["partitions"], builtin=c["builtin"])
                except Exception as err:  # noqa: BLE001  (the timing below reports a file that does not load)
                    r["coverage_error"] = first_line(err)

    def measure(self):
        a = self.args
        self.core = a.core if a.core is not None else max(os.sched_getaffinity(0))
        recs = [r for r in self.records if r["status"] == "ok"]
        self.log(f"timing {len(recs)} file(s) on core {self.core}")
        candidates, owner = {}, {}
        with timing.pinned(self.core):
            for i, r in enumerate(recs):
                try:
                    runner = load_runner(r["path"], realistic_inputs(r["vocab"], a.seq_len))
                    runner()
                except Exception as err:  # noqa: BLE001  (a file the runtime rejects is a finding, not a crash)
                    r.update(status="skipped", reason=f"runtime failed: {type(err).__name__}: {first_line(err)}")
                    continue
                r["size_mb"] = os.path.getsize(r["path"]) / 1e6
                candidates[f"m{i}"], owner[f"m{i}"] = runner, r
            samples = timing.interleaved(candidates, a.rounds, a.min_runs, a.min_time, a.warmup, 0.2, log=self.log)
        for key, values in samples.items():
            owner[key].update(timing.stats(values))


# -- tables ------------------------------------------------------------------------------------------

def _timed(records, **match):
    return [r for r in records if r["status"] == "ok" and r.get("median_ms") is not None
            and all(r.get(k) == v for k, v in match.items())]


def summary(records):
    """One row per model: float32 and best-int8 latency, and the ratios to its group's twin.

    Args:
        records (list[dict]): per-file records (``group``, ``role``, ``model``,
            ``precision``, ``flops``, ``status``, ``median_ms``; ``reason`` when skipped).

    Returns:
        list[dict]: ``model``, ``role``, ``group``, ``gflop``, ``float32_ms``,
        ``int8_ms``, ``int8_which``, ``ms_ratio`` (float32 and best int8 against
        the twin, a pair; None where either is missing), ``flop_ratio``, and
        ``failed`` (reasons of the model's skipped files), in first-seen order.
    """
    order = []
    for r in records:
        if (r["group"], r["role"], r["model"]) not in order:
            order.append((r["group"], r["role"], r["model"]))
    rows = {}
    for group, role, model in order:
        mine = [r for r in records if r["model"] == model and r["group"] == group]
        f32 = _timed(mine, precision="float32")
        int8s = [r for r in _timed(mine) if r["precision"] in INT8]
        int8 = min(int8s, key=lambda r: r["median_ms"]) if int8s else None
        flops = next((r["flops"] for r in mine if r.get("flops")), None)
        rows[(group, model)] = dict(
            group=group, role=role, model=model, gflop=flops / 1e9 if flops else None,
            float32_ms=f32[0]["median_ms"] if f32 else None,
            int8_ms=int8["median_ms"] if int8 else None, int8_which=int8["precision"] if int8 else None,
            failed=sorted({f"{r['precision']}: {r['reason']}" for r in mine if r["status"] != "ok"}),
        )
    for row in rows.values():
        twin = next((t for t in rows.values() if t["group"] == row["group"] and t["role"] == "twin"), None)
        row["ms_ratio"] = (_ratio(row["float32_ms"], twin and twin["float32_ms"]),
                           _ratio(row["int8_ms"], twin and twin["int8_ms"]))
        row["flop_ratio"] = _ratio(row["gflop"], twin and twin["gflop"])
    return list(rows.values())


def _ratio(a, b):
    return a / b if a is not None and b else None


def _f(value, spec=".2f"):
    return "-" if value is None else format(value, spec)


def table(records):
    """The issue's table as markdown lines (see :func:`summary` for the figures)."""
    lines = [
        "| model | GFLOP | float32 ms | float32 ms/GFLOP | best int8 ms (which) | ms ratio to twin: float32 | "
        "ms ratio to twin: best int8 | FLOP ratio to twin |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in summary(records):
        per_gflop = _ratio(row["float32_ms"], row["gflop"])
        int8 = f"{_f(row['int8_ms'])} ({row['int8_which']})" if row["int8_ms"] is not None else "-"
        name = f"**{row['model']}**" if row["role"] == "variant" else row["model"]
        f32_ratio, int8_ratio = row["ms_ratio"]
        lines.append(
            f"| {name} | {_f(row['gflop'], '.3f')} | {_f(row['float32_ms'])} | {_f(per_gflop)} | {int8} | "
            f"{_f(f32_ratio)} | {_f(int8_ratio)} | {_f(row['flop_ratio'])} |"
        )
        for reason in row["failed"]:
            lines.append(f"| {row['model']}: not measured | {reason} | | | | | | |")
    return lines


def markdown(records, meta):
    """The RESULTS.md section of one run."""
    lines = [f"## Issue 17: paper variants against BERT twins, one core: {meta['date']} ({meta['title']})", ""]
    if meta.get("noisy"):
        lines += [f"> **PRELIMINARY, NOISY MACHINE.** {meta['noise']}. Compare only ratios within this run.", ""]
    lines += [
        f"- command: `{meta['command']}`",
        f"- machine: {meta['machine']}",
        f"- runtimes: {meta['versions']}",
        f"- setting: core {meta['core']} pinned (sched_setaffinity), 1 thread, XNNPACK, batch 1, sequence length "
        f"{meta['seq_len']}, realistic inputs; {meta['timing']}; {meta['noise']}",
        "- twin: `bert-base` with the variant's " + ", ".join(TWIN_KEYS) + " (plain BERT layers: LayerNorm, "
        "GELU, absolute positions, self-attention); FLOPs: `mobilebert_kit.models.flops` (matrix products only)",
        "- (before): the variant exported with the layer formulations issue 17 replaced "
        "(`variants.formulation_before_issue_17`), same weights",
        "",
    ] + table(records) + [
        "",
        "### All files",
        "",
        "| model | precision | median ms | p90 ms | min ms | runs | size MB | ops | XNNPACK partitions | "
        "ops left to builtin kernels | export s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        if r["status"] != "ok":
            continue
        builtin = ", ".join(f"{k} {v}" for k, v in (r.get("builtin") or {}).items()) or "-"
        lines.append(
            f"| {r['model']} | {r['precision']} | {_f(r.get('median_ms'))} | {_f(r.get('p90_ms'))} | "
            f"{_f(r.get('min_ms'))} | {r.get('runs', '-')} | {_f(r.get('size_mb'), '.1f')} | {r.get('ops', '-')} | "
            f"{r.get('partitions', '-')} | {builtin} | {_f(r.get('export_s'), '.0f')} |"
        )
    return "\n".join(lines) + "\n"


def run(argv=None, log=print):
    """Runs the comparison; returns ``{"records", "meta", "markdown"}``."""
    args = parse_args(argv)
    load_start = report.load_average()
    bench = Bench(args, log=log)
    start = time.perf_counter()
    bench.collect()
    bench.coverage()
    export_s = time.perf_counter() - start
    bench.measure()
    measure_s = time.perf_counter() - start - export_s
    log(f"exports {export_s:.0f} s, timing {measure_s:.0f} s")
    load_end = report.load_average()
    cores = os.cpu_count() or 1
    # Our own pinned thread adds ~1 to the load average; above 0.75 x cores something else ran (run.py's rule).
    busy = max(x for x in (load_start, load_end, 0.0) if x is not None) > 0.75 * cores
    meta = {
        "date": report.now(),
        "title": "quick" if args.quick else "full",
        "noisy": args.quick or busy,
        "noise": (f"load average {load_start} at the start and {load_end} at the end on {cores} cores"
                  + (" (other jobs were running)" if busy else "") + (" --quick: few runs" if args.quick else "")
                  + (f"; {args.note}" if args.note else "")),
        "command": "python -m benchmarks.perf.variants " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "machine": report.machine(),
        "versions": report.versions(),
        "core": bench.core,
        "seq_len": args.seq_len,
        "timing": (f"{args.warmup} warm-up calls then {args.rounds} interleaved rounds, >= {args.min_runs} calls "
                   f"and >= {args.min_time:g} s per file; full int8 calibrated on {args.calibration_count} inputs"),
        "export_s": export_s,
        "measure_s": measure_s,
    }
    records = [{k: v for k, v in r.items()} for r in bench.records]
    text = markdown(records, meta)
    with open(os.path.join(bench.work, "variants.json"), "w") as f:
        json.dump({"records": records, "meta": meta}, f, indent=1, default=str)
    if not args.no_results:
        report.append_section(args.results, text)
        log(f"appended to {args.results}")
    return {"records": records, "meta": meta, "markdown": text}


def main(argv=None):
    result = run(argv)
    print(result["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
