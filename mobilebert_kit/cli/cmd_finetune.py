"""``mbk finetune``: fine-tune an encoder on classification, regression, span QA or token classification."""

from mobilebert_kit.training.strategies import STRATEGY_HELP
from mobilebert_kit.utils.atomic import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option


def register(subparsers):
    parser = subparsers.add_parser(
        "finetune",
        help="fine-tune a (distilled) encoder on a GLUE, SQuAD or tagging task",
        description="Fine-tune an encoder with a task head: classification / regression on GLUE-style .tsv/.csv/.jsonl "
        "tables, span question answering on SQuAD v1.1/v2.0 JSON, token classification on CoNLL text or .jsonl. "
        "Writes OUT/model, OUT/task.json, the vocabulary and OUT/tensorboard (loss, learning rate, eval metrics); `mbk evaluate` reads them.",
    )
    parser.add_argument("--model", required=True, type=input_path_option("any", tree=True, or_name=True), metavar="PRESET_OR_DIR",
                        help="encoder to start from: a distilled OUT/student, a saved model, an HF checkpoint or a preset")
    parser.add_argument("--task", required=True, metavar="TASK",
                        help="classification, regression, span_qa or token_classification")
    parser.add_argument("--train", required=True, type=input_path_option("file"), metavar="FILE", help="training data")
    parser.add_argument("--eval", type=input_path_option("file"), metavar="FILE", help="evaluation data (metrics printed and stored in task.json)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (written atomically)")
    parser.add_argument("--vocab", type=input_path_option("any"), metavar="PATH", help="vocab.txt / tokenizer.json / directory (default: found in --model)")
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    parser.add_argument("--cased", action="store_true", help="cased vocabulary")
    parser.add_argument("--text-columns", metavar="A[,B]", help="text column(s) of a table (default: GLUE names)")
    parser.add_argument("--label-column", metavar="NAME", help="label column of a table (default: label/score/...)")
    parser.add_argument("--epochs", type=number_option("epochs"), default=3)
    parser.add_argument("--batch-size", type=number_option("batch_size"), default=32)
    parser.add_argument("--learning-rate", type=number_option("learning_rate"), default=5e-5)
    parser.add_argument("--warmup-proportion", type=number_option("warmup_proportion"), default=0.1)
    parser.add_argument("--optimizer", default="adamw", help="adamw or lamb (default adamw)")
    parser.add_argument("--weight-decay", type=number_option("weight_decay"), default=0.01)
    parser.add_argument("--seq-len", type=number_option("seq_len"), default=128)
    parser.add_argument("--doc-stride", type=number_option("doc_stride"), default=128, help="SQuAD window stride (default 128)")
    parser.add_argument("--max-query-length", type=number_option("max_query_length"), default=64, help="SQuAD question tokens kept (default 64)")
    parser.add_argument("--dropout", type=number_option("dropout"), default=0.1, help="dropout before the classifier (default 0.1)")
    parser.add_argument("--precision", default="float32", help="float32, mixed_float16 or mixed_bfloat16")
    parser.add_argument("--seed", type=number_option("seed"), default=0)
    parser.add_argument("--strategy", default="default", metavar="NAME",
                        help=f"tf.distribute strategy: {STRATEGY_HELP}. With multi_worker only the chief writes --out; "
                        "--batch-size is the global batch")
    parser.set_defaults(func=run)


def find_vocab(model):
    """The vocabulary next to a model: the model directory itself or its parents' (a distill run's teacher is not known)."""
    from pathlib import Path

    for directory in (Path(model), Path(model).parent):
        for name in ("tokenizer.json", "vocab.txt"):
            if (directory / name).is_file():
                return directory
    return None


def run(args):
    from mobilebert_kit.data.word_piece_tokenizer import WordPieceTokenizer
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.training.fine_tuner import FineTuner
    from mobilebert_kit.training.finetune_config import FinetuneConfig
    from mobilebert_kit.training.strategies import make_strategy, quiet_cluster_teardown

    vocab = args.vocab or find_vocab(args.model)
    if vocab is None:
        raise MbkError(f"no vocabulary found in {args.model}; pass --vocab (the vocab.txt the model was trained with)")
    tokenizer = WordPieceTokenizer.from_file(vocab, lowercase=False if args.cased else None)
    config = FinetuneConfig(
        task=args.task, epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
        warmup_proportion=args.warmup_proportion, optimizer=args.optimizer, weight_decay=args.weight_decay,
        seq_len=args.seq_len, doc_stride=args.doc_stride, max_query_length=args.max_query_length,
        dropout=args.dropout, precision=args.precision, seed=args.seed,
    )
    columns = args.text_columns.split(",") if args.text_columns else None
    strategy = make_strategy(args.strategy)  # before TensorFlow runs anything (collective ops)
    tuner = FineTuner(args.model, tokenizer, config, text_columns=columns, label_column=args.label_column,
                      strategy=strategy)
    tuner.train(args.train, args.out, eval_path=args.eval, overwrite=args.overwrite)
    quiet_cluster_teardown(strategy)
    return 0
