"""The int8 kernels' own floor: one stack of FULLY_CONNECTED layers as dynamic int8 and as full int8, same run.

Issue 46 asks full int8 to take <= 0.85x our dynamic int8 (`mobilebert` preset) and a NoNorm + ReLU MiniLM's full
int8 <= 0.75x MiniLM's dynamic int8. Both files run int8 x int8 products; what differs is the kernel LiteRT's
XNNPACK picks for them. A dynamic-range FULLY_CONNECTED (float activations, int8 weights) runs `qd8_f32_qc8w`
kernels (on an avx512vnni host a hand-written `5x64c4` assembly kernel) after quantizing its rows on the fly; a
full-int8 one runs `qs8_qc8w` kernels (`7x16c8`, C intrinsics, no assembly variant in ai-edge-litert 2.x). This
script times that difference alone: ``--layers`` FFN-shaped products (``hidden -> intermediate -> hidden``, ReLU
between them, a residual ADD after each pair, the shapes of MobileBERT's and MiniLM's FFNs) at ``--seq-len``
tokens, exported by the TFLite converter both ways from one Keras model, interleaved on one pinned core. Nothing
but products, one ReLU and one ADD per pair: the ratio is the best a full-int8 graph of these products can reach
against a dynamic-int8 one on this host's kernels, before any softmax, (de)quantize or layout op.

Usage:
  PYTHONPATH=$PWD python benchmarks/int8_gemm_floor.py --shape 128x512 --shape 384x1536 --core 1 --rounds 5
"""

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.perf.timing import interleaved, pinned, stats  # noqa: E402


def ffn_stack(hidden, intermediate, layers, seq_len):
    """A Keras model of ``layers`` residual FFNs ``x + W2 relu(W1 x)`` on ``[1, seq_len, hidden]``."""
    import tf_keras as keras

    x = inputs = keras.Input([seq_len, hidden], batch_size=1)
    rng = np.random.default_rng(0)
    for i in range(layers):
        inner = keras.layers.Dense(intermediate, activation="relu", name=f"up_{i}")
        outer = keras.layers.Dense(hidden, name=f"down_{i}")
        h = outer(inner(x))
        for layer, fan_in in ((inner, hidden), (outer, intermediate)):
            kernel, bias = layer.get_weights()
            layer.set_weights([rng.normal(0, fan_in ** -0.5, kernel.shape).astype(np.float32), bias])
        x = keras.layers.Add(name=f"residual_{i}")([x, h])
    return keras.Model(inputs, x)


def convert(model, mode, seq_len, hidden):
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if mode == "full int8":
        rng = np.random.default_rng(1)
        converter.representative_dataset = lambda: ([rng.normal(0, 1, [1, seq_len, hidden]).astype(np.float32)]
                                                    for _ in range(16))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    return converter.convert()


def runner(content, seq_len, hidden):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=content, num_threads=1)
    it.allocate_tensors()
    index = it.get_input_details()[0]["index"]
    it.set_tensor(index, np.random.default_rng(2).normal(0, 1, [1, seq_len, hidden]).astype(np.float32))
    return it.invoke


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", help="HIDDENxINTERMEDIATE (repeatable)")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=4.0)
    args = parser.parse_args()
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    print(f"core {args.core}, 1 thread, seq {args.seq_len}, {args.layers} residual FFNs, {args.rounds} rounds")
    print("| FFN | dynamic int8 ms | full int8 ms | full / dynamic |\n|---|---|---|---|")
    for shape in args.shape or ["128x512", "384x1536"]:
        hidden, intermediate = (int(v) for v in shape.split("x"))
        model = ffn_stack(hidden, intermediate, args.layers, args.seq_len)
        files = {mode: convert(model, mode, args.seq_len, hidden) for mode in ("dynamic int8", "full int8")}
        with pinned(args.core):
            calls = {mode: runner(content, args.seq_len, hidden) for mode, content in files.items()}
            samples = interleaved(calls, args.rounds, 20, args.min_time, 5, 1.0)
        dyn, full = (stats(samples[m])["median_ms"] for m in ("dynamic int8", "full int8"))
        print(f"| {hidden} -> {intermediate} -> {hidden} | {dyn:.3f} | {full:.3f} | {full / dyn:.3f} |")


if __name__ == "__main__":
    main()
