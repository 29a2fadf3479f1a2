"""Experiment (benchmarks/perf/NOTES.md): does XNNPACK take the int8 attention once its operands are symmetric?

XNNPACK (LiteRT 2.3) delegates an int8 ``BATCH_MATMUL`` only when its second
operand has zero point 0 (found with ``benchmarks/perf/profile_ops.py``: in a full-int8
MobileBERT the 4 of 48 batch matmuls it took were exactly those). This script
rewrites a full-int8 ``.tflite`` so that the second operand of every
``BATCH_MATMUL`` (K for Q.K^T, V for P.V) and the RESHAPE/TRANSPOSE chain
that feeds it carry symmetric parameters: the same real range, ``scale =
max(|min|, |max|) / 127``, zero point 0. The producing FULLY_CONNECTED then
requantizes to those parameters itself, so no op is added and the values lose
at most one bit of resolution on that tensor. It then compares delegation and
latency before and after, and the outputs (cosine) on the same inputs.

This is a measurement for the converter's design (issue 5/7), not a code path
users run: the converter should produce such parameters itself.

Usage:
    python -m benchmarks.experiments.int8_attention_experiment IN.tflite OUT.tflite [--runs 20] [--reference F32.tflite]
    # the three changes together (scale folded, float softmax, symmetric operands):
    python -m benchmarks.experiments.int8_attention_experiment --export-folded CALIB.npz FOLDED.tflite OUT.tflite
"""

import argparse
import sys

import numpy as np

_PASS_THROUGH = ("RESHAPE", "TRANSPOSE")


def symmetrize_batch_matmul_operands(src, dst):
    """Writes ``dst`` with symmetric int8 parameters on every BATCH_MATMUL's second operand chain.

    Returns:
        number of tensors changed.
    """
    from ai_edge_litert.tools import flatbuffer_utils as fb

    model = fb.read_model(src)
    graph = model.subgraphs[0]
    names = {v: k for k, v in fb.schema_fb.BuiltinOperator.__dict__.items() if not k.startswith("_")}

    def opname(op):
        return names.get(fb.get_builtin_code_from_operator_code(model.operatorCodes[op.opcodeIndex]))

    producer = {int(t): op for op in graph.operators for t in op.outputs}
    changed = set()
    for op in graph.operators:
        if opname(op) != "BATCH_MATMUL":
            continue
        chain, tensor = [], int(op.inputs[1])
        while True:
            chain.append(tensor)
            prev = producer.get(tensor)
            if prev is None or opname(prev) not in _PASS_THROUGH:
                break
            tensor = int(prev.inputs[0])
        q = graph.tensors[chain[0]].quantization
        if q is None or q.zeroPoint is None or int(q.zeroPoint[0]) == 0:
            continue
        scale, zero = float(q.scale[0]), int(q.zeroPoint[0])
        bound = max(abs((-128 - zero) * scale), abs((127 - zero) * scale))
        for t in chain:
            tq = graph.tensors[t].quantization
            tq.scale = np.array([bound / 127.0], np.float32)
            tq.zeroPoint = np.array([0], np.int64)
            changed.add(t)
    fb.write_model(model, dst)
    return len(changed)


def export_with_folded_scale(out_path, calibration, preset="mobilebert", seq_len=128, keep_float_ops="SOFTMAX"):
    """Exports ``preset`` (seed 0, as ``mbk export <preset>``) with 1/sqrt(d) folded into the query dense layers.

    ``scores = (q . k) / sqrt(d)`` equals ``((W_q / sqrt(d)) x + b_q / sqrt(d)) . k``, so the
    24 score MULs (which XNNPACK leaves to the builtin kernels in int8) disappear. Done here
    by patching ``MultiHeadAttention.attention_scores`` in this process only, then running
    ``mbk export`` in-process on a saved copy with the scaled weights.
    """
    import math
    import tempfile

    import mobilebert_kit as mbk
    from mobilebert_kit.backend import keras, tf
    from mobilebert_kit.cli.main import main as mbk_main
    from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention

    MultiHeadAttention.attention_scores = lambda self, query, key: tf.matmul(query, key, transpose_b=True)
    keras.utils.set_random_seed(0)  # the weights of `mbk export <preset>` (model_source.PRESET_SEED)
    model = mbk.build(preset)
    for i in range(model.config["num_layers"]):
        attention = model.get_layer(f"transformer_layer_{i}").attention  # the block's "attention" sublayer
        c = 1.0 / math.sqrt(attention.head_size)
        attention.query.kernel.assign(attention.query.kernel * c)
        attention.query.bias.assign(attention.query.bias * c)
    with tempfile.TemporaryDirectory() as tmp:
        mbk.save(model, f"{tmp}/folded")
        argv = ["export", f"{tmp}/folded", "--format", "tflite", "--quantize", "int8", "--calibration", calibration,
                "--seq-len", str(seq_len), "--no-validate", "--out", out_path]
        if keep_float_ops:
            argv += ["--keep-float-ops", keep_float_ops]
        code = mbk_main(argv)
    if code:
        raise RuntimeError(f"mbk export exited {code}")
    return out_path


def main(argv=None):
    from benchmarks.perf.profile_ops import census, delegation, latency
    from benchmarks.perf.runners import TfliteRunner, realistic_inputs

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--export-folded", metavar="CALIBRATION_NPZ", default=None,
                   help="first export mobilebert with 1/sqrt(d) folded into the query layers and SOFTMAX in float, to SRC")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--vocab-size", type=int, default=30522)
    p.add_argument("--reference", default=None, help="float32 .tflite of the same model: cosine of each file against it")
    args = p.parse_args(argv)
    if args.export_folded:
        export_with_folded_scale(args.src, args.export_folded)
    n = symmetrize_batch_matmul_operands(args.src, args.dst)
    print(f"{n} tensors made symmetric")
    import os

    core = max(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    outputs = {}
    if args.reference:
        runner = TfliteRunner(args.reference, realistic_inputs(args.vocab_size, _seq_len(args.reference)))
        runner()
        outputs["float32"] = next(iter(runner.outputs().values())).astype(np.float64).ravel()
    for label, path in (("before", args.src), ("after", args.dst)):
        ops = census(path)
        taken, partitions, _ = delegation(path)
        bmm = [o for o in ops if o["op"] == "BATCH_MATMUL"]
        os.sched_setaffinity(0, {core})
        try:
            ms = latency(path, True, args.runs)
        finally:
            os.sched_setaffinity(0, before)
        runner = TfliteRunner(path, realistic_inputs(args.vocab_size, _seq_len(path)))
        runner()
        outputs[label] = next(iter(runner.outputs().values())).astype(np.float64).ravel()
        print(f"{label}: {len(ops) - len(taken)} ops on builtin kernels, {sum(o['index'] in taken for o in bmm)}/{len(bmm)} "
              f"BATCH_MATMUL in XNNPACK, {partitions} partitions, median {ms:.1f} ms")
    def cosine(a, b):
        return a @ b / (np.linalg.norm(a) * np.linalg.norm(b))

    print(f"cosine(before, after) of the first output: {cosine(outputs['before'], outputs['after']):.6f}")
    if "float32" in outputs:
        for label in ("before", "after"):
            print(f"cosine({label}, float32 reference): {cosine(outputs[label], outputs['float32']):.6f}")
    return 0


def _seq_len(path):
    from ai_edge_litert.interpreter import Interpreter

    return int(Interpreter(model_path=path).get_input_details()[0]["shape"][-1])


if __name__ == "__main__":
    sys.exit(main())
