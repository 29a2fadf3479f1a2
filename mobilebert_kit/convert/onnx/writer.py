"""The ``.onnx`` writer: a built export graph to the optimum-style file onnxruntime users load.

tf2onnx converts (``onnx.export.convert``), onnxruntime's quantizer quantizes as the setting's mode
record maps it (``QuantizationMode.onnx_as``), and our ``mbk_metadata`` (and the vocabulary) go into the
model's metadata properties. With ``--tokenizer-in-graph`` the checkpoint's tokenizer goes in front
(``text_graph.with_tokenizer``): the file's one input is the text.
"""

import json

import onnx

from mobilebert_kit.artifacts.metadata import METADATA_JSON
from mobilebert_kit.convert.onnx import export as onnx_export
from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.convert.quantization.modes import DYNAMIC_GROUP, quantization_mode
from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.utils.output_check import OutputKind, bytes_at, contains

# A later export recognises an .onnx file it wrote, and replaces it: no other format's magic number, our metadata
# inside (a protobuf has no magic number of its own).
_OTHER_MAGIC = tuple(bytes_at(*f.magic) for f in FORMATS.values() if f.magic)
_HAS_METADATA = contains(METADATA_JSON)
ONNX_OUTPUT = OutputKind("onnx", False, "an .onnx model exported by mbk",
                         lambda path: not any(magic(path) for magic in _OTHER_MAGIC) and _HAS_METADATA(path))


def write_onnx(graph, setting, calibration, metadata, path, calibrated=None):
    """Converts ``graph`` with ``setting`` and writes the ``.onnx`` file at ``path`` (arguments: ``ArtifactWriter``);
    returns notes (how many layers a LayerNorm model's full int8 quantized dynamically).

    No client unit is packed: optimum-style code runs the checkpoint's own tokenizer. ``calibrated`` is unused
    (ORT's quantizer calibrates inside ``quantize_static`` each time).
    """
    mode = quantization_mode(setting.quantize)
    # ExportOptions.check refuses it first in the user's spelling; a library caller must not get a float file.
    if not mode.allows("format:onnx"):
        raise ExportError(f"quantize {mode.name} has no ONNX export: {mode.refused['format:onnx']}")
    onnx_as = mode.onnx_as  # qat -> int8 (the record says why)
    fused = onnx_as is None or quantization_mode(onnx_as).onnx.fused_kernels
    model = onnx_export.convert(graph, setting.options.opset, fused=fused)
    notes = []
    if onnx_as is not None:
        # A LayerNorm model's full int8 takes the mode's own layer_norm_dynamic_nodes, as the TFLite writer does
        # (qat, whose onnx_as is int8, has none), unless the user chose the float ops.
        dynamic = mode.tflite.layer_norm_dynamic_nodes if metadata.layer_norm and setting.keep_float_ops is None else ()
        model = onnx_export.quantize(
            model, onnx_as, calibration, graph.input_dtypes, setting.keep_float_ops or (), setting.keep_float_layers,
            dynamic_layers=dynamic,
        )
        changed = sum(node.op_type == "MatMulInteger" for node in model.graph.node) if dynamic else 0
        if changed:
            notes.append(f"{changed} {DYNAMIC_GROUP}(s) with int8 weights, activations quantized per row at run time "
                         "(float output)")
    meta, vocab = metadata.meta, metadata.vocab
    if meta.get("tokenizer_in_graph"):
        # After quantizing (ORT's quantizers know no custom ops): the tokenizer's ids feed the quantized graph.
        from mobilebert_kit.convert.onnx.text_graph import with_tokenizer

        types = {value.name: graph.input_dtypes[value.name] for value in model.graph.input}
        model = with_tokenizer(model, setting.tokenizer, setting.seq_len, types,
                               static=setting.static_seq_len is not None, batch=setting.batch_size)
    entries = {METADATA_JSON: json.dumps(meta, sort_keys=True)}
    if vocab:
        entries["mbk_vocab"] = "\n".join(vocab) + "\n"
    model.metadata_props.extend(onnx.StringStringEntryProto(key=key, value=value) for key, value in entries.items())
    onnx_export.check(model)
    onnx.save(model, str(path))
    return notes
