"""What a TFLite conversion calibrates on (tflite_export._representative): the app's rows, and the padding's range."""

from types import SimpleNamespace

import numpy as np

from mobilebert_kit.convert.plan.input_set import InputSet
from mobilebert_kit.convert.tflite.export import PADDED_CALIBRATION_ROWS, _representative


def graph_with(seq_len):
    """The two attributes _representative reads of an export graph: its inputs' shape and dtypes."""
    spec = SimpleNamespace(shape=(1, seq_len))
    return SimpleNamespace(inputs=[spec], input_dtypes={"input_ids": "int32", "attention_mask": "int32"})


def padded_rows(lengths, seq_len=16):
    ids = np.zeros((len(lengths), seq_len), np.int32)
    mask = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length], mask[row, :length] = np.arange(1, length + 1), 1
    return InputSet({"input_ids": ids, "attention_mask": mask}, "rows")


def test_a_dynamic_file_calibrates_on_each_rows_tokens_and_on_some_padded_rows():
    """Calibrated only on unpadded rows, (1 - mask) * value had the range [0, 0]: a caller that pads got no
    attention mask (all-MiniLM-L6-v2 full int8, padded validation rows: cosine 0.52-0.62, 0.89 with this)."""
    lengths = [3, 5, 16, 7] * 4
    samples = list(_representative(graph_with(None), padded_rows(lengths))())
    cut = [s for s in samples if s["attention_mask"].all()]
    padded = [s for s in samples if not s["attention_mask"].all()]
    assert sorted(s["input_ids"].shape[1] for s in cut) == sorted(lengths)
    assert 1 <= len(padded) <= PADDED_CALIBRATION_ROWS
    assert all(s["input_ids"].shape == (1, 16) for s in padded)


def test_a_static_file_calibrates_on_the_padded_rows_as_they_are():
    samples = list(_representative(graph_with(16), padded_rows([3, 16, 9]))())
    assert [s["input_ids"].shape for s in samples] == [(1, 16)] * 3
