"""``mbk export``: a model to a validated ``.tflite`` / ``.onnx`` file, from flags or a recipe.

Contract:
    mbk export SRC --format tflite|onnx --quantize none|dynamic|int8|float16|int16x8|qat
               --seq-len N --out FILE [--calibration FILE]
    mbk export --recipe export/NAME.toml
"""

from mobilebert_kit.utils.atomic import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option


QUANTIZE_CHOICES = ("none", "dynamic", "int8", "float16", "int16x8", "qat")


def register(subparsers):
    p = subparsers.add_parser(
        "export",
        help="export to TFLite or ONNX (optionally quantized) and validate against the Keras model",
        description="Export an encoder or task model to .tflite / .onnx, quantize it, and validate the file "
        "against its Keras source before writing it (temp file, then rename).",
    )
    p.add_argument("src", nargs="?", type=input_path_option("any", tree=True, or_name=True), help="saved-model directory, Hugging Face directory or preset name")
    p.add_argument("--recipe", type=input_path_option("file"), help="a TOML recipe (export/NAME.toml) instead of SRC and flags")
    p.add_argument("--format", choices=("tflite", "onnx"), default="tflite")
    p.add_argument("--quantize", choices=QUANTIZE_CHOICES, default="none")
    p.add_argument("--seq-len", type=number_option("seq_len"), default=128, help="static sequence length (default 128)")
    p.add_argument("--batch-size", type=number_option("batch_size"), default=1, help="static batch size (default 1)")
    p.add_argument("--out", help="output file (.tflite or .onnx)")
    p.add_argument("--calibration", type=input_path_option("file"), help="calibration data: .txt (one sentence per line) or .npz input arrays")
    p.add_argument("--validation-data", type=input_path_option("file"), help="validation inputs (.txt or .npz); default: calibration rows or sample text")
    p.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    p.add_argument("--io-type", choices=("float32", "int8"), default="float32", help="TFLite int8/qat io type")
    p.add_argument("--mask-dtype", choices=("float32", "int32"), default="float32",
                   help="attention_mask input type (float32 avoids a CAST; default)")
    p.add_argument("--mask-value", type=number_option("mask_value"), default=-120.0,
                   help="score of padded keys in the exported graph (default -120: int8 friendly)")
    p.add_argument("--keep-float", default="",
                   help="comma-separated layer paths kept in float (e.g. transformer_layer_5,norm,ffn_0/output)")
    p.add_argument("--keep-float-ops", default=None,
                   help="comma-separated op types kept in float (e.g. SOFTMAX); 'none' for none. Default: SOFTMAX and "
                   "the attention-mask ADD for TFLite full int8 (XNNPACK has no int8 softmax), nothing otherwise")
    p.add_argument("--opset", type=number_option("opset"), default=17, help="ONNX opset (default 17)")
    p.add_argument("--dynamic-axes", action="store_true", help="ONNX: dynamic batch and sequence axes")
    p.add_argument("--qat-steps", type=number_option("qat_steps"), default=100, help="quantization-aware fine-tuning steps (qat)")
    p.add_argument("--threshold", action="append", default=[], metavar="KEY=VALUE",
                   help="override a validation threshold (min_cosine, min_snr_db, min_argmax_agreement, max_abs_error)")
    p.add_argument("--drift-report", action="store_true", help="per-layer drift report (quantized exports)")
    p.add_argument("--no-validate", action="store_true", help="write the artifact without validating it")
    p.add_argument("--no-vocab", action="store_true", help="do not embed the vocabulary in the metadata")
    p.set_defaults(func=run)
    return p


def parse_thresholds(items):
    """``["min_cosine=0.99"]`` -> ``{"min_cosine": 0.99}``; one-line errors for bad items."""
    from mobilebert_kit.convert.validation import THRESHOLD_KEYS
    from mobilebert_kit.errors import ConfigError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in THRESHOLD_KEYS:
            raise ConfigError(f"bad --threshold {item!r}; use KEY=VALUE with KEY one of {', '.join(THRESHOLD_KEYS)}")
        try:
            out[key] = float(value)
        except ValueError as err:
            raise ConfigError(f"bad --threshold {item!r}: {value!r} is not a number") from err
    return out


def _split(text):
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _float_ops(text):
    if text is None:
        return None  # the format's default
    return () if text.strip().lower() == "none" else _split(text)


def _progress_log():
    """Progress lines on stderr (stdout keeps the result): loading, converting and validating a
    full-size model take a minute or more, which must not look like a hang (issue 12)."""
    from rich.console import Console

    console = Console(stderr=True)
    return lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True)


def run(args):
    from mobilebert_kit.errors import ConfigError

    if args.recipe:
        if args.src or args.out:
            raise ConfigError("pass either --recipe or SRC with flags, not both (the recipe names source and outputs)")
        if args.overwrite:
            raise ConfigError("--overwrite goes with SRC --out FILE; a recipe replaces only the files mbk wrote "
                              "before (move other files away, or export with --out)")
        from mobilebert_kit.convert.recipe import Recipe

        recipe = Recipe.load(args.recipe)
        results = recipe.run(validate=not args.no_validate, log=_progress_log())
        for result in results:
            print(result.format_text())
        return 0
    if not args.src or not args.out:
        raise ConfigError("mbk export needs SRC and --out FILE (or --recipe export/NAME.toml)")
    from mobilebert_kit.convert.exporter import ExportOptions, export

    options = ExportOptions(
        source=args.src, format=args.format, quantize=args.quantize, out=args.out, seq_len=args.seq_len,
        batch_size=args.batch_size, calibration=args.calibration, validation_data=args.validation_data,
        validate=not args.no_validate, thresholds=parse_thresholds(args.threshold), drift_report=args.drift_report,
        io_type=args.io_type, mask_dtype=args.mask_dtype, attention_mask_value=args.mask_value,
        keep_float_ops=_float_ops(args.keep_float_ops), keep_float_layers=_split(args.keep_float),
        opset=args.opset, dynamic_axes=args.dynamic_axes, embed_vocab=not args.no_vocab, qat_steps=args.qat_steps,
        overwrite=args.overwrite,
    )
    result = export(options, log=_progress_log())
    print(result.format_text())
    return 0
