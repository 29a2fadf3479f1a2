"""``mbk import``: convert a checkpoint into a mobilebert-kit saved model."""

from pathlib import Path

from mobilebert_kit.checkpoints.families import FAMILIES
from mobilebert_kit.errors import CheckpointError, ConfigError
from mobilebert_kit.utils.atomic import check_output, file_signature
from mobilebert_kit.utils.output_check import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.terminal import escape


def register(subparsers):
    parser = subparsers.add_parser(
        "import",
        help="import a Hugging Face or TF1 checkpoint into a saved model",
        description="Import a Hugging Face directory (config.json + model.safetensors; its model_type one of "
        f"{', '.join(FAMILIES)}) or an "
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
    from mobilebert_kit.checkpoints.importer import import_checkpoint
    from mobilebert_kit.models.api import SAVED_MODEL, count_params, save

    head = None if args.head == "none" else args.head
    source = Path(args.source)
    if not source.exists() and not Path(str(source) + ".index").exists():
        raise CheckpointError(f"{escape(source)} does not exist; pass a checkpoint directory or TF1 checkpoint prefix")
    if args.config is not None and source.is_dir() and (source / "config.json").is_file() \
            and not any(source.glob("*.index")):
        # It was ignored: a Hugging Face directory is read with its own config.json.
        raise ConfigError(f"--config is for TF1 checkpoints; {escape(source)} is a Hugging Face directory, read with "
                          "its own config.json: drop --config (or edit that file)")
    sources = [source, args.config]
    check_output(args.out, SAVED_MODEL, overwrite=args.overwrite, sources=sources)  # before the import's work
    began = file_signature(args.out)  # what --out holds now: another command may write it while this one imports
    model = import_checkpoint(source, head=head, config=args.config)
    # Everything that travels beside the weights is read and checked against the model before the first write:
    # the model was saved first, so a refused vocabulary replaced a good earlier import with one without any.
    beside = deployment_files(source if source.is_dir() else source.parent, model)
    out = save(model, args.out, overwrite=args.overwrite, sources=sources, extra=beside.write, unchanged_since=began)
    kind = getattr(model, "architecture", "encoder") or "encoder"
    print(f"imported {escape(source)} -> {escape(out)} ({kind}, {count_params(model) / 1e6:.2f}M parameters)"
          + (f"; {', '.join(beside.carried)} carried alongside" if beside.carried else ""))
    return 0


class DeploymentFiles:
    """What an app needs beside the weights, read from the checkpoint's directory and checked against the model:
    the tokenizer files, a sentence-transformers pooling declaration and a classifier's label names. Without
    them `mbk export` of the imported model wrote token features with no vocabulary where the checkpoint itself
    exports as a sentence embedder that tokenizes real text.

    Args:
        tokenizer_files (dict[str, bytes]): the tokenizer files, read with their bounds.
        pooling (Pooling | None): the declared sentence pooling (None: none, or one mbk cannot export).
        dimension (int): the encoder's hidden size, which the pooling declaration records.
        labels (list[str]): a classifier's class names, checked against its head.
    """

    def __init__(self, tokenizer_files, pooling, dimension, labels):
        self.tokenizer_files, self.pooling, self.dimension, self.labels = tokenizer_files, pooling, dimension, labels

    @property
    def carried(self):
        """What the import reports as carried, in the order it is written."""
        return list(self.tokenizer_files) + (["sentence pooling (modules.json)"] if self.pooling else []) + (
            ["labels.txt"] if self.labels else [])

    def write(self, directory):
        """Writes the files into ``directory`` (the saved model's temporary directory)."""
        from mobilebert_kit.data.vocab import write_tokenizer_files
        from mobilebert_kit.sources.model_source import write_labels
        from mobilebert_kit.sources.pooling import write_pooling

        write_tokenizer_files(self.tokenizer_files, directory)
        if self.pooling is not None:
            write_pooling(directory, self.pooling, self.dimension)
        if self.labels:
            write_labels(directory, self.labels)


# What an import whose sentence-transformers pipeline mbk cannot export says to do.
IMPORT_FIX = ("the import would drop it and the exported vectors would not be the checkpoint's: export the "
              "checkpoint directly with `mbk export SRC --pooling mean|cls` to choose another pooling knowingly")


def deployment_files(source_dir, model):
    """Reads and checks the :class:`DeploymentFiles` of ``source_dir`` for ``model``; writes nothing. MbkError: a
    tokenizer file over its bound or unreadable, a casing setting that is no boolean, a tokenizer whose ids run
    past the embedding table, class names the clients would show wrongly or whose count is not the head's.
    """
    from mobilebert_kit.data.text_tokenizer import check_tokenizer_fits, tokenizer_of
    from mobilebert_kit.data.class_names import LABELLED_HEADS
    from mobilebert_kit.data.vocab import read_tokenizer_files
    from mobilebert_kit.sources.model_source import read_labels
    from mobilebert_kit.sources.pooling import read_pooling

    encoder = getattr(model, "encoder", model)
    # The one reading of the checkpoint's tokenizer files (checked against each other) is what is carried.
    tokenizer = tokenizer_of(source_dir)
    files = tokenizer.checkpoint_files() if tokenizer is not None else read_tokenizer_files(source_dir)
    check_tokenizer_fits(tokenizer, encoder.config["vocab_size"], "the model")
    # A pipeline mbk cannot export (a Dense projection, max pooling, ...) is refused, naming the module: a model
    # written without it exported vectors of another width or meaning than the checkpoint's, without a word.
    pooling = read_pooling(source_dir, fix=IMPORT_FIX)
    labels = []
    if getattr(model, "architecture", None) in LABELLED_HEADS:
        labels = read_labels(source_dir, getattr(model, "head_config", {}).get("num_labels"))
    return DeploymentFiles(files, pooling, encoder.config["hidden_size"], labels)
