"""The child that runs a model file inside the emulated foreign-architecture Python (not imported by the package).

Standalone on purpose: the aarch64 sysroot holds Python, numpy and the one runtime (ai-edge-litert or
onnxruntime) and nothing of mobilebert_kit. Inputs and outputs cross the process boundary as ``.npz``
files read with ``allow_pickle=False``, so nothing the child writes can run code in the parent.

Usage (by :class:`~mobilebert_kit.artifacts.emulated_runner.EmulatedRunner`)::

    python3.11 emulated_child.py MODEL FORMAT THREADS INPUTS.npz OUTPUTS.npz

``INPUTS.npz`` holds one batch per run as ``"{run}/{input name}"`` arrays already in the graph's input
types; ``OUTPUTS.npz`` gets ``"{run}/{output name}"`` float32 arrays (int8 outputs dequantized with their
own scale and zero point, as the app reads them).
"""

import sys

import numpy as np


def _batches(arrays):
    """``[{input name: array}]`` in run order from the ``"{run}/{name}"`` keys."""
    runs = {}
    for key in arrays.files:
        run, name = key.split("/", 1)
        runs.setdefault(int(run), {})[name] = arrays[key]
    return [runs[i] for i in sorted(runs)]


def run_tflite(path, threads, batches):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    # XNNPACK (the default delegate), as the app runs it: the builtin kernels give other numbers.
    with open(path, "rb") as handle:
        it = Interpreter(model_content=handle.read(), num_threads=threads,
                         experimental_op_resolver_type=OpResolverType.AUTO)
    it.allocate_tensors()
    out = {}
    for run, feeds in enumerate(batches):
        details = it.get_input_details()
        if any(list(d["shape"]) != list(feeds[d["name"]].shape) for d in details):
            for d in details:
                it.resize_tensor_input(d["index"], list(feeds[d["name"]].shape), strict=True)
            it.allocate_tensors()
        for d in it.get_input_details():
            value = feeds[d["name"]]
            scale, zero = d["quantization"]
            if np.issubdtype(np.dtype(d["dtype"]), np.integer) and scale:
                info = np.iinfo(d["dtype"])
                value = np.clip(np.round(value.astype(np.float32) / scale + zero), info.min, info.max)
            it.set_tensor(d["index"], np.asarray(value).astype(d["dtype"]))
        it.invoke()
        for d in it.get_output_details():
            value = it.get_tensor(d["index"])
            scale, zero = d["quantization"]
            if np.issubdtype(value.dtype, np.integer) and scale:
                value = (value.astype(np.float32) - zero) * scale
            out[f"{run}/{d['name']}"] = np.asarray(value, np.float32)
    return out


def run_onnx(path, threads, batches):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    if threads:
        options.intra_op_num_threads = threads
    with open(path, "rb") as handle:  # bytes, as run_tflite: never a file that can change under the session
        session = ort.InferenceSession(handle.read(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    out = {}
    for run, feeds in enumerate(batches):
        for name, value in zip(names, session.run(None, feeds)):
            out[f"{run}/{name}"] = np.asarray(value, np.float32)
    return out


# A format's name (artifacts.formats: Format.name) -> the function that runs a file of it here.
RUNNERS = {"tflite": run_tflite, "onnx": run_onnx}


def main(argv):
    path, fmt, threads, inputs, outputs = argv
    with np.load(inputs, allow_pickle=False) as arrays:
        batches = _batches(arrays)
    np.savez(outputs, **RUNNERS[fmt](path, int(threads) or None, batches))


if __name__ == "__main__":
    main(sys.argv[1:])
