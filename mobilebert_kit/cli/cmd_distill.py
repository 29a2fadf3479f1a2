"""``mbk distill``: progressive knowledge transfer and pre-training distillation of a student."""

import json
from pathlib import Path

from mobilebert_kit.errors import ConfigError, TrainingError
from mobilebert_kit.training.finetune_config import TRAINING_LIMITS
from mobilebert_kit.training.strategies import STRATEGY_HELP
from mobilebert_kit.utils.output_check import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option

# Command-line names of DistillConfig fields; None defaults mean "the config default, or the stored run's on --resume".
_OPTIONS = (
    ("--schedule", "schedule", str, "progressive (one stage per layer), end_to_end (all layers at once) or none"),
    ("--layer-steps", "layer_steps", int, "steps per progressive stage (default 1000)"),
    ("--pd-steps", "pd_steps", int, "pre-training distillation steps after the transfer (default 0)"),
    ("--batch-size", "batch_size", int, "global batch size (default 32)"),
    ("--learning-rate", "learning_rate", float, "peak learning rate of every stage (default 1e-3)"),
    ("--pd-learning-rate", "pd_learning_rate", float, "peak rate of pre-training distillation (default: --learning-rate)"),
    ("--warmup-proportion", "warmup_proportion", float, "share of each stage warming up (default 0.1)"),
    ("--decay", "decay", str, "linear, cosine or constant after warm-up (default linear)"),
    ("--lower-layer-lr-multiplier", "lower_layer_lr_multiplier", float,
     "learning-rate multiplier of the layers below the current stage; 0 freezes them (default 0)"),
    ("--optimizer", "optimizer", str, "lamb or adamw (default lamb)"),
    ("--weight-decay", "weight_decay", float, "decoupled weight decay, not on norms and biases (default 0.01)"),
    ("--clip-norm", "clip_norm", float, "global gradient-norm clipping (default 1.0)"),
    ("--alpha", "alpha", float, "MLM vs MLM-KD balance of Eq. 5 (default 0.5)"),
    ("--precision", "precision", str, "float32, mixed_float16 or mixed_bfloat16 (default float32)"),
    ("--seed", "seed", int, "seed of initialisation and data order (default 0)"),
    ("--shuffle-buffer", "shuffle_buffer", int, "records in the data shuffle buffer (default 1000)"),
    ("--checkpoint-every", "checkpoint_every", int, "steps between checkpoints (default 500)"),
    ("--keep-checkpoints", "keep_checkpoints", int, "checkpoints kept (default 3)"),
    ("--log-every", "log_every", int, "steps between progress and TensorBoard updates (default 10)"),
    ("--jit-compile", "jit_compile", str, "XLA-compile the steps: on, off, or auto (on for stages of 100 steps or "
     "more, where the compile time pays off, but not for mixed_bfloat16 without a GPU or TPU: XLA's CPU backend "
     "does not use bf16 instructions; default)"),
    ("--teacher-cache", "teacher_cache", str, "compute the frozen teacher's outputs once per example and reuse them "
     "in every layer-transfer step: on, off, or auto (on when the run would repeat the teacher's work at least "
     "twice and the cache fits in half the free disk; default)"),
)


def register(subparsers):
    parser = subparsers.add_parser(
        "distill",
        help="distil a teacher into a student: progressive transfer, then pre-training distillation",
        description="MobileBERT's training (Sun et al., 2020, Sec. 3): one stage per layer, bottom to top, "
        "minimising feature-map, mean/variance and attention transfer losses (weights 100/5000/5/1), then "
        "alpha*MLM + (1-alpha)*MLM-KD + NSP. Teacher and student need equal hidden size, layers and heads. "
        "Checkpoints every --checkpoint-every steps and at every stage boundary; Ctrl-C saves and stops; "
        "--resume continues exactly where the run stopped. The distilled encoder is written to OUT/student.",
    )
    parser.add_argument("--teacher", type=input_path_option("any", tree=True, or_name=True), metavar="DIR", help="teacher checkpoint (HF directory, TF1 checkpoint or mbk saved model)")
    parser.add_argument("--student", type=input_path_option("any", tree=True, or_name=True), metavar="PRESET_OR_DIR", help="student preset (see `mbk presets`) or saved model")
    parser.add_argument("--data", type=input_path_option("dir", tree=True), metavar="DIR", help="pre-training data from `mbk pretraining-data`")
    parser.add_argument("--out", required=True, metavar="DIR", help="run directory (checkpoints, logs, student/)")
    parser.add_argument("--overwrite", action="store_true",
                        help=OVERWRITE_HELP + "; an earlier run in --out is discarded and started over")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out (options not given are taken from its run.json)")
    parser.add_argument("--student-override", action="append", default=[], metavar="KEY=VALUE",
                        help="Encoder option replacing the student preset's, e.g. num_layers=6 (repeatable)")
    parser.add_argument("--weights", metavar="K=V,...",
                        help="transfer loss weights, e.g. attention=1,feature_map=100,mean=5000,variance=5")
    parser.add_argument("--no-copy-from-teacher", dest="copy_from_teacher", action="store_const", const=False,
                        default=None, help="do not start embeddings and MLM/NSP heads from the teacher's")
    parser.add_argument("--strategy", default="default", metavar="NAME",
                        help=f"tf.distribute strategy: {STRATEGY_HELP}. With multi_worker only the chief writes --out; "
                        "--batch-size is the global batch")
    for flag, dest, kind, text in _OPTIONS:
        parser.add_argument(flag, dest=dest, type=number_option(TRAINING_LIMITS[dest]) if kind in (int, float) else kind, default=None,
                            help=text)
    parser.set_defaults(func=run)


def _parse_pairs(items, what):
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{what} {item!r} must look like KEY=VALUE")
        try:
            out[key.strip()] = json.loads(value)
        except RecursionError as err:
            raise ConfigError(f"{what} {key.strip()} nests too deeply; pass a plain value") from err
        except ValueError:
            out[key.strip()] = value
    return out


def run(args):
    from mobilebert_kit.training.distill_config import DistillConfig
    from mobilebert_kit.training.distiller import RUN_FILE, Distiller
    from mobilebert_kit.training.run_directory import RunDirectory
    from mobilebert_kit.training.strategies import make_strategy, quiet_cluster_teardown

    given = {dest: getattr(args, dest) for _, dest, _, _ in _OPTIONS if getattr(args, dest) is not None}
    if args.weights:
        weights = _parse_pairs(args.weights.split(","), "--weights")
        bad = [k for k, v in weights.items() if not isinstance(v, (int, float)) or isinstance(v, bool)]
        if bad:
            raise ConfigError(f"--weights {bad[0]}={weights[bad[0]]!r} is not a number; pass e.g. feature_map=100")
        given["weights"] = {k: float(v) for k, v in weights.items()}
    if args.copy_from_teacher is not None:
        given["copy_from_teacher"] = args.copy_from_teacher
    overrides = _parse_pairs(args.student_override, "--student-override")
    teacher, student, data = args.teacher, args.student, args.data
    run_file = Path(args.out) / RUN_FILE
    if args.resume and run_file.is_file():
        stored = RunDirectory(args.out).read_record()
        given = {**stored["config"], **given}
        teacher, student, data = teacher or stored.get("teacher"), student or stored.get("student"), data or stored.get("data")
        overrides = overrides or stored.get("student_overrides", {})
    missing = [flag for flag, value in (("--teacher", teacher), ("--student", student), ("--data", data)) if not value]
    if missing:
        raise TrainingError(f"missing {', '.join(missing)} (needed unless --resume finds a run in --out)")
    config = DistillConfig.from_dict(given)
    strategy = make_strategy(args.strategy)  # before TensorFlow runs anything (collective ops)
    distiller = Distiller(teacher, student, data, args.out, config, strategy=strategy, student_overrides=overrides)
    distiller.run(resume=args.resume, overwrite=args.overwrite)
    quiet_cluster_teardown(strategy)
    return 0
