"""ONNX Runtime's ``MatMulNBits`` with 8-bit weights and int8 compute, on our float ONNX file (issue 36).

``MatMulNBits`` (com.microsoft) with ``bits=8`` and ``accuracy_level=4``
quantizes the activation per block of ``block_size`` along K inside the
kernel (per row and finer) and computes in int8 (VNNI where present), the
bias fused. This rewrites every weight MatMul (+ its bias Add) of a float
file as one such node, weights symmetric per block (stored unsigned around
128, the op's default zero point; ``--weight-bits 7`` keeps them in [-63, 63]),
then prints the minimum token cosine to the float file and the median
latency of float32, this file and ``quantize_dynamic`` (one scale per
tensor, ``DynamicQuantizeMatMul``) on one pinned core, one thread.

Written by hand because ``onnxruntime.quantization.matmul_nbits_quantizer``
needs ``onnx_ir``, which is not installed here.

Usage:
    python benchmarks/experiments/onnx_matmulnbits_8bit.py FLOAT.onnx OUT_DIR [--block 0] [--seq-len 128]
    (``--block 0``: one block per row where K is a power of two, else 128)
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.perf.runners import OnnxRunner, realistic_inputs  # noqa: E402
from benchmarks.perf.timing import interleaved, pinned  # noqa: E402
from mobilebert_kit.convert.onnx.row_scale import weight_matmuls  # noqa: E402


def to_matmulnbits(model, block=0, weight_bits=8):
    """Rewrites weight MatMuls (and a bias Add that only they feed) as MatMulNBits nodes; returns how many."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    readers = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    targets = {n.output[0] for n in weight_matmuls(model)}
    qmax = 2 ** (weight_bits - 1) - 1
    dropped, count = set(), 0
    for index, node in enumerate(graph.node):
        if node.op_type != "MatMul" or node.output[0] not in targets:
            continue
        w = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
        k, n = w.shape
        size = block or (k if k & (k - 1) == 0 and k >= 16 else 128)
        blocks = -(-k // size)
        wb = np.pad(w, ((0, blocks * size - k), (0, 0))).reshape(blocks, size, n)
        scale = np.maximum(np.abs(wb).max(1), 1e-30) / qmax  # [blocks, n]
        q = np.clip(np.round(wb / scale[:, None, :]), -qmax, qmax).astype(np.int32) + 128
        p = f"nbits{index}"
        graph.initializer.extend([numpy_helper.from_array(q.transpose(2, 0, 1).astype(np.uint8), f"{p}/q"),
                                  numpy_helper.from_array(scale.T.reshape(-1).astype(np.float32), f"{p}/scale")])
        inputs, output = [node.input[0], f"{p}/q", f"{p}/scale"], node.output[0]
        users = readers.get(output, [])
        if len(users) == 1 and users[0].op_type == "Add":
            other = [i for i in users[0].input if i != output]
            if other and other[0] in inits and numpy_helper.to_array(inits[other[0]]).size == n:
                bias = numpy_helper.to_array(inits[other[0]]).reshape(-1).astype(np.float32)
                graph.initializer.append(numpy_helper.from_array(bias, f"{p}/bias"))
                inputs += ["", "", f"{p}/bias"]  # zero_points, g_idx absent
                output = users[0].output[0]
                dropped.add(users[0].output[0])
        node.CopyFrom(helper.make_node("MatMulNBits", inputs, [output], name=node.name, domain="com.microsoft",
                                       K=k, N=n, bits=8, block_size=size, accuracy_level=4))
        count += 1
    keep = [n for n in graph.node if not (n.op_type == "Add" and n.output[0] in dropped)]
    del graph.node[:]
    graph.node.extend(keep)
    read = {name for node in graph.node for name in node.input}
    kept = [i for i in graph.initializer if i.name in read]  # the float weights and biases replaced above
    del graph.initializer[:]
    graph.initializer.extend(kept)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return count


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("float_file")
    parser.add_argument("out_dir")
    parser.add_argument("--block", type=int, default=0)
    parser.add_argument("--weight-bits", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--core", type=int, default=1)
    args = parser.parse_args(argv)
    from mobilebert_kit.convert.onnx.export import quantize

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = onnx.load(args.float_file)
    files = {"float32": Path(args.float_file)}
    nbits = onnx.load(args.float_file)
    print(f"MatMulNBits nodes: {to_matmulnbits(nbits, args.block, args.weight_bits)}")
    files["matmulnbits 8-bit acc4"] = out / "matmulnbits.onnx"
    onnx.save(nbits, str(files["matmulnbits 8-bit acc4"]))
    files["dynamic (tensor)"] = out / "tensor.onnx"
    onnx.save(quantize(model, "dynamic", activation_scales="tensor"), str(files["dynamic (tensor)"]))
    # The word embedding table: the largest Gather table (tf2onnx renames the initializers).
    vocab = max(i.dims[0] for i in model.graph.initializer if len(i.dims) == 2)
    inputs = realistic_inputs(vocab, args.seq_len)
    runners = {name: OnnxRunner(path, inputs) for name, path in files.items()}
    first = next(iter(runners.values())).outputs()
    name = next(iter(first))
    reference = first[name][0]
    for label, runner in runners.items():
        y = runner.outputs()[name][0]
        cos = (y * reference).sum(-1) / np.linalg.norm(y, axis=-1) / np.linalg.norm(reference, axis=-1)
        print(f"{label}: min token cosine to float32 {cos.min():.5f}")
    with pinned(args.core):
        samples = interleaved(runners, 5, min_runs=20, min_time_s=5.0, warmup_runs=3, warmup_time_s=0.5)
    base = float(np.median(samples["float32"]))
    for label, s in samples.items():
        print(f"{label}: {np.median(s):.2f} ms ({np.median(s) / base:.3f}x float32)")


if __name__ == "__main__":
    main()
