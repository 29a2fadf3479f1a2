"""``mbk inspect FILE``: inputs, outputs, ops by type, quantized vs float ops, size of a .tflite / .onnx file."""


def register(subparsers):
    p = subparsers.add_parser(
        "inspect",
        help="list a .tflite / .onnx file's inputs, outputs, ops (quantized or float) and size",
        description="Read a .tflite or .onnx file and list its inputs, outputs, operators by type (integer, "
        "hybrid, float), size and metadata. Needs no Keras model.",
    )
    p.add_argument("file", help="the .tflite or .onnx file")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=run)
    return p


def run(args):
    import json

    from mobilebert_kit.convert.inspection import inspect_artifact

    info = inspect_artifact(args.file)
    print(json.dumps(info.to_dict(), indent=2) if args.json else info.format_text())
    return 0
