"""Scoring a task model on labelled data: one record per task (data reader, scorer, headline metric).

Shared by both sides of ``mbk evaluate``: ``training.fine_tuner.model_evaluation``
(a Keras model) and ``evaluation.artifact_metrics.evaluate_artifact`` (an
exported file), so a float export and its Keras model are scored by the same
code. The metrics themselves are ``training/metrics.py``'s. TensorFlow-free.
"""

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.errors import DataError, MbkError
from mobilebert_kit.training import metrics as task_metrics
from mobilebert_kit.training import task_data

# MLPerf Mobile's accuracy rule: a quantized submission keeps >= 99% of the float model's metric.
DEFAULT_MIN_RATIO = 0.99

@dataclass(frozen=True)
class ArtifactEvaluation:
    """The task metrics of one model on one data file: ``metrics`` by name, the headline key ``primary``
    and its direction, the ``task`` scored and the examples scored (``rows``: rows, questions, sentences
    or pairs)."""

    metrics: dict
    primary: str
    task: str
    rows: int
    higher_is_better: bool = True

    @property
    def value(self):
        """The headline metric."""
        return self.metrics[self.primary]

    def to_dict(self):
        return asdict(self)


@dataclass
class Prepared:
    """A data file made into model inputs ``features`` (``[n, seq]`` each), the examples scored (``rows``)
    and what the task's ``score`` needs besides the outputs (``context``: labels, windows, ...)."""

    features: dict
    rows: int
    context: object


@dataclass(frozen=True)
class TaskMetric:
    """How one task is scored on labelled data.

    ``data`` describes the expected file in words (messages, ``--help``); ``prepare(path, tokenizer, spec,
    limit) -> Prepared`` reads it, ``spec`` holding ``task.json``'s keys; ``score(outputs, prepared, spec)``
    gives the metrics from the canonical ``outputs`` (others are dropped while running)."""

    task: str
    primary: str
    data: str
    prepare: Callable
    score: Callable
    outputs: tuple
    higher_is_better: bool = True


def spread(n, limit):
    """Indices of ``limit`` rows spread evenly over ``n`` (all of them when ``limit`` is None or >= n).

    Files are often sorted by label (the CrowdFlower sentiment set is), so the first rows of a file
    would score one class only.

    Example:
        >>> spread(10, 3).tolist()
        [0, 3, 6]
    """
    if limit is None or limit >= n:
        return np.arange(n)
    return np.arange(limit) * n // limit


# ------------------------------------------------------------- classification / regression
def _prepare_sequences(task):
    def prepare(path, tokenizer, spec, limit):
        if task == "classification" and not spec.get("label_names"):
            raise MbkError(f"{spec.get('model', 'the model')} records no label names, so its outputs cannot be matched "
                           "to the labels of the data; export a model directory holding labels.txt (the class names, one a line, "
                           "in output order), as `mbk finetune` writes in OUT/model")
        features, labels, _, _ = task_data.load_sequence_task(
            path, tokenizer, spec["seq_len"], task, spec.get("text_columns"), spec.get("label_column"),
            spec.get("label_names"), need_label=True, recorded_columns=spec.get("recorded_columns"),
        )
        index = spread(len(labels), limit)
        if task == "regression":
            _check_gold(np.asarray(labels[index], np.float64), "row's label", "value")
        return Prepared({k: np.asarray(v)[index] for k, v in features.items()}, len(index), labels[index])

    return prepare


def _label_scores(outputs, spec, probabilities, what):
    """A classifier's ``[rows, labels]`` scores: its logits (ONNX, Keras) or the ``probabilities`` output a TFLite
    file computes in its graph, one column per recorded label name (``what`` the columns are, in the message)."""
    scores = np.asarray(outputs["logits"] if "logits" in outputs else outputs[probabilities], np.float32)
    if scores.shape[-1] != len(spec["label_names"]):
        raise ArtifactError(f"{spec.get('model', 'the model')} outputs {scores.shape[-1]} {what} but records "
                            f"{len(spec['label_names'])} label names; re-export it")
    return scores


def _score_classification(outputs, prepared, spec):
    # A softmax keeps the logits' order: the same argmax either way.
    scores = _label_scores(outputs, spec, "probabilities", "classes")
    return task_metrics.classification_metrics(prepared.context, scores.argmax(-1), len(spec["label_names"]))


def _score_regression(outputs, prepared, spec):
    if "logits" not in outputs:
        # A file exported before the regression task: softmax over one column reads 1.0 for every row.
        raise ArtifactError(f"{spec.get('model', 'the model')} outputs probabilities, which a one-output regression "
                            "head cannot give; export it again (mbk export writes a regressor's raw score)")
    predicted = np.asarray(outputs["logits"], np.float32)
    if predicted.ndim != 2 or predicted.shape[1] != 1:
        # A checkpoint of several regression targets (problem_type regression) exports all its scores; scoring
        # the first against the data's one label column would report a metric of one target as the model's.
        raise ArtifactError(f"{spec.get('model', 'the model')} outputs {predicted.shape[-1]} regression scores per "
                            "row, and mbk evaluate scores one (the data's label column); evaluate such a model in "
                            "your own code, one target at a time")
    predicted = predicted[:, 0]
    _check_correlation(predicted, spec, "every row the same value")
    return task_metrics.regression_metrics(prepared.context, predicted)


# Fewer rows make any correlation +-1 (two points lie on a line): no measurement.
MIN_CORRELATION_ROWS = 3


def _check_gold(gold, each, values):
    """Refuses labels no correlation can be measured against: fewer than :data:`MIN_CORRELATION_ROWS`, or all
    equal. Checked when the data is read (``prepare``), so ``mbk finetune --eval`` refuses them before training."""
    n = len(gold)
    if n < MIN_CORRELATION_ROWS:
        raise DataError(f"{n} row(s) cannot measure a correlation; score at least {MIN_CORRELATION_ROWS} (raise --limit "
                        "or use more data)")
    if np.ptp(gold) == 0:
        raise DataError(f"every {each} in the data is {gold[0]:g}, so no correlation can be measured; score "
                        f"{values}s with varied labels")


def _check_correlation(predicted, spec, same, why=""):
    """Refuses a correlation that is undefined for the model's values (the labels passed :func:`_check_gold`),
    which ``metrics.pearson`` would report as 0 (a score that passes a budget of 99% of a float model's 0)."""
    n = len(predicted)
    broken = np.flatnonzero(~np.isfinite(predicted))
    if broken.size:  # np.ptp of a NaN is NaN, which passes the test below: the correlation came out NaN
        raise MbkError(f"{spec.get('model', 'the model')} gives {float(predicted[broken[0]])} for {broken.size} of "
                       f"{n} scored row(s), so no correlation can be measured; its outputs are not finite numbers (weights "
                       "that diverged in training, or a broken export): retrain it with a lower learning rate, or "
                       "re-export it")
    if np.ptp(predicted) < 1e-7:
        raise MbkError(f"{spec.get('model', 'the model')} gives {same} ({float(predicted[0]):.4f}), so its "
                       f"correlation with the labels is undefined{why}")


# ------------------------------------------------------------- multi-label classification
def _prepare_multi_label(path, tokenizer, spec, limit):
    names = spec.get("label_names")
    if not names:
        raise MbkError(f"{spec.get('model', 'the model')} records no label names, so its outputs cannot be matched "
                       "to the labels of the data; export it from a checkpoint whose config names its labels "
                       "(id2label) or a model directory holding labels.txt")
    rows = task_data.read_table(path)
    # One 0/1 column per label (no --label-column, and the table names every label) or one column listing them.
    per_label = spec.get("label_column") is None and bool(rows) and all(name in rows[0] for name in names)
    named = [name for name in names if rows and name in rows[0]]
    if not per_label and named and spec.get("label_column") is None and not task_data.resolve_columns(
            rows, path, spec.get("text_columns"), None, need_label=False, recorded=spec.get("recorded_columns"))[1]:
        # Some labels' 0/1 columns and no label column: one label's column is missing or spelt otherwise.
        missing = [name for name in names if name not in rows[0]]
        raise DataError(f"{path} has 0/1 columns for {', '.join(named)} but none for {', '.join(missing)}; give one "
                        f"column per label of the model ({', '.join(names)}), or a label column listing each row's "
                        "labels")
    text_columns, label_column = task_data.resolve_columns(
        rows, path, spec.get("text_columns"), spec.get("label_column"), need_label=not per_label,
        recorded=spec.get("recorded_columns"))
    gold = task_data.multi_label_targets(rows, path, names, None if per_label else label_column)
    features = task_data.table_features(tokenizer, rows, text_columns, spec["seq_len"])
    index = spread(len(rows), limit)
    return Prepared({k: np.asarray(v)[index] for k, v in features.items()}, len(index), gold[index])


def _score_multi_label(outputs, prepared, spec):
    # A label is predicted where its sigmoid exceeds 0.5, which is a logit above 0.
    scores = _label_scores(outputs, spec, "label_probabilities", "labels")
    return task_metrics.multi_label_metrics(prepared.context, scores > (0.0 if "logits" in outputs else 0.5))


# ------------------------------------------------------------- span QA
def _prepare_squad(path, tokenizer, spec, limit):
    examples = task_data.read_squad(path)
    examples = [examples[i] for i in spread(len(examples), limit)]
    features, windows = task_data.squad_features(tokenizer, examples, spec["seq_len"], spec["doc_stride"],
                                                 spec["max_query_length"], training=False)
    return Prepared(features, len(examples), (examples, windows))


def _score_squad(outputs, prepared, spec):
    examples, windows = prepared.context
    predictions = task_data.squad_predictions(examples, windows, np.asarray(outputs["start_logits"], np.float32),
                                              np.asarray(outputs["end_logits"], np.float32))
    answers = {e["id"]: ([] if e["impossible"] else [a["text"] for a in e["answers"]]) for e in examples}
    return task_metrics.squad_metrics(predictions, answers)


# ------------------------------------------------------------- token classification
def _prepare_tagged(path, tokenizer, spec, limit):
    sentences = task_data.read_tagged(path)
    sentences = [sentences[i] for i in spread(len(sentences), limit)]
    if not spec.get("label_names"):
        raise MbkError(f"{spec.get('model', 'the model')} records no tag names; export the `mbk finetune` output's "
                       "model/ (it holds labels.txt)")
    features, _, first_piece = task_data.tagging_features(tokenizer, sentences, spec["seq_len"], spec["label_names"],
                                                             path)
    return Prepared(features, len(sentences), (sentences, first_piece))


def _score_tagged(outputs, prepared, spec):
    sentences, first_piece = prepared.context
    names = spec["label_names"]
    guesses = np.asarray(outputs["logits"], np.float32).argmax(-1)
    gold, predicted = [], []
    for row, (_, tags) in enumerate(sentences):
        kept = [w for w in range(len(tags)) if w in first_piece[row]]  # words cut by truncation are not scored
        gold.append([tags[w] for w in kept])
        predicted.append([names[guesses[row, first_piece[row][w]]] for w in kept])
    return task_metrics.token_classification_metrics(gold, predicted)


# ------------------------------------------------------------- sentence embedding (text pairs)
def _prepare_pairs(path, tokenizer, spec, limit):
    rows = task_data.read_table(path)
    text_columns, label_column = task_data.resolve_columns(rows, path, spec.get("text_columns"),
                                                           spec.get("label_column"), need_label=True,
                                                           recorded=spec.get("recorded_columns"))
    if len(text_columns) != 2:
        raise DataError(f"{path}: an embedder is scored on sentence pairs with a similarity score (columns sentence1, "
                        f"sentence2, label); this file has the columns {', '.join(rows[0])}")
    # Every row's score is checked, as for regression labels (one rule, task_data.numeric_labels).
    scores = task_data.numeric_labels(path, [r[label_column] for r in rows], "similarity score",
                                      "a NaN or infinite score leaves the correlation undefined")
    index = spread(len(rows), limit)
    rows, scores = [rows[i] for i in index], scores[index]
    _check_gold(np.asarray(scores, np.float64), "pair's similarity score", "pair")
    halves = [task_data.sequence_features(tokenizer, [r[c] for r in rows], None, spec["seq_len"]) for c in text_columns]
    features = {k: np.concatenate([halves[0][k], halves[1][k]]) for k in halves[0]}
    return Prepared(features, len(rows), scores)


def _sentence_vectors(outputs, mask, pooling):
    if "sentence_embedding" in outputs:
        return np.asarray(outputs["sentence_embedding"], np.float64)
    hidden = np.asarray(outputs["sequence_output"], np.float64)
    if (pooling or {}).get("mode") == "cls":
        return hidden[:, 0]
    weights = np.asarray(mask, np.float64)[..., None]  # mean over real tokens: sentence-transformers' default
    return (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1.0)


def _score_pairs(outputs, prepared, spec):
    """Spearman correlation of the pairs' cosine with their gold score (and Pearson).

    Why Spearman: it is the STS metric of SentEval and MTEB for embedders; it compares
    rankings, so it does not depend on the range a model's cosines live in (MiniLM's
    unrelated sentences sit near 0.1, other models' near 0.5) nor on the label scale
    (0-5 STS-B, 0-1 SICK), and quantization error that keeps the order of pairs costs nothing.
    """
    vectors = _sentence_vectors(outputs, prepared.features["attention_mask"], spec.get("pooling"))
    n = prepared.rows
    a, b = vectors[:n], vectors[n:]
    cosine = (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)
    _check_correlation(cosine, spec, "every pair the same cosine", why=": its sentence vectors do not depend on the text (too short "
                       "a sequence length keeps only [CLS] and [SEP])")
    return {"spearman": task_metrics.spearman(cosine, prepared.context),
            "pearson": task_metrics.pearson(cosine, prepared.context)}


_PAIRS = "a table of sentence pairs with a similarity score (sentence1, sentence2, label)"
_SEQUENCES = "a .tsv/.csv/.jsonl table like `mbk finetune`'s (text column(s) and a label column)"
_MULTI_LABEL = ("a .tsv/.csv/.jsonl table with text column(s) and either one 0/1 column per label or a label column "
                "listing each row's labels")

TASK_METRICS = {
    record.task: record
    for record in (
        TaskMetric("classification", "accuracy", _SEQUENCES, _prepare_sequences("classification"),
                   _score_classification, ("logits", "probabilities")),
        TaskMetric("regression", "pearson", _SEQUENCES, _prepare_sequences("regression"), _score_regression,
                   ("logits", "probabilities")),
        TaskMetric("multi_label_classification", "micro_f1", _MULTI_LABEL, _prepare_multi_label,
                   _score_multi_label, ("logits", "label_probabilities")),
        TaskMetric("span_qa", "f1", "SQuAD v1.1/v2.0 JSON", _prepare_squad, _score_squad,
                   ("start_logits", "end_logits")),
        TaskMetric("token_classification", "f1", "CoNLL text (token ... tag) or .jsonl with tokens and tags",
                   _prepare_tagged, _score_tagged, ("logits",)),
        TaskMetric("embedding", "spearman", _PAIRS, _prepare_pairs, _score_pairs,
                   ("sentence_embedding", "sequence_output")),
    )
}
# Export tasks scored as another task: a features file is an embedder once its hidden states are pooled.
_SCORED_AS = {"features": "embedding"}


def task_metric(task, model="the model"):
    """The :class:`TaskMetric` of ``task`` (a fine-tuning or export task); a one-line error for others.

    Example:
        >>> task_metric("features").primary
        'spearman'
    """
    record = TASK_METRICS.get(_SCORED_AS.get(task, task))
    if record is None:
        raise ArtifactError(f"{model} is a {task!r} model, which has no task metric; evaluate a file exported for "
                            f"one of: {', '.join(sorted(set(TASK_METRICS) | set(_SCORED_AS)))}")
    return record


def prepare(task, data, tokenizer, spec, limit=None):
    """``data`` read and tokenized for scoring with ``task``'s record: a bad or empty file is refused here.

    ``mbk finetune --eval`` calls it before training, so a bad evaluation file is found at the start and the
    file is read once (:func:`score` takes the result)."""
    record = task_metric(task, spec.get("model", "the model"))
    prepared = record.prepare(Path(data), tokenizer, spec, limit)
    if not prepared.rows:
        raise DataError(f"{data} holds no examples to score; give it labelled {record.data}")
    return prepared


def score(task, data, predict, tokenizer, spec, limit=None, prepared=None):
    """Scores ``predict`` (features -> canonical outputs) on ``data`` with ``task``'s record.

    The one scoring path of both sides (a file, a Keras model). ``spec`` holds ``task.json``'s settings,
    ``limit`` caps the examples (spread over the file), ``prepared`` is ``data`` already read by :func:`prepare`."""
    record = task_metric(task, spec.get("model", "the model"))
    if prepared is None:
        prepared = prepare(task, data, tokenizer, spec, limit)
    metrics = record.score(predict(prepared.features), prepared, spec)
    # A NaN metric compares false with every budget and is no JSON: every caller gets a number or this error.
    undefined = [key for key, value in metrics.items() if not np.isfinite(value)]
    if undefined:
        raise MbkError(f"{spec.get('model', 'the model')}'s {undefined[0]} on {data} is {metrics[undefined[0]]} "
                       "(not a finite number: the model's outputs are not finite, or too large); retrain or re-export the model")
    return ArtifactEvaluation(metrics, record.primary, record.task, prepared.rows, record.higher_is_better)


# ------------------------------------------------------------- several models side by side
def compare(named, min_ratio=DEFAULT_MIN_RATIO):
    """Rows of a side-by-side table: each model's headline metric, its drop and ratio against the first.

    ``named`` is ``[(model name, ArtifactEvaluation)]``, the first the reference (the float model). A model
    passes when its metric is >= ``min_ratio`` x the reference's (<= ``1 / min_ratio`` x when lower is
    better; >= the reference's when that is <= 0, where a ratio means nothing). Each row holds ``model``,
    ``task``, ``rows``, ``primary``, ``metrics``, ``drop`` (reference minus this), ``ratio`` (None when the
    reference is <= 0 or it overflows) and ``passed``; models of different tasks are an MbkError.

    Example:
        >>> a = ArtifactEvaluation({"accuracy": 0.90}, "accuracy", "classification", 100)
        >>> b = ArtifactEvaluation({"accuracy": 0.80}, "accuracy", "classification", 100)
        >>> [row["passed"] for row in compare([("float", a), ("int8", b)])]
        [True, False]
    """
    reference_name, reference = named[0]
    rows = []
    for name, evaluation in named:
        if (evaluation.task, evaluation.primary) != (reference.task, reference.primary):
            raise MbkError(f"{name} is a {evaluation.task} model but {reference_name} is a {reference.task} model; "
                           "compare models of one task")
        value, base = evaluation.value, reference.value
        ratio = value / base if base > 0 else None
        if ratio is not None and not np.isfinite(ratio):  # a reference of 1e-320 overflows: no ratio, as for 0
            ratio = None
        if not evaluation.higher_is_better:
            passed = value <= base / min_ratio if base > 0 and min_ratio > 0 else value <= base
        else:
            passed = value >= min_ratio * base if base > 0 else value >= base
        rows.append({"model": name, "task": evaluation.task, "rows": evaluation.rows, "primary": evaluation.primary,
                     "metrics": dict(evaluation.metrics), "drop": base - value, "ratio": ratio,
                     "passed": bool(passed)})
    return rows
