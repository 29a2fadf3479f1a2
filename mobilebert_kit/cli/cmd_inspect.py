"""``mbk inspect FILE``: inputs, outputs, ops by type, quantized vs float ops, size, client metadata and readiness."""

import json

from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.input_paths import input_path_option


def register(subparsers):
    p = subparsers.add_parser(
        "inspect",
        help="list a .tflite / .onnx file's inputs, outputs, ops (quantized or float), size and client readiness",
        description="Read a .tflite or .onnx file and list its inputs, outputs, operators by type (integer, "
        "hybrid, float), size and metadata; the TFLite Metadata the app-side clients read (input names, "
        "tokenizer and vocabulary, packed files, labels); and which clients (MediaPipe, the TFLite Task Library, "
        "optimum-style onnxruntime) it is ready for, or why not; for .onnx, the contrib (com.microsoft) ops a "
        "reduced onnxruntime build must include. Needs no Keras model.",
    )
    p.add_argument("file", type=input_path_option("file"), help="the .tflite or .onnx file")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument("--xnnpack", action="store_true",
                   help=".tflite: also load the file with XNNPACK and list the ops it leaves to builtin kernels "
                   "(each one costs a partition on a phone CPU)")
    p.set_defaults(func=run)
    return p


def run(args):
    from mobilebert_kit.artifacts.inspection import inspect_artifact

    info = inspect_artifact(args.file)
    report = info.to_dict()
    text = info.format_text()
    if args.xnnpack:
        if not FORMATS[info.format].xnnpack:
            raise ConfigError("--xnnpack applies to .tflite files (ONNX Runtime has no XNNPACK delegate here)")
        from mobilebert_kit.artifacts.xnnpack_coverage import xnnpack_coverage

        report["xnnpack"] = coverage = xnnpack_coverage(args.file)
        left = ", ".join(f"{op} x{n}" for op, n in coverage["builtin"].items()) or "none"
        text += (f"\nXNNPACK: {coverage['delegated']} of {coverage['ops']} ops delegated in "
                 f"{coverage['partitions']} partition(s); on builtin kernels: {left}")
    print(json.dumps(report, indent=2) if args.json else text)
    return 0
