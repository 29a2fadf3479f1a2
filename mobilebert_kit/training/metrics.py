"""Evaluation metrics of the fine-tuning tasks, in plain numpy (which task reports which: docs/distillation.md,
"Fine-tuning"); SQuAD's after the official answer normalisation.
"""

import collections
import re
import string

import numpy as np


def accuracy(labels, predictions):
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float((labels == predictions).mean()) if labels.size else float("nan")


def f1_binary(labels, predictions, positive=1):
    """F1 of the positive class (GLUE's F1 for MRPC and QQP)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    tp = float(((predictions == positive) & (labels == positive)).sum())
    fp = float(((predictions == positive) & (labels != positive)).sum())
    fn = float(((predictions != positive) & (labels == positive)).sum())
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def f1_macro(labels, predictions):
    """Unweighted mean of the per-class F1 over the classes present in labels or predictions."""
    classes = sorted(set(np.asarray(labels).tolist()) | set(np.asarray(predictions).tolist()))
    return float(np.mean([f1_binary(labels, predictions, positive=c) for c in classes])) if classes else 0.0


def matthews_corrcoef(labels, predictions):
    """Matthews correlation for any number of classes (Gorodkin's R_K); 0 when undefined."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes = sorted(set(labels.tolist()) | set(predictions.tolist()))
    index = {c: i for i, c in enumerate(classes)}
    confusion = np.zeros((len(classes), len(classes)), np.float64)
    for truth, guess in zip(labels.tolist(), predictions.tolist()):
        confusion[index[truth], index[guess]] += 1
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    c, s = np.trace(confusion), confusion.sum()
    denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return float((c * s - t @ p) / denominator) if denominator else 0.0


def multi_label_metrics(labels, predictions):
    """Metrics of a multi-label classifier from ``[n, labels]`` 0/1 arrays (gold, predicted): micro F1 over every
    (row, label) decision, macro F1 over the labels present in the gold or the predictions (as :func:`f1_macro`),
    exact match (rows with every label right) and label accuracy (decisions right).

    Example:
        >>> multi_label_metrics([[1, 0], [1, 1]], [[1, 0], [0, 1]])["micro_f1"]
        0.8
    """
    labels, predictions = np.asarray(labels, bool), np.asarray(predictions, bool)
    present = np.flatnonzero(labels.any(0) | predictions.any(0))
    return {"micro_f1": f1_binary(labels.reshape(-1), predictions.reshape(-1), positive=True),
            "macro_f1": float(np.mean([f1_binary(labels[:, j], predictions[:, j], positive=True) for j in present]))
            if present.size else 0.0,
            "exact_match": float((labels == predictions).all(1).mean()) if labels.size else float("nan"),
            "label_accuracy": accuracy(labels, predictions)}


def pearson(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator else 0.0


def _ranks(values):
    """Ranks starting at 1, ties sharing their average rank (the scorers refuse non-finite values first)."""
    _, group, counts = np.unique(np.asarray(values, np.float64), return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # the rank of each group's last member
    return (last - (counts - 1) / 2.0)[group.reshape(-1)]


def spearman(x, y):
    """Pearson correlation of the ranks (average ranks for ties)."""
    return pearson(_ranks(x), _ranks(y))


def classification_metrics(labels, predictions, num_labels):
    """accuracy, Matthews correlation, and F1 (binary F1 of class 1 for two classes, else macro F1)."""
    out = {"accuracy": accuracy(labels, predictions), "matthews_corrcoef": matthews_corrcoef(labels, predictions)}
    out["f1"] = f1_binary(labels, predictions) if num_labels == 2 else f1_macro(labels, predictions)
    return out


def regression_metrics(labels, predictions):
    return {"pearson": pearson(labels, predictions), "spearman": spearman(labels, predictions),
            "mse": float(np.mean((np.asarray(labels) - np.asarray(predictions)) ** 2))}


# --- SQuAD (the official evaluate-v1.1 / v2.0 normalisation) ---
def normalize_answer(text):
    """Lower case, drop punctuation, articles (a, an, the) and extra whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def squad_exact(prediction, truth):
    return float(normalize_answer(prediction) == normalize_answer(truth))


def squad_f1(prediction, truth):
    pred, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    if not pred or not gold:
        return float(pred == gold)  # SQuAD 2.0: both empty (no answer) is a match
    common = collections.Counter(pred) & collections.Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def squad_metrics(predictions, answers):
    """``{"exact_match", "f1"}`` in percent of ``predictions`` (``{question id: text}``, "" for no answer), each
    the max over the gold ``answers`` (``{question id: [texts]}``, [] when unanswerable), averaged over questions."""
    exact = f1 = 0.0
    for qid, golds in answers.items():
        golds = golds or [""]
        prediction = predictions.get(qid, "")
        exact += max(squad_exact(prediction, g) for g in golds)
        f1 += max(squad_f1(prediction, g) for g in golds)
    n = max(len(answers), 1)
    return {"exact_match": 100.0 * exact / n, "f1": 100.0 * f1 / n}


# --- token classification ---
def bio_spans(tags):
    """Entity spans ``(type, start, end)`` of a BIO/IOB2 tag sequence (an I- after O or another type opens a span)."""
    spans, kind, start = [], None, 0
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, this = (tag[0], tag[2:]) if tag.startswith(("B-", "I-")) else ("O", None)
        if kind is not None and (prefix != "I" or this != kind):
            spans.append((kind, start, i))
            kind = None
        if prefix in ("B", "I") and kind is None:
            kind, start = this, i
    return spans


def token_classification_metrics(label_sequences, prediction_sequences):
    """Tag accuracy and F1: entity-level over BIO spans when tags use B-/I-, else over non-O tags."""
    flat_labels = [t for seq in label_sequences for t in seq]
    flat_predictions = [t for seq in prediction_sequences for t in seq]
    out = {"accuracy": accuracy(flat_labels, flat_predictions)}
    if any(t.startswith(("B-", "I-")) for t in flat_labels):
        gold = {(i,) + s for i, seq in enumerate(label_sequences) for s in bio_spans(seq)}
        pred = {(i,) + s for i, seq in enumerate(prediction_sequences) for s in bio_spans(seq)}
    else:
        gold = {(i, j, t) for i, seq in enumerate(label_sequences) for j, t in enumerate(seq) if t != "O"}
        pred = {(i, j, t) for i, seq in enumerate(prediction_sequences) for j, t in enumerate(seq) if t != "O"}
    tp = len(gold & pred)
    precision = tp / len(pred) if pred else 0.0
    recall = tp / len(gold) if gold else 0.0
    out.update(precision=precision, recall=recall,
               f1=2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    return out
