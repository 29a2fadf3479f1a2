"""Task metrics of an exported file: :func:`evaluate_artifact` runs a ``.tflite`` / ``.onnx`` on labelled data,
read as its app reads it; docs/evaluate.md says what comes from the file and how each task is scored.
TensorFlow-free (``tests/evaluation/test_artifact_metrics.py`` checks it).
"""

import tempfile
from pathlib import Path

import numpy as np
from rich.table import Table

from mobilebert_kit.artifacts.carried_tokenizer import carried_tokenizer
from mobilebert_kit.artifacts.client_metadata import packed_disagreements, read_with_client_metadata
from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.artifacts.metadata import in_graph_length, parse_mbk_metadata, planned_length
from mobilebert_kit.artifacts.metadata_schema import PACKED_AS, TFLITE_METADATA
from mobilebert_kit.artifacts.runner import ArtifactRunner
from mobilebert_kit.convert.plan.export_tasks import TASKS as EXPORT_TASKS
from mobilebert_kit.data.text_tokenizer import TextTokenizer, check_tokenizer_fits
from mobilebert_kit.training.finetune_config import FinetuneConfig
# ArtifactEvaluation and the records live with the training code, which scores Keras models with them too.
from mobilebert_kit.training.task_scoring import (  # noqa: F401  (re-exported: this module's interface)
    DEFAULT_MIN_RATIO, TASK_METRICS, ArtifactEvaluation, compare, score, spread, task_metric,
)
from mobilebert_kit.utils.terminal import escape


class _InGraphText:
    """The "tokenizer" of a text-in ``.onnx`` (``mbk export --tokenizer-in-graph``): the file tokenizes, so the
    rows it is scored on are the texts themselves (``text``), beside a placeholder ``input_ids`` that only counts
    them."""

    def __init__(self, path):
        self.path = path

    def encode_pairs(self, texts_a, texts_b, seq_len):
        if texts_b is not None and any(b is not None for b in texts_b):
            raise ArtifactError(f"{self.path} takes one text per row (its tokenizer runs inside it), and this data "
                                "has text pairs; score a file exported without --tokenizer-in-graph")
        n = len(texts_a)
        # input_ids and attention_mask only count the rows: scoring reads the file's sentence vectors or logits.
        return {"input_ids": np.zeros((n, 1), np.int32), "attention_mask": np.ones((n, 1), np.int32),
                "text": np.asarray([str(t) for t in texts_a], dtype=object)}

    def _needs_tokens(self, *args):
        raise ArtifactError(f"{self.path} takes whole texts (its tokenizer runs inside it), and this task "
                            "needs the text's tokens; score a file exported without --tokenizer-in-graph")

    # SQuAD spans read encode first, CoNLL tags pad_id (an AttributeError reported as an internal error).
    encode = encode_words = _needs_tokens
    pad_id = property(_needs_tokens)


def _tokenizer_of(path, graph, client, meta, vocab, tokenizer):
    """The tokenizer whose ids the file's app feeds it: ``--tokenizer`` when given, else what the file carries by
    the rule ``mbk inspect`` and ``mbk profile --text`` use (``artifacts.carried_tokenizer``); a text-in file's
    own (:class:`_InGraphText`: it is fed the texts)."""
    if isinstance(meta.get("tokenizer_in_graph"), dict):
        return _InGraphText(path)
    if tokenizer is not None:
        # A tokenizer.json records its own casing (asking for the file's said "--cased was asked for", an option
        # mbk evaluate does not have); a vocab.txt takes the file's, and a mismatch is refused below by name.
        given_path = Path(tokenizer)  # a .json, or a directory holding tokenizer.json: TextTokenizer.from_file's rule
        json_file = (given_path / "tokenizer.json").is_file() if given_path.is_dir() else given_path.suffix == ".json"
        given = TextTokenizer.from_file(tokenizer, lowercase=None if json_file else meta.get("do_lower_case"))
        # Another model's larger vocabulary: the runtime's gather error, blamed on the file.
        if isinstance(meta.get("vocab_size"), int):
            check_tokenizer_fits(given, meta["vocab_size"], path)
        # Another kind's ids (a BERT vocab.txt for a RoBERTa file) fit the table and were scored without a word.
        recorded = meta.get("tokenizer_kind")
        if isinstance(recorded, str) and given.kind.name != recorded:
            raise ArtifactError(f"--tokenizer {tokenizer} is a {given.kind.name} tokenizer but {path} was exported "
                                f"from a checkpoint whose tokenizer is {recorded}; pass that checkpoint's directory")
        cased = meta.get("do_lower_case")
        if isinstance(cased, bool) and given.do_lower_case != cased:
            raise ArtifactError(f"--tokenizer {tokenizer} is {'uncased' if given.do_lower_case else 'cased'} but {path} "
                                f"was exported {'uncased' if cased else 'cased'}; pass the checkpoint's own directory")
        if FORMATS[graph.format].client_metadata and TFLITE_METADATA in graph.metadata:
            # Scored on the ids its app computes (docs/clients/README.md); a tokenizer no client runs (byte-level
            # BPE): the app feeds the checkpoint tokenizer's ids through LiteRT.
            return given.client_tokenizer() or given
        return given
    carried = carried_tokenizer(path, client, meta, vocab)
    if not carried.ready:
        raise ArtifactError(carried.missing)
    if carried.runs_as == "client":
        return TextTokenizer.from_packed(carried.tokenizer, carried.data, f"{path}'s packed {carried.file_name}")
    with tempfile.TemporaryDirectory(prefix="mbk-eval-") as tmp:
        vocab_file = Path(tmp) / "vocab.txt"
        vocab_file.write_bytes(carried.data)
        # Labelled as the file's own entry, not the temporary copy, in any message about it.
        return TextTokenizer.from_vocab(vocab_file, lowercase=carried.lowercase,
                                        label=f"the embedded {carried.file_name} of {path} (re-export it)")


def _packed_labels(path, client, meta, vocab):
    """The label names as the app reads them (the packed ``labels.txt`` of a ``.tflite`` with TFLite Metadata),
    or None; a file whose packed files disagree with the model is refused: its metric would be neither the
    app's nor the model's."""
    if client is None:
        return None
    problems = packed_disagreements(client, meta, vocab)
    if PACKED_AS.get(client.tokenizer) == "lines" and client.vocab_file not in client.packed_lines:
        problems.insert(0, f"its {client.vocab_file or 'vocabulary'} is not packed, so the app cannot tokenize")
    if problems:
        raise ArtifactError(f"{path}: {'; '.join(problems)}; the app would not run the model as exported: "
                            "re-export it")
    labels = client.packed_lines.get(client.labels_file) if client.labels_file else None
    return list(labels) if labels is not None else None


def _seq_len_of(path, runner, meta, seq_len):
    fixed = runner.seq_len or in_graph_length(meta)  # a text-in file cuts its text inside itself
    if fixed is not None:
        if seq_len and int(seq_len) != fixed:
            raise ArtifactError(f"{path} takes {fixed} tokens, not {seq_len}; drop --seq-len or re-export at {seq_len}")
        return fixed
    # A dynamic-axis file: the requested length, else the length its export planned (recorded in it).
    return planned_length(meta, requested=seq_len)


def evaluate_artifact(path, data, *, batch_size=32, limit=None, seq_len=None, tokenizer=None, fmt=None,
                      num_threads=None, text_columns=None, label_column=None):
    """Task metrics of an exported ``.tflite`` / ``.onnx`` file on labelled data, read as its app reads it.

    Args:
        path (str | os.PathLike): the file written by ``mbk export``.
        data (str | os.PathLike): labelled data in the task's format (``mbk finetune``'s for heads;
            sentence pairs with a score for embedders).
        batch_size (int): rows per run of a dynamic-batch file (static files run their own batch).
        limit (int | None): score at most this many examples, spread evenly over the file.
        seq_len (int | None): tokens per example for a dynamic-axis file (default: the length its export
            planned, else 128 within its position table); a static file takes only its own.
        tokenizer (str | os.PathLike | None): a vocab.txt / model directory for a file without an embedded vocabulary.
        fmt (str | None): ``"tflite"`` or ``"onnx"`` when the suffix does not say.
        num_threads (int | None): runtime threads.
        text_columns (list[str] | None): the table's text column(s) (default: the fine-tune's, which the
            file records, when the table has them; else GLUE's usual names).
        label_column (str | None): the table's label column (default: label, score, ...).

    Returns:
        ArtifactEvaluation: the metrics, the headline key, the task and the rows scored.

    Raises:
        ArtifactError: the file is not a readable artifact, carries no task/vocabulary/labels, its packed files
            disagree with its model, or it fails to run.
        MbkError: the data does not fit the file's task or labels.

    Example:
        >>> evaluate_artifact("clf-int8.tflite", "test.tsv", limit=200).metrics["accuracy"]  # doctest: +SKIP
        0.861
    """
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path} does not exist; pass a file written by `mbk export`")
    graph, client = read_with_client_metadata(path, fmt)
    fmt = graph.format
    meta, vocab = parse_mbk_metadata(graph.metadata, path)
    packed_labels = _packed_labels(path, client, meta, vocab)
    export_task = meta.get("task")
    if export_task not in EXPORT_TASKS:
        raise ArtifactError(f"{path} records no export task (it was not written by `mbk export`, or is a drift probe); "
                            "evaluate a file exported by `mbk export`")
    labels = list(packed_labels if packed_labels is not None else meta.get("labels") or [])
    runner = ArtifactRunner(path, num_threads=num_threads, fmt=fmt)
    canonical = EXPORT_TASKS[export_task].canonical(fmt)
    task = _task_of(export_task, labels, graph, canonical)
    windows = meta.get("squad_windows") or {}
    spec = {"model": str(path), "task": task, "seq_len": _seq_len_of(path, runner, meta, seq_len),
            "label_names": labels, "pooling": meta.get("pooling"),
            # A fine-tuned QA file's windows are its fine-tune's (task.json, recorded by the export), as for DIR.
            "doc_stride": windows.get("doc_stride", FinetuneConfig.doc_stride),
            "max_query_length": windows.get("max_query_length", FinetuneConfig.max_query_length),
            "text_columns": text_columns, "label_column": label_column,
            "recorded_columns": meta.get("table_columns") if isinstance(meta.get("table_columns"), dict) else None}
    wanted = set(task_metric(task, path).outputs)
    if runner.takes_text and "sentence_embedding" not in canonical.values() and "sequence_output" in wanted:
        raise ArtifactError(f"{path} takes text and gives token vectors without their mask, so its sentence vectors "
                            "cannot be pooled here; export it with --task embedding to score it")
    step = runner.batch_size or batch_size

    def predict(features):
        n = len(features["input_ids"])
        parts = []
        for start in range(0, n, step):
            # As the app feeds the file: a dynamic-length .tflite gets each text's own tokens, no padding.
            if runner.takes_text:
                out = runner.run_text(features["text"][start : start + step], spec["seq_len"])
            else:
                out = runner.run_as_app({k: v[start : start + step] for k, v in features.items()})
            parts.append({canonical.get(k, k): v for k, v in out.items() if canonical.get(k, k) in wanted})
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    return score(task, data, predict, _tokenizer_of(path, graph, client, meta, vocab, tokenizer), spec, limit)


def app_tokenizer(path, tokenizer=None, fmt=None):
    """The tokenizer whose ids an exported file's app feeds it (``mbk evaluate`` scores with it); ``tokenizer`` is a
    vocab.txt / model directory for a file without an embedded one. ArtifactError when the file is unreadable or
    carries no tokenizer and none is given."""
    graph, client = read_with_client_metadata(Path(path), fmt)
    meta, vocab = parse_mbk_metadata(graph.metadata, path)
    _packed_labels(path, client, meta, vocab)  # refuses packed files that disagree with the model
    if isinstance(meta.get("tokenizer_in_graph"), dict):
        raise ArtifactError(f"{path} takes text (its tokenizer runs inside it), not token ids; time or score it on "
                            "text through mbk evaluate, or export it without --tokenizer-in-graph for token ids")
    return _tokenizer_of(path, graph, client, meta, vocab, tokenizer)


def _task_of(export_task, labels, graph, canonical):
    """The task a file is scored as: its export task, except that a classification file without label names
    whose output has one column is a regression head (``mbk finetune --task regression`` records no labels)."""
    if export_task == "classification" and not labels:
        widths = [spec["shape"][-1] for spec in graph.output_specs()
                  if canonical.get(spec["name"]) in ("logits", "probabilities") and spec["shape"]]
        if widths == [1]:
            return "regression"
    return export_task


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
    for heading, justify in ((f"drop ({primary})", "right"), ("ratio", "right"), (f">= {min_ratio:g}", "center")):
        table.add_column(heading, justify=justify)
    for index, row in enumerate(rows):
        cells = [f"{row['metrics'].get(key, float('nan')):.4f}" for key in keys]
        drop = "-" if index == 0 else f"{row['drop']:+.4f}"
        ratio = "-" if index == 0 or row["ratio"] is None else f"{row['ratio']:.4f}"
        verdict = "ref" if index == 0 else ("pass" if row["passed"] else "[red]FAIL[/red]")
        table.add_row(escape(row["model"], markup=True), *cells, drop, ratio, verdict)
    return table
