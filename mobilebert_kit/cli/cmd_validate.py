"""``mbk validate FILE --reference SRC``: compare an artifact with its Keras source; non-zero exit on failure.

``--arch arm64`` also runs the file on the runtime's aarch64 build, emulated (``convert/validation/arch_validation.py``).
"""

import json

from mobilebert_kit.artifacts.arches import ARCHES, arch
from mobilebert_kit.artifacts.formats import SEQ_LEN
from mobilebert_kit.convert.plan.export_options import ROWS, parse_thresholds
from mobilebert_kit.convert.quantization.modes import CONVERTED_MODES
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option


def register(subparsers):
    p = subparsers.add_parser(
        "validate",
        help="check a .tflite / .onnx file against its Keras source (exit 1 when thresholds fail)",
        description="Check output names, then shapes, then values of an exported file against the Keras "
        "model it came from. Exit status 1 when any threshold fails, 2 on bad input.",
    )
    p.add_argument("file", type=input_path_option("file"), help="the .tflite or .onnx artifact")
    p.add_argument("--reference", required=True, type=input_path_option("any", tree=True, or_name=True), help="saved-model directory, Hugging Face directory or preset name")
    p.add_argument("--data", type=input_path_option("file"), help="validation inputs: .txt (one sentence per line) or .npz input arrays")
    p.add_argument("--count", type=number_option(ROWS), default=16, help="rows validated (default 16)")
    # --precision is the quantization mode's name (kept for the contract); its record holds the thresholds.
    p.add_argument("--precision", choices=CONVERTED_MODES,
                   help="threshold set (default: the quantization recorded in the file's metadata)")
    p.add_argument("--seq-len", type=number_option(SEQ_LEN), help="sequence length for dynamic-axis ONNX files (default: metadata or 128, at most the model's positions)")
    p.add_argument("--threshold", action="append", default=[], metavar="KEY=VALUE", help="override a threshold")
    p.add_argument("--arch", choices=tuple(ARCHES), help="also run the file on this CPU architecture's build of the "
                   "runtime under QEMU user-mode emulation and compare it with the x86-64 run and the Keras model "
                   "(numerics only; the emulator and runtime are fetched into the cache on first use: "
                   "docs/export.md#arm-numerics-under-emulation)")
    p.add_argument("--cpu", help="the emulated CPU for --arch (arm64: " + ", ".join(ARCHES["arm64"].cpus)
                   + f"; default {ARCHES['arm64'].default_cpu}, a phone big core)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)
    return p


def run(args):
    from mobilebert_kit.artifacts.metadata import in_graph_length, planned_length, read_artifact_metadata

    meta = read_artifact_metadata(args.file)  # a missing or unreadable file fails here, before TensorFlow loads
    thresholds = parse_thresholds(args.threshold)
    cut = in_graph_length(meta)
    if cut is not None and args.seq_len and args.seq_len != cut:
        # The file cuts its text inside itself: the reference cut elsewhere would fail it for nothing.
        raise ConfigError(f"{args.file} cuts each text to {cut} tokens inside itself (--tokenizer-in-graph); "
                          f"--seq-len {args.seq_len} cannot change that: drop --seq-len or re-export with --seq-len "
                          f"{args.seq_len}")
    if args.cpu is not None and args.arch is None:
        raise ConfigError(f"--cpu {args.cpu} names an emulated CPU; pass --arch too (--arch arm64 --cpu {args.cpu})")
    if args.arch is not None:
        arch(args.arch).cpu(args.cpu)  # an unknown CPU fails here, before TensorFlow loads
    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.convert.validation.file_validation import validate_file
    from mobilebert_kit.convert.plan.input_set import InputSet, default_inputs, validation_lines
    from mobilebert_kit.convert.prepare.rebuild import encoder_of
    from mobilebert_kit.models.api import max_positions
    from mobilebert_kit.sources.model_source import ModelSource

    precision = args.precision or meta.get("quantization") or "none"
    source = ModelSource.load(args.reference)
    config = encoder_of(source.model).config
    # A dynamic-axis file (the ONNX default) is validated at the length its export planned (its metadata);
    # a file without one, at the export rule's default within the reference's position table.
    positions = max_positions(config)
    fixed = ArtifactRunner(args.file).seq_len
    if fixed and args.seq_len and args.seq_len != fixed:
        # Validated at the file's own length while the report read as --seq-len's (mbk evaluate refuses it too).
        raise ConfigError(f"{args.file} takes {fixed} tokens, not {args.seq_len}; drop --seq-len or re-export at "
                          f"{args.seq_len}")
    seq_len = fixed or cut or planned_length(meta, requested=args.seq_len, max_positions=positions)
    if positions and seq_len > positions:
        # The reference would read past its position table (an internal error deep in the embedding).
        what = f"{args.file} takes {seq_len} tokens" if fixed else f"--seq-len {seq_len} is"
        fix = "validate against the model the file was exported from" if fixed else f"pass --seq-len {positions} or less"
        raise ConfigError(f"{what} more than the {positions} positions of the reference {args.reference}; {fix}")
    recorded = meta.get("vocab_size")
    if isinstance(recorded, int) and recorded != config["vocab_size"]:
        # Another model's reference: its larger vocabulary failed in the runtime's gather, blamed on the file.
        raise ConfigError(f"{args.file} embeds {recorded} tokens (its mbk_metadata vocab_size) but the reference "
                          f"{args.reference} embeds {config['vocab_size']}, so it was exported from another model; "
                          "validate against the model the file was exported from")
    if args.data:
        inputs = InputSet.for_model(args.data, seq_len, source.tokenizer, config, count=args.count)
    else:
        inputs = default_inputs(config, seq_len, source.tokenizer, count=args.count)
    report = validate_file(args.file, source.model, inputs, precision, thresholds,
                           texts=validation_lines(args.data, source.tokenizer, args.count, seq_len), tokenizer=source.tokenizer,
                           arch=args.arch, cpu=args.cpu)
    print(json.dumps(report.to_dict(), indent=2, default=str) if args.json else report.format_text())
    report.raise_for_failures()
    return 0
