"""``mbk pipeline``: a recipe end to end (export, quantize, validate, profile, report), re-runs skip what is done.

Contract:
    mbk pipeline [RECIPE] [--source SRC] [--out DIR] [--force] [--runs N] [--threads N]
                 [--device SERIAL [--adb PATH] [--benchmark-binary PATH] [--trials N]]
"""

from mobilebert_kit.errors import ConfigError
from mobilebert_kit.profiler.result import PROFILE_LIMITS
from mobilebert_kit.utils.output_check import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import number_option


def register(subparsers):
    p = subparsers.add_parser(
        "pipeline",
        help="run a recipe end to end: export, quantize, validate, profile, one HTML report",
        description="Run a recipe (export/NAME.toml) end to end: load the source (preset, saved model, Hugging Face "
        "directory or TF1 checkpoint), substitute and recover if the recipe says so, quantize, export TFLite/ONNX "
        "(plus a float32 baseline per format when quantized), validate every file against the Keras source, "
        "profile on the host (and on a phone with --device), and write one HTML report with the JSON behind it. "
        "Each stage stores a manifest (content hashes of its inputs) next to its outputs; a re-run skips stages "
        "whose inputs did not change. With no RECIPE: export/default.toml on all-MiniLM-L6-v2 when the examples "
        "extra is installed, else on the mobilebert preset.",
    )
    p.add_argument("recipe", nargs="?", type=input_path_option("file"), metavar="RECIPE",
                   help="a TOML recipe (default: export/default.toml on the default model)")
    p.add_argument("--source", type=input_path_option("any", tree=True, or_name=True), metavar="SRC",
                   help="model replacing the recipe's [source]: preset name, saved-model or Hugging Face directory, "
                   "or TF1 checkpoint")
    p.add_argument("--out", metavar="DIR", help="output directory (default: the recipe's out_dir)")
    p.add_argument("--force", action="store_true", help="re-run every stage, even unchanged ones")
    p.add_argument("--runs", type=number_option(PROFILE_LIMITS["runs"]), default=20, help="timed runs per artifact and target (default 20; again with 4x the runs, up to 3 attempts, "
                   "while the 95%% interval of the median is wider than 5%%)")
    p.add_argument("--threads", type=number_option(PROFILE_LIMITS["threads"]), default=1, help="inference threads when profiling (default 1)")
    p.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    p.add_argument("--device", metavar="SERIAL", help="also profile the .tflite files on this Android phone (adb)")
    p.add_argument("--adb", type=input_path_option("file", or_name=True), metavar="PATH", help="adb client to use with --device (default: adb on PATH)")
    p.add_argument("--benchmark-binary", type=input_path_option("file"), metavar="PATH", help="LiteRT benchmark_model for the phone's ABI")
    p.add_argument("--trials", type=number_option(PROFILE_LIMITS["trials"]), default=2, help="benchmark_model invocations per file on the phone (default 2)")
    p.set_defaults(func=run)
    return p


def run(args):
    from mobilebert_kit.pipeline.runner import Pipeline
    from mobilebert_kit.pipeline.source import default_recipe, default_source

    source = args.source
    if args.recipe is None:
        recipe = default_recipe()
        if source is None:
            source, what = default_source()
            print(f"mbk pipeline: default recipe {recipe} on {what}")
    else:
        recipe = args.recipe
    if (args.adb or args.benchmark_binary) and not args.device:
        raise ConfigError("--adb and --benchmark-binary go with --device SERIAL (the phone to profile on)")
    Pipeline(recipe, source=source, out_dir=args.out, force=args.force, runs=args.runs, threads=args.threads,
             device=args.device, adb=args.adb, benchmark_binary=args.benchmark_binary, trials=args.trials,
             overwrite=args.overwrite).run()
    return 0
