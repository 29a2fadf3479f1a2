"""The ``.tflite`` writer: a built export graph to a file the TFLite clients load.

The converter (``tflite.export``) quantizes as the setting's mode record says; the file then gets our
``mbk_metadata`` (and the vocabulary), the clients' TFLite Metadata (input names, tokenizer, labels) and
the files that metadata names, packed after the flatbuffer (``tflite_metadata``).
"""

import json
import warnings
from pathlib import Path

from mobilebert_kit.artifacts.client_metadata import packed_disagreements, parse_client_metadata
from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.convert.tflite import export as tflite_export
from mobilebert_kit.convert.tflite import flatbuffer as tflite_flatbuffer
from mobilebert_kit.convert.tflite import metadata as tflite_metadata
from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.data.tokenizer_kinds import VOCAB_KIND, ClientUnit
from mobilebert_kit.models.encoder import INPUT_NAMES
from mobilebert_kit.utils.output_check import OutputKind, bytes_at, contains

# A later export recognises a .tflite file it wrote, and replaces it: a TFLite flatbuffer with our metadata.
_IS_TFLITE, _HAS_METADATA = bytes_at(*FORMATS["tflite"].magic), contains(tflite_flatbuffer.METADATA_JSON)
TFLITE_OUTPUT = OutputKind("tflite", False, "a .tflite model exported by mbk",
                           lambda path: _IS_TFLITE(path) and _HAS_METADATA(path))


def write_tflite(graph, setting, calibration, metadata, path, calibrated=None):
    """Converts ``graph`` with ``setting`` and writes the ``.tflite`` file at ``path`` (arguments:
    ``ArtifactWriter``); returns the converter's notes."""
    with warnings.catch_warnings():
        # The converter's calibrator still instantiates tf.lite.Interpreter internally.
        warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
        data, notes = tflite_export.convert(
            graph, setting.quantize, calibration, setting.options.io_type,
            setting.keep_float_ops, setting.keep_float_layers, calibrated,
            layer_norm=metadata.layer_norm,
        )
    meta, vocab, unit = metadata
    entries = {tflite_flatbuffer.METADATA_JSON: json.dumps(meta, sort_keys=True).encode()}
    if vocab:
        entries[tflite_flatbuffer.METADATA_VOCAB] = ("\n".join(vocab) + "\n").encode()
    # The TFLite clients' metadata (TFLITE_METADATA: input names, tokenizer, labels) and the files it
    # names, packed after the flatbuffer; a drift probe (meta {}) is no client's file and gets none.
    args = client_metadata_args(meta, vocab, unit)
    files = {}
    if args:
        metadata_bytes, files = tflite_metadata.client_metadata(**args)
        entries[tflite_metadata.TFLITE_METADATA] = metadata_bytes
    # A dynamic sequence axis ([1, -1]) allocates at the planned length until a client resizes it.
    default_seq_len = setting.seq_len if setting.static_seq_len is None else None
    data = tflite_flatbuffer.finalize(data, INPUT_NAMES, graph.output_order, entries, default_seq_len)
    if files:
        data = tflite_metadata.pack_files(data, files)
        # Read back as the clients will, before anything is written: the packed files must say what the
        # model was exported with (vocabulary within its embedding table, the model's tokens and classes).
        packed = parse_client_metadata(entries, data, str(path))
        problems = packed_disagreements(packed, meta, list(vocab or []))
        if problems:
            raise ExportError(f"the files packed for the apps disagree with the model: {'; '.join(problems)}; "
                              "export from a source whose tokenizer files and labels are the model's own")
    Path(path).write_bytes(data)
    return notes


def client_metadata_args(meta, vocab, client_unit=None):
    """The arguments of ``tflite_metadata.client_metadata`` for an export's ``mbk_metadata`` and tokenizer; None for
    a file without a task (a drift probe). ``vocab`` becomes the clients' ``vocab.txt`` when no ``client_unit``
    (``data.tokenizer_kinds``, packed as is) is given."""
    if not meta.get("task"):
        return None
    if client_unit is None and vocab:
        client_unit = ClientUnit(VOCAB_KIND.client_options, VOCAB_KIND.client_file,
                                 tflite_metadata.lines_file("vocabulary token", vocab))
    return {
        "client": meta["client"], "output_names": list(meta["outputs"]), "tokenizer": client_unit,
        "labels": list(meta.get("labels") or []) or None, "name": meta["source"],
        "description": f"{meta['task']} export of {meta['source']} by mobilebert-kit",
    }
