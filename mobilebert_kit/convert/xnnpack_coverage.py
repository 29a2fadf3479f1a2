"""Which ops of a ``.tflite`` file the XNNPACK delegate runs, and which fall back to builtin kernels.

Why it matters: on a phone CPU every op XNNPACK leaves out runs on LiteRT's
reference/optimized builtin kernels *and* cuts the delegated graph into
another partition, with a quantize/dequantize hand-over at each cut. In a
full-int8 MobileBERT this was the whole difference between 1.9x and 0.9x the
latency of dynamic-range int8 (benchmarks/perf/NOTES.md).

How it is read: an interpreter with delegate node fusion disabled
(``experimental_disable_delegate_node_fusion``) makes one delegate node per
delegated op; an op is delegated when a delegate node produces its outputs.
The normal interpreter's delegate nodes are the partitions. The XNNPACK
version is the one in the installed ai-edge-litert (the same library the
Android app links when it uses LiteRT with its default delegate).

Example:
    >>> coverage = xnnpack_coverage("model.tflite")  # doctest: +SKIP
    >>> coverage["builtin"]  # doctest: +SKIP
    {'GATHER': 2, 'STRIDED_SLICE': 1}
"""

from collections import Counter

from mobilebert_kit.convert.errors import ArtifactError


def read_operators(path):
    """``(model, graph, [(op type name, operator)])`` of a ``.tflite`` file's first subgraph.

    The flatbuffer objects are the read-only ones of ai-edge-litert's schema; op
    types are builtin names such as ``FULLY_CONNECTED``.
    """
    from ai_edge_litert import schema_py_generated as schema

    with open(path, "rb") as f:
        model = schema.Model.GetRootAs(f.read(), 0)
    names = {v: k for k, v in schema.BuiltinOperator.__dict__.items() if not k.startswith("_")}
    graph = model.Subgraphs(0)
    ops = []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        ops.append((names.get(builtin, str(builtin)), op))
    return model, graph, ops


def xnnpack_coverage(path):
    """Returns ``{"ops", "delegated", "partitions", "builtin": {op type: count}, "delegated_indices"}``.

    Args:
        path: the ``.tflite`` file.

    Raises:
        ArtifactError: the file cannot be loaded by the interpreter.
    """
    from ai_edge_litert.interpreter import Interpreter

    from mobilebert_kit.utils.quiet import quiet_fd2

    try:
        _, _, operators = read_operators(path)
        ops = [(name, {int(t) for t in op.OutputsAsNumpy()}) for name, op in operators]
        with quiet_fd2():
            fused = Interpreter(model_path=str(path), num_threads=1)
            fused.allocate_tensors()
            per_op = Interpreter(model_path=str(path), num_threads=1, experimental_disable_delegate_node_fusion=True)
            per_op.allocate_tensors()
    except Exception as err:  # noqa: BLE001  (flatbuffer or interpreter failure: a bad file)
        raise ArtifactError(f"cannot load {path} to check XNNPACK delegation ({type(err).__name__}: {err})") from err
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
