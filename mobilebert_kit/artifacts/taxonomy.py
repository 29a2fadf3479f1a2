"""One op taxonomy for ``.tflite`` and ``.onnx`` graphs: dtypes, LayerNorm/GELU/ReLU evidence, how each op computes.

It works on an :class:`~mobilebert_kit.artifacts.reader.ArtifactGraph` or on op-type sets, so ``mbk inspect``,
``mbk export``'s float-op census and ``mbk profile`` name the same file the same way. Families are found by
evidence *sets*, not single marker ops: a lone ``MEAN`` is mean pooling as often as LayerNorm, a lone ``POW`` a
LayerNorm's ``x**2`` as often as tanh-GELU's ``x**3``. A family is present when one of its evidence sets is
wholly in the graph, and only the ops of such sets are reported as "left".

Example:
    >>> variant_name({"RSQRT", "MEAN", "GELU"}, "tflite")
    'LayerNorm+GELU'
    >>> variant_ops({"MEAN": 1, "RELU": 4}, "tflite")
    {'layer_norm': {}, 'gelu': {}}
"""

from collections import Counter

# TFLite schema TensorType -> numpy dtype name.
TFLITE_TYPES = {
    0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool", 7: "int16",
    9: "int8", 10: "float64", 16: "uint16", 17: "int4",
}
# ONNX TensorProto.DataType -> numpy dtype name (the same names as TFLite's, so reports compare).
ONNX_TYPES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string", 9: "bool",
    10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16", 21: "uint4", 22: "int4",
}
FLOAT_TYPES = {"float32", "float16", "float64", "bfloat16"}
QUANT_TYPES = {"int8", "uint8", "int16", "int4"}


def dtype_name(code, fmt):
    """The dtype name of a TFLite ``TensorType`` or ONNX ``DataType`` code (``"type<n>"`` when unknown)."""
    return _TYPES[fmt].get(int(code), f"type{int(code)}")


# Each family: the op sets any one of which shows the family is in the graph.
VARIANT_EVIDENCE = {
    "tflite": {
        # LayerNorm lowers to MEAN, SQUARED_DIFFERENCE, RSQRT (TF 2.x) or MEAN ... SQRT.
        "layer_norm": ({"RSQRT"}, {"SQUARED_DIFFERENCE"}, {"MEAN", "SQRT"}),
        # GELU is a builtin since TF 2.4; exact GELU otherwise lowers to ERF, the tanh form to POW and TANH.
        "gelu": ({"GELU"}, {"ERF"}, {"POW", "TANH"}),
    },
    "onnx": {
        # tf2onnx makes GlobalAveragePool of the mean; torch exports ReduceMean, Pow, Sqrt.
        "layer_norm": ({"LayerNormalization"}, {"SkipLayerNormalization"}, {"SimplifiedLayerNormalization"},
                       {"ReduceMean", "Sqrt"}, {"ReduceMean", "Pow"}, {"GlobalAveragePool", "Sqrt"}),
        "gelu": ({"Gelu"}, {"FastGelu"}, {"BiasGelu"}, {"Erf"}, {"Pow", "Tanh"}),
    },
}
# ReLU also arrives fused into FULLY_CONNECTED / ADD (TFLite's fused activation).
RELU_OPS = {"tflite": {"RELU", "RELU6", "RELU_N1_TO_1"}, "onnx": {"Relu"}}

# Ops that move between integer and float representations.
CONVERSION_OPS = {"QUANTIZE", "DEQUANTIZE", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
ONNX_INTEGER_OPS = {
    "MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "QLinearAdd", "QLinearMul", "QAttention",
    "DynamicQuantizeMatMul", "QGemm", "QLinearSoftmax", "QLinearConcat", "QLinearLeakyRelu", "QLinearSigmoid",
    "QEmbedLayerNormalization", "QLinearGlobalAveragePool",
}
# ONNX Runtime's block-quantized int4 weight kernels: float activations in and out (MatMulNBits at accuracy level 4
# quantizes its input to int8 on the fly), so mbk inspect counts them with the hybrid ops, not the float ones.
ONNX_HYBRID_OPS = {"MatMulNBits", "GatherBlockQuantized"}
# ONNX ops that only move or reshape data: neither float nor integer arithmetic.
ONNX_DATA_MOVEMENT_OPS = {"Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Reshape", "Cast", "Slice",
                          "Transpose", "Identity", "Constant", "ConstantOfShape", "Range", "Expand"}
TFLITE_MATRIX_OPS = ("FULLY_CONNECTED", "BATCH_MATMUL", "CONV_2D", "DEPTHWISE_CONV_2D")


def variant_ops(op_counts, fmt):
    """``{"layer_norm": {op: n}, "gelu": {op: n}}``: the ops of ``op_counts`` (op type or label such as
    ``com.microsoft.Gelu`` -> count) in every evidence set wholly present.

    Example:
        >>> variant_ops({"ReduceMean": 2, "Sqrt": 2, "Erf": 1}, "onnx")
        {'layer_norm': {'ReduceMean': 2, 'Sqrt': 2}, 'gelu': {'Erf': 1}}
    """
    # Keys may be domain-qualified labels (``com.microsoft.FastGelu``); evidence names the op type.
    present = {_op_type(op) for op, n in op_counts.items() if n}
    out = {}
    for family, evidence in VARIANT_EVIDENCE[fmt].items():
        ops = set().union(*(group for group in evidence if group <= present))
        out[family] = {op: n for op, n in sorted(op_counts.items()) if n and _op_type(op) in ops}
    return out


def _op_type(label):
    return label.rsplit(".", 1)[-1]


# variant_name of a graph in which no feed-forward activation is found: what is known, not a Table 6 row.
NO_ACTIVATION = {True: "LayerNorm, no GELU/ReLU found", False: "no LayerNorm/GELU/ReLU found"}


def variant_name(op_types, fmt):
    """Names the normalisation and activation a graph's ``op_types`` (fused activations included) show: the
    MobileBERT paper's Table 6 rows. NoNorm has no op of its own (it is a missing LayerNorm), so a Table 6 name needs
    a feed-forward activation; a graph with none is named by what was found.

    Example:
        >>> variant_name({"FULLY_CONNECTED", "RELU"}, "tflite")
        'NoNorm+ReLU'
        >>> variant_name({"MatMul", "Gather"}, "onnx")
        'no LayerNorm/GELU/ReLU found'
    """
    found = variant_ops(dict.fromkeys(op_types, 1), fmt)
    layer_norm = bool(found["layer_norm"])
    act = "GELU" if found["gelu"] else "ReLU" if set(op_types) & RELU_OPS[fmt] else None
    if act is None:
        return NO_ACTIVATION[layer_norm]
    return f"{'LayerNorm' if layer_norm else 'NoNorm'}+{act}"


def compute_census(graph):
    """Splits every op of ``graph`` by how it computes: ``{"quantized" | "hybrid" | "float" | "conversion" | "other":
    Counter(op label)}``. TFLite by the dtypes of the op's tensors (float outputs from integer inputs: hybrid);
    ONNX by op type, since the file stores no intermediate dtypes."""
    census = {kind: Counter() for kind in ("quantized", "hybrid", "float", "conversion", "other")}
    _CENSUS[graph.format](graph, census)
    return census


def _tflite_census(graph, census):
    """Counts a TFLite graph's ops into ``census`` by the dtypes of their tensors."""
    for op in graph.ops:
        in_types = [graph.tensors[i]["dtype"] for i in op["inputs"] if i >= 0]
        out_types = [graph.tensors[i]["dtype"] for i in op["outputs"]]
        if op["type"] in CONVERSION_OPS:
            kind = "conversion"
        elif any(t in QUANT_TYPES for t in out_types):
            kind = "quantized"
        elif any(t in FLOAT_TYPES for t in out_types) and any(t in QUANT_TYPES for t in in_types):
            kind = "hybrid"
        elif any(t in FLOAT_TYPES for t in out_types):
            kind = "float"
        else:
            kind = "other"
        census[kind][op["label"]] += 1


def _onnx_census(graph, census):
    """Counts an ONNX graph's ops into ``census`` by op type (intermediate dtypes are not stored in the file)."""
    from mobilebert_kit.artifacts.formats import EXTENSIONS_DOMAIN, TOKENIZER_PREFIX  # noqa: PLC0415

    produced_by = {out: op["type"] for op in graph.ops for out in op["outputs"]}
    for op in graph.ops:
        node = op.get("node")
        if op.get("domain") == EXTENSIONS_DOMAIN or (node is not None and node.name.startswith(TOKENIZER_PREFIX)):
            kind = "other"  # a text-in file's tokenizer: strings and ids, no float compute
        elif op["type"] in CONVERSION_OPS:
            kind = "conversion"
        elif op["type"] in ONNX_INTEGER_OPS:
            kind = "quantized"
        elif op["type"] in ONNX_HYBRID_OPS:
            kind = "hybrid"
        elif any(produced_by.get(i) == "DequantizeLinear" for i in op["inputs"] if i):
            # QDQ format: the float op between DequantizeLinear and QuantizeLinear runs in int8 in ORT.
            kind = "quantized"
        elif op["type"] in ONNX_DATA_MOVEMENT_OPS:
            kind = "other"
        else:
            kind = "float"
        census[kind][op["label"]] += 1


def precision(graph):
    """How the matrix products of an :class:`ArtifactGraph` compute: ``"float32"``, ``"float16"``, ``"dynamic-int8"``,
    ``"int8"``, ``"dynamic-int4"`` (int4 weights read by the product itself, its input quantized to int8 on the fly)
    or ``"int4-weight-only"`` (int4 weights expanded to float by a ``DEQUANTIZE``, float compute)."""
    return _PRECISION[graph.format](graph)


def _onnx_precision(graph):
    """:func:`precision` of an ONNX graph, by its op types and constant weights."""
    kinds = {op["type"] for op in graph.ops}
    if "MatMulNBits" in kinds:  # ONNX Runtime's int4 weights, int8 compute (accuracy_level 4)
        return "dynamic-int4"
    if kinds & {"MatMulInteger", "ConvInteger", "DynamicQuantizeLinear", "DynamicQuantizeMatMul"}:
        return "dynamic-int8"
    if kinds & {"QLinearMatMul", "QLinearConv", "QGemm"} or {"QuantizeLinear", "DequantizeLinear"} <= kinds:
        return "int8"
    weight_types = {
        graph.tensors[name]["dtype"]
        for op in graph.ops
        if op["type"] in ("MatMul", "Gemm", "Conv")
        for name in op["inputs"][1:2]
        if name in graph.tensors and graph.tensors[name]["constant"]
    }
    return "float16" if "float16" in weight_types else "float32"


def _tflite_precision(graph):
    """:func:`precision` of a TFLite graph, by its matrix ops' activation and weight dtypes."""
    producers = {out: op for op in graph.ops for out in op["outputs"]}
    activation_types, weight_types, expanded_types = set(), set(), set()
    for op in graph.ops:
        if op["type"] not in TFLITE_MATRIX_OPS or len(op["inputs"]) < 2 or min(op["inputs"][:2]) < 0:
            continue
        activation_types.add(graph.tensors[op["inputs"][0]]["dtype"])
        weight = op["inputs"][1]
        producer = producers.get(weight)
        if producer is not None and producer["type"] == "DEQUANTIZE" and producer["inputs"]:
            weight = producer["inputs"][0]  # float16 / int8 / int4 weights expanded at load time
            expanded_types.add(graph.tensors[weight]["dtype"])
        weight_types.add(graph.tensors[weight]["dtype"])
    if activation_types & {"int8", "uint8", "int16"}:
        return "int8"
    if "int4" in weight_types:
        return "int4-weight-only" if "int4" in expanded_types else "dynamic-int4"
    if weight_types & {"int8", "uint8"}:
        return "dynamic-int8"
    if "float16" in weight_types:
        return "float16"
    return "float32"


# What each format (artifacts.formats.FORMATS) calls its dtypes, and how its ops are classified.
_TYPES = {"tflite": TFLITE_TYPES, "onnx": ONNX_TYPES}
_CENSUS = {"tflite": _tflite_census, "onnx": _onnx_census}
_PRECISION = {"tflite": _tflite_precision, "onnx": _onnx_precision}
