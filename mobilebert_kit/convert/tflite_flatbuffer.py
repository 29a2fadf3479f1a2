"""Edits of a converted ``.tflite`` flatbuffer: tensor names, input/output order, metadata.

The TFLite converter names graph inputs ``serving_default_input_ids:0`` and
outputs ``StatefulPartitionedCall:0``, and orders both alphabetically. Apps
(and ``mbk validate``) read the graph's inputs and outputs by position and
name, so the finished file renames them to the model's own names and puts them
in the export order (``input_ids``, ``attention_mask``, ``token_type_ids``;
``sequence_output`` first). The serving signature keeps mapping the same
tensors, so signature runners work unchanged.

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

from mobilebert_kit.artifacts.metadata import METADATA_JSON, METADATA_VOCAB  # noqa: F401  (the exporter writes them)
from mobilebert_kit.convert.errors import ArtifactError
from mobilebert_kit.utils.scratch import base_directory

FILE_IDENTIFIER = b"TFL3"  # the TFLite schema's flatbuffer file identifier: bytes 4..8 of every .tflite file


def _name(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def finalize(model_bytes, input_order, output_order, metadata=None):
    """Returns ``model_bytes`` with named, ordered inputs/outputs and metadata entries.

    Args:
        model_bytes: the converter's output.
        input_order: input names in the order the graph should list them.
        output_order: output names (signature keys) in export order.
        metadata: ``{entry name: bytes}`` added to ``Model.metadata``.
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
    inputs = {_name(m.name): m for m in signature.inputs}
    outputs = {_name(m.name): m for m in signature.outputs}
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
    for key, value in (metadata or {}).items():
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(bytes(value), dtype=np.uint8)
        model.buffers.append(buffer)
        entry = schema.MetadataT()
        entry.name = key.encode()
        entry.buffer = len(model.buffers) - 1
        # An entry of the same name is replaced, not duplicated: clients read the first TFLITE_METADATA.
        kept = [m for m in (model.metadata or []) if _name(m.name) != key]
        model.metadata = kept + [entry]
    return bytes(fb.convert_object_to_bytearray(model))
