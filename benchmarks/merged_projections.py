"""Does merging the dense layers that share an input speed up a MobileBERT-shaped TFLite model? (issue 17)

A MobileBERT block (24 of them: hidden 512, bottleneck 128, 4 heads, 4 stacked FFNs, NoNorm folded away)
runs three dense layers on the block input (input bottleneck, attention bottleneck, value) and two on the
attention bottleneck (query, key). Merged, they are one 512x384 and one 128x256 product followed by SPLITs:
72 fewer FULLY_CONNECTED calls and larger products, for 48 more SPLITs. Timing only (random weights,
float32): both graphs are converted by the TFLite converter and run by ai-edge-litert, interleaved, on one
pinned core with one thread.

    python benchmarks/merged_projections.py [--core 1] [--rounds 7]
"""

import argparse
import os
import time

import numpy as np

HIDDEN, BOTTLENECK, HEADS, FFNS, LAYERS, INTERMEDIATE = 512, 128, 4, 4, 24, 512


def _weights(rng, tf):
    def w(*shape):
        return tf.constant(rng.standard_normal(shape).astype(np.float32) * 0.02)

    shapes = {"input": (HIDDEN, BOTTLENECK), "attention": (HIDDEN, BOTTLENECK), "value": (HIDDEN, BOTTLENECK),
              "query": (BOTTLENECK, BOTTLENECK), "key": (BOTTLENECK, BOTTLENECK),
              "attention_output": (BOTTLENECK, BOTTLENECK), "output": (BOTTLENECK, HIDDEN)}
    layers = []
    for _ in range(LAYERS):
        layer = {name: (w(*shape), w(shape[1])) for name, shape in shapes.items()}
        layer["ffn"] = [(w(BOTTLENECK, INTERMEDIATE), w(INTERMEDIATE), w(INTERMEDIATE, BOTTLENECK), w(BOTTLENECK))
                        for _ in range(FFNS)]
        # The merged products: the same kernels side by side.
        layer["input_attention_value"] = tuple(
            tf.concat([layer[name][i] for name in ("input", "attention", "value")], axis=-1) for i in (0, 1))
        layer["query_key"] = tuple(tf.concat([layer[name][i] for name in ("query", "key")], axis=-1) for i in (0, 1))
        layers.append(layer)
    return layers


def _encoder(tf, layers, seq, merged):
    def dense(x, kernel_bias):
        kernel, bias = kernel_bias
        return tf.matmul(x, kernel) + bias

    def heads(t):
        return tf.transpose(tf.reshape(t, [1, seq, HEADS, BOTTLENECK // HEADS]), [0, 2, 1, 3])

    def attention(q, k, v):
        scores = tf.matmul(heads(q), heads(k), transpose_b=True) * (BOTTLENECK // HEADS) ** -0.5
        context = tf.matmul(tf.nn.softmax(scores), heads(v))
        return tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [1, seq, BOTTLENECK])

    def call(x):
        for layer in layers:
            if merged:
                bottleneck, qk_input, v = tf.split(dense(x, layer["input_attention_value"]), 3, axis=-1)
                q, k = tf.split(dense(qk_input, layer["query_key"]), 2, axis=-1)
            else:
                bottleneck, qk_input, v = (dense(x, layer[name]) for name in ("input", "attention", "value"))
                q, k = dense(qk_input, layer["query"]), dense(qk_input, layer["key"])
            h = dense(attention(q, k, v), layer["attention_output"]) + bottleneck
            for k1, b1, k2, b2 in layer["ffn"]:
                h = dense(tf.nn.relu(dense(h, (k1, b1))), (k2, b2)) + h
            x = dense(h, layer["output"]) + x
        return x

    return call


def _per_call_ms(interpreter, seconds=1.5):
    for _ in range(3):
        interpreter.invoke()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        interpreter.invoke()
        calls += 1
    return (time.perf_counter() - start) / calls * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seq", type=int, nargs="+", default=[32, 128])
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    rng = np.random.default_rng(0)
    layers = _weights(rng, tf)
    os.sched_setaffinity(0, {args.core})
    for seq in args.seq:
        interpreters = []
        for merged in (False, True):
            function = tf.function(_encoder(tf, layers, seq, merged),
                                   input_signature=[tf.TensorSpec([1, seq, HIDDEN], tf.float32)])
            converter = tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()], function)
            interpreter = Interpreter(model_content=converter.convert(), num_threads=1)
            interpreter.allocate_tensors()
            interpreter.set_tensor(interpreter.get_input_details()[0]["index"],
                                   rng.standard_normal((1, seq, HIDDEN)).astype(np.float32))
            interpreters.append(interpreter)
        separate, merged = [], []
        for _ in range(args.rounds):
            separate.append(_per_call_ms(interpreters[0]))
            merged.append(_per_call_ms(interpreters[1]))
        ratios = [round(m / s, 3) for s, m in zip(separate, merged)]
        print(f"seq {seq}: separate {np.median(separate):.2f} ms, merged {np.median(merged):.2f} ms, "
              f"merged/separate {np.median(merged) / np.median(separate):.3f} (rounds {ratios})", flush=True)


if __name__ == "__main__":
    main()
