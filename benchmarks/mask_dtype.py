"""TFLite latency of an int32 attention-mask input against a float32 one, dynamic and full int8 (issue 14).

MediaPipe and the TFLite Task Library accept only all-int32 (or all-string)
inputs, so a client-ready export takes the mask as int32; the float32 mask
was the default because a CAST in front of the mask once split XNNPACK's
partitions in full int8. This exports the same model four times (dynamic and
full int8, each with ``mask_dtype`` float32 and int32), then times the four
files in one process, on one pinned core, one thread, XNNPACK on, in
interleaved rounds (``benchmarks/perf/timing.py``), and prints each int32
file's median latency as a ratio to the float32 file of the same precision:
absolute milliseconds on the shared 2-core machine move with the load, ratios
of files timed side by side much less. No assert on time: the figures go to
``benchmarks/RESULTS.md`` with their command.

Also printed per file: the operator count, the CAST count and the operators
computing in float (from the export result), to explain a difference.

Usage:
    python benchmarks/mask_dtype.py [--preset mobilebert] [--seq-len 128] [--rounds 6] [--append-results]
"""

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.perf.runners import TfliteRunner, realistic_inputs  # noqa: E402  (after the path insert)
from benchmarks.perf.timing import interleaved, pinned, stats  # noqa: E402

PRECISIONS = ("dynamic", "int8")
MASK_DTYPES = ("float32", "int32")  # the first is the peer each ratio divides by


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="mobilebert")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--calibration-rows", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--min-runs", type=int, default=60, help="timed calls per file over all rounds, at least")
    parser.add_argument("--min-time", type=float, default=6.0, help="timed seconds per file over all rounds, at least")
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--append-results", action="store_true", help="append a section to benchmarks/RESULTS.md")
    args = parser.parse_args(argv)

    from mobilebert_kit.convert.exporter import ExportOptions, export
    from mobilebert_kit.convert.plan.input_set import InputSet
    from mobilebert_kit.sources.model_source import ModelSource

    source = ModelSource.load(args.preset)
    vocab_size = source.model.config["vocab_size"]
    rows = {}
    with tempfile.TemporaryDirectory(prefix="mbk-mask-") as tmp:
        tmp = Path(tmp)
        calibration = tmp / "calibration.npz"
        InputSet.random(vocab_size, args.calibration_rows, args.seq_len, seed=1).save(calibration)
        files = {}
        for precision in PRECISIONS:
            for mask_dtype in MASK_DTYPES:
                out = tmp / f"{args.preset}-{precision}-{mask_dtype}.tflite"
                options = ExportOptions(source, "tflite", precision, out=str(out), seq_len=args.seq_len,
                                        calibration=str(calibration), validate=False, mask_dtype=mask_dtype)
                t0 = time.perf_counter()
                result = export(options, source=source, log=None)
                files[(precision, mask_dtype)] = out
                rows[(precision, mask_dtype)] = dict(
                    export_s=time.perf_counter() - t0, ops=sum(result.op_counts.values()),
                    casts=result.op_counts.get("CAST", 0), float_ops=sum(result.float_ops.values()))
                print(f"exported {out.name}: {rows[(precision, mask_dtype)]}", flush=True)
        inputs = realistic_inputs(vocab_size, args.seq_len)
        with pinned(args.core):
            runners = {key: TfliteRunner(path, inputs) for key, path in files.items()}
            samples = interleaved(runners, args.rounds, args.min_runs, args.min_time, warmup_runs=3,
                                  warmup_time_s=0.5, log=None)
    for key, values in samples.items():
        rows[key].update(stats(values))
    table = _table(rows)
    print(table)
    if args.append_results:
        command = "python benchmarks/mask_dtype.py " + " ".join(argv if argv is not None else sys.argv[1:])
        _append(table, command.replace("--append-results", "").strip(), args)
    return 0


def _table(rows):
    lines = ["| precision | mask input | median ms | p90 ms | runs | / float32 mask (same precision) | ops | CAST ops | "
             "float ops |", "|---|---|---|---|---|---|---|---|---|"]
    for (precision, mask_dtype), r in rows.items():
        peer = rows[(precision, MASK_DTYPES[0])]["median_ms"]
        lines.append(f"| {precision} | {mask_dtype} | {r['median_ms']:.2f} | {r['p90_ms']:.2f} | {r['runs']} | "
                     f"**{r['median_ms'] / peer:.3f}** | {r['ops']} | {r['casts']} | {r['float_ops']} |")
    return "\n".join(lines)


def _append(table, command, args):
    load = os.getloadavg()
    text = f"""

## int32 vs float32 attention-mask input, TFLite dynamic and full int8 (issue 14, `benchmarks/mask_dtype.py`)

Command: `{command}` (repository root), {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC. Machine:
{platform.machine()}, {os.cpu_count()} CPU(s), load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end
(shared with other engineers' jobs: read the ratio column, measured side by side in one process). Preset
`{args.preset}` (random weights), sequence length {args.seq_len}, batch 1; one thread pinned to cpu{args.core},
XNNPACK on (ai-edge-litert); {args.rounds} interleaved rounds, at least {args.min_runs} calls and
{args.min_time:.0f} s per file; full int8 calibrated on {args.calibration_rows} random realistic rows.

{table}
"""
    with open(REPO / "benchmarks" / "RESULTS.md", "a", encoding="utf-8") as handle:
        handle.write(text)


if __name__ == "__main__":
    sys.exit(main())
