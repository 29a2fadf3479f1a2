"""The client readiness lint (artifacts/clients.py): each client's rules, from the facts of a file alone.

The facts are built here (no model file): what a file looks like to the rules is its inputs, outputs and
TFLite Metadata, and each case changes one of them from a ready file and expects the reason for it.
The real files and the real clients are in tests/convert/test_tflite_metadata.py.
"""

import dataclasses

import pytest

from mobilebert_kit.artifacts.client_metadata import AssociatedFile, ClientMetadata, TensorMetadata
from mobilebert_kit.artifacts.clients import CLIENTS, FileFacts, readiness

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def tflite(seq=128, dtypes=("int32",) * 3, outputs=(("sentence_embedding", [1, 384]),), meta_changes=None,
           labels=None, allocated=None):
    """The facts of a TFLite file with client metadata, changed by ``meta_changes`` (ClientMetadata fields)."""
    labels_file = (AssociatedFile("labels.txt", "TENSOR_AXIS_LABELS"),) if labels else ()
    meta = ClientMetadata(
        name="m", min_parser_version="1.1.0", subgraphs=1,
        inputs=tuple(TensorMetadata(n) for n in ("ids", "mask", "segment_ids")),
        outputs=tuple(TensorMetadata(name, labels_file if i == 0 else ()) for i, (name, _) in enumerate(outputs)),
        tokenizer="bert", vocab_file="vocab.txt", packed_files=("vocab.txt",) + (("labels.txt",) if labels else ()),
        line_counts={"vocab.txt": 30522, **({"labels.txt": labels} if labels else {})},
    )
    meta = dataclasses.replace(meta, **(meta_changes or {}))
    extra = {"allocated": [1, allocated]} if allocated else {}  # a dynamic file's default shape
    return FileFacts("tflite", [{"name": n, "dtype": d, "shape": [1, seq], **extra} for n, d in zip(INPUTS, dtypes)],
                     [{"name": n, "dtype": "float32", "shape": s} for n, s in outputs], meta)


def onnx(names=INPUTS, dtype="int64", shape=(-1, -1), outputs=("last_hidden_state",)):
    return FileFacts("onnx", [{"name": n, "dtype": dtype, "shape": list(shape)} for n in names],
                     [{"name": n, "dtype": "float32", "shape": [-1, -1, 384]} for n in outputs])


def ready(facts):
    return sorted(name for name, reasons in readiness(facts).items() if not reasons)


def test_each_file_kind_is_ready_for_its_clients():
    assert ready(tflite()) == ["MediaPipe TextEmbedder", "Task Library TextEmbedder"]
    # The default .tflite: a dynamic length, allocated at its --seq-len (the QA file's 384).
    assert ready(tflite(-1, allocated=128)) == ["MediaPipe TextEmbedder", "Task Library TextEmbedder"]
    assert "Task Library BertQuestionAnswerer" in ready(
        tflite(-1, outputs=(("start_logits", [1, -1]), ("end_logits", [1, -1])), allocated=384))
    assert ready(tflite(outputs=(("probability", [1, 3]),), labels=3)) == [
        "MediaPipe TextClassifier", "Task Library BertNLClassifier"]
    # The embedders load it too, and read its start logits as "the embedding": not ready for them.
    assert ready(tflite(384, outputs=(("start_logits", [1, 384]), ("end_logits", [1, 384])))) == [
        "Task Library BertQuestionAnswerer"]
    for outputs in (("last_hidden_state", "sentence_embedding"), ("logits",), ("start_logits", "end_logits")):
        assert ready(onnx(outputs=outputs)) == ["onnxruntime (optimum-style)"]
    # RoBERTa-like families: their tokenizer returns no token_type_ids, and the file takes none (issue 35).
    assert ready(onnx(names=("input_ids", "attention_mask"), outputs=("logits",))) == ["onnxruntime (optimum-style)"]
    # A SentencePiece tokenizer with its model packed serves the same clients as a vocab.txt.
    assert ready(tflite(meta_changes={"tokenizer": "sentencepiece", "vocab_file": "sentencepiece.model",
                                      "packed_files": ("sentencepiece.model",)})) == [
        "MediaPipe TextEmbedder", "Task Library TextEmbedder"]
    # A report lists the clients of the file's format only.
    assert set(readiness(onnx())) == {c.name for c in CLIENTS if c.format == "onnx"}


@pytest.mark.parametrize("facts, client, reason", [
    # issue 14: the float mask MediaPipe refuses ("All input tensors should have type int32")
    (tflite(dtypes=("int32", "float32", "int32")), "MediaPipe TextEmbedder", "attention_mask is float32"),
    (tflite(meta_changes={"inputs": (TensorMetadata("input_ids"),) * 3}), "MediaPipe TextEmbedder",
     "input metadata names are input_ids, input_ids, input_ids; it looks up ids, mask, segment_ids"),
    (tflite(meta_changes={"inputs": (TensorMetadata("ids"), TensorMetadata("mask"))}), "MediaPipe TextClassifier",
     "input metadata names are ids, mask"),
    (dataclasses.replace(tflite(), inputs=tflite().inputs[:2]), "MediaPipe TextEmbedder",
     "the graph has 2 inputs; it feeds 3 (ids, mask, segment_ids)"),
    (tflite(meta_changes={"tokenizer": None, "vocab_file": None}), "Task Library TextEmbedder",
     "no BertTokenizer or SentencePiece input process unit"),
    (tflite(meta_changes={"tokenizer": "regex"}), "MediaPipe TextEmbedder", "(found regex)"),
    # A SentencePiece model is run too (issue 35), but it must be packed.
    (tflite(meta_changes={"tokenizer": "sentencepiece", "vocab_file": "sentencepiece.model"}),
     "MediaPipe TextEmbedder", "the tokenizer's file sentencepiece.model is not packed"),
    (tflite(meta_changes={"packed_files": ()}), "MediaPipe TextEmbedder", "vocab.txt is not packed"),
    (tflite(meta_changes={"line_counts": {"vocab.txt": 0}}), "MediaPipe TextEmbedder", "vocab.txt is empty"),
    (tflite(meta_changes={"blank_lines": {"vocab.txt": 2}}), "MediaPipe TextEmbedder",
     "vocab.txt has 2 blank line(s), which the client skips"),
    (tflite(meta_changes={"outputs": ()}), "MediaPipe TextEmbedder", "0 output metadata entries for 1 graph outputs"),
    (tflite(meta_changes={"subgraphs": 0, "inputs": (), "outputs": ()}), "MediaPipe TextEmbedder",
     "input metadata names are none"),
    (tflite(outputs=(("sequence_output", [1, 128, 384]),)), "MediaPipe TextEmbedder",
     "the first output sequence_output is [1, 128, 384]; it reads one [1, N] vector"),
    (tflite(outputs=(("probability", [1, 3]),)), "MediaPipe TextClassifier", "no TENSOR_AXIS_LABELS file"),
    (tflite(outputs=(("probability", [1, 3]),), labels=2), "MediaPipe TextClassifier", "2 labels for 3 scores"),
    (tflite(outputs=(("probability", [1, 3]),), labels=3, meta_changes={"packed_files": ("vocab.txt",)}),
     "MediaPipe TextClassifier", "labels file labels.txt is not packed"),
    (tflite(outputs=(("score", [1, 3]),), labels=3), "Task Library BertNLClassifier",
     "no output metadata named probability (found score)"),
    (tflite(128, outputs=(("start_logits", [1, 128]), ("end_logits", [1, 128]))), "Task Library BertQuestionAnswerer",
     "sequence length [128]; it runs 384"),
    # A dynamic-length file ([1, -1]) is allocated at --seq-len until resized; this client never resizes.
    (tflite(-1, outputs=(("start_logits", [1, -1]), ("end_logits", [1, -1])), allocated=128),
     "Task Library BertQuestionAnswerer", "sequence length [128]; it runs 384"),
    (tflite(seq=16, dtypes=("int32",) * 3, meta_changes={}), "Task Library BertQuestionAnswerer",
     "no output metadata named start_logits, end_logits"),
    (dataclasses.replace(tflite(), meta=None), "MediaPipe TextEmbedder", "no TFLite Metadata (TFLITE_METADATA)"),
    (dataclasses.replace(tflite(), inputs=[{"name": n, "dtype": "int32", "shape": [1, s]}
                                           for n, s in zip(INPUTS, (128, 128, 64))]),
     "MediaPipe TextEmbedder", "inputs must be [1, seq] with one seq"),
    # A classifier loads in the embedders, which then call its class scores an embedding (session 12's probe).
    (tflite(outputs=(("probability", [1, 3]),), labels=3), "MediaPipe TextEmbedder",
     "the first output is a classifier's scores (labels labels.txt), not a sentence vector"),
    # A span answerer's [1, 384] start logits passed as "one vector": mbk export said "ready for MediaPipe
    # TextEmbedder, ..., Task Library TextEmbedder" of a question-answering file.
    (tflite(384, outputs=(("start_logits", [1, 384]), ("end_logits", [1, 384]))), "MediaPipe TextEmbedder",
     "the first output start_logits is a span answerer's logits, one per token, not a sentence vector"),
    (tflite(384, outputs=(("start_logits", [1, 384]), ("end_logits", [1, 384]))), "Task Library TextEmbedder",
     "not a sentence vector"),
    # tflite-support 0.4.4 refuses FULLY_CONNECTED v12, which dynamic-range files use
    # (tests/clients/test_task_library.py::test_dynamic_range_file_is_refused_by_its_old_runtime).
    (dataclasses.replace(tflite(outputs=(("probability", [1, 3]),), labels=3), op_versions={"FULLY_CONNECTED": 12}),
     "Task Library BertNLClassifier", "the file has FULLY_CONNECTED version 12"),
    (onnx(dtype="int32"), "onnxruntime (optimum-style)", "every input must be int64; input_ids is int32"),
    (onnx(names=("ids", "mask", "segment_ids")), "onnxruntime (optimum-style)",
     "it feeds inputs named input_ids, attention_mask (found ids, mask, segment_ids)"),
    (onnx(names=("input_ids", "attention_mask", "position_ids")), "onnxruntime (optimum-style)",
     "it feeds nothing to position_ids"),
    (onnx(shape=(1, 128)), "onnxruntime (optimum-style)", "have a fixed batch or sequence length"),
    (onnx(outputs=("sequence_output", "pooled_output")), "onnxruntime (optimum-style)",
     "outputs sequence_output, pooled_output match none of last_hidden_state (feature-extraction)"),
])
def test_a_broken_rule_names_its_reason(facts, client, reason):
    reasons = readiness(facts)[client]
    assert any(reason in r for r in reasons), reasons


def test_a_text_in_file_is_not_said_to_have_a_fixed_length():
    # mbk inspect of a --tokenizer-in-graph .onnx (text ['batch_size']) said "inputs text have a fixed batch or
    # sequence length" among the reasons it does not serve optimum-style code.
    facts = FileFacts("onnx", [{"name": "text", "dtype": "string", "shape": [-1]}],
                      [{"name": "logits", "dtype": "float32", "shape": [-1, 4]}])
    reasons = readiness(facts)["onnxruntime (optimum-style)"]
    assert "inputs text are not [batch, sequence] tensors" in reasons and not any("fixed" in r for r in reasons)


def test_all_three_inputs_dynamic_is_allowed_for_the_tflite_clients():
    # clients.md: a dynamic length only if all three are dynamic.
    facts = dataclasses.replace(tflite(), inputs=[{"name": n, "dtype": "int32", "shape": [1, -1]} for n in INPUTS])
    assert readiness(facts)["MediaPipe TextEmbedder"] == []
