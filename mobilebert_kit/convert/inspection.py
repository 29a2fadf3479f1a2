"""``inspect_artifact``: what a ``.tflite`` or ``.onnx`` file holds, read from the file alone.

Reports inputs and outputs (name, shape, dtype), operators by type, and for
each operator whether it computes in integer arithmetic, with integer weights
on float activations (TFLite "hybrid" / dynamic-range), or in float; plus the
file size and the metadata keys. The ``.tflite`` reader walks the flatbuffer
with the schema that ships in ai-edge-litert; the ``.onnx`` reader uses
``onnx``. No Keras model is needed.

The normalization/activation check (``variant_ops``) looks for the operators
LayerNorm and GELU lower to (TFLite: MEAN / SQUARED_DIFFERENCE / RSQRT and
GELU / ERF / POW; ONNX: LayerNormalization / ReduceMean / GlobalAveragePool (what
tf2onnx makes of the mean) / Sqrt and Gelu / Erf /
Pow); a NoNorm + ReLU model has none of them.
"""

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mobilebert_kit.convert.errors import ArtifactError

FORMATS = (".tflite", ".onnx")

_TFLITE_TYPES = {
    0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool", 7: "int16",
    9: "int8", 10: "float64", 16: "uint16", 17: "int4",
}
_FLOAT = {"float32", "float16", "float64"}
_QUANT = {"int8", "uint8", "int16", "int4"}
_CONVERSION_OPS = {"QUANTIZE", "DEQUANTIZE", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
_ONNX_INTEGER_OPS = {
    "MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "QLinearAdd", "QLinearMul", "QAttention",
    "DynamicQuantizeMatMul", "QGemm", "QLinearSoftmax", "QLinearConcat", "QLinearLeakyRelu", "QLinearSigmoid",
    "QEmbedLayerNormalization", "QLinearGlobalAveragePool",
}
VARIANT_OPS = {
    "tflite": {"layer_norm": {"MEAN", "SQUARED_DIFFERENCE", "RSQRT"}, "gelu": {"GELU", "ERF", "POW"}},
    "onnx": {
        "layer_norm": {"LayerNormalization", "ReduceMean", "GlobalAveragePool", "Sqrt", "SimplifiedLayerNormalization"},
        "gelu": {"Gelu", "Erf", "Pow", "FastGelu", "BiasGelu"},
    },
}


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
        markers = VARIANT_OPS[self.format]
        return {family: {op: self.op_counts[op] for op in sorted(ops) if self.op_counts.get(op)}
                for family, ops in markers.items()}

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
        from mobilebert_kit.utils.terminal import escape

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
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path} does not exist")
    fmt = fmt or path.suffix.lstrip(".")
    if fmt == "tflite":
        return _inspect_tflite(path)
    if fmt == "onnx":
        return _inspect_onnx(path)
    raise ArtifactError(f"{path}: unknown model type {path.suffix!r}; expected one of {', '.join(FORMATS)}")


def _builtin_names():
    from ai_edge_litert import schema_py_generated as schema

    return {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}


def _inspect_tflite(path):
    from ai_edge_litert import schema_py_generated as schema

    data = path.read_bytes()
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ArtifactError(f"{path} is not a TFLite flatbuffer (no TFL3 identifier); re-export it")
    try:
        model = schema.Model.GetRootAs(data, 0)
        names = _builtin_names()
        codes = []
        for i in range(model.OperatorCodesLength()):
            code = model.OperatorCodes(i)
            builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
            codes.append(code.CustomCode().decode() if builtin == schema.BuiltinOperator.CUSTOM else names.get(builtin, str(builtin)))
        graph = model.Subgraphs(0)

        def tensor(index):
            t = graph.Tensors(index)
            return {"name": t.Name().decode(), "shape": [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else [],
                    "dtype": _TFLITE_TYPES.get(t.Type(), str(t.Type()))}

        info = ArtifactInfo(
            str(path), "tflite", len(data),
            [tensor(int(i)) for i in graph.InputsAsNumpy()], [tensor(int(i)) for i in graph.OutputsAsNumpy()],
            Counter(),
        )
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            kind = codes[op.OpcodeIndex()]
            ins = [graph.Tensors(int(j)) for j in op.InputsAsNumpy() if j >= 0] if op.InputsLength() else []
            outs = [graph.Tensors(int(j)) for j in op.OutputsAsNumpy()] if op.OutputsLength() else []
            in_types = [_TFLITE_TYPES.get(t.Type()) for t in ins]
            out_types = [_TFLITE_TYPES.get(t.Type()) for t in outs]
            info.op_counts[kind] += 1
            if kind in _CONVERSION_OPS:
                info.conversion_ops[kind] += 1
            elif any(t in _QUANT for t in out_types):
                info.quantized_ops[kind] += 1
            elif any(t in _FLOAT for t in out_types) and any(t in _QUANT for t in in_types):
                info.hybrid_ops[kind] += 1
            elif any(t in _FLOAT for t in out_types):
                info.float_ops[kind] += 1
            else:
                info.other_ops[kind] += 1
        info.metadata_keys = [model.Metadata(i).Name().decode() for i in range(model.MetadataLength())]
        return info
    except ArtifactError:
        raise
    except Exception as err:  # noqa: BLE001  (a truncated flatbuffer fails anywhere)
        raise ArtifactError(f"{path} is not a readable TFLite model ({type(err).__name__}: {err}); re-export it") from err


def _inspect_onnx(path):
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # noqa: BLE001  (protobuf decode errors have many types)
        raise ArtifactError(f"{path} is not a readable ONNX model ({type(err).__name__}); re-export it") from err
    graph = model.graph
    elem = {v: k.lower() for k, v in onnx.TensorProto.DataType.items()}

    def value(v):
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]
        return {"name": v.name, "shape": dims, "dtype": elem.get(t.elem_type, str(t.elem_type))}

    initializers = {i.name for i in graph.initializer}
    produced_by = {out: node.op_type for node in graph.node for out in node.output}
    info = ArtifactInfo(
        str(path), "onnx", path.stat().st_size,
        [value(v) for v in graph.input if v.name not in initializers], [value(v) for v in graph.output], Counter(),
    )
    for node in graph.node:
        kind = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        info.op_counts[kind] += 1
        if node.op_type in _CONVERSION_OPS:
            info.conversion_ops[kind] += 1
        elif node.op_type in _ONNX_INTEGER_OPS:
            info.quantized_ops[kind] += 1
        elif any(produced_by.get(i) == "DequantizeLinear" for i in node.input if i):
            # QDQ format: the float op between DequantizeLinear and QuantizeLinear runs in int8 in ORT.
            info.quantized_ops[kind] += 1
        elif node.op_type in ("Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Reshape", "Cast", "Slice",
                              "Transpose", "Identity", "Constant", "ConstantOfShape", "Range", "Expand"):
            info.other_ops[kind] += 1
        else:
            info.float_ops[kind] += 1
    info.metadata_keys = [p.key for p in model.metadata_props]
    return info
