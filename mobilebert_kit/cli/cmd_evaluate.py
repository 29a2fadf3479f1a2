"""``mbk evaluate``: task metrics of a fine-tuned model directory or an exported file, alone or side by side."""

import json
from pathlib import Path

from mobilebert_kit.artifacts.formats import BATCH_SIZE, SEQ_LEN
from mobilebert_kit.convert.plan.export_options import EVALUATE_LIMITS
from mobilebert_kit.errors import DataError, MbkError, TrainingError
from mobilebert_kit.training.task_scoring import DEFAULT_MIN_RATIO
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option
from mobilebert_kit.utils.terminal import escape


def register(subparsers):
    parser = subparsers.add_parser(
        "evaluate",
        help="task metrics of a fine-tuned model or an exported .tflite/.onnx file (accuracy, F1, Pearson, EM/F1)",
        description="Evaluate a directory written by `mbk finetune`, or a .tflite/.onnx file written by `mbk export` "
        "(run with its own vocabulary, labels and sequence length), on labelled data in the same format as "
        "`mbk finetune`'s training data. Classification: accuracy, F1, Matthews correlation; regression: Pearson, "
        "Spearman, MSE; multi_label_classification (a table with one 0/1 column per label, or a label column "
        "listing each row's labels): micro and macro F1, exact match, label accuracy; span_qa: SQuAD exact match "
        "and F1; token_classification: accuracy and entity-level F1; "
        "embedding/features files: Spearman correlation of the pairs' cosine with their score on a "
        "sentence1/sentence2/label table. Several --model give one table, each against the first (the float model), "
        "with pass/fail by MLPerf Mobile's rule (quantized >= 99% of float); the exit status is 1 when one fails.",
    )
    parser.add_argument("--model", required=True, action="append", type=input_path_option("any", tree=True),
                        metavar="DIR|FILE", help="`mbk finetune` output directory (or a saved task model with labels.txt and "
                        "vocab.txt, such as `mbk substitute` of one), or a .tflite/.onnx file; repeat to compare (the "
                        "first is the reference)")
    parser.add_argument("--data", required=True, type=input_path_option("file"), metavar="FILE", help="labelled evaluation data")
    parser.add_argument("--batch-size", type=number_option(BATCH_SIZE), default=32)
    parser.add_argument("--limit", type=number_option(EVALUATE_LIMITS["limit"]), metavar="N",
                        help="score N examples spread evenly over the file (quick runs)")
    parser.add_argument("--seq-len", type=number_option(SEQ_LEN), metavar="N",
                        help="tokens per example for a dynamic-axis .onnx file or a model directory (default: a directory's "
                        "task.json, a file's planned length, else 128 within the position table)")
    parser.add_argument("--tokenizer", type=input_path_option("any"), metavar="PATH",
                        help="vocab.txt or model directory for a file exported with --no-vocab")
    parser.add_argument("--text-columns", metavar="A[,B]",
                        help="text column(s) of the table (default: the fine-tune's, from the directory's task.json or "
                        "recorded in the exported file, else GLUE names)")
    parser.add_argument("--label-column", metavar="NAME",
                        help="label column of the table (default: the fine-tune's, from the directory's task.json or "
                        "recorded in the exported file, else label/score/...)")
    parser.add_argument("--min-ratio", type=number_option(EVALUATE_LIMITS["min_ratio"]), default=DEFAULT_MIN_RATIO, metavar="R",
                        help="with several --model: each must keep >= R x the first model's headline metric "
                        f"(default {DEFAULT_MIN_RATIO}, MLPerf Mobile's rule)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: the metrics (one model; a file adds task, primary, rows, model), "
                        "or {data, primary, min_ratio, passed, models: [...]} for several")
    parser.set_defaults(func=run)


def evaluate_one(path, args):
    """The ArtifactEvaluation of a finetune directory or an exported file (TensorFlow loads for a directory only)."""
    columns = {"text_columns": args.text_columns.split(",") if args.text_columns else None,
               "label_column": args.label_column}
    if Path(path).is_dir():
        from mobilebert_kit.training.fine_tuner import directory_evaluation

        return directory_evaluation(path, args.data, args.batch_size, args.limit, columns=columns, seq_len=args.seq_len)
    from mobilebert_kit.evaluation.artifact_metrics import evaluate_artifact

    return evaluate_artifact(path, args.data, batch_size=args.batch_size, limit=args.limit, seq_len=args.seq_len,
                             tokenizer=args.tokenizer, **columns)


def _named(path, args):
    """evaluate_one, whose one-line error names the --model it is about when there are several."""
    try:
        return evaluate_one(path, args)
    except MbkError as err:
        if len(args.model) < 2:
            raise
        kind = type(err) if type(err) in (DataError, TrainingError) else MbkError  # a data error stays one
        raise kind(f"--model {path}: {err}") from err


def run(args):
    from mobilebert_kit.evaluation.artifact_metrics import compare, comparison_table

    paths = [str(path) for path in args.model]
    names = [Path(p).name for p in paths]
    shown = names if len(set(names)) == len(names) else paths  # the table names files by their base name when it can
    named = [(str(path), _named(path, args)) for path in args.model]
    if len(named) == 1:
        (path, evaluation), = named
        if args.json:
            extra = {} if Path(path).is_dir() else {"model": path, "task": evaluation.task,
                                                    "primary": evaluation.primary, "rows": evaluation.rows}
            # allow_nan=False: scoring refuses a non-finite metric (task_scoring.score), so a bare NaN (no JSON) cannot
            # reach stdout; were one to, this fails instead of printing it.
            print(json.dumps({**evaluation.metrics, **extra}, sort_keys=True, allow_nan=False))  # a directory: metrics only
        else:
            for key, value in evaluation.metrics.items():
                print(f"{key:>20s}  {value:.4f}")
        return 0
    rows = compare(named, args.min_ratio)
    passed = all(row["passed"] for row in rows)
    if args.json:
        print(json.dumps({"data": str(args.data), "primary": rows[0]["primary"], "min_ratio": args.min_ratio,
                          "passed": passed, "models": rows}, sort_keys=True, allow_nan=False))
    else:
        from rich.console import Console

        table_rows = [{**row, "model": name} for row, name in zip(rows, shown)]
        title = f"{rows[0]['task']} on {escape(args.data, markup=True)}"
        Console(soft_wrap=True).print(comparison_table(table_rows, args.min_ratio, title=title))
    return 0 if passed else 1
