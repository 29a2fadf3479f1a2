"""What the profiler needs to know about a model file, read from the file alone: inputs, operator mix,
precision, normalisation/activation variant, vocabulary size and the FLOPs of one inference (docs/profiler.md
says what they count). When the shapes of some matrix op cannot be worked out, the count is None, never a
partial sum.
"""

import hashlib
import os
from collections import Counter

import numpy as np
import onnx

from mobilebert_kit.artifacts import taxonomy
from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.artifacts.metadata import parse_mbk_metadata
from mobilebert_kit.artifacts.reader import artifact_format, read_artifact, takes_text
from mobilebert_kit.artifacts.runner import load_tflite
from mobilebert_kit.artifacts.runtimes import file_needs
from mobilebert_kit.profiler.errors import ProfilerError
from mobilebert_kit.profiler.inputs import feed_shape
from mobilebert_kit.errors import first_line


# Names the three BERT inputs go by in common exports (TF Hub, Hugging Face, Model Garden).
_ROLE_ALIASES = {
    "input_ids": ("input_ids", "input_word_ids", "word_ids"),
    "attention_mask": ("attention_mask", "input_mask", "mask"),
    "token_type_ids": ("token_type_ids", "segment_ids", "input_type_ids", "type_ids"),
}
# Single-input ops that pass token ids through unchanged on their way to the embedding lookup.
_TFLITE_PASS_THROUGH = {"CAST", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "IDENTITY"}
_ONNX_PASS_THROUGH = {"Cast", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Flatten"}
# Single-tensor wrappers between an embedding table and its lookup: a quantized (QDQ) export stores the
# int8 table as an initializer and gathers from DequantizeLinear's output; the table's rows are the same.
_TFLITE_TABLE_WRAPPERS = {"DEQUANTIZE", "QUANTIZE", "CAST", "IDENTITY"}
_ONNX_TABLE_WRAPPERS = {"DequantizeLinear", "QuantizeLinear", "Cast", "Identity"}
_MATMULS = ("MatMul", "MatMulInteger", "FusedMatMul", "QLinearMatMul")  # out x the first input's last axis
_ONNX_MATRIX_OPS = (*_MATMULS, "Gemm", "Conv", "ConvInteger", "QLinearConv", "Attention", "MultiHeadAttention")
FLOPS_SOURCE = "2 x MACs of matrix ops read from the model file"
# When the vocabulary cannot be read from the graph: BERT's uncased WordPiece vocabulary.
DEFAULT_VOCAB_SIZE = 30522


def fixed_length_error(path, static_len, seq_len):
    """The ProfilerError for a file fixed at ``static_len`` asked to run at ``seq_len``."""
    return ProfilerError(f"{path} has a fixed sequence length {static_len}, not {seq_len}; use --seq-len "
                         f"{static_len} or export the model with a dynamic sequence length")


def input_role(name):
    """Returns ``input_ids``, ``attention_mask``, ``token_type_ids`` or None for an input name."""
    lowered = name.lower()
    # Longest alias first so "input_mask" is not taken for "mask" of something else.
    for role, aliases in _ROLE_ALIASES.items():
        for alias in sorted(aliases, key=len, reverse=True):
            if alias in lowered:
                return role
    return None


class ModelInfo:
    """Static facts about one ``.tflite`` or ``.onnx`` file.

    Args:
        path: the model file.

    Attributes:
        path, name, format, size_bytes, sha256: the file.
        inputs: list of dicts ``{name, role, dtype, shape}``; ``shape`` uses -1
            for dynamic dimensions.
        op_counts: ``Counter`` of operator types in the main graph.
        precision: ``"float32"``, ``"float16"``, ``"dynamic-int8"``, ``"int8"``, ``"dynamic-int4"`` or
            ``"int4-weight-only"`` (:func:`mobilebert_kit.artifacts.taxonomy.precision`).
        variant: e.g. ``"LayerNorm+GELU"`` or ``"NoNorm+ReLU"`` (paper Table 6).
        vocab_size, vocab_source: the embedding rows token ids must stay below,
            and where that number came from.
        static_seq_len: the sequence length fixed in the file, or None if dynamic.

    Raises:
        ProfilerError: the file is missing, not a model, or corrupt.

    Example:
        >>> ModelInfo("tiny.onnx").inputs[0]["role"]  # doctest: +SKIP
        'input_ids'
    """

    def __init__(self, path):
        self.path = os.path.abspath(str(path))
        self.name = os.path.splitext(os.path.basename(self.path))[0]
        try:
            self.format = artifact_format(path)
        except ArtifactError:
            ext = os.path.splitext(str(path))[1].lower().lstrip(".")
            raise ProfilerError(f"{path}: unsupported model file type {ext!r}; the profiler takes .tflite or .onnx "
                                "files") from None
        if not os.path.isfile(self.path):
            raise ProfilerError(f"{path}: no such model file; check the path")
        self.size_bytes = os.path.getsize(self.path)
        with open(self.path, "rb") as handle:
            self.sha256 = hashlib.file_digest(handle, "sha256").hexdigest()
        try:
            artifact = read_artifact(self.path, self.format)
        except ArtifactError as err:
            raise ProfilerError(str(err)) from err
        self._graph = (_TfliteGraph if FORMATS[self.format].litert else _OnnxGraph)(artifact)
        self.inputs = artifact.input_specs()
        for spec in self.inputs:
            spec["role"] = input_role(spec["name"])
            if spec["role"] and 0 in spec["shape"]:
                # A static 0 holds no tokens; --seq-len cannot change a static dimension, so it is not the fix.
                raise ProfilerError(f"{path}: input {spec['name']!r} has the static shape {spec['shape']}, which holds no "
                                    "tokens; re-export the model with a positive (or dynamic) batch and sequence length")
        self.op_counts = Counter(op["type"] for op in artifact.ops)
        self.fused_activations = Counter(op["fused"] for op in artifact.ops if op.get("fused"))
        self.precision = taxonomy.precision(artifact)
        # What the file asks of a LiteRT API (open axes, quantized inputs/outputs, int16): picks CompiledModel or not.
        self.runtime_needs = file_needs(artifact) if FORMATS[self.format].litert else {}
        self.variant = taxonomy.variant_name(set(self.op_counts) | set(self.fused_activations), self.format)
        self.vocab_size, self.vocab_source = self._graph.vocab_size(self.inputs)
        # A one-row segment table (RoBERTa, XLM-R) takes segment id 0 only: the timing inputs read it here.
        segments, found = self._graph.vocab_size(self.inputs, "token_type_ids")
        for spec in self.inputs:
            if spec["role"] == "token_type_ids" and found == "embedding table":
                spec["segments"] = segments
        self.static_seq_len = _static_seq_len(self.inputs)
        try:  # its planned length, position table, ...; values out of their bounds refused (metadata.BOUNDED)
            self.metadata = parse_mbk_metadata(artifact.metadata, self.path)[0]
        except ArtifactError as err:
            raise ProfilerError(str(err)) from err
        self.max_seq_len = self.metadata.get("max_seq_len")  # bounded where it is read (metadata.BOUNDED)
        self.takes_text = takes_text(self.inputs)  # a --tokenizer-in-graph .onnx: fed the text itself

    def feed_vocab(self, given=None):
        """The vocabulary the timing inputs draw ids from: ``given`` (``--vocab-size``), else the model's; ProfilerError
        when ``given`` exceeds what the file's lookup reads (the runtime would blame the file)."""
        if given is None:
            return int(self.vocab_size)
        if self.vocab_source in ("embedding table", "one-hot depth") and int(given) > self.vocab_size:
            raise ProfilerError(f"--vocab-size {given} exceeds the {self.vocab_size} ids of {self.path}'s "
                                f"{self.vocab_source}; pass at most {self.vocab_size}, or leave it out to read it")
        return int(given)

    def flops(self, seq_len):
        """Returns ``(flops, by_op_type)`` of one inference at ``seq_len`` (2 x MACs); flops is None when unknown."""
        return self.count_flops(seq_len)[:2]

    def count_flops(self, seq_len):
        """Returns ``(flops, by_op_type, source)``: flops is None, and ``source`` says why, when the shapes of
        some matrix op could not be worked out (the ops that were counted are still in ``by_op_type``)."""
        total, by_type, unresolved = self._graph.flops(int(seq_len), self.inputs)
        if not unresolved:
            return total, by_type, FLOPS_SOURCE
        kinds = ", ".join(sorted(Counter(unresolved)))
        return None, by_type, (f"unknown: shapes of {len(unresolved)} matrix op(s) ({kinds}) could not be inferred, so only "
                               f"part of the work would be counted; pass --flops to give the work per inference")

    def summary(self):
        """Returns the JSON-ready description used in reports."""
        return {
            **{key: getattr(self, key) for key in ("path", "name", "format", "size_bytes", "sha256", "precision",
                                                   "variant", "vocab_size", "vocab_source", "static_seq_len")},
            "inputs": [dict(spec) for spec in self.inputs],
            "op_counts": dict(sorted(self.op_counts.items())),
            "fused_activations": dict(sorted(self.fused_activations.items())),
        }


def _static_seq_len(inputs):
    lengths = {spec["shape"][-1] for spec in inputs if spec["role"] and len(spec["shape"]) >= 2}
    if not lengths or any(n is None or n < 0 for n in lengths):
        return None
    return lengths.pop() if len(lengths) == 1 else None


def _prod(shape):
    return int(np.prod([max(int(d), 0) for d in shape], dtype=np.int64)) if len(shape) else 1


def _consumers(ops):
    consumers = {}
    for op in ops:
        for key in op["inputs"]:
            consumers.setdefault(key, []).append(op)
    return consumers


def _smallest_table(rows):
    """The vocabulary when no lookup of the ids was found: any id below the smallest lookup table is valid in
    every table."""
    if tables := [n for n in rows if n is not None]:
        return int(min(tables)), "smallest lookup table"
    return DEFAULT_VOCAB_SIZE, "default (no embedding lookup found)"


def _table_rows(ops, key, wrappers, table_shape):
    """Rows of the constant table behind ``key`` (through ``wrappers``: dequantize and the like), or None;
    ``table_shape(key)`` is a constant's shape, None for any other tensor."""
    producers = {o: op for op in ops for o in op["outputs"]}
    for _ in range(8):
        shape = table_shape(key)
        if shape is not None:
            return int(shape[0]) if shape else None
        op = producers.get(key)
        if op is None or op["type"] not in wrappers or not op["inputs"]:
            return None
        key = op["inputs"][0]
    return None


class _TfliteGraph:
    """Vocabulary and FLOPs of the main subgraph of a read ``.tflite`` file."""

    def __init__(self, artifact):
        self.path = artifact.path
        self.tensors = artifact.tensors
        self.ops = artifact.ops
        self.input_indices = artifact.inputs
        self._const_values = artifact.constant_values

    def _table_rows(self, tensor):
        return _table_rows(self.ops, tensor, _TFLITE_TABLE_WRAPPERS,
                           lambda t: self.tensors[t]["shape"] if t >= 0 and self.tensors[t]["constant"] else None)

    def vocab_size(self, inputs, role="input_ids"):
        consumers = _consumers(self.ops)
        ids = [idx for idx, spec in zip(self.input_indices, inputs) if spec.get("role") == role]
        frontier, seen = list(ids), set()
        while frontier:
            tensor = frontier.pop()
            if tensor in seen:
                continue
            seen.add(tensor)
            for op in consumers.get(tensor, []):
                if op["type"] == "GATHER" and op["inputs"][0] == tensor:
                    # The ids gathered by position (a dynamic-length file's PositionClip): still the ids.
                    frontier.extend(op["outputs"])
                elif op["type"] in ("GATHER", "EMBEDDING_LOOKUP") and len(op["inputs"]) >= 2:
                    table, indices = (op["inputs"][0], op["inputs"][1]) if op["type"] == "GATHER" else (op["inputs"][1], op["inputs"][0])
                    rows = self._table_rows(table) if indices == tensor else None
                    if rows is None and indices == tensor and self.tensors[table]["shape"]:
                        rows = int(self.tensors[table]["shape"][0])
                    if rows is not None:
                        return rows, "embedding table"
                elif op["type"] == "ONE_HOT" and len(op["inputs"]) >= 2 and op["inputs"][0] == tensor:
                    depth = self._const_values(op["inputs"][1])
                    if depth is not None and depth.size == 1:
                        return int(depth[0]), "one-hot depth"
                elif op["type"] in _TFLITE_PASS_THROUGH:
                    frontier.extend(op["outputs"])
        return _smallest_table([self._table_rows(op["inputs"][0]) for op in self.ops
                                if op["type"] == "GATHER" and op["inputs"]])

    def _shapes(self, seq_len, inputs):
        """Tensor shapes at ``seq_len``; dynamic models are resized by the interpreter."""
        shapes = [t["shape"] for t in self.tensors.values()]
        dynamic = any(d < 0 for spec in inputs for d in spec["shape"])
        static_len = _static_seq_len(inputs)
        if not dynamic and static_len in (None, seq_len):
            return shapes
        if not dynamic:
            raise fixed_length_error(self.path, static_len, seq_len)
        try:  # at the shapes the timing feeds (inputs.make_feeds)
            interpreter = load_tflite(self.path, delegate="none",
                                      input_shapes={spec["name"]: feed_shape(spec, seq_len) for spec in inputs})
        except ArtifactError as err:
            raise ProfilerError(str(err)) from err
        # Intermediate shapes of a dynamic graph are only known after one invoke;
        # zeros are valid token ids, segment ids and (with ones) mask values.
        for detail in interpreter.get_input_details():
            fill = np.ones if input_role(detail["name"]) == "attention_mask" else np.zeros
            interpreter.set_tensor(detail["index"], fill(detail["shape"], dtype=detail["dtype"]))
        try:
            interpreter.invoke()
        except RuntimeError as err:
            raise ProfilerError(f"{self.path} does not run at sequence length {seq_len} ({first_line(err)}); try a "
                                "smaller --seq-len") from err
        for detail in interpreter.get_tensor_details():
            if detail["index"] < len(shapes):
                shapes[detail["index"]] = [int(d) for d in detail["shape"]]
        return shapes

    def flops(self, seq_len, inputs):
        shapes = self._shapes(seq_len, inputs)
        by_type = Counter()
        for op in self.ops:
            kind, ins, outs = op["type"], op["inputs"], op["outputs"]
            if len(ins) < 2 or not outs or min(ins[:2]) < 0:
                continue
            out = _prod(shapes[outs[0]])
            a, b = shapes[ins[0]], shapes[ins[1]]
            if kind == "FULLY_CONNECTED" and len(b) == 2:
                macs = out * b[1]  # weights [units, depth]
            elif kind == "BATCH_MATMUL" and len(a) >= 2:
                macs = out * (a[-2] if op["adj_x"] else a[-1])
            elif kind == "CONV_2D" and len(b) == 4:
                macs = out * b[1] * b[2] * b[3]  # filter [out, h, w, in]
            elif kind == "DEPTHWISE_CONV_2D" and len(b) == 4:
                macs = out * b[1] * b[2]  # filter [1, h, w, out]
            else:
                continue
            by_type[kind] += 2 * macs
        # The interpreter knows every shape after its invoke: nothing is left unresolved.
        return int(sum(by_type.values())), dict(by_type), []


class _OnnxGraph:
    """Vocabulary and FLOPs of the main graph of a read ``.onnx`` file (weights are not needed, only their shapes)."""

    def __init__(self, artifact):
        self.path = artifact.path
        self.model = artifact.proto
        self.ops = artifact.ops
        self.initializers = {name: t for name, t in artifact.tensors.items() if t["constant"]}

    def _table_rows(self, name):
        return _table_rows(self.ops, name, _ONNX_TABLE_WRAPPERS,
                           lambda n: self.initializers[n]["shape"] if n in self.initializers else None)

    def vocab_size(self, inputs, role="input_ids"):
        consumers = _consumers(self.ops)
        ids = [spec["name"] for spec in inputs if spec.get("role") == role]
        frontier, seen = list(ids), set()
        while frontier:
            name = frontier.pop()
            if name in seen:
                continue
            seen.add(name)
            for op in consumers.get(name, []):
                if op["type"] == "Gather" and len(op["inputs"]) >= 2 and op["inputs"][1] == name:
                    rows = self._table_rows(op["inputs"][0])
                    if rows is not None:
                        return rows, "embedding table"
                elif op["type"] in _ONNX_PASS_THROUGH:
                    frontier.extend(op["outputs"][:1])
        return _smallest_table([self._table_rows(op["inputs"][0]) for op in self.ops
                                if op["type"] == "Gather" and op["inputs"]])

    def _shapes(self, seq_len, inputs):
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        for value in model.graph.input:
            if value.name in self.initializers:
                continue
            dims = value.type.tensor_type.shape.dim
            for position, dim in enumerate(dims):
                if not dim.HasField("dim_value"):
                    dim.Clear()
                    dim.dim_value = seq_len if position == len(dims) - 1 and len(dims) >= 2 else 1
        # data_prop evaluates the Shape -> Gather/Concat -> Reshape chains exporters write (tf2onnx's Tensordot), which
        # plain inference leaves unknown; onnx knows no com.microsoft kernel (convert/onnx/fused.py): onnxruntime's
        # symbolic inference does.
        inferred = _contrib_shapes(model)
        try:
            inferred = inferred or onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception:  # noqa: BLE001  (data propagation is newer and stricter; plain inference may still do)
            try:
                inferred = onnx.shape_inference.infer_shapes(model)
            except Exception as err:  # noqa: BLE001
                raise ProfilerError(f"{self.path}: ONNX shape inference failed ({first_line(err)}); pass --flops to give the "
                                    "work per inference") from err
        shapes = {}
        for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
            dims = value.type.tensor_type.shape.dim
            # No shape field is an unknown rank, not a scalar.
            if value.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
                shapes[value.name] = [d.dim_value for d in dims]
        for name, init in self.initializers.items():
            shapes[name] = list(init["shape"])
        static = _static_seq_len(inputs)
        if static is not None and static != seq_len:
            raise fixed_length_error(self.path, static, seq_len)
        return shapes

    def flops(self, seq_len, inputs):
        shapes = self._shapes(seq_len, inputs)
        by_type, unresolved = Counter(), []
        for op in self.ops:
            kind, ins, outs = op["type"], op["inputs"], op["outputs"]
            if kind not in _ONNX_MATRIX_OPS:
                continue
            if not outs or outs[0] not in shapes:
                unresolved.append(kind)
                continue
            out = _prod(shapes[outs[0]])
            if kind in _MATMULS and len(ins) >= (4 if kind == "QLinearMatMul" else 2) and ins[0] in shapes:
                macs = out * shapes[ins[0]][-1]
            elif kind == "Gemm" and ins and ins[0] in shapes:
                trans_a = any(a.name == "transA" and a.i for a in op["node"].attribute)
                a = shapes[ins[0]]
                macs = out * (a[0] if trans_a else a[-1])
            elif kind in ("Attention", "MultiHeadAttention") and len(ins) >= 3 and all(i in shapes for i in ins[:3]):
                macs = _attention_macs(kind, [shapes[i] for i in ins[:3]])
            elif kind in ("Conv", "ConvInteger", "QLinearConv"):
                w_index = 3 if kind == "QLinearConv" else 1
                if len(ins) <= w_index or ins[w_index] not in shapes:
                    unresolved.append(kind)
                    continue
                w = shapes[ins[w_index]]  # [out, in / group, k...]
                macs = out * _prod(w[1:])
            else:
                unresolved.append(kind)
                continue
            by_type[kind] += 2 * macs
        return int(sum(by_type.values())), dict(by_type), unresolved


def _contrib_shapes(model):
    """``model`` with shapes from onnxruntime's symbolic inference where it has ``com.microsoft`` nodes, else None."""
    if not any(node.domain == "com.microsoft" for node in model.graph.node):
        return None
    try:
        return _symbolic_shapes(model)
    except Exception:  # noqa: BLE001  (its failures are many; onnx's own inference is the fallback)
        return None


def _symbolic_shapes(model):
    """``SymbolicShapeInference.infer_shapes(model, auto_merge=True)``, else None, without the failure dump that
    method writes into the working directory (``sym_shape_infer_temp.onnx``) where some shape stays unknown."""
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference, get_opset

    opset = get_opset(model)
    if not opset or opset < 7:
        return None
    inference = SymbolicShapeInference(2**31 - 1, True, False, 0)  # infer_shapes' defaults, auto_merge on
    inference._preprocess(model)
    complete = False
    while inference.run_:
        complete = inference._infer_impl()
    inference._update_output_from_vi()
    return inference.out_mp_ if complete else None


def _attention_macs(kind, shapes):
    """MACs of ORT's ``Attention`` (input, packed q/k/v weight: the projection, then the scores and the context)
    or ``MultiHeadAttention`` (projected query, key, value: the scores and the context)."""
    if kind == "Attention":
        (batch, seq, hidden), (_, packed) = shapes[0], shapes[1]
        width = packed // 3
        return batch * seq * hidden * packed + 2 * batch * seq * seq * width
    query, key, value = shapes
    return query[0] * query[1] * key[1] * (query[-1] + value[-1])
