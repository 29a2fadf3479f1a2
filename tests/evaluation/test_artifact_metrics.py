"""Task metrics of exported files: each head in both formats scored like its Keras model, TF-free, one-line errors."""

import subprocess
import sys

import numpy as np
import pytest

from mobilebert_kit.errors import MbkError
from mobilebert_kit.evaluation.artifact_metrics import TASK_METRICS, evaluate_artifact, spread
from tests.evaluation.conftest import SEQ

_slow = pytest.mark.slow
# Each head in each format; the default tier keeps one file per head and both formats of the classifier.
HEADS = [("classification", "tflite"), ("classification", "onnx"), ("regression", "tflite"), ("regression", "onnx"),
         ("token_classification", "onnx"), ("span_qa", "tflite"),
         pytest.param("token_classification", "tflite", marks=_slow), pytest.param("span_qa", "onnx", marks=_slow)]


def keras_evaluation(task_models, task, data):
    import json

    from mobilebert_kit.data.word_piece_tokenizer import WordPieceTokenizer
    from mobilebert_kit.models.api import load
    from mobilebert_kit.training.fine_tuner import model_evaluation

    directory = task_models[task]
    spec = json.loads((directory / "task.json").read_text())
    return model_evaluation(load(directory / "model"), spec, WordPieceTokenizer(directory / "vocab.txt"), data)


@pytest.mark.parametrize("task, fmt", HEADS)
def test_a_float_export_scores_as_its_keras_model(task_models, exported, task, fmt):
    data = task_models["data"][task]
    # A dynamic-axis ONNX file does not record the length it was fine-tuned at: pass it, as a user would.
    ours = evaluate_artifact(exported[task, fmt], data, batch_size=7, seq_len=SEQ if fmt == "onnx" else None)
    reference = keras_evaluation(task_models, task, data)
    assert (ours.task, ours.primary, ours.rows) == (reference.task, reference.primary, reference.rows)
    assert ours.primary == TASK_METRICS[task].primary and ours.primary in ours.metrics
    assert ours.metrics == pytest.approx(reference.metrics, abs=1e-4)


def test_an_embedding_export_scores_pairs_by_the_cosine_of_its_keras_vectors(task_models, exported):
    from mobilebert_kit.data.word_piece_tokenizer import WordPieceTokenizer
    from mobilebert_kit.models.api import load
    from mobilebert_kit.training import metrics, task_data

    data = task_models["data"]["embedding"]
    ours = evaluate_artifact(exported["embedding", "tflite"], data)
    rows = task_data.read_table(data)
    tokenizer = WordPieceTokenizer(task_models["classification"] / "vocab.txt")
    encoder = load(task_models["classification"] / "model").encoder
    vectors = []
    for column in ("sentence1", "sentence2"):
        features = task_data.sequence_features(tokenizer, [r[column] for r in rows], None, SEQ)
        hidden = encoder(features, training=False)["sequence_output"].numpy()
        mask = features["attention_mask"][..., None]
        vectors.append((hidden * mask).sum(1) / mask.sum(1))
    a, b = vectors
    cosine = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    gold = [float(r["label"]) for r in rows]
    assert (ours.task, ours.primary, ours.rows) == ("embedding", "spearman", len(rows))
    assert ours.metrics["spearman"] == pytest.approx(metrics.spearman(cosine, gold), abs=1e-4)


def test_evaluating_tflite_and_onnx_files_loads_no_tensorflow(task_models, exported):
    files = [exported["classification", "tflite"], exported["classification", "onnx"]]
    code = (
        "import sys\n"
        "from mobilebert_kit.evaluation.artifact_metrics import evaluate_artifact\n"
        f"for path in {[str(f) for f in files]!r}:\n"
        f"    print('ACCURACY', evaluate_artifact(path, {str(task_models['data']['classification'])!r}).metrics['accuracy'])\n"
        "print('IMPORTED', sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'tf_keras', 'keras')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ACCURACY") == 2 and "IMPORTED []" in done.stdout, done.stdout


def test_limit_spreads_rows_over_the_file():
    assert spread(10, None).tolist() == list(range(10)) and spread(3, 5).tolist() == [0, 1, 2]
    assert spread(100, 4).tolist() == [0, 25, 50, 75]  # a label-sorted file still gives every class


@pytest.mark.slow
def test_a_file_without_vocabulary_takes_tokenizer(task_models, exported, tmp_path):
    from mobilebert_kit.convert.exporter import ExportOptions, export

    out = tmp_path / "novocab.onnx"
    export(ExportOptions(str(task_models["classification"] / "model"), "onnx", "none", out=str(out), seq_len=SEQ,
                         validate=False, embed_vocab=False), log=None)
    data = task_models["data"]["classification"]
    with pytest.raises(MbkError, match="carries no vocabulary.*--tokenizer"):
        evaluate_artifact(out, data)
    with_vocab = evaluate_artifact(exported["classification", "onnx"], data, seq_len=SEQ)
    given = evaluate_artifact(out, data, seq_len=SEQ, tokenizer=task_models["classification"] / "vocab.txt")
    assert given.metrics == pytest.approx(with_vocab.metrics)


def test_an_undefined_correlation_is_refused_not_reported_as_zero(task_models, exported, tmp_path):
    # Every pair with the same cosine (an embedder whose vectors ignore the text, e.g. at --seq-len 2) or the same
    # gold score made Spearman's denominator 0, which metrics.pearson reports as 0.0: "spearman 0.0000".
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.training.task_scoring import Prepared, _score_pairs

    data = tmp_path / "same.tsv"
    lines = task_models["data"]["embedding"].read_text().splitlines()
    data.write_text("\n".join([lines[0]] + [line.rsplit("\t", 1)[0] + "\t0.5" for line in lines[1:]]) + "\n")
    with pytest.raises(MbkError, match="every pair's similarity score in the data is 0.5"):
        evaluate_artifact(exported["embedding", "tflite"], data)
    constant = {"sentence_embedding": np.ones((6, 4))}
    prepared = Prepared({"attention_mask": np.ones((6, 3))}, 3, np.array([0.1, 0.5, 0.9]))
    with pytest.raises(MbkError, match=r"gives every pair the same cosine \(1.0000\)"):
        _score_pairs(constant, prepared, {"model": "m.onnx"})
    varied = {"sentence_embedding": np.array([[1, 0], [1, 0], [1, 0], [0, 1], [1, 1], [1, 0]], np.float64)}
    assert _score_pairs(varied, prepared, {})["spearman"] == pytest.approx(1.0)


@pytest.mark.parametrize("labels, predicted, problem", [
    ([2.0, 2.0, 2.0], [0.1, 0.5, 0.9], "every row's label in the data is 2"),
    ([0.1, 0.5, 0.9], [0.3, 0.3, 0.3], "gives every row the same value (0.3000)"),
    ([0.1, 0.9], [0.2, 0.4], "2 row(s) cannot measure a correlation"),
])
def test_an_undefined_regression_correlation_is_refused(labels, predicted, problem):
    # Constant labels scored "pearson 0.0000", which then met auto's budget of 99% of a float 0.0; two rows
    # always correlate perfectly.
    import re

    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.training.task_scoring import Prepared, _score_regression

    prepared = Prepared({}, len(labels), np.array(labels))
    with pytest.raises(MbkError, match=re.escape(problem)):
        _score_regression({"logits": np.array(predicted)[:, None]}, prepared, {"model": "m.onnx"})
    fine = _score_regression({"logits": np.array([[0.2], [0.4], [0.1]])}, Prepared({}, 3, np.array([1.0, 2.0, 0.5])), {})
    assert fine["pearson"] > 0.9
