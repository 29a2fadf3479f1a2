"""Full int8 without --calibration: a model with a vocabulary calibrates on the built-in calibration sentences."""

import pytest

from mobilebert_kit.convert.exporter import ExportOptions, export
from mobilebert_kit.convert.plan.input_set import InputSet
from mobilebert_kit.convert.plan.sample_text import CALIBRATION_SENTENCES, SENTENCE_PAIRS, SENTENCES
from tests.convert.conftest import SEQ


def test_calibration_and_validation_sentences_share_no_line():
    # Never calibrate on what you validate on: the ranges would fit the test rows.
    validation = set(SENTENCES) | set(SENTENCE_PAIRS)
    assert not validation & set(CALIBRATION_SENTENCES)
    assert len(set(CALIBRATION_SENTENCES)) == len(CALIBRATION_SENTENCES) >= 100
    assert any("\t" in line for line in CALIBRATION_SENTENCES)  # sentence pairs fill segment 1 too


def test_full_int8_of_a_model_with_a_vocabulary_calibrates_on_built_in_sentences(tiny_with_vocab, tmp_path):
    lines = []
    out = tmp_path / "m.tflite"
    result = export(ExportOptions(str(tiny_with_vocab), "tflite", "int8", out=str(out), seq_len=SEQ),
                    log=lines.append)
    assert out.is_file() and result.validation.passed
    said = [line for line in lines if line.startswith("calibrating on ")]
    assert said == [f"calibrating on {len(CALIBRATION_SENTENCES)} line(s) of built-in calibration sentences; "
                    "pass --calibration FILE for your data"]
    assert any("built-in calibration sentences" in n and "--calibration FILE" in n for n in result.notes)
    # Validated on the other set, and the report says how many of its lines.
    assert result.validation.inputs == f"the first 16 of {len(SENTENCES + SENTENCE_PAIRS)} line(s) of built-in sample sentences"
    assert "note: calibrated on" in result.format_text()


def test_default_calibration_rows_are_the_tokenized_calibration_sentences(tiny_with_vocab):
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    tokenizer = TextTokenizer.from_directory(tiny_with_vocab)
    rows = InputSet.default_calibration(tokenizer, 512, 200, SEQ)
    expected = tokenizer.encode_inputs(list(CALIBRATION_SENTENCES), SEQ)
    assert rows.count == len(CALIBRATION_SENTENCES)
    for name, array in expected.items():
        assert (rows.arrays[name] == array).all()
    assert (rows.arrays["input_ids"] != tokenizer.unk_id).mean() > 0.9  # real words, not [UNK]
    assert InputSet.default_calibration(tokenizer, 512, 5, SEQ).count == 5
    assert "random" in InputSet.default_calibration(None, 512, 5, SEQ).description
