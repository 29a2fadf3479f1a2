"""Cases an outside probe of the merged issue-12 work still got wrong, each fixed at its cause.

The probe (hostile inputs through the real CLI, run by the lead after the merge) found four
consumers that took a parsed value before checking it: validation thresholds (NaN, a cosine of 5),
a table row over csv's field limit, a config field that is looked up in a table while holding a
list, and a vocabulary line holding a control character.
"""

import json
import re

import pytest

from mobilebert_kit.errors import CheckpointError, ConfigError, MbkError
from tests.reliability.test_bad_inputs import assert_refused


@pytest.mark.parametrize("value", ["nan", "5", "-2", "inf"])
def test_threshold_out_of_range_is_refused_naming_it(mbk, tmp_path, value):
    # Checked while parsing the options, before the model is built: it used to fail every export with
    # "cosine 1.000000 < nan" after the whole conversion.
    proc = mbk("export", "tiny-bert", "--out", tmp_path / "m.tflite", "--seq-len", "16",
               "--threshold", f"min_cosine={value}")
    assert_refused(proc, "--threshold min_cosine")
    assert not list(tmp_path.iterdir())


def test_thresholds_from_python_and_recipes_are_checked_too():
    from mobilebert_kit.convert.exporter import ExportOptions

    with pytest.raises(ConfigError, match="min_snr_db"):
        ExportOptions("tiny-bert", out="m.tflite", thresholds={"min_snr_db": float("nan")}).check()
    with pytest.raises(ConfigError, match="validation threshold"):
        ExportOptions("tiny-bert", out="m.tflite", thresholds={"min_cosinus": 0.9}).check()


@pytest.mark.parametrize("suffix", [".tsv", ".csv"])
def test_table_field_over_the_csv_limit_is_one_error_naming_the_line(tmp_path, suffix):
    from mobilebert_kit.training.task_data import read_table

    sep = "\t" if suffix == ".tsv" else ","
    path = tmp_path / f"train{suffix}"
    path.write_text(f"sentence{sep}label\nfine{sep}pos\n" + "x" * 200_000 + f"{sep}neg\n")
    with pytest.raises(MbkError, match="line 3 cannot be read as a table") as caught:
        read_table(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("suffix", [".tsv", ".csv", ".jsonl"])
def test_a_table_with_a_byte_order_mark_keeps_its_column_names(tmp_path, suffix):
    # Excel/Notepad's UTF-8 BOM stuck to the first column's name ("\ufeffsentence"): the text column was not found.
    from mobilebert_kit.training.task_data import read_table, resolve_columns

    sep = {".tsv": "\t", ".csv": ","}.get(suffix)
    text = (f"sentence{sep}label\r\nhi there{sep}pos\r\n" if sep else '{"sentence": "hi there", "label": "pos"}\n')
    path = tmp_path / f"test{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    rows = read_table(path)
    assert rows == [{"sentence": "hi there", "label": "pos"}]
    assert resolve_columns(rows, path) == (["sentence"], "label")


@pytest.mark.parametrize("suffix, body, fields", [
    (".tsv", "no tab on this line\n", 1),  # its label was read as None, then "label 'None' was not seen"
    (".tsv", '"a quoted\ttab" inside\tpos\n', 3),  # a .tsv has no quoting: the label column shifted
    (".csv", "alone\n", 1),
    (".csv", "a,b,c\n", 3),
])
def test_a_row_with_the_wrong_number_of_fields_is_refused_naming_its_line(tmp_path, suffix, body, fields):
    from mobilebert_kit.training.task_data import read_table

    sep = "\t" if suffix == ".tsv" else ","
    path = tmp_path / f"data{suffix}"
    path.write_text(f"sentence{sep}label\nfine{sep}pos\n" + body)
    with pytest.raises(MbkError, match=f"line 3 has {fields} field\\(s\\) where the header has 2") as caught:
        read_table(path)
    assert "\n" not in str(caught.value)


def test_missing_label_column_and_unknown_label_say_what_and_where(tmp_path):
    from mobilebert_kit.training.task_data import load_sequence_task, resolve_columns

    path = tmp_path / "t.tsv"
    with pytest.raises(MbkError, match=r"no label column \(none of label, score"):
        resolve_columns([{"sentence": "a"}], path)
    path.write_text("sentence\tlabel\na\tpos\nb\tneg\nc\tpositive\n")
    from mobilebert_kit.data.text_tokenizer import TextTokenizer
    from tests.data.conftest import write_vocab

    tokenizer = TextTokenizer.from_vocab(write_vocab(tmp_path / "vocab.txt", ["a", "b", "c"]))
    with pytest.raises(MbkError, match=r"label 'positive' \(data row 3\) was not seen in training"):
        load_sequence_task(path, tokenizer, 8, "classification", label_names=["neg", "pos"])


@pytest.mark.parametrize("text, problem", [('{"model_type": "bert", "vocab_si', "is not valid JSON"),
                                           ("[" * 100_000 + "]" * 100_000, "nests too deeply"),
                                           ("[1, 2]", "config.json")])
def test_an_unreadable_config_json_is_named_not_called_no_checkpoint(tmp_path, text, problem):
    # A truncated or hostile config.json next to real weights was "not a checkpoint: expected config.json + ...".
    import mobilebert_kit as mbk

    (tmp_path / "config.json").write_text(text)
    (tmp_path / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(CheckpointError, match=problem) as caught:
        mbk.import_checkpoint(tmp_path)
    assert "not a checkpoint" not in str(caught.value) and "restore the checkpoint's config.json" in str(caught.value)


@pytest.mark.parametrize("line", ["[1, 2]", "[" * 100_000 + "]" * 100_000, '{"a": 1, "a": 2}'])
def test_jsonl_rows_that_are_not_flat_objects_are_refused(tmp_path, line):
    from mobilebert_kit.training.task_data import read_table

    path = tmp_path / "train.jsonl"
    path.write_text('{"sentence": "fine", "label": "pos"}\n' + line + "\n")
    with pytest.raises(MbkError, match="train.jsonl:2"):
        read_table(path)


@pytest.mark.parametrize("field, value", [("hidden_act", ["gelu"]), ("model_type", {"bert": 1}),
                                          ("position_embedding_type", 3)])
def test_string_config_fields_of_another_type_name_the_field(tmp_path, field, value):
    import mobilebert_kit as mbk

    config = {"model_type": "bert", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 37, field: value}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(CheckpointError, match=f"{field} must be a string"):
        mbk.import_checkpoint(tmp_path)


@pytest.mark.parametrize("token", ["[UNK]\x00", "a\x1b[2J", "b\x07"])
def test_vocabulary_line_with_a_control_character_is_refused(token):
    from mobilebert_kit.data.vocab import parse_vocab

    with pytest.raises(ConfigError, match="line 2 holds the control character"):
        parse_vocab("[PAD]\n" + token + "\n[CLS]\n", "vocab.txt")


@pytest.mark.parametrize("name, body, task, problem", [
    ("t.tsv", "sentence\tlabel\na\t0.5\nb\tnan\n", "regression", "data row 2 is 'nan', not a finite float32"),
    ("t.tsv", "sentence\tlabel\na\t-inf\nb\t1\n", "regression", "data row 1 is '-inf'"),
    ("t.tsv", "sentence\tlabel\na\t1\nb\t1e308\n", "regression", "data row 2 is '1e308'"),  # inf in float32
    ("t.tsv", "sentence\tlabel\na\tpos\nb\t \n", "classification", "data row 2 is empty"),
    ("t.jsonl", '{"sentence": "a", "label": "pos"}\n{"sentence": "b", "label": null}\n', "classification",
     "data row 2 is null"),
    ("t.jsonl", '{"sentence": "a", "label": {"x": [1]}}\n', "classification", 'data row 1 is {"x": [1]}'),
])
def test_a_label_that_is_no_label_is_refused_naming_its_row(tmp_path, name, body, task, problem):
    # A NaN regression target trained a model of NaN weights and exited 0; null, empty and object labels
    # became classes ("None", "", a Python repr).
    from mobilebert_kit.data.text_tokenizer import TextTokenizer
    from mobilebert_kit.training.task_data import load_sequence_task
    from tests.data.conftest import write_vocab

    path = tmp_path / name
    path.write_text(body)
    tokenizer = TextTokenizer.from_vocab(write_vocab(tmp_path / "vocab.txt", ["a", "b"]))
    with pytest.raises(MbkError, match=re.escape(problem)) as caught:
        load_sequence_task(path, tokenizer, 8, task)
    assert "\n" not in str(caught.value)


def test_segment_ids_past_the_models_segments_are_refused_naming_the_array(tmp_path):
    # They reached the embedding lookup of `mbk validate` / `mbk export --validation-data` as an internal error.
    import numpy as np

    from mobilebert_kit.convert.errors import ExportError
    from mobilebert_kit.convert.plan.input_set import InputSet

    rows = {"input_ids": np.full((2, 8), 5), "attention_mask": np.ones((2, 8)), "token_type_ids": np.zeros((2, 8))}
    rows["token_type_ids"][1, 3] = 9
    np.savez(tmp_path / "in.npz", **{k: v.astype(np.int32) for k, v in rows.items()})
    with pytest.raises(ExportError, match=re.escape("token_type_ids outside the model's 2 segment(s) [0, 2)")):
        InputSet.from_file(tmp_path / "in.npz", 8, vocab_size=100, type_vocab_size=2)
    assert InputSet.from_file(tmp_path / "in.npz", 8, vocab_size=100).arrays["token_type_ids"].max() == 9


def test_validate_at_more_positions_than_the_reference_has_is_one_line(tmp_path):
    import mobilebert_kit as mbk
    from tests.helpers import assert_one_line_error, run_mbk

    positions = mbk.build("tiny-bert").config["max_position_embeddings"]
    out = tmp_path / "m.onnx"
    run_mbk("export", "tiny-bert", "--format", "onnx", "--seq-len", 16, "--out", out, "--no-validate", check=True)
    proc = run_mbk("validate", out, "--reference", "tiny-bert", "--seq-len", positions + 1)
    assert proc.returncode == 2
    assert_one_line_error(proc, f"--seq-len {positions + 1} is more than the {positions} positions",
                          f"pass --seq-len {positions} or less")
