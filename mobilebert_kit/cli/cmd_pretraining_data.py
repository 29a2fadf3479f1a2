"""``mbk pretraining-data``: plain text -> masked-LM/NSP examples in sharded TFRecords."""

from pathlib import Path

from mobilebert_kit.data.pretraining_examples import OPTION_LIMITS
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.atomic import UNCHECKED, atomic_dir, check_output, file_signature
from mobilebert_kit.utils.output_check import OVERWRITE_HELP, overlap
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option
from mobilebert_kit.utils.terminal import escape


def _option(field):
    """The argparse ``type=`` of a PretrainingDataOptions field: its bounds in ``OPTION_LIMITS``, two of them
    tighter than the shared records (a --seq-len of 3 passed the parser and failed later)."""
    return number_option(OPTION_LIMITS[field])


def register(subparsers):
    parser = subparsers.add_parser(
        "pretraining-data",
        help="create pre-training examples (NSP pairs, 80/10/10 masking, whole word masking) from text",
        description="Tokenize text files (one sentence per line, a blank line between documents) with a BERT "
        "vocabulary and write sentence pairs with next-sentence labels and masked tokens to sharded TFRecords "
        "plus dataset.json. Deterministic given --seed; memory bounded by --chunk-documents. With "
        "--stdlib-corpus, first builds an English corpus offline from the Python standard library's docstrings.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", nargs="+", type=input_path_option("file"), metavar="FILE", help="input text files")
    source.add_argument("--stdlib-corpus", metavar="DIR",
                        help="build the standard-library docstring corpus into the directory DIR (train.txt, heldout.txt; "
                        "written like --out) and use train.txt")
    parser.add_argument("--vocab", required=True, type=input_path_option("any"), metavar="PATH",
                        help="vocab.txt, tokenizer.json, or a model directory holding one (e.g. the teacher's)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (written atomically)")
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    parser.add_argument("--cased", action="store_true", help="keep case and accents (cased vocabularies)")
    parser.add_argument("--seq-len", type=_option("seq_len"), default=128, help="tokens per example (default 128)")
    parser.add_argument("--max-predictions", type=_option("max_predictions"), default=20, help="masked tokens per example (default 20)")
    parser.add_argument("--masked-lm-prob", type=_option("masked_lm_prob"), default=0.15, help="share of tokens masked (default 0.15)")
    parser.add_argument("--whole-word", default="wordpiece", metavar="MODE",
                        help="whole word masking: none, wordpiece (## pieces, English) or jieba (Chinese words); default wordpiece")
    parser.add_argument("--short-seq-prob", type=_option("short_seq_prob"), default=0.1, help="share of shorter examples (default 0.1)")
    parser.add_argument("--dupe-factor", type=_option("dupe_factor"), default=1, help="passes over the text with different masks (default 1)")
    parser.add_argument("--shards", type=_option("num_shards"), default=4, help="TFRecord files (default 4)")
    parser.add_argument("--chunk-documents", type=_option("chunk_documents"), default=2000,
                        help="documents in memory at once, at least 2; a random next sentence comes from another document of "
                        "the same chunk (default 2000)")
    parser.add_argument("--seed", type=_option("seed"), default=12345, help="random seed (default 12345)")
    parser.set_defaults(func=run)


def run(args):
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from mobilebert_kit.data.pretraining_examples import PretrainingDataOptions, write_pretraining_data
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    console = Console()
    options = PretrainingDataOptions(
        seq_len=args.seq_len, max_predictions=args.max_predictions, masked_lm_prob=args.masked_lm_prob,
        whole_word=args.whole_word, short_seq_prob=args.short_seq_prob, dupe_factor=args.dupe_factor,
        num_shards=args.shards, chunk_documents=args.chunk_documents, seed=args.seed,
    )
    tokenizer = TextTokenizer.from_file(args.vocab, lowercase=False if args.cased else None)
    files, began = args.input, UNCHECKED
    if args.stdlib_corpus:
        from mobilebert_kit.data.records import PRETRAINING_DATA
        from mobilebert_kit.data.stdlib_corpus import STDLIB_CORPUS, build_stdlib_corpus

        corpus = Path(args.stdlib_corpus)
        # DIR is an output too: it overwrote a user's own train.txt / heldout.txt. Both outputs are decided
        # before the corpus is written, so a refused --out leaves no corpus behind either.
        if overlap(args.out, corpus):
            raise ConfigError(f"--out {args.out} and --stdlib-corpus {corpus} overlap; give each its own directory")
        check_output(corpus, STDLIB_CORPUS, overwrite=args.overwrite, sources=[args.vocab])
        check_output(args.out, PRETRAINING_DATA, overwrite=args.overwrite, sources=[args.vocab])
        # What both held now is what this run may replace: another run into them meanwhile is not silently replaced.
        began = file_signature(args.out)
        with atomic_dir(corpus, STDLIB_CORPUS, overwrite=args.overwrite, sources=[args.vocab],
                        unchanged_since=file_signature(corpus)) as tmp:
            stats = build_stdlib_corpus(tmp / "train.txt", tmp / "heldout.txt")
        console.print(
            f"corpus: Python {stats['python']} standard library, {stats['documents']} modules / "
            f"{stats['sentences']} sentences in {escape(corpus / 'train.txt')}, {stats['heldout_documents']} modules "
            f"held out in {escape(corpus / 'heldout.txt')}", markup=False, highlight=False, soft_wrap=True,
        )
        files = [corpus / "train.txt"]
    console.print(
        f"[bold]mbk pretraining-data[/bold] {len(files)} file(s) -> {escape(args.out, markup=True)}: "
        f"{options.seq_len} tokens, "
        f"{options.max_predictions} predictions, mask {options.masked_lm_prob:g} (80/10/10), whole word "
        f"{options.whole_word}, {'cased' if not tokenizer.lowercase else 'uncased'} vocabulary of "
        f"{tokenizer.vocab_size}, dupe factor {options.dupe_factor}, {options.num_shards} shard(s), seed {options.seed}",
        highlight=False, soft_wrap=True,
    )
    total = sum(Path(f).stat().st_size for f in files if Path(f).is_file())
    with Progress(TextColumn("tokenizing"), BarColumn(), DownloadColumn(), TextColumn("{task.fields[examples]} examples"),
                  TimeRemainingColumn(), console=console, disable=not console.is_terminal) as progress:
        task = progress.add_task("data", total=total or 1, examples=0)
        meta = write_pretraining_data(
            files, tokenizer, args.out, options,
            on_progress=lambda done, _total, n: progress.update(task, completed=done, examples=n),
            overwrite=args.overwrite, unchanged_since=began,
        )
    console.print(
        f"wrote {meta['num_examples']} examples from {meta['num_documents']} documents "
        f"({meta['num_masked_tokens']} masked of {meta['num_tokens']} tokens, "
        f"{meta['num_random_next']} random next sentences) to {escape(args.out)}", markup=False, highlight=False,
        soft_wrap=True,
    )
    return 0
