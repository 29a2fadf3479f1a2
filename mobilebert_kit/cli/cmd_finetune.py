"""``mbk finetune``: fine-tune an encoder on classification, regression, span QA or token classification."""

import os
from pathlib import Path

from mobilebert_kit.errors import DataError, TrainingError
from mobilebert_kit.training.finetune_config import TRAINING_LIMITS, FinetuneConfig
from mobilebert_kit.training.strategies import STRATEGY_HELP
from mobilebert_kit.utils.output_check import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import check_input_path, input_path_option
from mobilebert_kit.utils.limits import number_option
from mobilebert_kit.utils.run_state import RUN_FILE


# Command-line names of FinetuneConfig fields; None defaults mean "the config default, or the stored run's on
# --resume". The help's "(default ...)" is read from FinetuneConfig, the one place of the defaults.
_OPTIONS = (
    ("--epochs", "epochs", int, "passes over the training data"),
    ("--batch-size", "batch_size", int, "global batch size"),
    ("--learning-rate", "learning_rate", float, "peak learning rate"),
    ("--warmup-proportion", "warmup_proportion", float, "share of the steps warming up"),
    ("--optimizer", "optimizer", str, "adamw or lamb"),
    ("--weight-decay", "weight_decay", float, "decoupled weight decay, not on norms and biases"),
    ("--seq-len", "seq_len", int, "tokens per example"),
    ("--doc-stride", "doc_stride", int, "SQuAD window stride"),
    ("--max-query-length", "max_query_length", int, "SQuAD question tokens kept"),
    ("--dropout", "dropout", float, "dropout before the classifier"),
    ("--precision", "precision", str, "float32, mixed_float16 or mixed_bfloat16"),
    ("--seed", "seed", int, "seed of the head's initialisation, dropout and data order"),
    ("--checkpoint-every", "checkpoint_every", int,
     "steps between checkpoints in OUT/run, from which --resume continues"),
)
# The run's inputs: required unless --resume finds them in the run's record (OUT/run/run.json).
_INPUTS = (("--model", "model"), ("--task", "task"), ("--train", "train"))


def register(subparsers):
    parser = subparsers.add_parser(
        "finetune",
        help="fine-tune a (distilled) encoder on a GLUE, SQuAD or tagging task",
        description="Fine-tune an encoder with a task head: classification / regression on GLUE-style .tsv/.csv/.jsonl "
        "tables, span question answering on SQuAD v1.1/v2.0 JSON, token classification on CoNLL text or .jsonl. "
        "Writes OUT/model, OUT/task.json, the vocabulary and OUT/tensorboard (loss, learning rate, eval metrics); "
        "`mbk evaluate` reads them. While it trains, OUT/run holds checkpoints every --checkpoint-every steps; "
        "Ctrl-C checkpoints the current step and stops, and --resume continues exactly where the run stopped.",
    )
    parser.add_argument("--model", type=input_path_option("any", tree=True, or_name=True), metavar="PRESET_OR_DIR",
                        help="encoder to start from: a distilled OUT/student, a saved model, an HF checkpoint or a "
                        "preset (required unless --resume)")
    parser.add_argument("--task", metavar="TASK",
                        help="classification, regression, span_qa or token_classification (required unless --resume)")
    parser.add_argument("--train", type=input_path_option("file"), metavar="FILE",
                        help="training data (required unless --resume)")
    parser.add_argument("--eval", type=input_path_option("file"), metavar="FILE", help="evaluation data (metrics printed and stored in task.json)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (replaced when the run completes)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the interrupted run in --out from its last checkpoint (inputs and options not "
                        "given are taken from OUT/run/run.json)")
    parser.add_argument("--vocab", type=input_path_option("any"), metavar="PATH", help="vocab.txt / tokenizer.json / directory (default: found in --model)")
    parser.add_argument("--overwrite", action="store_true",
                        help=OVERWRITE_HELP + "; an interrupted run in --out is discarded and started over. What mbk "
                        "did not write is replaced only by the finished output, so such a run keeps no state to "
                        "--resume from")
    parser.add_argument("--cased", action="store_true", default=None, help="cased vocabulary")
    parser.add_argument("--text-columns", metavar="A[,B]", help="text column(s) of a table (default: GLUE names)")
    parser.add_argument("--label-column", metavar="NAME", help="label column of a table (default: label/score/...)")
    for flag, dest, kind, text in _OPTIONS:
        parser.add_argument(flag, dest=dest, type=number_option(TRAINING_LIMITS[dest]) if kind in (int, float) else kind, default=None,
                            help=f"{text} (default {getattr(FinetuneConfig, dest)})")
    parser.add_argument("--strategy", default="default", metavar="NAME",
                        help=f"tf.distribute strategy: {STRATEGY_HELP}. With multi_worker only the chief writes --out; "
                        "--batch-size is the global batch")
    parser.set_defaults(func=run)


def find_vocab(model):
    """The vocabulary next to a model: the model directory itself or its parents' (a distill run's teacher is not known)."""
    for directory in (Path(model), Path(model).parent):
        for name in ("tokenizer.json", "vocab.txt"):
            if (directory / name).is_file():
                return directory
    return None


def _stored_inputs(args):
    """On --resume, the inputs and options the command did not give, from the run's record (OUT/run/run.json).

    The record is a file on disk, so each value is checked as the command line's would be (type, and the
    paths by the same input check) before anything uses it.
    """
    from mobilebert_kit.training.finetune_run import FinetuneRun

    run = FinetuneRun(args.out)
    if not args.resume:
        return {}, {}
    run.require_interrupted()
    stored = run.read_record()
    record = f"{run.path / RUN_FILE}"
    inputs = {}
    for key, kind in (("model", "any"), ("train", "file"), ("eval", "file"), ("vocab", "any")):
        value = stored.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise run.bad_field(key, given="inputs")
        if key == "model" and not os.path.lexists(value):
            inputs[key] = value  # a preset name
        else:  # the check --model / --train / --eval / --vocab get on the command line
            inputs[key] = check_input_path(value, f"{record}'s {key}", kind, tree=key == "model")
    for key, ok in (("cased", lambda v: isinstance(v, bool)),
                    ("text_columns", lambda v: isinstance(v, list) and 0 < len(v) <= 2
                     and all(isinstance(c, str) for c in v)),
                    ("label_column", lambda v: isinstance(v, str))):
        if stored.get(key) is not None:
            if not ok(stored[key]):
                raise run.bad_field(key, given="inputs")
            inputs[key] = stored[key]
    if stored["config"].get("task") is not None:
        inputs["task"] = stored["config"]["task"]
    return inputs, stored["config"]


def run(args):
    from mobilebert_kit.data.text_tokenizer import TextTokenizer
    from mobilebert_kit.training.fine_tuner import FineTuner
    from mobilebert_kit.training.finetune_config import FinetuneConfig
    from mobilebert_kit.training.strategies import make_strategy, quiet_cluster_teardown

    stored, stored_config = _stored_inputs(args)
    given = {dest: getattr(args, dest) for _, dest, _, _ in _OPTIONS if getattr(args, dest) is not None}
    model, task, train = (getattr(args, dest) or stored.get(dest) for _, dest in _INPUTS)
    missing = [flag for (flag, _), value in zip(_INPUTS, (model, task, train)) if not value]
    if missing:
        raise TrainingError(f"missing {', '.join(missing)} (needed unless --resume finds a run in --out)")
    columns = args.text_columns.split(",") if args.text_columns else stored.get("text_columns")
    label_column = args.label_column or stored.get("label_column")
    cased = args.cased if args.cased is not None else stored.get("cased", False)
    eval_path = args.eval or stored.get("eval")
    vocab = args.vocab or stored.get("vocab") or find_vocab(model)
    if vocab is None:
        from mobilebert_kit.sources.spec import classify

        classify(model)  # a model that is neither a path nor a preset is that, not "no vocabulary found in" it
        raise DataError(f"no vocabulary found in {model}; pass --vocab (the vocab.txt the model was trained with)")
    tokenizer = TextTokenizer.from_file(vocab, lowercase=False if cased else None)
    known = {k: v for k, v in stored_config.items() if k in FinetuneConfig.__dataclass_fields__}
    config = FinetuneConfig(**{**known, **given, "task": task})
    strategy = make_strategy(args.strategy)  # before TensorFlow runs anything (collective ops)
    tuner = FineTuner(model, tokenizer, config, text_columns=columns, label_column=label_column, strategy=strategy)
    tuner.train(train, args.out, eval_path=eval_path, overwrite=args.overwrite, resume=args.resume)
    quiet_cluster_teardown(strategy)
    return 0
