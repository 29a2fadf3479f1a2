"""``mbk import``: convert a checkpoint into a mobilebert-kit saved model."""

from mobilebert_kit.utils.atomic import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.terminal import escape


def register(subparsers):
    parser = subparsers.add_parser(
        "import",
        help="import a Hugging Face or TF1 checkpoint into a saved model",
        description="Import a Hugging Face directory (config.json + model.safetensors; MobileBERT or BERT) or an "
        "original TF1 MobileBERT checkpoint (with its bert_config.json) and write a saved model directory. "
        "Every variable must match; pickle checkpoints (.bin/.pt) are refused.",
    )
    parser.add_argument("source", type=input_path_option("any", tree=True, or_name=True), metavar="SRC", help="checkpoint directory, TF1 prefix or .index file")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (written atomically)")
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    parser.add_argument("--head", default="auto",
                        help="task head to keep: auto (whatever the checkpoint holds), none, or a head name")
    parser.add_argument("--config", default=None, type=input_path_option("file"), metavar="JSON", help="TF1 config (default: found next to SRC)")
    parser.set_defaults(func=run)


def run(args):
    from pathlib import Path

    from mobilebert_kit.checkpoints.importer import import_checkpoint
    from mobilebert_kit.models.api import save
    from mobilebert_kit.utils.atomic import check_output

    head = None if args.head == "none" else args.head
    source = Path(args.source)
    if not source.exists() and not Path(str(source) + ".index").exists():
        from mobilebert_kit.errors import CheckpointError

        raise CheckpointError(f"{escape(source)} does not exist; pass a checkpoint directory or TF1 checkpoint prefix")
    sources = [source, args.config]
    check_output(args.out, "model", overwrite=args.overwrite, sources=sources)  # before the import's work
    model = import_checkpoint(source, head=head, config=args.config)
    out = save(model, args.out, overwrite=args.overwrite, sources=sources)
    from mobilebert_kit.models.api import count_params

    kind = getattr(model, "architecture", "encoder") or "encoder"
    print(f"imported {escape(source)} -> {escape(out)} ({kind}, {count_params(model) / 1e6:.2f}M parameters)")
    return 0
