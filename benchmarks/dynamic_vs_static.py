"""The default dynamic-length ``.tflite`` resized to L tokens against the ``--static-axes`` file of length L.

Issue 46 item 4: a dynamic-length file (inputs ``[1, -1]``) should cost what its static twin costs at the same
length (target <= 1.03x at 128 and 16 tokens, float32 and dynamic int8). For each quantization mode the default
file is exported once and resized to every length; a static file is exported per length. Every file gets the same
row of real text cut to exactly L tokens (no padding), set once; only ``invoke`` is timed. One thread, the
process pinned to one core, LiteRT's Interpreter with XNNPACK (its default delegate), interleaved rounds
(benchmarks/perf/timing.py), medians; only ratios within one run are meant to be compared.

Usage:
  PYTHONPATH=$PWD python benchmarks/dynamic_vs_static.py --model MINILM_DIR --work /tmp/dvs \\
      [--lengths 16,32,64,128] [--modes none,dynamic,int8] [--rounds 5] [--min-time 4] [--core 0]

Files already in ``--work`` are reused (delete them to re-export). Every file is exported with ``--no-validate``,
so each full-int8 file is all-int8 (validation's fallback would keep other layers float in some of them).
"""

import argparse
import collections
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.perf.timing import interleaved, pinned, stats  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "export" / "data" / "sentences.txt"
CALIBRATION = ROOT / "export" / "data" / "calibration.txt"


def export(model, out, quantize, seq_len, static):
    """``mbk export`` of one file (skipped when ``out`` exists); returns the command line."""
    command = ["mbk", "export", str(model), "--format", "tflite", "--quantize", quantize, "--seq-len", str(seq_len),
               "--out", str(out)]
    if quantize == "int8":
        command += ["--calibration", str(CALIBRATION)]
    # No validation: full int8 would then fall back to float layers in some files and not others (the files
    # compared must be the same graph); the exports' own validation is reported apart (RESULTS.md).
    command += ["--no-validate"] + (["--static-axes"] if static else [])
    if not out.exists():
        print("$", " ".join(command), flush=True)
        subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return " ".join(command)


def op_count(path):
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils as fb

    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    model = fb.read_model(str(path))
    counts = collections.Counter()
    for graph in model.subgraphs:
        for op in graph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            counts[names[max(code.builtinCode, code.deprecatedBuiltinCode)]] += 1
    return sum(counts.values())


def real_row(model, length):
    """One row of real text, exactly ``length`` tokens (sentences joined until the tokenizer cuts them)."""
    from mobilebert_kit.sources.model_source import ModelSource

    text = " ".join(t.strip() for t in TEXT.read_text(encoding="utf-8").splitlines() if t.strip())
    arrays = ModelSource.load(model).tokenizer.encode_inputs([text], length)
    assert int(np.asarray(arrays["attention_mask"]).sum()) == length, "the text is shorter than the length"
    return {k: np.asarray(v) for k, v in arrays.items()}


def runner(path, row):
    """A zero-argument ``invoke`` of ``path`` resized to the row's length, its inputs set once."""
    from mobilebert_kit.artifacts.runner import load_tflite

    shapes = {name: list(array.shape) for name, array in row.items()}
    interpreter = load_tflite(str(path), num_threads=1, input_shapes=shapes)
    for detail in interpreter.get_input_details():
        name = next(n for n in row if detail["name"].startswith(n))
        interpreter.set_tensor(detail["index"], row[name].astype(detail["dtype"]))
    interpreter.invoke()
    return interpreter.invoke


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the model directory (all-MiniLM-L6-v2)")
    parser.add_argument("--work", required=True, help="folder for the exported files")
    parser.add_argument("--lengths", default="16,32,64,128")
    parser.add_argument("--modes", default="none,dynamic,int8")
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=4.0, help="timed seconds per file and length, at least")
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    modes = args.modes.split(",")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)

    commands, files = [], {}
    for mode in modes:
        dynamic = work / f"{mode}-dynamic.tflite"
        commands.append(export(args.model, dynamic, mode, max(lengths), static=False))
        for length in lengths:
            static = work / f"{mode}-static-{length}.tflite"
            commands.append(export(args.model, static, mode, length, static=True))
            files[(mode, length)] = (dynamic, static)

    rows = {length: real_row(args.model, length) for length in lengths}
    with pinned(args.core):
        candidates = {}
        for (mode, length), (dynamic, static) in files.items():
            candidates[(mode, length, "dynamic")] = runner(dynamic, rows[length])
            candidates[(mode, length, "static")] = runner(static, rows[length])
        samples = interleaved(candidates, args.rounds, 20, args.min_time, 5, 0.5)
    load = os.getloadavg()
    print(f"\ncore {args.core}, 1 thread, XNNPACK, {args.rounds} interleaved rounds; load average "
          f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min, {os.cpu_count()} cores)")
    print("| mode | tokens | dynamic ops | static ops | dynamic median ms | static median ms | dynamic / static |")
    print("|---|---|---|---|---|---|---|")
    for (mode, length), (dynamic, static) in files.items():
        d, s = (stats(samples[(mode, length, kind)])["median_ms"] for kind in ("dynamic", "static"))
        print(f"| {mode} | {length} | {op_count(dynamic)} | {op_count(static)} | {d:.3f} | {s:.3f} | {d / s:.3f} |")
    print("\nexports:\n" + "\n".join(dict.fromkeys(commands)))


if __name__ == "__main__":
    main()
