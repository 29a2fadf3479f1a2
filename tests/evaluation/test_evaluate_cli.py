"""`mbk evaluate` on exported files: the JSON contract, several models side by side, and one-line errors."""

import json

import pytest

from tests.evaluation.conftest import SEQ
from tests.helpers import assert_one_line_error
from tests.training.test_cli import mbk


def test_json_of_one_classifier_file_is_one_object_with_accuracy(task_models, exported, capsys, tmp_path):
    data = task_models["data"]["classification"]
    proc = mbk(capsys, "evaluate", "--model", exported["classification", "tflite"], "--data", data, "--json")
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["primary"] == "accuracy" and result["rows"] == 40 and 0.0 <= result["accuracy"] <= 1.0
    assert {"accuracy", "f1", "matthews_corrcoef"} <= set(result)
    # Other column names: the file does not record them, the flags name them (as `mbk finetune`'s do).
    renamed = tmp_path / "renamed.tsv"
    renamed.write_text("review\tcategory\n" + "".join(data.read_text().splitlines(keepends=True)[1:]))
    assert_one_line_error(mbk(capsys, "evaluate", "--model", exported["classification", "tflite"], "--data", renamed,
                              check=False), "--text-columns")
    proc = mbk(capsys, "evaluate", "--model", exported["classification", "tflite"], "--data", renamed, "--json",
               "--text-columns", "review", "--label-column", "category")
    assert json.loads(proc.stdout)["accuracy"] == result["accuracy"]


def test_several_models_give_one_table_with_drop_and_ratio(task_models, exported, capsys, tmp_path):
    data = task_models["data"]["classification"]
    files = [exported["classification", "tflite"], exported["classification-dynamic", "tflite"],
             exported["classification", "onnx"]]
    args = [a for f in files for a in ("--model", f)]
    proc = mbk(capsys, "evaluate", *args, "--data", data, "--json", "--seq-len", SEQ, check=False)
    result = json.loads(proc.stdout)
    rows = result["models"]
    assert [r["model"] for r in rows] == [str(f) for f in files] and result["primary"] == "accuracy"
    reference = rows[0]["metrics"]["accuracy"]
    for row in rows:
        assert row["drop"] == pytest.approx(reference - row["metrics"]["accuracy"])
        assert row["passed"] == (row["metrics"]["accuracy"] >= 0.99 * reference)
    assert rows[2]["drop"] == pytest.approx(0.0, abs=1e-9)  # the float ONNX file scores as the float TFLite file
    assert proc.returncode == (0 if result["passed"] else 1)
    # An impossible bar fails every model but the reference: exit 1, and the table says which.
    proc = mbk(capsys, "evaluate", *args, "--data", data, "--min-ratio", 5, "--seq-len", SEQ, check=False)
    assert proc.returncode == 1
    assert proc.stdout.count("FAIL") == 2
    proc = mbk(capsys, "evaluate", *args[:4], "--data", data, "--limit", 8, "--json")
    assert all(row["rows"] == 8 for row in json.loads(proc.stdout)["models"])


@pytest.mark.parametrize(
    "model, data, fragment",
    [
        (("classification", "tflite"), "embedding", "label '"),  # a pairs TSV for a classifier file
        (("embedding", "tflite"), "classification", "scored on sentence pairs"),
        (("classification", "tflite"), "empty", "has no rows"),
        (("classification", "tflite"), "unknown-label", "label 'zzz'"),
        # Three "nan" scores of four printed spearman -0.4 and a bare NaN (no JSON), exit 0.
        (("embedding", "tflite"), "nan-scores", "similarity score of data row 2 is 'nan', not a finite float32"),
        ("not-an-artifact", "classification", "not a TFLite flatbuffer"),
        ("text.txt", "classification", "expected .tflite or .onnx"),
        ("plain-dir", "classification", "is neither a fine-tuned model (task.json) nor a saved task model"),
    ],
)
def test_bad_inputs_are_one_line_errors(task_models, exported, tmp_path, capsys, model, data, fragment):
    files = {"empty": tmp_path / "empty.tsv", "unknown-label": tmp_path / "unknown.tsv",
             "not-an-artifact": tmp_path / "fake.tflite", "text.txt": tmp_path / "text.txt",
             "plain-dir": tmp_path / "plain"}
    files["empty"].write_text("sentence\tlabel\n")
    files["unknown-label"].write_text("sentence\tlabel\ngood movie\tc1\nbad film\tzzz\n")
    files["nan-scores"] = tmp_path / "nan.tsv"
    files["nan-scores"].write_text("sentence1\tsentence2\tlabel\ngood movie\tbad film\t4.5\n"
                                   + "".join(f"the {w}\ta {w}\tnan\n" for w in ("plot", "actor", "film")))
    files["not-an-artifact"].write_text("this is not a model\n")
    files["text.txt"].write_text("hello\n")
    files["plain-dir"].mkdir()
    path = exported[model] if isinstance(model, tuple) else files[model]
    data_path = task_models["data"].get(data) or files[data]
    proc = mbk(capsys, "evaluate", "--model", path, "--data", data_path, "--json", check=False)
    assert_one_line_error(proc, fragment)
    assert proc.returncode == 2 and proc.stdout == ""


def test_pipeline_evaluates_each_file_when_the_recipe_names_data(task_models, tmp_path, capsys):
    import shutil

    (tmp_path / "model").symlink_to(task_models["classification"] / "model")
    shutil.copyfile(task_models["data"]["classification"], tmp_path / "test.tsv")
    recipe = tmp_path / "clf.toml"
    recipe.write_text(f'[source]\nmodel = "model"\n\n[export]\nformats = ["tflite"]\nquantize = "dynamic"\n'
                      f'seq_len = {SEQ}\nname = "clf"\n\n[validation]\ncount = 2\n\n'
                      '[evaluation]\ndata = "test.tsv"\nlimit = 20\n')
    proc = mbk(capsys, "pipeline", recipe, "--out", tmp_path / "out", "--runs", 1)
    report = json.loads((tmp_path / "out" / "clf.pipeline.json").read_text())
    evaluation = report["evaluation"]
    assert [m["model"] for m in evaluation["models"]] == ["clf-float32.tflite", "clf.tflite"]
    assert evaluation["primary"] == "accuracy" and all(m["rows"] == 20 for m in evaluation["models"])
    float_run = evaluation["models"][0]["metrics"]["accuracy"]
    dynamic = evaluation["models"][1]["metrics"]["accuracy"]
    assert evaluation["models"][1]["drop"] == pytest.approx(float_run - dynamic)
    assert "task metrics on" in proc.stdout and "Task metrics on" in (tmp_path / "out" / "clf.pipeline.html").read_text()
    # The float file scores as `mbk evaluate` scores it.
    alone = json.loads(mbk(capsys, "evaluate", "--model", tmp_path / "out" / "clf-float32.tflite", "--data",
                           tmp_path / "test.tsv", "--limit", 20, "--json").stdout)
    assert alone["accuracy"] == pytest.approx(float_run)
