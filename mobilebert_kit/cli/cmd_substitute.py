"""``mbk substitute SRC --norm no_norm --act relu --out DIR [--recover-steps N --data FILE]``, and
``mbk substitute --out DIR --resume`` to continue an interrupted recovery (``convert/prepare/recovery_run.py``)."""

import json

from mobilebert_kit.convert.plan.export_options import SUBSTITUTE_LIMITS
from mobilebert_kit.errors import ConfigError, check_choice
from mobilebert_kit.utils.atomic import OVERWRITE, atomic_dir
from mobilebert_kit.utils.output_check import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option
from mobilebert_kit.utils.terminal import escape


# Defaults of the options a resumed run takes from its record when they are not given (None on the command
# line means "not given"). The same values as convert/prepare/source.py's Recovery and convert/prepare/recovery_run.py's
# DEFAULT_CHECKPOINT_EVERY (tests/convert/test_substitute_resume.py checks), written out here so that
# `mbk --help` does not load TensorFlow.
_DEFAULTS = {"recover_steps": 0, "seq_len": None, "learning_rate": 1e-4, "batch_size": 8, "seed": 0,
             "checkpoint_every": 100, "fit": True, "scale_migration": "balance"}


def register(subparsers):
    p = subparsers.add_parser(
        "substitute",
        help="replace LayerNorm/GELU with NoNorm/ReLU in a trained model (optional recovery distillation)",
        description="Rebuild a model with other normalization/activation operators, carry every weight over by "
        "name, optionally distil it back towards the original, and save it with a fidelity report. While it "
        "recovers, OUT/run holds checkpoints every --checkpoint-every steps; Ctrl-C checkpoints the current step "
        "and stops, and --resume continues exactly where the recovery stopped.",
    )
    p.add_argument("src", nargs="?", type=input_path_option("any", tree=True, or_name=True),
                   help="saved-model directory, Hugging Face directory or preset name (required unless --resume)")
    p.add_argument("--norm", help="normalization: no_norm or layer_norm")
    p.add_argument("--act", help="activation: relu, relu6, gelu or gelu_tanh")
    p.add_argument("--intermediate-size", type=number_option(SUBSTITUTE_LIMITS["intermediate_size"]), default=None,
                   help="narrow every FFN to this many hidden units, keeping the most active ones on --data (their "
                   "weights unchanged; structured pruning that recovery then trains back towards the source)")
    p.add_argument("--out", required=True, help="output directory (a saved model; replaced when the run completes)")
    p.add_argument("--resume", action="store_true",
                   help="continue the interrupted recovery in --out from its last checkpoint (SRC and options not "
                   "given are taken from OUT/run/run.json)")
    p.add_argument("--recover-steps", type=number_option(SUBSTITUTE_LIMITS["recover_steps"]), default=None,
                   help=f"recovery distillation steps (default {_DEFAULTS['recover_steps']})")
    p.add_argument("--data", type=input_path_option("file"), help="text (.txt) or input arrays (.npz) for the NoNorm fit, recovery and the report")
    p.add_argument("--seq-len", type=number_option(SUBSTITUTE_LIMITS["seq_len"]), default=None,
                   help="sequence length of text data (default: the export's rule, 128 within the model's position table, "
                        "or the length a fine-tuned model was trained at)")
    p.add_argument("--learning-rate", type=number_option(SUBSTITUTE_LIMITS["learning_rate"]), default=None,
                   help="recovery learning rate at the first step, decaying linearly to 0 (default "
                   f"{_DEFAULTS['learning_rate']:.0e})".replace("e-0", "e-"))  # 1e-4, not 0.0001
    p.add_argument("--batch-size", type=number_option(SUBSTITUTE_LIMITS["batch_size"]), default=None,
                   help=f"recovery rows per step (default {_DEFAULTS['batch_size']}; more rows per step recover more "
                   "within the same steps)")
    p.add_argument("--seed", type=number_option(SUBSTITUTE_LIMITS["seed"]), default=None,
                   help=f"seed of the rows each recovery step draws (default {_DEFAULTS['seed']})")
    p.add_argument("--checkpoint-every", type=number_option(SUBSTITUTE_LIMITS["checkpoint_every"]), default=None,
                   help=f"recovery steps between checkpoints in OUT/run, from which --resume continues (default "
                   f"{_DEFAULTS['checkpoint_every']})")
    p.add_argument("--scale-migration", default=None,
                   help="after recovery, move NoNorm scales into the dense layers (exact in float; makes full "
                   "int8 hold): balance (default), unit, smoothquant or none")
    p.add_argument("--overwrite", action="store_true",
                   help=OVERWRITE_HELP + "; an interrupted recovery in --out is discarded and started over. What mbk "
                   "did not write is replaced only by the finished output, so such a run keeps no state to "
                   "--resume from")
    p.add_argument("--no-fit", action="store_true", default=None,
                   help="start NoNorm as LayerNorm's gamma/beta instead of fitting it to the data")
    p.set_defaults(func=run)
    return p


def _settings(args):
    """SRC, data and options of this run: the command line's, else (on --resume) the stored run's, else the
    defaults. The stored values are checked as the command line's are (``RecoveryRun.stored_settings``)."""
    stored = {}
    if args.resume:
        from mobilebert_kit.convert.prepare.recovery_run import RecoveryRun

        stored = RecoveryRun(args.out).stored_settings()
    given = {key: getattr(args, key) for key in ("src", "data", "norm", "act", "intermediate_size", "recover_steps",
                                                 "seq_len", "learning_rate", "batch_size", "seed", "checkpoint_every",
                                                 "scale_migration")}
    given["fit"] = None if args.no_fit is None else not args.no_fit
    return {key: value if value is not None else stored.get(key, _DEFAULTS.get(key)) for key, value in given.items()}


def run(args):
    settings = _settings(args)
    if settings["src"] is None:
        raise ConfigError("missing SRC, the model to substitute (needed unless --resume finds a run in --out)")
    if settings["norm"] is None and settings["act"] is None and settings["intermediate_size"] is None:
        raise ConfigError("nothing to substitute; pass --norm no_norm and/or --act relu (or --intermediate-size N)")
    # The same value sets as layers.NORMALIZATIONS / layers.ACTIVATIONS, checked before TensorFlow loads.
    if settings["norm"] is not None:
        check_choice("--norm", settings["norm"], ("layer_norm", "no_norm"))
    if settings["act"] is not None:
        check_choice("--act", settings["act"], ("gelu", "gelu_tanh", "relu", "relu6"))
    # scale_migration.MIGRATION_POLICIES
    check_choice("--scale-migration", settings["scale_migration"], ("unit", "balance", "smoothquant", "none"))
    from mobilebert_kit.convert.prepare.source import Recovery, prepare_source
    from mobilebert_kit.convert.prepare.recovery_run import CONFIG_KEYS, SUBSTITUTE_OUTPUT, RecoveryRun, substitute_record
    from mobilebert_kit.data.vocab import copy_tokenizer_files
    from mobilebert_kit.models.api import save
    from mobilebert_kit.sources.model_source import write_labels

    sources = [settings["src"], settings["data"]]
    record = substitute_record(settings["src"], settings["data"], {key: settings[key] for key in CONFIG_KEYS})
    state = RecoveryRun(args.out, record, resume=args.resume, sources=sources,
                        checkpoint_every=settings["checkpoint_every"])
    try:  # the lock of OUT that the check takes (utils.run_state), dropped however the command ends
        decision = state.check(record, args.resume, overwrite=args.overwrite, sources=sources)  # before any work
        resumable = bool(settings["recover_steps"])
        if resumable and decision == OVERWRITE and not args.resume:
            # The run's state would have to replace the user's directory before the output is complete; without
            # it the directory is replaced only by the finished output, as --overwrite always did.
            resumable = False
            print(f"{escape(args.out)} is not an output of mbk: --overwrite replaces it once the output is "
                  "complete, so this recovery keeps no state to resume from (remove the directory or choose a new "
                  "--out for that)")
        recovery = Recovery(steps=settings["recover_steps"], data=settings["data"], seq_len=settings["seq_len"],
                            learning_rate=settings["learning_rate"], batch_size=settings["batch_size"],
                            fit=settings["fit"], migrate=settings["scale_migration"], seed=settings["seed"])
        prepared = prepare_source(settings["src"], {"norm": settings["norm"], "act": settings["act"],
                                                     "ffn": settings["intermediate_size"]}, recovery,
                                  log=print, run=state if resumable else None)
        # A recovery that kept its state in OUT finishes inside it: files the user put there meanwhile stay.
        with atomic_dir(args.out, SUBSTITUTE_OUTPUT, overwrite=args.overwrite, sources=sources,
                        keep_foreign=resumable and decision != OVERWRITE) as tmp:
            save(prepared.source.model, tmp)
            copy_tokenizer_files(prepared.source.directory, tmp)
            if prepared.original.labels:  # a classifier's class names: an export embeds them for the clients
                write_labels(tmp, prepared.original.labels)
            pooling = _carry_pooling(prepared, tmp)
            (tmp / "substitution.json").write_text(json.dumps({
                "source": prepared.original.describe(),
                "changes": {k: list(v) for k, v in prepared.substitution.changes.items()},
                "rules": prepared.substitution.rules, "fit_to_data": settings["fit"], "data": prepared.data.description,
                "fidelity": prepared.fidelity.to_dict(), "scale_migration": prepared.migration,
            }, indent=2) + "\n")
        if pooling:
            print(f"sentence pooling carried over from the source: {pooling}")
        print(f"wrote {escape(args.out)}")
        return 0
    finally:
        state.release()


def _carry_pooling(prepared, directory):
    """The source's sentence pooling, declared in the output too (sources/pooling.py); a phrase, or None."""
    from mobilebert_kit.sources.pooling import carry_pooling

    try:
        pooling = carry_pooling(prepared.original.directory, directory, prepared.source.encoder.config["hidden_size"])
    except ConfigError as err:  # a pooling mbk cannot export: the model is still written, without one
        print(f"note: the source's sentence pooling is not carried over ({err}); export with --pooling mean|cls")
        return None
    return pooling.describe() if pooling else None
