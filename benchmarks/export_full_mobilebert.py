"""Export + validation of the full 24-layer ``mobilebert`` preset in every precision and both formats, timed.

For each (format, precision): ``mbk export``'s pipeline without validation
(timed: graph, conversion, quantization, metadata, atomic write), then the
validation of the written file against the Keras model (timed separately: the
Keras reference on the validation rows plus the artifact on the same rows).
Printed with the ratio to the float32 export of the same format, measured in
the same process: absolute seconds on a shared 2-core machine move with the
load, ratios much less.

The preset has random weights (seed 0, as ``mbk export mobilebert`` builds
it) and no vocabulary, so calibration and validation use realistic random ids
(a third of the rows right padded); QAT runs ``--qat-steps`` steps of
self-distillation (a full QAT run is a training job, not an export).

Usage:
    python benchmarks/export_full_mobilebert.py [--seq-len 128] [--qat-steps 2] [--append-results]
"""

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mobilebert_kit.convert.quantization.modes import MODES  # noqa: E402  (after the path insert)

PRECISIONS = tuple(MODES)  # every quantization mode the exporter knows
FORMATS = ("tflite", "onnx")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--calibration-rows", type=int, default=32)
    parser.add_argument("--validation-rows", type=int, default=8)
    parser.add_argument("--qat-steps", type=int, default=2)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--append-results", action="store_true", help="append a section to benchmarks/RESULTS.md")
    args = parser.parse_args(argv)

    from mobilebert_kit.convert.exporter import ExportOptions, export, validate_file
    from mobilebert_kit.convert.plan.input_set import InputSet
    from mobilebert_kit.sources.model_source import ModelSource

    start = time.perf_counter()
    source = ModelSource.load("mobilebert")
    load_s = time.perf_counter() - start
    config = source.model.config
    rows = []
    with tempfile.TemporaryDirectory(prefix="mbk-bench-") as tmp:
        tmp = Path(tmp)
        calibration = tmp / "calibration.npz"
        InputSet.random(config["vocab_size"], args.calibration_rows, args.seq_len, seed=1).save(calibration)
        validation = InputSet.random(config["vocab_size"], args.validation_rows, args.seq_len, seed=2)
        for fmt in args.formats.split(","):
            float_export_s = None
            for precision in args.precisions.split(","):
                out = tmp / f"mobilebert-{precision}.{fmt}"
                options = ExportOptions(source, fmt, precision, out=str(out), seq_len=args.seq_len,
                                        calibration=str(calibration), validate=False, qat_steps=args.qat_steps)
                t0 = time.perf_counter()
                try:
                    result = export(options, source=source, log=None)
                except Exception as err:  # noqa: BLE001  (a benchmark reports failures, it does not stop)
                    rows.append(dict(fmt=fmt, precision=precision, error=f"{type(err).__name__}: {err}"[:160]))
                    print(rows[-1], flush=True)
                    continue
                export_s = time.perf_counter() - t0
                float_export_s = float_export_s or (export_s if precision == "none" else None)
                t0 = time.perf_counter()
                report = validate_file(out, source.model, validation, precision)
                validate_s = time.perf_counter() - t0
                seq = next(m for m in report.outputs if m.name == "sequence_output")
                rows.append(dict(
                    fmt=fmt, precision=precision, export_s=export_s, validate_s=validate_s,
                    ratio=export_s / float_export_s if float_export_s else None,
                    size_mb=result.size_bytes / 1e6, float_ops=sum(result.float_ops.values()),
                    total_ops=sum(result.op_counts.values()), cosine=seq.cosine, snr=seq.snr_db,
                    passed=report.passed,
                ))
                print(_row(rows[-1]), flush=True)
                out.unlink()
    table = _table(rows)
    print(table)
    if args.append_results:
        command = "python benchmarks/export_full_mobilebert.py " + " ".join(argv if argv is not None else sys.argv[1:])
        _append(table, command.replace("--append-results", "").strip(), load_s, args)
    return 0


def _row(r):
    if "error" in r:
        return f"| {r['fmt']} | {r['precision']} | failed: {r['error']} | | | | | | | |"
    ratio = f"{r['ratio']:.2f}" if r["ratio"] else "-"
    return (f"| {r['fmt']} | {r['precision']} | {r['export_s']:.1f} | {ratio} | {r['validate_s']:.1f} | "
            f"{r['size_mb']:.1f} | {r['float_ops']}/{r['total_ops']} | {r['cosine']:.5f} | {r['snr']:.1f} | "
            f"{'yes' if r['passed'] else 'NO'} |")


def _table(rows):
    head = ("| format | precision | export s | / float32 export | validate s | size MB | float ops / all | "
            "sequence_output cosine | SNR dB | passed |\n|---|---|---|---|---|---|---|---|---|---|")
    return "\n".join([head] + [_row(r) for r in rows])


def _append(table, command, load_s, args):
    import os

    load = os.getloadavg()
    text = f"""

## Converter: export + validation of the full `mobilebert` preset (issue 5)

Command: `{command}` (repository root). Machine: {platform.machine()}, {os.cpu_count()} CPU(s),
load average {load[0]:.1f} / {load[1]:.1f} at the end (other engineers' jobs share the machine: compare the
ratio column, measured in one process, not absolute seconds). Python {platform.python_version()}.
Model: 24-layer MobileBERT preset, random weights (seed 0), built in {load_s:.1f} s; sequence length
{args.seq_len}, batch 1; calibration {args.calibration_rows} random realistic rows; validation
{args.validation_rows} other rows against the Keras model (default thresholds of each precision);
QAT with {args.qat_steps} self-distillation step(s). "export s" is everything `mbk export` does except
validation; "float ops" counts operators computing in float (for int8 / int16x8 / qat: what stayed float).

{table}
"""
    with open(REPO / "benchmarks" / "RESULTS.md", "a", encoding="utf-8") as handle:
        handle.write(text)


if __name__ == "__main__":
    sys.exit(main())
