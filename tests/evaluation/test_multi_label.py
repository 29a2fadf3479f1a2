"""`mbk evaluate` of a multi-label classifier (transformers' problem_type multi_label_classification): the imported
directory, its TFLite file (sigmoids) and its ONNX file (logits) scored against metrics computed here from
transformers' own logits, in both table layouts; bad tables refused in one line."""

import json

import numpy as np
import pytest

from tests.helpers import assert_one_line_error
from tests.training.test_cli import mbk

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _expected(gold, logits):
    """The metrics by their definitions, written out here rather than taken from the library."""
    predicted = logits > 0
    tp, fp, fn = (gold & predicted).sum(), (~gold & predicted).sum(), (gold & ~predicted).sum()
    per_label = [2 * (gold[:, j] & predicted[:, j]).sum() / ((gold[:, j].sum() + predicted[:, j].sum()) or 1)
                 for j in range(gold.shape[1]) if gold[:, j].any() or predicted[:, j].any()]
    return {"micro_f1": 2 * tp / (2 * tp + fp + fn), "macro_f1": float(np.mean(per_label)),
            "exact_match": float((gold == predicted).all(1).mean()),
            "label_accuracy": float((gold == predicted).mean())}


@pytest.fixture(scope="module")
def multi_label(tmp_path_factory):
    from mobilebert_kit.cli.main import main
    from mobilebert_kit.convert.plan.sample_text import SENTENCES
    from tests.tokenizer_fixtures import LABELS, save_checkpoint

    root = tmp_path_factory.mktemp("multi_label")
    model = save_checkpoint("bert", root / "hf", seed=5, problem_type="multi_label_classification")
    assert main(["import", str(root / "hf"), "--out", str(root / "saved")]) == 0
    for fmt in ("tflite", "onnx"):
        assert main(["export", str(root / "saved"), "--format", fmt, "--seq-len", "32",
                     "--out", str(root / f"m.{fmt}")]) == 0
    # ASCII sentences: a .tflite is scored with its app's tokenizer, which keeps accents the checkpoint's strips.
    texts = [text for text in SENTENCES if text.isascii()][:12]
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(root / "hf"))
    with torch.no_grad():
        logits = np.concatenate([model(**tokenizer(text, truncation=True, max_length=32, return_tensors="pt"))
                                 .logits.numpy() for text in texts])
    gold = np.random.default_rng(0).random(logits.shape) < 0.5
    return {"root": root, "texts": texts, "labels": LABELS, "logits": logits, "gold": gold}


def _evaluate(capsys, case, data, *extra, check=True):
    root = case["root"]
    models = [root / "saved", root / "m.tflite", root / "m.onnx"]
    return mbk(capsys, "evaluate", *[a for m in models for a in ("--model", m)], "--data", data, "--seq-len", 32,
               "--json", *extra, check=check)


def test_directory_tflite_and_onnx_score_as_transformers_logits(multi_label, capsys, tmp_path):
    case = multi_label
    # The decisions scored are not coin flips at the threshold: each logit is clear of 0 by more than float error.
    assert np.abs(case["logits"]).min() > 1e-4
    expected = _expected(case["gold"], case["logits"])
    lists = tmp_path / "lists.jsonl"  # one column listing each row's labels (names; an empty list is no label)
    lists.write_text("".join(json.dumps({"text": text, "labels": [case["labels"][j] for j in np.flatnonzero(row)]})
                             + "\n" for text, row in zip(case["texts"], case["gold"])))
    columns = tmp_path / "columns.csv"  # one 0/1 column per label (Jigsaw-style)
    columns.write_text("text," + ",".join(case["labels"]) + "\n" + "".join(
        json.dumps(text) + "," + ",".join(str(int(v)) for v in row) + "\n"
        for text, row in zip(case["texts"], case["gold"])))
    for data in (lists, columns):
        result = json.loads(_evaluate(capsys, case, data).stdout)
        assert result["primary"] == "micro_f1" and result["passed"]
        for row in result["models"]:
            assert row["task"] == "multi_label_classification" and row["rows"] == len(case["texts"]), row
            for key, value in expected.items():
                assert row["metrics"][key] == pytest.approx(value, abs=1e-9), (data.name, row["model"], key)


def test_tables_that_do_not_fit_the_labels_are_refused_in_one_line(multi_label, capsys, tmp_path):
    case = multi_label
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "a film", "labels": ["negative", "joy"]}) + "\n")
    assert_one_line_error(_evaluate(capsys, case, bad, check=False), "label 'joy' (data row 1) is not one of the "
                                                                     "model's labels: negative, neutral, positive")
    bad = tmp_path / "bad.csv"
    bad.write_text("text,negative,neutral,positive\na film,1,maybe,0\n")
    assert_one_line_error(_evaluate(capsys, case, bad, check=False), "the 'neutral' column of data row 1 is "
                                                                     '"maybe"; give every row 0 or 1')
    # One label's 0/1 column missing (or spelt otherwise) was refused as "no label column (none of label, ...)".
    bad.write_text("text,Negative,neutral,positive\na film,1,0,0\n")
    assert_one_line_error(_evaluate(capsys, case, bad, check=False), "has 0/1 columns for neutral, positive but none "
                                                                     "for negative; give one column per label")
