"""``mbk info``: parameters and FLOPs of a preset or saved/imported model."""

import json
import shlex
from pathlib import Path

from mobilebert_kit.artifacts.formats import FORMATS, SEQ_LEN
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option


def register(subparsers):
    parser = subparsers.add_parser(
        "info",
        help="print parameters and FLOPs of a preset or model directory",
        description="Build a preset (or load a saved / Hugging Face / TF1 model) and print its configuration, "
        "parameters by component and FLOPs (2 x multiply-accumulates of every matrix product) at --seq-len.",
    )
    parser.add_argument("source", type=input_path_option("any", tree=True, or_name=True), metavar="PRESET_OR_DIR", help="preset name or model directory")
    parser.add_argument("--seq-len", type=number_option(SEQ_LEN), default=None,
                        help="sequence length for FLOPs (default 128, or the model's positions when fewer)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.set_defaults(func=run)


def load_source(source):
    """A preset name or a checkpoint path -> model, through the one resolver (``sources/``)."""
    from mobilebert_kit.models.presets import PRESETS
    from mobilebert_kit.sources.spec import locate

    if locate(source) is None:  # refused before TensorFlow loads
        raise ConfigError(
            f"{source!r} is neither a preset nor an existing path; presets: {', '.join(PRESETS)}"
        )
    if Path(source).is_file() and Path(source).suffix.lower() in {f.suffix for f in FORMATS.values()}:
        # An exported file has no Keras model to summarize; "not a checkpoint: expected config.json" sent the
        # user looking for a config the file never had.
        raise ConfigError(f"{source} is a {Path(source).suffix.lower()} file (an exported model), not a preset or "
                          f"checkpoint; run `mbk inspect {shlex.quote(str(source))}` for its inputs, operators and size")
    from mobilebert_kit.sources.model_source import ModelSource

    return ModelSource.load(source, head="auto").model


def print_summary(summary, console=None):
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    config = summary["config"]
    flops = summary["flops"]
    flops_text = f"{flops / 1e9:.3f} GFLOPs" if flops >= 1e8 else f"{flops / 1e6:.3f} MFLOPs"
    console.print(
        f"[bold]{summary['architecture']}[/]: {summary['params']:,} parameters ({summary['params'] / 1e6:.2f}M), "
        f"{flops_text} at sequence length {summary['seq_len']} (2 x MACs of matrix products)"
    )
    table = Table()
    table.add_column("component")
    table.add_column("parameters", justify="right")
    for name, count in summary["params_by_component"].items():
        table.add_row(name, f"{count:,}")
    console.print(table)
    keys = ("attention_type", "position_embedding_type", "num_layers", "hidden_size", "intra_bottleneck_size", "num_heads", "intermediate_size",
            "num_feedforward_networks", "normalization_type", "hidden_act", "embedding_size", "trigram_input",
            "key_query_shared_bottleneck", "use_bottleneck_attention", "vocab_size")
    console.print("  ".join(f"{k}={config.get(k)}" for k in keys if k in config))


def run(args):
    from mobilebert_kit.models.api import check_positions, default_seq_len
    from mobilebert_kit.models.summary import summarize

    model = load_source(args.source)
    config = getattr(model, "encoder", model).config
    # The default fits the model: `mbk info tiny-bert` (64 positions) failed on a length nobody asked for.
    seq_len = args.seq_len or default_seq_len(config)
    check_positions(config, seq_len)
    summary = summarize(model, seq_len=seq_len)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print_summary(summary)
    return 0
