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
encoding, quantization), ``mbk_vocab`` the WordPiece vocabulary text.
"""


import numpy as np

from mobilebert_kit.convert.errors import ArtifactError
from mobilebert_kit.utils.structured import load_json

METADATA_JSON = "mbk_metadata"
METADATA_VOCAB = "mbk_vocab"


def _schema():
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    return schema, flatbuffer_utils


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
    schema, fb = _schema()
    model = fb.read_model_from_bytearray(bytearray(model_bytes))
    if not model.signatureDefs:
        import tempfile

        # The converter saves a temporary SavedModel first and, when that write fails (a full disk or
        # temp directory), silently falls back to a path that yields no signature.
        raise ArtifactError(
            "the converted model has no serving signature: the TFLite converter could not save its temporary "
            f"SavedModel in {tempfile.gettempdir()} (disk full?); free space or set TMPDIR elsewhere and run again"
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
        model.metadata = list(model.metadata or []) + [entry]
    return bytes(fb.convert_object_to_bytearray(model))


def read_metadata(model_bytes):
    """Returns ``{name: bytes}`` of every ``Model.metadata`` entry of a ``.tflite`` file's bytes."""
    schema, _ = _schema()
    try:
        model = schema.Model.GetRootAs(bytearray(model_bytes), 0)
        out = {}
        for i in range(model.MetadataLength()):
            entry = model.Metadata(i)
            buffer = model.Buffers(entry.Buffer())
            if buffer.Offset():
                data = bytes(model_bytes[buffer.Offset(): buffer.Offset() + buffer.Size()])
            else:
                data = buffer.DataAsNumpy().tobytes() if buffer.DataLength() else b""
            out[_name(entry.Name())] = data
        return out
    except Exception as err:  # noqa: BLE001  (any flatbuffer decoding failure means a bad file)
        raise ArtifactError(
            f"the TFLite file is truncated or corrupt: cannot read its metadata ({type(err).__name__}: {err}); "
            "re-export or copy it again"
        ) from err


def read_mbk_metadata(model_bytes):
    """The ``mbk_metadata`` JSON and vocabulary lines of an exported ``.tflite`` (empty when absent)."""
    entries = read_metadata(model_bytes)
    meta = load_json(entries[METADATA_JSON], f"the TFLite file's {METADATA_JSON} entry", expect=dict,
                     error=ArtifactError, fix="re-export it") if METADATA_JSON in entries else {}
    try:
        vocab = entries[METADATA_VOCAB].decode().splitlines() if METADATA_VOCAB in entries else []
    except UnicodeDecodeError as err:
        raise ArtifactError(f"the TFLite file's {METADATA_VOCAB} entry is not UTF-8 ({err}); re-export it") from err
    return meta, vocab
