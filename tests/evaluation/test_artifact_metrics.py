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
HEADS = [("classification", "tflite"), ("classification", "onnx"), ("regression", "onnx"),
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
