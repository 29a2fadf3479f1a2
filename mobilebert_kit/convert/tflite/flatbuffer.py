"""Edits of a converted ``.tflite`` flatbuffer: tensor names, input/output order, metadata.

The TFLite converter names graph inputs ``serving_default_input_ids:0`` and
outputs ``StatefulPartitionedCall:0``, and orders both alphabetically. Apps
(and ``mbk validate``) read the graph's inputs and outputs by position and
name, so the finished file renames them to the model's own names and puts them
in the export order (``input_ids``, ``attention_mask``, ``token_type_ids``;
``sequence_output`` first). The serving signature keeps mapping the same
tensors, so signature runners work unchanged.

The inputs are also renumbered to be tensors ``0, 1, 2``, in input order
(:func:`inputs_first`): MediaPipe Tasks 1.2.2 resizes a dynamic input with
the input's *position* where the interpreter takes a *tensor index*, so a
``[1, -1]`` file whose inputs are other tensors (the converter's are
tensors ``1, 0, 2``: it numbers them alphabetically) kept its ``[1, 1]``
inputs and failed each text with ``tflite_tensor.bytes ==
input_tensor.bytes() (4 vs. 24)``. Measured: the same file with its tensors
renumbered runs every length. A dynamic file's inputs get the planned
length as their default shape (``[1, seq_len]``, signature ``[1, -1]``), so
an app that allocates without resizing runs the validated length.

Metadata is stored as entries of the flatbuffer's ``Model.metadata`` list (a
name and a buffer), the mechanism TFLite itself uses for
``min_runtime_version`` and TFLite Support's ``TFLITE_METADATA``:
``mbk_metadata`` holds JSON (sequence length, lower-casing, labels, mask
encoding, quantization), ``mbk_vocab`` the WordPiece vocabulary text. Reading
them back is :mod:`mobilebert_kit.artifacts.metadata`'s.
"""

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools import flatbuffer_utils as fb

from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.artifacts.metadata import METADATA_JSON, METADATA_VOCAB  # noqa: F401  (the exporter writes them)
from mobilebert_kit.convert.errors import ArtifactError
from mobilebert_kit.utils.scratch import base_directory

FILE_IDENTIFIER = FORMATS["tflite"].magic[1]  # the TFLite schema's flatbuffer file identifier: bytes 4..8 of every .tflite file


def text_of(value):
    """A flatbuffer name (bytes or str) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def serialized(model, model_bytes, changed):
    """``(bytes, changed)`` of a pass over the unpacked ``model`` read from ``model_bytes``: those unchanged when the
    pass changed nothing."""
    return (bytes(fb.convert_object_to_bytearray(model)) if changed else model_bytes), changed


def finalize(model_bytes, input_order, output_order, metadata=None, default_seq_len=None):
    """Returns ``model_bytes`` with named, ordered inputs/outputs, the inputs as tensors ``0..n-1``, and metadata.

    ``metadata``: ``{entry name: bytes}`` added to ``Model.metadata``; ``default_seq_len``: the shape a dynamic
    sequence axis (signature ``-1``) has before any resize (None: the converter's, 1).
    """
    model = fb.read_model_from_bytearray(bytearray(model_bytes))
    if not model.signatureDefs:
        # The converter saves a temporary SavedModel first and, when that write fails (a full disk or
        # temp directory), silently falls back to a path that yields no signature.
        raise ArtifactError(
            "the converted model has no serving signature: the TFLite converter could not save its temporary "
            f"SavedModel in {base_directory()} (disk full?); free space or set TMPDIR elsewhere and run again"
        )
    if len(model.signatureDefs) != 1:
        raise ArtifactError(f"expected one serving signature in the converted model, found {len(model.signatureDefs)}")
    signature = model.signatureDefs[0]
    graph = model.subgraphs[signature.subgraphIndex]
    inputs = {text_of(m.name): m for m in signature.inputs}
    outputs = {text_of(m.name): m for m in signature.outputs}
    for wanted, have, kind in ((input_order, inputs, "inputs"), (output_order, outputs, "outputs")):
        if sorted(wanted) != sorted(have):
            raise ArtifactError(f"converted model {kind} {sorted(have)} differ from the export graph's {sorted(wanted)}")
    graph.inputs = [inputs[n].tensorIndex for n in input_order]
    graph.outputs = [outputs[n].tensorIndex for n in output_order]
    signature.inputs = [inputs[n] for n in input_order]
    signature.outputs = [outputs[n] for n in output_order]
    for name in list(input_order) + list(output_order):
        index = (inputs.get(name) or outputs[name]).tensorIndex
        graph.tensors[index].name = name.encode()
    inputs_first(model, signature.subgraphIndex)
    for index in graph.inputs:
        tensor = graph.tensors[index]
        if default_seq_len and tensor.shapeSignature is not None and len(tensor.shape) == 2 \
                and tensor.shapeSignature[1] == -1:
            tensor.shape = np.array([tensor.shape[0], default_seq_len], dtype=np.int32)
    for key, value in (metadata or {}).items():
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(bytes(value), dtype=np.uint8)
        model.buffers.append(buffer)
        entry = schema.MetadataT()
        entry.name = key.encode()
        entry.buffer = len(model.buffers) - 1
        # An entry of the same name is replaced, not duplicated: clients read the first TFLITE_METADATA.
        kept = [m for m in (model.metadata or []) if text_of(m.name) != key]
        model.metadata = kept + [entry]
    return bytes(fb.convert_object_to_bytearray(model))


def inputs_first(model, subgraph_index=0):
    """Renumbers a subgraph's tensors so that its inputs are tensors ``0, 1, ...``, in input order; in place.

    MediaPipe resizes dynamic inputs by position, as if input ``i`` were tensor ``i`` (module docstring).
    ``model``: the unpacked ``schema.ModelT`` (``flatbuffer_utils.read_model_from_bytearray``), returned.
    """
    graph = model.subgraphs[subgraph_index]
    first = [int(i) for i in graph.inputs]
    return renumber_tensors(model, first + sorted(set(range(len(graph.tensors))) - set(first)), subgraph_index)


def renumber_tensors(model, order, subgraph_index=0):
    """Puts tensor ``order[i]`` of a subgraph at index ``i``, and every reference to it with it; in place.

    One permutation applied to every field of the schema that holds a tensor index of the subgraph: its inputs
    and outputs, each operator's inputs, outputs and intermediates, and the tensor maps of the signatures on
    it. Buffers are untouched (a tensor keeps its buffer index) and an absent optional operand (``-1``) stays
    absent, so the graph computes the same values. ``order`` maps new index -> old index; one that is not a
    permutation of the subgraph's tensors is an ArtifactError. Returns ``model``.
    """
    graph = model.subgraphs[subgraph_index]
    order = [int(i) for i in order]
    if sorted(order) != list(range(len(graph.tensors))):
        raise ArtifactError(f"a tensor order of subgraph {subgraph_index} must list each of its "
                            f"{len(graph.tensors)} tensors once; got {len(order)} indices")
    if order == sorted(order):
        return model
    new = np.empty(len(order), dtype=np.int64)
    new[order] = np.arange(len(order))

    def renumbered(indices):
        return None if indices is None else [int(new[i]) if i >= 0 else int(i) for i in indices]

    graph.tensors = [graph.tensors[i] for i in order]
    graph.inputs, graph.outputs = renumbered(graph.inputs), renumbered(graph.outputs)
    for op in graph.operators or []:
        op.inputs, op.outputs, op.intermediates = (renumbered(op.inputs), renumbered(op.outputs),
                                                   renumbered(op.intermediates))
    for signature in model.signatureDefs or []:
        if signature.subgraphIndex == subgraph_index:
            for entry in list(signature.inputs or []) + list(signature.outputs or []):
                entry.tensorIndex = int(new[entry.tensorIndex])
    return model
