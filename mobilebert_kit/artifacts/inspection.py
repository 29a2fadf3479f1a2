"""``inspect_artifact``: what a ``.tflite`` or ``.onnx`` file holds, read from the file alone.

Reports inputs and outputs (name, shape, dtype), operators by type, and for
each operator whether it computes in integer arithmetic, with integer weights
on float activations (TFLite "hybrid" / dynamic-range), or in float; plus the
file size and the metadata keys. The ``.tflite`` reader walks the flatbuffer
with the schema that ships in ai-edge-litert; the ``.onnx`` reader uses
``onnx``. No Keras model is needed.

The normalization/activation check (``variant_ops``) and the split of ops by
how they compute are :mod:`~mobilebert_kit.artifacts.taxonomy`'s, the same
ones ``mbk profile`` uses; a NoNorm + ReLU model has no LayerNorm or GELU ops.
"""

from collections import Counter
from dataclasses import dataclass, field

from mobilebert_kit.artifacts import taxonomy
from mobilebert_kit.artifacts.reader import read_artifact
from mobilebert_kit.utils.terminal import escape


@dataclass
class ArtifactInfo:
    """What :func:`inspect_artifact` found.

    ``op_counts`` counts every operator by type; ``quantized_ops``, ``hybrid_ops``,
    ``float_ops`` and ``conversion_ops`` split the same operators by how they compute.
    """

    path: str
    format: str
    size_bytes: int
    inputs: list
    outputs: list
    op_counts: Counter
    quantized_ops: Counter = field(default_factory=Counter)
    hybrid_ops: Counter = field(default_factory=Counter)
    float_ops: Counter = field(default_factory=Counter)
    conversion_ops: Counter = field(default_factory=Counter)
    other_ops: Counter = field(default_factory=Counter)
    metadata_keys: list = field(default_factory=list)

    def variant_ops(self):
        """``{"layer_norm": {op: n}, "gelu": {op: n}}``: the operators left of each family."""
        return taxonomy.variant_ops(self.op_counts, self.format)

    def to_dict(self):
        return {
            "path": self.path, "format": self.format, "size_bytes": self.size_bytes,
            "inputs": self.inputs, "outputs": self.outputs, "op_counts": dict(self.op_counts),
            "quantized_ops": dict(self.quantized_ops), "hybrid_ops": dict(self.hybrid_ops),
            "float_ops": dict(self.float_ops), "conversion_ops": dict(self.conversion_ops),
            "other_ops": dict(self.other_ops), "metadata_keys": self.metadata_keys,
            "variant_ops": self.variant_ops(),
        }

    def format_text(self):
        """The human-readable report ``mbk inspect`` prints."""
        # Tensor, op and metadata names come from the file: escaped, one line each whatever they hold.
        lines = [f"{escape(self.path)}: {self.format}, {self.size_bytes / 1e6:.2f} MB"]
        for title, tensors in (("inputs", self.inputs), ("outputs", self.outputs)):
            lines.append(f"{title}:")
            lines += [f"  {escape(t['name']):<24} {escape(t['dtype']):<8} {escape(t['shape'])}" for t in tensors]
        total = sum(self.op_counts.values())
        lines.append(f"operators: {total} ({len(self.op_counts)} types)")
        for op, n in sorted(self.op_counts.items(), key=lambda kv: (-kv[1], kv[0])):
            parts = [f"{label} {c[op]}" for label, c in (
                ("int", self.quantized_ops), ("hybrid", self.hybrid_ops), ("float", self.float_ops),
                ("q/dq", self.conversion_ops), ("other", self.other_ops)) if c.get(op)]
            lines.append(f"  {escape(op):<28} {n:>5}   {', '.join(parts)}")
        lines.append(
            f"integer ops: {sum(self.quantized_ops.values())}, hybrid (int8 weights, float activations): "
            f"{sum(self.hybrid_ops.values())}, float ops: {sum(self.float_ops.values())}, "
            f"quantize/dequantize: {sum(self.conversion_ops.values())}"
        )
        if self.float_ops:
            lines.append("float ops: " + ", ".join(f"{escape(op)} x{n}" for op, n in sorted(self.float_ops.items())))
        left = {k: v for k, v in self.variant_ops().items() if v}
        lines.append("layer_norm/gelu ops: " + (str(left) if left else "none"))
        if self.metadata_keys:
            lines.append("metadata: " + ", ".join(escape(k) for k in self.metadata_keys))
        return "\n".join(lines)


def inspect_artifact(path, fmt=None):
    """Inspects a ``.tflite`` or ``.onnx`` file.

    Args:
        path: the file.
        fmt: ``"tflite"`` or ``"onnx"`` when the suffix does not say (a temporary file).

    Raises:
        ArtifactError: the file is missing, of another type, or not readable.

    Example:
        >>> info = inspect_artifact("model.tflite")  # doctest: +SKIP
        >>> info.float_ops  # doctest: +SKIP
        Counter({'SOFTMAX': 24})
    """
    graph = read_artifact(path, fmt)
    census = taxonomy.compute_census(graph)
    return ArtifactInfo(
        str(path), graph.format, graph.size_bytes,
        [_shown(graph, key) for key in graph.inputs], [_shown(graph, key) for key in graph.outputs],
        Counter(op["label"] for op in graph.ops),
        quantized_ops=census["quantized"], hybrid_ops=census["hybrid"], float_ops=census["float"],
        conversion_ops=census["conversion"], other_ops=census["other"], metadata_keys=list(graph.metadata),
    )


def _shown(graph, key):
    """A tensor as ``mbk inspect`` prints it: dynamic dimensions by their ONNX name (``?`` when unnamed)."""
    tensor = graph.tensors[key]
    names = tensor.get("dim_names") or [None] * len(tensor["signature"])
    shape = [d if d >= 0 or graph.format == "tflite" else (name or "?") for d, name in zip(tensor["signature"], names)]
    return {"name": tensor["name"], "shape": shape, "dtype": tensor["dtype"]}
