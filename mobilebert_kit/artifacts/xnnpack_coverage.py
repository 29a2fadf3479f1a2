"""Which ops of a ``.tflite`` file the XNNPACK delegate runs, and which fall back to builtin kernels.

Every op XNNPACK leaves out runs on builtin kernels *and* cuts the delegated graph into another partition, with
a quantize/dequantize hand-over at each cut (benchmarks/perf/NOTES.md). An interpreter with delegate node fusion
disabled makes one delegate node per delegated op: an op is delegated when a delegate node produces its
outputs; the normal interpreter's delegate nodes are the partitions.

Example:
    >>> coverage = xnnpack_coverage("model.tflite")  # doctest: +SKIP
    >>> coverage["builtin"]  # doctest: +SKIP
    {'GATHER': 2, 'STRIDED_SLICE': 1}
"""

from collections import Counter

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.reader import read_artifact
from mobilebert_kit.artifacts.runner import load_tflite


def xnnpack_coverage(path):
    """Returns ``{"ops", "delegated", "partitions", "builtin": {op type: count}, "delegated_indices"}`` of a
    ``.tflite`` file; ArtifactError when the interpreter cannot load it."""
    try:
        ops = [(op["type"], set(op["outputs"])) for op in read_artifact(path, fmt="tflite").ops]
        fused = load_tflite(path, num_threads=1)
        per_op = load_tflite(path, num_threads=1, per_op_delegate_nodes=True)
    except ArtifactError as err:  # a bad file, or one the interpreter refuses
        raise ArtifactError(f"cannot load {path} to check XNNPACK delegation ({err})") from err
    # Private but stable in ai-edge-litert 2.x: node count and node outputs of the execution plan.
    partitions = fused._interpreter.NumNodes() - len(ops)  # noqa: SLF001
    wrapper = per_op._interpreter  # noqa: SLF001
    delegated_outputs = set()
    for node in range(len(ops), wrapper.NumNodes()):
        delegated_outputs.update(int(t) for t in wrapper.NodeOutputs(node))
    taken = [i for i, (_, outs) in enumerate(ops) if outs & delegated_outputs]
    builtin = Counter(name for i, (name, _) in enumerate(ops) if i not in set(taken))
    return {"ops": len(ops), "delegated": len(taken), "partitions": partitions,
            "builtin": dict(sorted(builtin.items())), "delegated_indices": taken}
