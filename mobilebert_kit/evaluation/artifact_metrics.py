"""Task metrics of an exported file: :func:`evaluate_artifact` runs a ``.tflite`` / ``.onnx`` on labelled data.

Output cosine against the Keras model (``mbk validate``) is not a number a user
can act on; the accuracy of the file the app ships is (issue 15: a classifier
at 86.6% float and 86.3% dynamic int8 while full int8 failed a cosine bar). The
file is read as the app reads it: its own vocabulary and casing (``mbk_vocab``
and ``mbk_metadata``, written by ``mbk export`` in both formats), its own label
names in index order, its static ``[1, seq]`` inputs (TFLite) or dynamic axes
(ONNX).

Each task is one :class:`TaskMetric` record in :data:`TASK_METRICS`: how its
data file is read, how outputs are scored (``training/metrics.py``, the one
implementation), and the headline key. The Keras side
(``training.fine_tuner.evaluate_model``, behind ``mbk evaluate DIR``) uses the
same records, so a float export and its Keras model are scored by the same code
and can only differ by what the file computes.

TensorFlow-free: numpy, the artifact floor, the tokenizer and the metric and
table readers only (``tests/evaluation/test_artifact_metrics.py`` checks it).

Example:
    >>> result = evaluate_artifact("sst2.tflite", "SST-2/dev.tsv")  # doctest: +SKIP
    >>> result.primary, round(result.metrics[result.primary], 3)  # doctest: +SKIP
    ('accuracy', 0.912)
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from rich.table import Table

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.metadata import parse_mbk_metadata
from mobilebert_kit.artifacts.reader import read_artifact
from mobilebert_kit.artifacts.runner import ArtifactRunner
from mobilebert_kit.convert.export_options import DEFAULT_SEQ_LEN
from mobilebert_kit.convert.export_tasks import TASKS as EXPORT_TASKS
from mobilebert_kit.data.word_piece_tokenizer import WordPieceTokenizer
from mobilebert_kit.errors import MbkError
from mobilebert_kit.evaluation import DEFAULT_MIN_RATIO
from mobilebert_kit.training import metrics as task_metrics
from mobilebert_kit.training import task_data
from mobilebert_kit.training.finetune_config import FinetuneConfig
from mobilebert_kit.utils.terminal import escape


@dataclass(frozen=True)
class ArtifactEvaluation:
    """The task metrics of one model on one data file.

    Args:
        metrics (dict[str, float]): every metric of the task (``accuracy``, ``f1``, ...).
        primary (str): the headline key of ``metrics``.
        task (str): the task scored (``classification``, ``regression``, ``span_qa``,
            ``token_classification``, ``embedding``).
        rows (int): examples scored (rows, questions, sentences or pairs).
        higher_is_better (bool): the direction of ``primary``.

    Example:
        >>> ArtifactEvaluation({"accuracy": 0.9}, "accuracy", "classification", 10, True).value
        0.9
    """

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
        return {"metrics": dict(self.metrics), "primary": self.primary, "task": self.task, "rows": self.rows,
                "higher_is_better": self.higher_is_better}


@dataclass
class Prepared:
    """A data file made into model inputs.

    Args:
        features (dict[str, np.ndarray]): ``input_ids`` / ``attention_mask`` / ``token_type_ids`` ``[n, seq]``.
        rows (int): examples scored (windows and pair halves count once per example).
        context (object): what the task's ``score`` needs besides the outputs (labels, windows, ...).
    """

    features: dict
    rows: int
    context: object


@dataclass(frozen=True)
class TaskMetric:
    """How one task is scored on labelled data.

    Args:
        task (str): the task name (``task.json``'s, or the export task's).
        primary (str): the headline metric key.
        data (str): the expected data file, in words (for messages and ``--help``).
        prepare (Callable): ``(path, tokenizer, spec, limit) -> Prepared``; ``spec`` holds
            ``seq_len``, ``label_names``, ``doc_stride``, ``max_query_length``, ``pooling`` and
            optionally ``text_columns`` / ``label_column`` (the keys of ``task.json``).
        score (Callable): ``(outputs, prepared, spec) -> dict[str, float]``; ``outputs`` by canonical name.
        outputs (tuple[str, ...]): the canonical outputs ``score`` may read (others are dropped while running).
        higher_is_better (bool): the direction of ``primary``.
    """

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


def _take(features, index):
    return {k: np.asarray(v)[index] for k, v in features.items()}


# ------------------------------------------------------------- classification / regression
def _prepare_sequences(task):
    def prepare(path, tokenizer, spec, limit):
        if task == "classification" and not spec.get("label_names"):
            raise MbkError(f"{spec.get('model', 'the model')} records no label names, so its outputs cannot be matched "
                           "to the labels of the data; export the `mbk finetune` output's model/ (it holds labels.txt) "
                           "or pass --labels to `mbk export`")
        features, labels, _, _ = task_data.load_sequence_task(
            path, tokenizer, spec["seq_len"], task, spec.get("text_columns"), spec.get("label_column"),
            spec.get("label_names"), need_label=True,
        )
        index = spread(len(labels), limit)
        return Prepared(_take(features, index), len(index), labels[index])

    return prepare


def _score_classification(outputs, prepared, spec):
    # TFLite classifiers output probabilities (softmax in the graph), ONNX and Keras logits: same argmax.
    scores = np.asarray(outputs["logits"] if "logits" in outputs else outputs["probabilities"], np.float32)
    names = spec["label_names"]
    if scores.shape[-1] != len(names):
        raise ArtifactError(f"{spec.get('model', 'the model')} outputs {scores.shape[-1]} classes but records "
                            f"{len(names)} label names; re-export it")
    return task_metrics.classification_metrics(prepared.context, scores.argmax(-1), len(names))


def _score_regression(outputs, prepared, spec):
    if "logits" not in outputs:
        # A TFLite classification export applies softmax: one output column reads 1.0 for every row.
        raise ArtifactError(f"{spec.get('model', 'the model')} outputs probabilities, which a one-output regression "
                            "head cannot give; export it with --format onnx to evaluate it")
    return task_metrics.regression_metrics(prepared.context, np.asarray(outputs["logits"], np.float32)[:, 0])


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
    features, _, first_piece = task_data.tagging_features(tokenizer, sentences, spec["seq_len"], spec["label_names"])
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
                                                           spec.get("label_column"), need_label=True)
    if len(text_columns) != 2:
        raise MbkError(f"{path}: an embedder is scored on sentence pairs with a similarity score (columns sentence1, "
                       f"sentence2, label); this file has the columns {', '.join(rows[0])}")
    index = spread(len(rows), limit)
    rows = [rows[i] for i in index]
    try:
        scores = np.asarray([float(r[label_column]) for r in rows], np.float64)
    except (TypeError, ValueError) as err:
        raise MbkError(f"{path}: an embedder is scored against numeric similarity labels in {label_column!r} "
                       f"({err}); give each pair a score") from err
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
    return {"spearman": task_metrics.spearman(cosine, prepared.context),
            "pearson": task_metrics.pearson(cosine, prepared.context)}


_PAIRS = "a table of sentence pairs with a similarity score (sentence1, sentence2, label)"
_SEQUENCES = "a .tsv/.csv/.jsonl table like `mbk finetune`'s (text column(s) and a label column)"

TASK_METRICS = {
    record.task: record
    for record in (
        TaskMetric("classification", "accuracy", _SEQUENCES, _prepare_sequences("classification"),
                   _score_classification, ("logits", "probabilities")),
        TaskMetric("regression", "pearson", _SEQUENCES, _prepare_sequences("regression"), _score_regression,
                   ("logits", "probabilities")),
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


def score(task, data, predict, tokenizer, spec, limit=None):
    """Scores ``predict`` (features -> canonical outputs) on ``data`` with ``task``'s record.

    The one scoring path of both sides: :func:`evaluate_artifact` (a file) and
    ``training.fine_tuner.evaluate_model`` (a Keras model).

    Args:
        task (str): the task (see :data:`TASK_METRICS`).
        data (str | os.PathLike): the labelled data file.
        predict (Callable): ``dict[str, np.ndarray] -> dict[str, np.ndarray]`` by canonical output name.
        tokenizer (WordPieceTokenizer): the model's tokenizer.
        spec (dict): ``task.json``-like settings (``seq_len``, ``label_names``, ...).
        limit (int | None): score at most this many examples, spread over the file.

    Returns:
        ArtifactEvaluation: the metrics.

    Example:
        >>> score("classification", "dev.tsv", predict, tokenizer, {"seq_len": 64, "label_names": ["neg", "pos"]})  # doctest: +SKIP
    """
    record = task_metric(task, spec.get("model", "the model"))
    prepared = record.prepare(Path(data), tokenizer, spec, limit)
    if not prepared.rows:
        raise MbkError(f"{data} holds no examples to score; give it labelled {record.data}")
    outputs = predict(prepared.features)
    return ArtifactEvaluation(record.score(outputs, prepared, spec), record.primary, record.task, prepared.rows,
                              record.higher_is_better)


# ------------------------------------------------------------- the artifact
def _tokenizer_of(path, meta, vocab, tokenizer):
    if tokenizer is not None:
        return WordPieceTokenizer.from_file(tokenizer, lowercase=meta.get("do_lower_case"))
    if not vocab:
        raise ArtifactError(f"{path} carries no vocabulary (exported with --no-vocab?); pass --tokenizer with the "
                            "model's vocab.txt or directory")
    with tempfile.TemporaryDirectory(prefix="mbk-eval-") as tmp:
        vocab_file = Path(tmp) / "vocab.txt"
        vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
        lowercase = meta.get("do_lower_case")
        return WordPieceTokenizer(vocab_file, lowercase=True if lowercase is None else bool(lowercase))


def _seq_len_of(path, runner, meta, seq_len):
    fixed = runner.seq_len
    if fixed is not None:
        if seq_len and int(seq_len) != fixed:
            raise ArtifactError(f"{path} takes {fixed} tokens, not {seq_len}; drop --seq-len or re-export at {seq_len}")
        return fixed
    # A dynamic-axis file: the requested length, else the export default within the position table.
    return int(seq_len or min(DEFAULT_SEQ_LEN, meta.get("max_seq_len") or DEFAULT_SEQ_LEN))


def evaluate_artifact(path, data, *, batch_size=32, limit=None, seq_len=None, tokenizer=None, fmt=None,
                      num_threads=None):
    """Task metrics of an exported ``.tflite`` / ``.onnx`` file on labelled data.

    The task, vocabulary, casing, label names and sequence length come from the file
    (``mbk_metadata`` / ``mbk_vocab``); nothing here imports TensorFlow.

    Args:
        path (str | os.PathLike): the file written by ``mbk export``.
        data (str | os.PathLike): labelled data in the task's format (``mbk finetune``'s for heads;
            sentence pairs with a score for embedders).
        batch_size (int): rows per run of a dynamic-batch file (static files run their own batch).
        limit (int | None): score at most this many examples, spread evenly over the file.
        seq_len (int | None): tokens per example for a dynamic-axis file (default: 128 within its
            position table); a static file takes only its own.
        tokenizer (str | os.PathLike | None): a vocab.txt / model directory for a file without an embedded vocabulary.
        fmt (str | None): ``"tflite"`` or ``"onnx"`` when the suffix does not say.
        num_threads (int | None): runtime threads.

    Returns:
        ArtifactEvaluation: the metrics, the headline key, the task and the rows scored.

    Raises:
        ArtifactError: the file is not a readable artifact, carries no task/vocabulary/labels, or fails to run.
        MbkError: the data does not fit the file's task or labels.

    Example:
        >>> evaluate_artifact("clf-int8.tflite", "test.tsv", limit=200).metrics["accuracy"]  # doctest: +SKIP
        0.861
    """
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path} does not exist; pass a file written by `mbk export`")
    graph = read_artifact(path, fmt)
    fmt = graph.format
    meta, vocab = parse_mbk_metadata(graph.metadata, path)
    export_task = meta.get("task")
    if export_task not in EXPORT_TASKS:
        raise ArtifactError(f"{path} records no export task (it was not written by `mbk export`, or is a drift probe); "
                            "evaluate a file exported by `mbk export`")
    labels = list(meta.get("labels") or [])
    runner = ArtifactRunner(path, num_threads=num_threads, fmt=fmt)
    canonical = EXPORT_TASKS[export_task].canonical(fmt)
    task = _task_of(export_task, labels, graph, canonical)
    spec = {"model": str(path), "task": task, "seq_len": _seq_len_of(path, runner, meta, seq_len),
            "label_names": labels, "pooling": meta.get("pooling"),
            "doc_stride": FinetuneConfig.doc_stride, "max_query_length": FinetuneConfig.max_query_length}
    wanted = set(task_metric(task, path).outputs)
    step = runner.batch_size or batch_size

    def predict(features):
        n = len(features["input_ids"])
        parts = []
        for start in range(0, n, step):
            out = runner.run({k: v[start : start + step] for k, v in features.items()})
            parts.append({canonical.get(k, k): v for k, v in out.items() if canonical.get(k, k) in wanted})
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    return score(task, data, predict, _tokenizer_of(path, meta, vocab, tokenizer), spec, limit)


def _task_of(export_task, labels, graph, canonical):
    """The task a file is scored as: its export task, except that a classification file without label names
    whose output has one column is a regression head (``mbk finetune --task regression`` records no labels)."""
    if export_task == "classification" and not labels:
        widths = [spec["shape"][-1] for spec in graph.output_specs()
                  if canonical.get(spec["name"]) in ("logits", "probabilities") and spec["shape"]]
        if widths == [1]:
            return "regression"
    return export_task


# ------------------------------------------------------------- several models side by side
def compare(named, min_ratio=DEFAULT_MIN_RATIO):
    """Rows of a side-by-side table: each model's headline metric, its drop and ratio against the first.

    Args:
        named (list[tuple[str, ArtifactEvaluation]]): ``(model name, evaluation)``; the first is the reference
            (the float model).
        min_ratio (float): a model passes when its metric is >= ``min_ratio`` x the reference's
            (<= ``1 / min_ratio`` x for a lower-is-better metric; >= the reference's when that is <= 0,
            where a ratio means nothing).

    Returns:
        list[dict]: per model ``model``, ``task``, ``rows``, ``primary``, ``metrics``, ``drop`` (reference
        minus this, in the metric's units; positive is worse for higher-is-better metrics), ``ratio``
        (None when the reference is <= 0) and ``passed``.

    Raises:
        MbkError: the models were scored on different tasks.

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
        if not evaluation.higher_is_better:
            passed = value <= base / min_ratio if base > 0 and min_ratio > 0 else value <= base
        else:
            passed = value >= min_ratio * base if base > 0 else value >= base
        rows.append({"model": name, "task": evaluation.task, "rows": evaluation.rows, "primary": evaluation.primary,
                     "metrics": dict(evaluation.metrics), "drop": base - value, "ratio": ratio,
                     "passed": bool(passed)})
    return rows


def comparison_table(rows, min_ratio=DEFAULT_MIN_RATIO, title=None):
    """A ``rich`` table of :func:`compare`'s rows: every metric, the headline's drop and ratio, pass/fail.

    Example:
        >>> from rich.console import Console  # doctest: +SKIP
        >>> Console().print(comparison_table(compare(named)))  # doctest: +SKIP
    """
    keys = list(rows[0]["metrics"])
    primary = rows[0]["primary"]
    table = Table(title=title)
    table.add_column("model", overflow="fold")
    for key in keys:
        table.add_column(f"{key} *" if key == primary else key, justify="right")
    table.add_column(f"drop ({primary})", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column(f">= {min_ratio:g}", justify="center")
    for index, row in enumerate(rows):
        cells = [f"{row['metrics'].get(key, float('nan')):.4f}" for key in keys]
        drop = "-" if index == 0 else f"{row['drop']:+.4f}"
        ratio = "-" if index == 0 or row["ratio"] is None else f"{row['ratio']:.4f}"
        verdict = "ref" if index == 0 else ("pass" if row["passed"] else "[red]FAIL[/red]")
        table.add_row(escape(row["model"], markup=True), *cells, drop, ratio, verdict)
    return table
