"""The one reader of ``.tflite`` and ``.onnx`` files: tensors, graph inputs/outputs, operators, metadata entries.

``.tflite`` files are walked with ai-edge-litert's flatbuffer schema (no interpreter, no TensorFlow); ``.onnx``
files are loaded with ``onnx`` without their external weights. Both give the same :class:`ArtifactGraph`.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from ai_edge_litert import schema_py_generated as schema

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.artifacts.taxonomy import dtype_name

_BUILTIN_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
_OPTION_CLASSES = {v: k for k, v in vars(schema.BuiltinOptions).items() if not k.startswith("_")}
_ACTIVATIONS = {v: k for k, v in vars(schema.ActivationFunctionType).items() if not k.startswith("_")}


@dataclass
class ArtifactGraph:
    """The main graph of one artifact, read from the file alone.

    Attributes:
        path (str): the file (``"<bytes>"`` when read from memory).
        format (str): ``"tflite"`` or ``"onnx"``.
        size_bytes (int): the file size.
        tensors (dict): key -> ``{name, dtype, shape, signature, constant, quantization}``;
            ``signature`` has -1 for dynamic dimensions, ``shape`` the size the
            file was written at (TFLite) or the same as ``signature`` (ONNX).
        inputs, outputs (list): tensor keys of the graph inputs and outputs
            (ONNX weights listed as inputs by old exporters are left out).
        ops (list[dict]): ``{type, label, domain, inputs, outputs, fused, adj_x, node}``
            in graph order; ``label`` is ``domain.type`` for ONNX ops outside the
            default domain, else ``type``.
        metadata (dict[str, bytes]): the file's metadata entries.
        proto: the ``onnx.ModelProto`` (ONNX only; shape inference needs it).
    """

    path: str
    format: str
    size_bytes: int
    tensors: dict
    inputs: list
    outputs: list
    ops: list
    metadata: dict = field(default_factory=dict)
    proto: object = None
    _constants: dict = field(default_factory=dict, repr=False)

    def input_specs(self):
        """``[{"name", "dtype", "shape"}]`` of the graph inputs; ``shape`` has -1 for dynamic dimensions."""
        return [self._spec(key) for key in self.inputs]

    def output_specs(self):
        """``[{"name", "dtype", "shape"}]`` of the graph outputs."""
        return [self._spec(key) for key in self.outputs]

    def _spec(self, key):
        tensor = self.tensors[key]
        spec = {"name": tensor["name"], "dtype": tensor["dtype"], "shape": list(tensor["signature"])}
        if -1 in spec["shape"] and tensor.get("shape") is not None and list(tensor["shape"]) != spec["shape"]:
            # A TFLite tensor with an open axis is allocated at its default shape until a client resizes it.
            spec["allocated"] = [int(d) for d in tensor["shape"]]
        return spec

    def constant_values(self, key):
        """The values of a constant int32/int64 tensor as a flat array, or None."""
        reader = self._constants.get("reader")
        return reader(key) if reader else None


def takes_text(input_specs):
    """Whether a graph with these inputs (``[{"name", "dtype", ...}]``) takes text: one string tensor, a
    ``--tokenizer-in-graph`` file whose tokenizer runs inside it."""
    return len(input_specs) == 1 and input_specs[0]["dtype"] == "string"


def artifact_format(path, fmt=None):
    """``"tflite"`` or ``"onnx"`` from ``fmt`` or the file suffix; raises ArtifactError for anything else."""
    by_suffix = {record.suffix: name for name, record in FORMATS.items()}
    fmt = fmt or by_suffix.get(Path(str(path)).suffix.lower())
    if fmt not in FORMATS:
        raise ArtifactError(f"{path}: unknown model type {Path(str(path)).suffix!r}; expected .tflite or .onnx")
    return fmt


def read_artifact(path, fmt=None):
    """Reads a ``.tflite`` or ``.onnx`` file.

    Args:
        path (str | os.PathLike): the file.
        fmt (str | None): ``"tflite"`` or ``"onnx"`` when the suffix does not say (a temporary file).

    Returns:
        ArtifactGraph: the main graph.

    Raises:
        ArtifactError: the file is missing, of another type, or not a readable model.

    Example:
        >>> read_artifact("model.onnx").ops[0]["type"]  # doctest: +SKIP
        'Gather'
    """
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path} does not exist")
    return _READERS[artifact_format(path, fmt)](path)


def read_tflite_bytes(data, path="<bytes>"):
    """The :class:`ArtifactGraph` of a ``.tflite`` flatbuffer held in memory (``path`` names it in messages);
    raises ArtifactError for no TFL3 identifier, no subgraph, or a truncated/corrupt flatbuffer."""
    if len(data) < 8 or not schema.Model.ModelBufferHasIdentifier(data, 0):
        raise ArtifactError(
            f"{path} is not a TFLite flatbuffer (missing the 'TFL3' identifier); "
            "re-export the model or check that the download finished"
        )
    try:
        model = schema.Model.GetRootAs(data, 0)
        if model.SubgraphsLength() < 1:
            raise ArtifactError(f"{path} has no subgraph; re-export the model")
        return _read_tflite(model, data, path)
    except ArtifactError:
        raise
    except Exception as err:  # noqa: BLE001  (a truncated flatbuffer fails anywhere inside the reader)
        raise ArtifactError(f"{path} is a corrupt TFLite file ({type(err).__name__} while reading it); re-export the model") from err


def _text(raw, path, what):
    """A name stored in a ``.tflite`` file, decoded; one that is not UTF-8 is refused (LiteRT decodes strictly)."""
    try:
        return (raw or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise ArtifactError(f"{path}: the name of {what} is not UTF-8 text, so the file is corrupt; re-export it or "
                            "copy it again") from None


def _check_signature_names(model, path):
    for i in range(model.SubgraphsLength()):
        _text(model.Subgraphs(i).Name(), path, f"subgraph {i}")
    for i in range(model.SignatureDefsLength()):
        signature = model.SignatureDefs(i)
        _text(signature.SignatureKey(), path, f"signature {i}")
        for kind, count, entry in (("input", signature.InputsLength(), signature.Inputs),
                                   ("output", signature.OutputsLength(), signature.Outputs)):
            for j in range(count):
                _text(entry(j).Name(), path, f"{kind} {j} of signature {i}")


def _read_tflite(model, data, path):
    _check_signature_names(model, path)
    codes, versions = [], []
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        versions.append(int(code.Version()))
        if builtin == schema.BuiltinOperator.CUSTOM:
            custom = code.CustomCode()
            codes.append(_text(custom, path, f"custom operator code {i}") if custom else "CUSTOM")
        else:
            codes.append(_BUILTIN_NAMES.get(builtin, f"BUILTIN_{builtin}"))
    graph = model.Subgraphs(0)
    tensors = {}
    for i in range(graph.TensorsLength()):
        t = graph.Tensors(i)
        shape = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
        buffer_index = t.Buffer()
        buffer = model.Buffers(buffer_index) if 0 < buffer_index < model.BuffersLength() else None
        constant = buffer is not None and (buffer.DataLength() > 0 or buffer.Size() > 0)
        quant = t.Quantization()
        tensors[i] = {
            "name": _text(t.Name(), path, f"tensor {i}"),
            "dtype": dtype_name(t.Type(), "tflite"),
            "shape": shape,
            "signature": [int(d) for d in t.ShapeSignatureAsNumpy()] if t.ShapeSignatureLength() else list(shape),
            "constant": constant,
            "buffer": buffer_index,
            "quantization": {
                "scale": [float(s) for s in quant.ScaleAsNumpy()] if quant is not None and quant.ScaleLength() else [],
                "zero_point": [int(z) for z in quant.ZeroPointAsNumpy()] if quant is not None and quant.ZeroPointLength() else [],
            },
        }
    ops = []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        index = op.OpcodeIndex()
        kind = codes[index] if index < len(codes) else "UNKNOWN"
        entry = {
            "type": kind, "label": kind, "domain": "", "version": versions[index] if index < len(versions) else 0,
            "inputs": [int(x) for x in op.InputsAsNumpy()] if op.InputsLength() else [],
            "outputs": [int(x) for x in op.OutputsAsNumpy()] if op.OutputsLength() else [],
            "adj_x": False, "fused": None, "node": None,
        }
        options_class = getattr(schema, _OPTION_CLASSES.get(op.BuiltinOptionsType(), ""), None)
        if options_class is not None and hasattr(options_class, "FusedActivationFunction"):
            table = op.BuiltinOptions()
            options = options_class()
            options.Init(table.Bytes, table.Pos)
            fused = _ACTIVATIONS.get(options.FusedActivationFunction(), "NONE")  # ReLU folded into FC / ADD
            entry["fused"] = None if fused == "NONE" else fused
        if kind == "BATCH_MATMUL" and op.BuiltinOptionsType() == schema.BuiltinOptions.BatchMatMulOptions:
            table = op.BuiltinOptions()
            options = schema.BatchMatMulOptions()
            options.Init(table.Bytes, table.Pos)
            entry["adj_x"] = bool(options.AdjX())
        ops.append(entry)
    inputs = [int(x) for x in graph.InputsAsNumpy()] if graph.InputsLength() else []
    outputs = [int(x) for x in graph.OutputsAsNumpy()] if graph.OutputsLength() else []
    _check_tflite_references(model, tensors, ops, inputs, outputs, len(data), path)
    metadata = {}
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        buffer = model.Buffers(entry.Buffer())
        name = _text(entry.Name(), path, f"metadata entry {i}")
        if buffer.Offset():  # files over 2 GB keep buffers after the flatbuffer
            metadata[name] = bytes(data[buffer.Offset(): buffer.Offset() + buffer.Size()])
        else:
            metadata[name] = buffer.DataAsNumpy().tobytes() if buffer.DataLength() else b""

    def constant_values(key):
        tensor = tensors[key]
        buffer = model.Buffers(tensor["buffer"])
        dtype = {"int32": np.int32, "int64": np.int64}.get(tensor["dtype"])
        if buffer.DataLength() == 0 or dtype is None:
            return None
        return np.frombuffer(buffer.DataAsNumpy().tobytes(), dtype=dtype)

    return ArtifactGraph(
        path=path, format="tflite", size_bytes=len(data), tensors=tensors, inputs=inputs, outputs=outputs,
        ops=ops, metadata=metadata, _constants={"reader": constant_values},
    )


def _check_tflite_references(model, tensors, ops, inputs, outputs, size, path):
    """Refuses a flatbuffer whose operators or graph name tensors it lacks, or whose buffers lie past its end."""
    def bad(where, index):
        raise ArtifactError(f"{path}: {where} names tensor {index}, and the file has {len(tensors)} tensor(s); it is "
                            "corrupt: re-export the model")

    for number, op in enumerate(ops):
        for index in [i for i in op["inputs"] if i != -1] + op["outputs"]:  # -1: an optional input left out
            if index not in tensors:
                bad(f"operator {number} ({op['type']})", index)
    for where, indices in (("the graph's inputs", inputs), ("the graph's outputs", outputs)):
        for index in indices:
            if index not in tensors:
                bad(where, index)
    for i in range(model.BuffersLength()):
        buffer = model.Buffers(i)
        if buffer.Offset() and buffer.Offset() + buffer.Size() > size:
            raise ArtifactError(f"{path}: buffer {i} lies past the end of the file ({buffer.Offset() + buffer.Size():,} > "
                                f"{size:,} bytes); the file is truncated or corrupt: re-export or copy it again")


def _check_external_data(model, path):
    """Refuses ONNX initializers stored outside the file unless they sit, whole, in a regular file beside it
    (onnxruntime follows an initializer's ``location`` wherever it points: ``/etc/passwd``, a FIFO, the file itself)."""
    directory = Path(path).resolve().parent
    for init in model.graph.initializer:
        if init.data_location != onnx.TensorProto.EXTERNAL:
            continue
        fields = {entry.key: entry.value for entry in init.external_data}
        location = fields.get("location", "")
        where = f"{path}: initializer {init.name[:80]!r} keeps its data in {location[:120]!r}"
        target = (directory / location).resolve() if location else None
        if (not location or Path(location).is_absolute() or ".." in Path(location).parts or target is None
                or not target.is_relative_to(directory)):
            raise ArtifactError(f"{where}, outside the model's directory; keep external data files beside the "
                                ".onnx file (or re-export with the weights inside)")
        if not target.is_file() or target == Path(path).resolve():
            raise ArtifactError(f"{where}, which is not a data file beside the model; restore the external data file "
                                "(or re-export with the weights inside)")
        try:
            offset, length = int(fields.get("offset", 0)), int(fields.get("length", -1))
        except ValueError:
            raise ArtifactError(f"{where} at an offset or length that is no number; re-export the model") from None
        size = target.stat().st_size
        if offset < 0 or offset > size or (length >= 0 and offset + length > size):
            raise ArtifactError(f"{where} at bytes {offset}..{offset + max(length, 0)}, past the end of that "
                                f"{size:,}-byte file; restore the external data file or re-export the model")


def _undecodable_text(message, where="model"):
    """The field path (``graph.node.name``) of the first string field of ``message`` that is not UTF-8 (protobuf hands
    it back as bytes), or None; tensor contents are bytes fields, not walked."""
    for field_descriptor, value in message.ListFields():
        name = f"{where}.{field_descriptor.name}"
        repeated = (field_descriptor.is_repeated if hasattr(field_descriptor, "is_repeated")  # protobuf 7 has no label
                    else field_descriptor.label == field_descriptor.LABEL_REPEATED)
        values = value if repeated else [value]
        if field_descriptor.type == field_descriptor.TYPE_STRING:
            if any(isinstance(v, bytes) for v in values):
                return name
        elif field_descriptor.type == field_descriptor.TYPE_MESSAGE:
            for inner in values:
                if found := _undecodable_text(inner, name):
                    return found
    return None


def _nodes(graph):
    """The graph's nodes, then those of its subgraphs (a Loop's body: a text-in file's tokenizer runs in one)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for inner in attr.graphs:
                    yield from _nodes(inner)


def _read_onnx(path):
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # noqa: BLE001  (protobuf raises DecodeError, RuntimeWarning, ValueError...)
        raise ArtifactError(f"{path} is not a readable ONNX model ({type(err).__name__}); re-export it") from err
    if undecodable := _undecodable_text(model):
        raise ArtifactError(f"{path}: its {undecodable} is not UTF-8 text, so the file is corrupt; re-export it or "
                            "copy it again")
    graph = model.graph
    if not graph.node:  # protobuf reads an empty (or all-unknown-fields) file as an empty model
        raise ArtifactError(f"{path} holds no ONNX graph (no nodes{'; the file is empty' if not path.stat().st_size else ''}); "
                            "re-export it")
    _check_external_data(model, path)
    tensors = {}
    for init in graph.initializer:
        dims = [int(d) for d in init.dims]
        tensors[init.name] = {"name": init.name, "dtype": dtype_name(init.data_type, "onnx"), "shape": dims,
                              "signature": dims, "dim_names": [None] * len(dims), "constant": True, "quantization": {}}
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        if value.name in tensors:
            continue  # old exporters list weights as inputs too
        tensor_type = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim]
        tensors[value.name] = {
            "name": value.name, "dtype": dtype_name(tensor_type.elem_type, "onnx"), "shape": dims, "signature": dims,
            "dim_names": [None if d.HasField("dim_value") else (d.dim_param or None) for d in tensor_type.shape.dim],
            "constant": False, "quantization": {},
        }
    initializers = {init.name for init in graph.initializer}
    ops = [
        {"type": node.op_type, "label": node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}",
         "domain": node.domain, "inputs": list(node.input), "outputs": list(node.output), "adj_x": False, "fused": None,
         "node": node}
        for node in _nodes(graph)
    ]

    def constant_values(key):
        init = next((i for i in graph.initializer if i.name == key), None)
        if init is None or init.data_type not in (6, 7):
            return None
        return numpy_helper.to_array(init).reshape(-1)

    return ArtifactGraph(
        path=str(path), format="onnx", size_bytes=path.stat().st_size, tensors=tensors,
        inputs=[v.name for v in graph.input if v.name not in initializers], outputs=[v.name for v in graph.output],
        ops=ops, metadata={p.key: p.value.encode() for p in model.metadata_props}, proto=model,
        _constants={"reader": constant_values},
    )


# How a file of each format (artifacts.formats.FORMATS) is read into an ArtifactGraph.
_READERS = {"tflite": lambda path: read_tflite_bytes(path.read_bytes(), str(path)), "onnx": _read_onnx}
