"""``mbk substitute SRC --norm no_norm --act relu --out DIR [--recover-steps N --data FILE]``."""

from mobilebert_kit.utils.atomic import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option


def register(subparsers):
    p = subparsers.add_parser(
        "substitute",
        help="replace LayerNorm/GELU with NoNorm/ReLU in a trained model (optional recovery distillation)",
        description="Rebuild a model with other normalization/activation operators, carry every weight over by "
        "name, optionally distil it back towards the original, and save it with a fidelity report.",
    )
    p.add_argument("src", type=input_path_option("any", tree=True, or_name=True), help="saved-model directory, Hugging Face directory or preset name")
    p.add_argument("--norm", help="normalization: no_norm or layer_norm")
    p.add_argument("--act", help="activation: relu, relu6, gelu or gelu_tanh")
    p.add_argument("--out", required=True, help="output directory (a saved model)")
    p.add_argument("--recover-steps", type=number_option("recover_steps"), default=0, help="recovery distillation steps (default 0)")
    p.add_argument("--data", type=input_path_option("file"), help="text (.txt) or input arrays (.npz) for the NoNorm fit, recovery and the report")
    p.add_argument("--seq-len", type=number_option("seq_len"), default=128, help="sequence length of text data (default 128)")
    p.add_argument("--learning-rate", type=number_option("learning_rate"), default=1e-4, help="recovery learning rate at the first step, decaying linearly to 0 (default 1e-4)")
    p.add_argument("--batch-size", type=number_option("batch_size"), default=8,
                   help="recovery rows per step (default 8; more rows per step recover more within the same steps)")
    p.add_argument("--scale-migration", default=None,
                   help="after recovery, move NoNorm scales into the dense layers (exact in float; makes full "
                   "int8 hold): balance (default), unit, smoothquant or none")
    p.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    p.add_argument("--no-fit", action="store_true",
                   help="start NoNorm as LayerNorm's gamma/beta instead of fitting it to the data")
    p.set_defaults(func=run)
    return p


def run(args):
    import json

    from mobilebert_kit.errors import ConfigError

    if args.norm is None and args.act is None:
        raise ConfigError("nothing to substitute; pass --norm no_norm and/or --act relu")
    if args.recover_steps < 0:
        raise ConfigError(f"--recover-steps must be >= 0, got {args.recover_steps}")
    from mobilebert_kit.errors import check_choice

    # The same value sets as layers.NORMALIZATIONS / layers.ACTIVATIONS, checked before TensorFlow loads.
    if args.norm is not None:
        check_choice("--norm", args.norm, ("layer_norm", "no_norm"))
    if args.act is not None:
        check_choice("--act", args.act, ("gelu", "gelu_tanh", "relu", "relu6"))
    if args.scale_migration is not None:  # scale_migration.MIGRATION_POLICIES
        check_choice("--scale-migration", args.scale_migration, ("unit", "balance", "smoothquant", "none"))
    from mobilebert_kit.convert.prepare import Recovery, prepare_source
    from mobilebert_kit.data.vocab import copy_tokenizer_files
    from mobilebert_kit.models.api import save
    from mobilebert_kit.utils.atomic import atomic_dir, check_output

    sources = [args.src, args.data]
    check_output(args.out, "substitute", overwrite=args.overwrite, sources=sources)  # before the fit and recovery
    migrate = {} if args.scale_migration is None else {"migrate": args.scale_migration}
    recovery = Recovery(steps=args.recover_steps, data=args.data, seq_len=args.seq_len,
                        learning_rate=args.learning_rate, batch_size=args.batch_size, fit=not args.no_fit, **migrate)
    prepared = prepare_source(args.src, {"norm": args.norm, "act": args.act}, recovery, log=print)
    with atomic_dir(args.out, "substitute", overwrite=args.overwrite, sources=sources) as tmp:
        save(prepared.source.model, tmp)
        copy_tokenizer_files(prepared.source.directory, tmp)
        (tmp / "substitution.json").write_text(json.dumps({
            "source": prepared.original.describe(),
            "changes": {k: list(v) for k, v in prepared.substitution.changes.items()},
            "rules": prepared.substitution.rules, "fit_to_data": not args.no_fit, "data": prepared.data.description,
            "fidelity": prepared.fidelity.to_dict(), "scale_migration": prepared.migration,
        }, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0
