"""Does ``mbk profile --target host`` measure what a plain timing loop measures?

Builds two BERT-shaped models (4 layers, hidden 256, feed-forward 1024, one
head, random weights; a ``.tflite`` through TFLiteConverter and an ``.onnx``
through ``onnx.helper``), then, in one process and pinned to one core,
alternates rounds of

- the profiler: ``HostProfiler(threads=1, ...).profile(path)`` (median latency);
- a plain loop: the same runtime, threads and inputs, ``warmup`` calls, then
  ``runs`` calls timed one by one with ``time.perf_counter`` (median).

and prints the ratio profiler / plain per round and its median. Alternating
rounds matter here: on a shared VM the medians move 5-40% between passes
(performance-notes.md), so only ratios taken side by side are compared.

Usage:
    python benchmarks/profiler_vs_plain_loop.py [--rounds 5] [--runs 100] [--seq-len 128]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "profiler"))

import mobilebert_kit  # noqa: E402,F401  (TF_USE_LEGACY_KERAS before TensorFlow loads)


def plain_tflite(path, feeds, runs, warmup):
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=path, num_threads=1)
    for detail in interpreter.get_input_details():
        if list(detail["shape"]) != list(feeds[detail["name"]].shape):
            interpreter.resize_tensor_input(detail["index"], feeds[detail["name"]].shape)
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], feeds[detail["name"]])
    for _ in range(warmup):
        interpreter.invoke()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        interpreter.invoke()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def plain_onnx(path, feeds, runs, warmup):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        session.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--seq-len", type=int, default=128)
    args = parser.parse_args(argv)

    from fixture_models import build_onnx_bert, build_tflite_bert

    from mobilebert_kit.profiler.host import HostProfiler
    from mobilebert_kit.profiler.inputs import make_feeds
    from mobilebert_kit.profiler.model_info import ModelInfo

    tmp = tempfile.mkdtemp(prefix="mbk-bench-")
    models = {
        "tflite fp32 (XNNPACK)": build_tflite_bert(
            os.path.join(tmp, "bert4x256.tflite"), vocab_size=30522, hidden=256, layers=4, intermediate=1024, seq_len=args.seq_len
        ),
        "onnx fp32 (ORT)": build_onnx_bert(os.path.join(tmp, "bert4x256.onnx"), vocab_size=30522, hidden=256, layers=4, seq_len=args.seq_len),
    }
    cpu = max(os.sched_getaffinity(0))
    profiler = HostProfiler(threads=1, cores=format(1 << cpu, "x"), runs=args.runs, warmup=args.warmup, min_time_s=0.0)
    saved = os.sched_getaffinity(0)
    print(f"pinned to cpu{cpu}; {args.rounds} rounds x {args.runs} runs; seq_len {args.seq_len}")
    for label, path in models.items():
        info = ModelInfo(path)
        feeds = make_feeds(info.inputs, args.seq_len, info.vocab_size)
        plain = plain_tflite if path.endswith(".tflite") else plain_onnx
        ratios, prof_ms, plain_ms = [], [], []
        for round_index in range(args.rounds):
            # Alternate which one goes first, so drift does not favour either.
            order = ("profiler", "plain") if round_index % 2 == 0 else ("plain", "profiler")
            got = {}
            for which in order:
                if which == "profiler":
                    got[which] = profiler.profile(path)["latency_ms"]["median"]
                else:
                    os.sched_setaffinity(0, {cpu})
                    try:
                        got[which] = plain(path, feeds, args.runs, args.warmup)
                    finally:
                        os.sched_setaffinity(0, saved)
            prof_ms.append(got["profiler"])
            plain_ms.append(got["plain"])
            ratios.append(got["profiler"] / got["plain"])
        flops = info.flops(args.seq_len)[0]
        print(
            f"{label}: {flops / 1e9:.3f} GFLOP; profiler median {statistics.median(prof_ms):.3f} ms, "
            f"plain loop median {statistics.median(plain_ms):.3f} ms; ratio profiler/plain per round "
            f"{', '.join(f'{r:.3f}' for r in ratios)}; median ratio {statistics.median(ratios):.3f} "
            f"(min {min(ratios):.3f}, max {max(ratios):.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
