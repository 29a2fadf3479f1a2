"""``mbk import``: convert a checkpoint into a mobilebert-kit saved model."""

from mobilebert_kit.utils.atomic import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.terminal import escape


def register(subparsers):
    parser = subparsers.add_parser(
        "import",
        help="import a Hugging Face or TF1 checkpoint into a saved model",
        description="Import a Hugging Face directory (config.json + model.safetensors; MobileBERT, BERT, ConvBERT, "
        "NEZHA, DistilBERT, ELECTRA, ALBERT, RoBERTa or XLM-RoBERTa) or an "
        "original TF1 MobileBERT checkpoint (with its bert_config.json) and write a saved model directory, with the "
        "checkpoint's tokenizer files, sentence-transformers pooling and class labels beside the weights (what "
        "`mbk export` embeds for apps). Every variable must match; pickle checkpoints (.bin/.pt) are refused.",
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
    from mobilebert_kit.models.api import SAVED_MODEL, save
    from mobilebert_kit.utils.atomic import check_output

    head = None if args.head == "none" else args.head
    source = Path(args.source)
    if not source.exists() and not Path(str(source) + ".index").exists():
        from mobilebert_kit.errors import CheckpointError

        raise CheckpointError(f"{escape(source)} does not exist; pass a checkpoint directory or TF1 checkpoint prefix")
    if args.config is not None and source.is_dir() and (source / "config.json").is_file() \
            and not any(source.glob("*.index")):
        from mobilebert_kit.errors import ConfigError

        # It was ignored: a Hugging Face directory is read with its own config.json.
        raise ConfigError(f"--config is for TF1 checkpoints; {escape(source)} is a Hugging Face directory, read with "
                          "its own config.json: drop --config (or edit that file)")
    sources = [source, args.config]
    check_output(args.out, SAVED_MODEL, overwrite=args.overwrite, sources=sources)  # before the import's work
    model = import_checkpoint(source, head=head, config=args.config)
    out = save(model, args.out, overwrite=args.overwrite, sources=sources)
    from mobilebert_kit.models.api import count_params

    kind = getattr(model, "architecture", "encoder") or "encoder"
    carried = carry_deployment_files(source if source.is_dir() else source.parent, out, model)
    print(f"imported {escape(source)} -> {escape(out)} ({kind}, {count_params(model) / 1e6:.2f}M parameters)"
          + (f"; {', '.join(carried)} carried alongside" if carried else ""))
    return 0


def carry_deployment_files(source_dir, out, model):
    """Copies what an app needs beside the weights from the checkpoint's directory into the saved model: the
    tokenizer files, a sentence-transformers pooling declaration and a classifier's label names. Without them
    `mbk export` of the imported model wrote token features with no vocabulary where the checkpoint itself
    exports as a sentence embedder that tokenizes real text. Returns what was carried."""
    from mobilebert_kit.data.vocab import copy_tokenizer_files
    from mobilebert_kit.errors import ConfigError
    from mobilebert_kit.sources.model_source import read_labels, write_labels
    from mobilebert_kit.sources.pooling import carry_pooling
    from mobilebert_kit.utils.atomic import relist

    carried = copy_tokenizer_files(source_dir, out)
    try:
        if carry_pooling(source_dir, out, getattr(model, "encoder", model).config["hidden_size"]):
            carried.append("sentence pooling (modules.json)")
    except ConfigError:
        pass  # a pooling mbk cannot export: the model is written without one, as `mbk export SRC` would say
    labels = read_labels(source_dir) if getattr(model, "architecture", None) in ("sequence_classifier",
                                                                                 "token_classifier") else []
    if labels:
        write_labels(out, labels)
        carried.append("labels.txt")
    if carried:
        relist(out)  # these files are ours too: a re-run replaces them
    return carried
