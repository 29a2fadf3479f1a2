"""``mbk export``: a model to a validated ``.tflite`` / ``.onnx`` file, from flags or a recipe.

Contract:
    mbk export SRC --format tflite|onnx --quantize MODE (convert/quantization/modes.py)
               --seq-len N --out FILE [--calibration FILE]
    mbk export --recipe export/NAME.toml
"""

from mobilebert_kit.convert.plan.export_options import add_arguments, from_arguments
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.terminal import escape


def register(subparsers):
    p = subparsers.add_parser(
        "export",
        help="export to TFLite or ONNX (optionally quantized) and validate against the Keras model",
        description="Export an encoder or task model to .tflite / .onnx, quantize it, and validate the file "
        "against its Keras source before writing it (temp file, then rename).",
    )
    p.add_argument("--recipe", type=input_path_option("file"), help="a TOML recipe (export/NAME.toml) instead of SRC and flags")
    # Every other flag is an ExportOptions field's declaration (convert/plan/export_options.py).
    add_arguments(p)
    p.set_defaults(func=run)
    return p


def _progress_log():
    """Progress lines on stdout, before the result: loading, converting and validating a full-size
    model take a minute or more, which must not look like a hang (issue 12). Not on stderr: a
    refused export leaves exactly one error line there, as every command does."""
    from rich.console import Console

    console = Console()
    return lambda line: console.print(escape(line), markup=False, highlight=False, soft_wrap=True)  # a path in it


def run(args):
    if args.recipe:
        if args.source or args.out:
            raise ConfigError("pass either --recipe or SRC with flags, not both (the recipe names source and outputs)")
        if args.overwrite:
            raise ConfigError("--overwrite goes with SRC --out FILE; a recipe replaces only the files mbk wrote "
                              "before (move other files away, or export with --out)")
        from mobilebert_kit.convert.recipe import Recipe

        recipe = Recipe.load(args.recipe)
        results = recipe.run(validate=args.validate, log=_progress_log(), score=_score())
        for result in results:
            print(result.format_text())
        return 0
    if not args.source or not args.out:
        raise ConfigError("mbk export needs SRC and --out FILE (or --recipe export/NAME.toml)")
    from mobilebert_kit.convert.exporter import export

    result = export(from_arguments(args), log=_progress_log(), score=_score())
    print(result.format_text())
    return 0


def _score():
    """The task scorer ``export`` needs for eval data (the evaluator sits above ``convert/``)."""
    from mobilebert_kit.evaluation.artifact_metrics import evaluate_artifact

    return evaluate_artifact
