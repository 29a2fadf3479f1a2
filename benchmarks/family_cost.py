"""What DeBERTa-v3's disentangled attention and ModernBERT's layout cost against a BERT of the same width and depth.

Issue 48: each new family is timed beside a BERT encoder with the same hidden size, layers and heads (each with
its own usual feed-forward width: BERT and DeBERTa 4x the hidden size, ModernBERT's GeGLU 1.5x per half, as its
published configs), random weights saved by transformers (``tests/tokenizer_fixtures.py: save_checkpoint``)
and exported by ``mbk export --seq-len L`` as a user runs it (an encoder without a task head exports a static
``[1, L]`` file) in float32 and dynamic int8. Every file is timed on one pinned core, one thread, all files
interleaved in the same rounds (``benchmarks/perf/timing.py``); printed as median ms and the ratio to the BERT
file of the same precision. ModernBERT's local layers (window 128, every third layer global) compute the full
score matrix and mask it, so their cost does not shrink with the window: the 512 row shows it.

Usage:
    PYTHONPATH=$PWD python benchmarks/family_cost.py [--workdir /tmp/family-cost] [--seq-len 128,512] [--core 1]
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from benchmarks.perf.timing import interleaved, pinned, stats  # noqa: E402

HIDDEN, LAYERS, HEADS = 384, 12, 6  # deberta-v3-xsmall's encoder
SHAPES = {
    "bert": dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                 intermediate_size=4 * HIDDEN, max_position_embeddings=512),
    "deberta-v2": dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                       intermediate_size=4 * HIDDEN, max_position_embeddings=512, position_buckets=256,
                       max_relative_positions=-1, pooler_hidden_size=HIDDEN),
    "modernbert": dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                       intermediate_size=3 * HIDDEN // 2, max_position_embeddings=8192, local_attention=128,
                       global_attn_every_n_layers=3),
}


def export(family, workdir, seq_len):
    """``{precision: .tflite}`` of ``family`` at :data:`SHAPES` and ``seq_len``, exported by the command line once."""
    from tests.tokenizer_fixtures import save_checkpoint

    source = workdir / family
    if not (source / "config.json").exists():
        save_checkpoint(family, source, head=None, **SHAPES[family])
    files = {}
    for precision in ("none", "dynamic"):
        out = workdir / f"{family}.{precision}.{seq_len}.tflite"
        if not out.exists():
            subprocess.run([sys.executable, "-m", "mobilebert_kit.cli.main", "export", str(source), "--format",
                            "tflite", "--quantize", precision, "--seq-len", str(seq_len), "--no-validate", "--out",
                            str(out)], check=True)
        files[precision] = out
    return files


def runner(path, seq_len):
    """One inference of ``path`` resized to ``[1, seq_len]``, inputs set once (the work, not the copy-in)."""
    from mobilebert_kit.artifacts.runner import load_tflite

    interpreter = load_tflite(path, num_threads=1)
    for detail in interpreter.get_input_details():
        interpreter.resize_tensor_input(detail["index"], [1, seq_len])
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        fill = np.ones if "mask" in detail["name"] else np.zeros
        interpreter.set_tensor(detail["index"], fill((1, seq_len), detail["dtype"]))
    return interpreter.invoke


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="/tmp/family-cost")
    parser.add_argument("--seq-len", default="128,512")
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"hidden {HIDDEN}, {LAYERS} layers, {HEADS} heads; core {args.core}; load {os.getloadavg()[0]:.2f}")
    print("| file | seq | median ms | / bert of the same precision |\n|---|---|---|---|")
    for seq_len in (int(s) for s in args.seq_len.split(",")):
        files = {family: export(family, workdir, seq_len) for family in SHAPES}
        with pinned(args.core):
            calls = {f"{family} {precision}": runner(path, seq_len)
                     for family, paths in files.items() for precision, path in paths.items()}
            samples = interleaved(calls, rounds=args.rounds, min_runs=30, min_time_s=6.0, warmup_runs=3,
                                  warmup_time_s=0.5)
        medians = {name: stats(s)["median_ms"] for name, s in samples.items()}
        for name, median in medians.items():
            base = medians[f"bert {name.split()[1]}"]
            print(f"| {name} | {seq_len} | {median:.2f} | {median / base:.3f} |")


if __name__ == "__main__":
    main()
