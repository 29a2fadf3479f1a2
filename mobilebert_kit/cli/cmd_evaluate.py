"""``mbk evaluate``: metrics of a fine-tuned model on labelled data."""

from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option


def register(subparsers):
    parser = subparsers.add_parser(
        "evaluate",
        help="evaluate a fine-tuned model (accuracy, F1, Matthews, Pearson/Spearman, SQuAD EM/F1)",
        description="Evaluate a directory written by `mbk finetune` on labelled data in the same format as its "
        "training data. Classification: accuracy, F1, Matthews correlation; regression: Pearson, Spearman, MSE; "
        "span_qa: SQuAD exact match and F1; token_classification: accuracy and entity-level F1.",
    )
    parser.add_argument("--model", required=True, type=input_path_option("dir", tree=True), metavar="DIR", help="output directory of `mbk finetune`")
    parser.add_argument("--data", required=True, type=input_path_option("file"), metavar="FILE", help="labelled evaluation data")
    parser.add_argument("--batch-size", type=number_option("batch_size"), default=32)
    parser.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    parser.set_defaults(func=run)


def run(args):
    import json

    from mobilebert_kit.training.fine_tuner import evaluate_directory

    results = evaluate_directory(args.model, args.data, args.batch_size)
    if args.json:
        print(json.dumps(results, sort_keys=True))
    else:
        for key, value in results.items():
            print(f"{key:>20s}  {value:.4f}")
    return 0
