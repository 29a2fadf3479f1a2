"""Issue 7 benchmark: our MobileBERT exports against the official ones, on one pinned core, in one run.

One process, one core (``os.sched_setaffinity``), one thread, batch 1, the
same realistic inputs for every model. Measured side by side, in interleaved
rounds:

- ours: ``mbk export <preset>`` to TFLite (float32, dynamic-range int8, full
  int8, float16) and ONNX (float32, ORT dynamic int8, static int8 if offered);
- peers (``peers.py``): TF Model Garden's ``MobileBERTEncoder`` through
  ``TFLiteConverter`` (float32, dynamic int8, full int8 with float io,
  float16) and Hugging Face ``MobileBertModel`` through ``torch.onnx`` in
  ONNX Runtime (float32, ``quantize_dynamic`` int8);
- the on-device peers of 2026 (``edge_peers.py``), from the same PyTorch
  model: ExecuTorch (XNNPACK partitioner; float32 and 8-bit dynamic
  per-channel) in its Python runtime, and litert-torch (float32 and its
  ``full_dynamic_recipe``) in LiteRT;
- cold start and memory (``cold_start.py``): every file of the main set
  loaded and run in fresh processes (import, load, first inference, peak RSS);
- single-core GEMM kernels (``gemm.py``): the peak each model's achieved
  GFLOP/s is divided by;
- optionally a latency sweep over sequence lengths (``--sweep``), the paper's
  Table 6 settings (``--table6``) and larger baselines (``--baselines bert-base``).

Output: the ratio table (ours / best peer per precision), the issue's
targets, every measurement (median, p90, size, peak memory, GFLOP/s, share
of the GEMM peak), appended as a new section to ``benchmarks/RESULTS.md``
with this command and the machine; plots into ``benchmarks/perf/plots/``.
On a loaded machine (load average above 1.5 on this 2-core VM, or
``--quick``) the section is labelled preliminary.

Usage:
    bash benchmarks/perf/setup_peers.sh --edge               # once: the peers (--edge: ExecuTorch, litert-torch)
    python -m benchmarks.perf.run                            # main table, seq 128
    python -m benchmarks.perf.run --sweep 32,64,128,256,512 --table6 --baselines bert-base
    python -m benchmarks.perf.run --quick --label "smoke"    # proves it works, numbers are rough
"""

import os
import sys

# One thread everywhere before NumPy/BLAS load (the GEMM peak uses NumPy too).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
if not __package__:  # run as a file: make `benchmarks.perf` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import argparse  # noqa: E402
import json  # noqa: E402
import shlex  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import mobilebert_kit  # noqa: E402,F401  (TF_USE_LEGACY_KERAS before TensorFlow loads)
from mobilebert_kit.errors import first_line  # noqa: E402
from benchmarks.perf import cold_start, edge_peers, gemm, ours, peers, plots, report, timing  # noqa: E402
from benchmarks.perf.runners import load_runner, realistic_inputs  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRECISIONS = ("float32", "dynamic-int8", "int8", "float16")
ONNX_PRECISIONS = ("float32", "dynamic-int8", "int8")
HF_PRECISIONS = ("float32", "dynamic-int8")
SETTING_OVERRIDES = {
    "LayerNorm+GELU": dict(normalization_type="layer_norm", hidden_act="gelu"),
    "NoNorm+GELU": dict(normalization_type="no_norm", hidden_act="gelu"),
    "LayerNorm+ReLU": dict(normalization_type="layer_norm", hidden_act="relu"),
    "NoNorm+ReLU": dict(normalization_type="no_norm", hidden_act="relu"),
}


def _csv(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.perf.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="mobilebert", help="our preset (peers get the same architecture)")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--precisions", type=_csv, default=list(PRECISIONS), help="subset of " + ",".join(PRECISIONS))
    p.add_argument("--formats", type=_csv, default=["tflite", "onnx"])
    p.add_argument("--no-peers", action="store_true", help="measure ours and the GEMM peak only")
    p.add_argument("--no-edge-peers", action="store_true", help="leave out ExecuTorch and litert-torch")
    p.add_argument("--cold-start", type=int, default=None, metavar="N",
                   help="fresh-process launches per main-set file for load time, first inference and peak RSS "
                        "(default 3; --quick 1; 0: none)")
    p.add_argument("--baselines", type=_csv, default=[], help="presets exported float32 TFLite beside ours, e.g. bert-base")
    p.add_argument("--sweep", type=lambda s: [int(x) for x in _csv(s)], default=[], help="sequence lengths, e.g. 32,64,128,256,512")
    p.add_argument("--sweep-precisions", type=_csv, default=["float32", "dynamic-int8", "int8"])
    p.add_argument("--table6", action="store_true", help="LayerNorm/GELU vs NoNorm/ReLU (and the mixes) by precision")
    p.add_argument("--table6-precisions", type=_csv, default=list(PRECISIONS))
    p.add_argument("--core", type=int, default=None, help="CPU core to pin to (default: the last allowed one)")
    p.add_argument("--min-runs", type=int, default=None, help="timed calls per model, at least (default 30; --quick 5)")
    p.add_argument("--min-time", type=float, default=None, help="timed seconds per model, at least (default 10; --quick 1.5)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; --quick 2)")
    p.add_argument("--warmup", type=int, default=None, help="unrecorded calls per model (default 5; --quick 2)")
    p.add_argument("--calibration-count", type=int, default=None, help="full-int8 calibration inputs for the peers")
    p.add_argument("--quick", action="store_true", help="few runs: proves the harness, figures are rough")
    p.add_argument("--no-xnnpack", action="store_true", help="LiteRT builtin kernels only (diagnosis)")
    p.add_argument("--validate", action=argparse.BooleanOptionalAction, default=None,
                   help="let mbk export validate each file and report its fidelity (default: on, off with --quick)")
    p.add_argument("--ours-arg", action="append", default=[], help="extra argument passed to `mbk export` of our preset, not the --baselines (repeatable)")
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "mbk-perf-work"), help="exports and caches")
    p.add_argument("--fresh", action="store_true", help="re-export the peers too (ours are always re-exported)")
    p.add_argument("--reuse-ours", action="store_true",
                   help="time our files already in --workdir instead of re-exporting (only while the converter is unchanged)")
    p.add_argument("--results", default=os.path.join(REPO, "benchmarks", "RESULTS.md"), help="file the section is appended to")
    p.add_argument("--no-results", action="store_true", help="print the section, append nothing")
    p.add_argument("--plots-dir", default=os.path.join(REPO, "benchmarks", "perf", "plots"))
    p.add_argument("--json", default=None, help="also write every record as JSON here")
    p.add_argument("--label", default=None, help="words added to the section title")
    p.add_argument("--note", default="", help="a sentence recorded with the run (e.g. what else was running)")
    p.add_argument("--debug", action="store_true", help="print tracebacks of failed exports")
    args = p.parse_args(argv)
    quick = args.quick
    # Many short interleaved rounds spread the other jobs' bursts evenly over the candidates.
    defaults = dict(min_runs=(8, 30), min_time=(2.0, 10.0), rounds=(4, 5), warmup=(2, 5), calibration_count=(8, 32),
                    cold_start=(1, 3))
    for name, (q, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, q if quick else full)
    if args.validate is None:
        args.validate = not quick
    bad = sorted(set(args.precisions + args.sweep_precisions + args.table6_precisions) - set(PRECISIONS))
    if bad:
        p.error(f"unknown precision(s) {', '.join(bad)}; valid: {', '.join(PRECISIONS)}")
    if set(args.formats) - {"tflite", "onnx"}:
        p.error("--formats takes tflite and/or onnx")
    return args


class Harness:
    """Collects the records of one run: exports first (all cores), then timing (one pinned core)."""

    def __init__(self, args, log=print):
        self.args = args
        self.log = log
        self.records = []
        self.config = _preset_config(args.preset)
        self.work = os.path.abspath(args.workdir)
        os.makedirs(self.work, exist_ok=True)
        self._flops = {}
        self._mg = {}
        self._hf = None
        self.runners = {}

    # -- records ------------------------------------------------------------------------------
    def add(self, **record):
        record.setdefault("status", "ok")
        record.setdefault("setting", None)
        self.records.append(record)
        return record

    def skip(self, record, reason):
        record.update(status="skipped", reason=reason, path=None)
        self.log(f"  skipped {record['family']} {record['format']} {record['precision']} s{record.get('seq_len')}: {reason}")

    def flops(self, preset, seq_len):
        key = (preset, seq_len)
        if key not in self._flops:
            import mobilebert_kit as mbk

            self._flops[key] = mbk.count_flops(self._model(preset), seq_len)
        return self._flops[key]

    def _model(self, preset):
        cache = self.__dict__.setdefault("_models", {})
        if preset not in cache:
            import mobilebert_kit as mbk

            cache[preset] = mbk.build(preset)
        return cache[preset]

    # -- exports ------------------------------------------------------------------------------
    def export_ours(self, set_name, fmt, precision, seq_len, src_preset, overrides=None, setting=None, family="ours"):
        tag = src_preset + ("_" + "_".join(f"{v}" for _, v in sorted(overrides.items())) if overrides else "")
        record = self.add(set=set_name, family=family, model=tag, format=fmt, precision=precision, seq_len=seq_len,
                          setting=setting, flops=self.flops(src_preset, seq_len),
                          vocab=_preset_config(src_preset)["vocab_size"])
        path = os.path.join(self.work, f"ours_{tag}_{precision}_s{seq_len}{ours.SUFFIX[fmt]}")
        cache = self.__dict__.setdefault("_ours_done", {})
        if path in cache:  # exported earlier in this run (the sweep and Table 6 reuse the main exports)
            record.update(cache[path])
            return record
        if self.args.reuse_ours and os.path.isfile(path):
            record.update(path=path, how="reused file (--reuse-ours)")
            cache[path] = {k: record.get(k) for k in ("status", "reason", "path", "how")}
            return record
        try:
            src = ours.source_for(src_preset, overrides or {}, self.work)
            start = time.perf_counter()
            # --ours-arg is for our student; a baseline (plain BERT) is exported as a user would export it,
            # not with options its architecture refuses (--fold-nonorm on LayerNorm).
            extra = self.args.ours_arg if family == "ours" else ()
            how, fidelity = ours.export(src, fmt, precision, seq_len, path, extra,
                                        calibration=self.calibration_file(src_preset, seq_len),
                                        validate=self.args.validate)
            record.update(path=path, how=how, fidelity=fidelity, export_s=time.perf_counter() - start,
                          validated=bool(self.args.validate))
            self.log(f"  ours {tag} {fmt} {precision} s{seq_len}: {record['export_s']:.0f} s ({how})"
                     + (f"; validation: {fidelity}" if fidelity else ""))
        except ours.ExportUnavailable as err:
            self.skip(record, str(err))
        except Exception as err:  # noqa: BLE001  (one failed export must not lose the others' figures)
            self._failed(record, err)
        cache[path] = {k: record.get(k) for k in ("status", "reason", "path", "how", "export_s", "fidelity", "validated")}
        return record

    def calibration_file(self, preset, seq_len):
        """``.npz`` calibration inputs for full int8: the rows the Model Garden peer is calibrated on too."""
        path = os.path.join(self.work, f"calibration_{preset}_s{seq_len}_n{self.args.calibration_count}.npz")
        return peers.calibration_npz(path, _preset_config(preset)["vocab_size"], seq_len, self.args.calibration_count)

    def export_model_garden(self, set_name, precisions, seq_len, config_preset=None, setting=None):
        config = self.config if config_preset is None else _preset_config(config_preset)
        out_dir = os.path.join(self.work, "peers", self.args.preset)
        os.makedirs(out_dir, exist_ok=True)
        wanted = [p for p in precisions if p in PRECISIONS]
        records = {p: self.add(set=set_name, family="model-garden", model="MobileBERTEncoder", format="tflite",
                               precision=p, seq_len=seq_len, setting=setting, flops=self.flops(self.args.preset, seq_len))
                   for p in wanted}
        paths = {p: os.path.join(out_dir, f"mg_{p}_s{seq_len}.tflite") for p in wanted}
        missing = [p for p in wanted if not os.path.isfile(paths[p]) or (self.args.fresh and (p, seq_len) not in self._mg)]
        if missing:
            try:
                start = time.perf_counter()
                peers.export_model_garden(config, seq_len, missing, out_dir, self.args.calibration_count)
                self.log(f"  model garden s{seq_len} {','.join(missing)}: {time.perf_counter() - start:.0f} s")
            except peers.PeerUnavailable as err:
                for p in wanted:
                    self.skip(records[p], str(err))
                return
            except Exception as err:  # noqa: BLE001
                for p in wanted:
                    self._failed(records[p], err)
                return
        for p in wanted:
            self._mg[(p, seq_len)] = paths[p]
            records[p].update(path=paths[p], how="tf.lite.TFLiteConverter")

    def export_hugging_face(self, set_name, precisions, seq_len):
        wanted = [p for p in precisions if p in HF_PRECISIONS]
        records = {p: self.add(set=set_name, family="hugging-face", model="MobileBertModel", format="onnx", precision=p,
                               seq_len=seq_len, flops=self.flops(self.args.preset, seq_len)) for p in wanted}
        if not wanted:
            return
        if self._hf is None:
            out_dir = os.path.join(self.work, "peers", self.args.preset)
            os.makedirs(out_dir, exist_ok=True)
            paths = {p: os.path.join(out_dir, f"hf_{p}.onnx") for p in self.hf_precisions}
            if self.args.fresh or not all(os.path.isfile(x) for x in paths.values()):
                try:
                    start = time.perf_counter()
                    peers.export_hugging_face(self.config, self.hf_precisions, out_dir)
                    self.log(f"  hugging face onnx + quantize_dynamic: {time.perf_counter() - start:.0f} s")
                except peers.PeerUnavailable as err:
                    self._hf = str(err)
                except Exception as err:  # noqa: BLE001
                    self._hf = f"export failed: {type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
                    if self.args.debug:
                        traceback.print_exc()
            if self._hf is None:
                self._hf = paths
        for p in wanted:
            if isinstance(self._hf, str):
                self.skip(records[p], self._hf)
            else:
                records[p].update(path=self._hf[p], how="torch.onnx.export (opset 17)" + (" + quantize_dynamic" if p != "float32" else ""))

    def export_edge_peers(self, set_name, precisions, seq_len):
        """ExecuTorch (``.pte``) and litert-torch (``.tflite``) of the Hugging Face model, static ``seq_len``."""
        out_dir = os.path.join(self.work, "peers", self.args.preset)
        os.makedirs(out_dir, exist_ok=True)
        families = (
            ("executorch", "pte", edge_peers.EXECUTORCH_PRECISIONS, edge_peers.export_executorch,
             lambda p: os.path.join(out_dir, f"et_{p}_s{seq_len}.pte"),
             "torch.export + XnnpackPartitioner", " (XNNPACKQuantizer dynamic per-channel, PT2E)"),
            ("litert-torch", "tflite", edge_peers.LITERT_TORCH_PRECISIONS, edge_peers.export_litert_torch,
             lambda p: os.path.join(out_dir, f"lt_{p}_s{seq_len}.tflite"),
             "litert_torch.convert", " (full_dynamic_recipe)"),
        )
        for family, fmt, offered, export, path_of, how, quant_how in families:
            wanted = [p for p in precisions if p in offered]
            records = {p: self.add(set=set_name, family=family, model="MobileBertModel", format=fmt, precision=p,
                                   seq_len=seq_len, flops=self.flops(self.args.preset, seq_len)) for p in wanted}
            missing = [p for p in wanted if self.args.fresh or not os.path.isfile(path_of(p))]
            if missing:
                try:
                    start = time.perf_counter()
                    export(self.config, seq_len, missing, out_dir)
                    self.log(f"  {family} s{seq_len} {','.join(missing)}: {time.perf_counter() - start:.0f} s")
                except peers.PeerUnavailable as err:
                    for p in wanted:
                        self.skip(records[p], str(err))
                    continue
                except Exception as err:  # noqa: BLE001  (a peer that fails here is a finding, not a crash)
                    for p in wanted:
                        self._failed(records[p], err)
                    continue
            for p in wanted:
                records[p].update(path=path_of(p), how=how + (quant_how if p != "float32" else ""))

    def _failed(self, record, err):
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        self.skip(record, f"export failed: {type(err).__name__}: {first}")
        if self.args.debug:
            traceback.print_exc()

    def collect(self):
        a = self.args
        # One Hugging Face export (dynamic sequence axis) serves every length: export what any set needs.
        self.hf_precisions = [p for p in HF_PRECISIONS if p in a.precisions or (a.sweep and p in a.sweep_precisions)]
        self.log(f"exports (work dir {self.work})")
        for fmt in a.formats:
            for precision in a.precisions if fmt == "tflite" else [p for p in a.precisions if p in ONNX_PRECISIONS]:
                self.export_ours("main", fmt, precision, a.seq_len, a.preset)
        for name in a.baselines:
            self.export_ours("main", "tflite", "float32", a.seq_len, name, family="baseline")
        if not a.no_peers:
            if "tflite" in a.formats:
                self.export_model_garden("main", a.precisions, a.seq_len)
            if "onnx" in a.formats:
                self.export_hugging_face("main", a.precisions, a.seq_len)
            if not a.no_edge_peers:
                self.export_edge_peers("main", a.precisions, a.seq_len)
        for seq_len in a.sweep:
            for precision in a.sweep_precisions:
                self.export_ours("sweep", "tflite", precision, seq_len, a.preset)
            if "float32" in a.sweep_precisions:  # the student's speed-up over each baseline at every length
                for name in a.baselines:
                    self.export_ours("sweep", "tflite", "float32", seq_len, name, family="baseline")
            if not a.no_peers:
                self.export_model_garden("sweep", a.sweep_precisions, seq_len)
                self.export_hugging_face("sweep", a.sweep_precisions, seq_len)
        if a.table6:
            for setting, wanted in SETTING_OVERRIDES.items():
                src, overrides = self._table6_source(wanted)
                for precision in a.table6_precisions:
                    self.export_ours("table6", "tflite", precision, a.seq_len, src, overrides, setting=setting)

    def _table6_source(self, wanted):
        """The preset and overrides of one Table 6 setting: a named preset where there is one."""
        overrides = {k: v for k, v in wanted.items() if self.config.get(k) != v}
        if self.args.preset == "mobilebert" and overrides == SETTING_OVERRIDES["LayerNorm+GELU"]:
            return "mobilebert-no-opt", None  # the paper's "w/o OPT" model, a preset of its own
        return self.args.preset, overrides or None

    # -- timing -------------------------------------------------------------------------------
    def measure(self):
        a = self.args
        self.core = a.core if a.core is not None else max(os.sched_getaffinity(0))
        kernels = gemm.kernels(self.work)  # built (converted) before pinning, on all cores
        for set_name in ("main", "sweep", "table6"):
            recs = [r for r in self.records if r["set"] == set_name and r["status"] == "ok"]
            if not recs and set_name != "main":
                continue
            self.log(f"timing set {set_name}: {len(recs)} model(s) on core {self.core}")
            candidates, owner = {}, {}
            with timing.pinned(self.core):
                for i, r in enumerate(recs):
                    inputs = realistic_inputs(r.get("vocab", self.config["vocab_size"]), r["seq_len"])
                    try:
                        with timing.peak_memory() as mem:
                            runner = load_runner(r["path"], inputs, xnnpack=not a.no_xnnpack)
                            runner()
                            runner()
                    except Exception as err:  # noqa: BLE001  (a file the runtime rejects is a finding, not a crash)
                        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                        self.skip(r, f"runtime failed: {type(err).__name__}: {first}")
                        continue
                    r.update(peak_mb=mem["peak_mb"], size_mb=os.path.getsize(r["path"]) / 1e6)
                    candidates[f"m{i}"], owner[f"m{i}"] = runner, r
                if set_name == "main":
                    for j, (name, (precision, fn)) in enumerate(kernels.items()):
                        owner[f"g{j}"] = self.add(set="gemm", family="gemm", model=name, format="kernel",
                                                  precision=precision, seq_len=None, flops=gemm.FLOPS)
                        candidates[f"g{j}"] = fn
                samples = timing.interleaved(candidates, a.rounds, a.min_runs, a.min_time, a.warmup, 0.2, log=self.log)
            for key, values in samples.items():
                owner[key].update(timing.stats(values))
            del candidates
        if a.cold_start > 0:
            self.measure_cold_start()
        self._derive()

    def measure_cold_start(self):
        """Every timed file of the main set in ``--cold-start`` fresh processes, on the timing core."""
        recs = [r for r in self.records if r["set"] == "main" and r["status"] == "ok" and r.get("path")]
        self.log(f"cold start: {len(recs)} file(s), {self.args.cold_start} launch(es) each, core {self.core}")
        for r in recs:
            try:
                r["cold_start"] = cold_start.measure(r["path"], r.get("vocab", self.config["vocab_size"]), r["seq_len"],
                                                     core=self.core, repeat=self.args.cold_start)
            except Exception as err:  # noqa: BLE001  (reported in the table, the run goes on)
                r["cold_start_error"] = first_line(err)

    def _derive(self):
        peaks = {}
        for r in self.records:
            if r["status"] == "ok" and r.get("median_ms"):
                r["gflops_per_s"] = r["flops"] / (r["median_ms"] / 1000.0) / 1e9
                if r["family"] == "gemm" and r["precision"] in ("float32", "int8"):
                    peaks[r["precision"]] = max(peaks.get(r["precision"], 0.0), r["gflops_per_s"])
        self.peaks = peaks
        for r in self.records:
            if r.get("gflops_per_s") is not None:
                kind = "int8" if r["precision"] in ("dynamic-int8", "int8", "int8-slow") else "float32"
                if peaks.get(kind):
                    r["peak_fraction"] = r["gflops_per_s"] / peaks[kind]


def _preset_config(name):
    from mobilebert_kit.models.presets import PRESETS

    return dict(PRESETS[name]["config"])


def run(argv=None, log=print):
    """Runs the benchmark; returns ``{"records", "meta", "markdown", "plots"}``."""
    args = parse_args(argv)
    load_start = report.load_average()
    harness = Harness(args, log=log)
    start = time.perf_counter()
    harness.collect()
    export_s = time.perf_counter() - start
    harness.measure()
    measure_s = time.perf_counter() - start - export_s
    log(f"exports {export_s:.0f} s, timing {measure_s:.0f} s")
    load_end = report.load_average()
    records = [{k: v for k, v in r.items() if not k.startswith("_")} for r in harness.records]
    cores = os.cpu_count() or 1
    # Our own pinned thread adds ~1 to the load average; above 1.5 on 2 cores something else ran.
    busy = max(x for x in (load_start, load_end, 0.0) if x is not None) > 0.75 * cores
    noisy = args.quick or busy
    noise = (f"Load average {load_start} at the start and {load_end} at the end on {cores} cores"
             + (" (other jobs were running)." if busy else ".") + (" --quick: few runs." if args.quick else "")
             + (f" {args.note}" if args.note else ""))
    title = " ".join(x for x in ("quick" if args.quick else "full", args.label or "") if x)
    subtitle = f"{report.machine().split(',')[0]}; {'PRELIMINARY (noisy machine)' if noisy else title}"
    plot_paths = []
    if args.sweep:
        plot_paths.append(plots.latency_vs_seq_len(records, os.path.join(args.plots_dir, "latency_vs_seq_len.png"), subtitle))
    if args.table6:
        plot_paths.append(plots.table6(records, os.path.join(args.plots_dir, "table6.png"), subtitle))
    plot_paths = [os.path.relpath(p, REPO) if p.startswith(REPO) else p for p in plot_paths if p]
    a = args
    meta = {
        "date": report.now(),
        "title": title,
        "noisy": noisy,
        "noise": noise,
        "command": "python -m benchmarks.perf.run " + shlex.join(argv if argv is not None else sys.argv[1:]),
        "machine": report.machine(),
        "versions": report.versions(),
        "core": harness.core,
        "seq_len": a.seq_len,
        "preset": a.preset,
        "gflop": harness.flops(a.preset, a.seq_len) / 1e9,
        "timing": (f"{a.warmup} warm-up calls then {a.rounds} interleaved rounds, >= {a.min_runs} calls and "
                   f">= {a.min_time:g} s per model; XNNPACK {'off' if a.no_xnnpack else 'on'}"
                   + ("; our files reused from an earlier `mbk export` (--reuse-ours)" if a.reuse_ours else "")),
        "peaks_gflops": harness.peaks,
        "export_s": export_s,
        "measure_s": measure_s,
        "plots": plot_paths,
    }
    text = report.markdown(records, meta)
    result = {"records": records, "meta": meta, "markdown": text, "plots": plot_paths}
    with open(os.path.join(harness.work, "results.json"), "w") as f:
        json.dump({"records": records, "meta": meta}, f, indent=1, default=str)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"records": records, "meta": meta}, f, indent=1, default=str)
    if not args.no_results:
        report.append_section(args.results, text)
        log(f"appended to {args.results}")
    return result


def main(argv=None):
    result = run(argv)
    print(result["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
