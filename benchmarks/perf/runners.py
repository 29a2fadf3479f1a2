"""One inference call per model file: LiteRT (XNNPACK) for ``.tflite``, ONNX Runtime for ``.onnx``, ExecuTorch for ``.pte``.

Every runner uses one thread, batch 1 and the same realistic inputs (see
:func:`realistic_inputs`), cast to whatever dtype each model declares: the
peers take int32 (Model Garden) or int64 (Hugging Face) masks, ours a float32
one. Inputs are matched by name, accepting each family's spelling.
"""

import os

import numpy as np

# Each family's names for the three BERT inputs.
ALIASES = {
    "input_ids": ("input_ids", "input_word_ids"),
    "attention_mask": ("attention_mask", "input_mask"),
    "token_type_ids": ("token_type_ids", "input_type_ids", "segment_ids"),
}


def realistic_inputs(vocab_size, seq_len, seed=0):
    """Batch-1 int arrays: [CLS] ids... [SEP] ids... [SEP], then 1/8 right padding.

    Ids are drawn inside the vocabulary (above the special tokens when it is
    big enough), the mask is 1 on real tokens and 0 on padding, segments are
    0 then 1. Latency does not depend on the values, but quantized models must
    see in-range ids and a real mask (their calibration did).
    """
    rng = np.random.default_rng(seed)
    real = max(2, seq_len - seq_len // 8)
    low = 1000 if vocab_size > 2000 else 5
    cls, sep = (101, 102) if vocab_size > 2000 else (1, 2)
    ids = np.zeros((1, seq_len), np.int64)
    ids[0, :real] = rng.integers(low, vocab_size, size=real)
    half = max(1, real // 2)
    ids[0, 0] = cls
    ids[0, half - 1] = sep
    ids[0, real - 1] = sep
    mask = np.zeros((1, seq_len), np.int64)
    mask[0, :real] = 1
    types = np.zeros((1, seq_len), np.int64)
    types[0, half:real] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _canonical(name):
    lowered = name.lower()
    for canonical, spellings in ALIASES.items():
        if any(s in lowered for s in spellings):
            return canonical
    raise ValueError(f"model input {name!r} is none of {sorted(ALIASES)} (or their aliases)")


class TfliteRunner:
    """A LiteRT interpreter on one thread (XNNPACK applied by default), inputs set once.

    Args:
        path: the ``.tflite`` file.
        inputs: :func:`realistic_inputs` arrays.
        xnnpack: False runs the builtin kernels only.
    """

    def __init__(self, path, inputs, xnnpack=True):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        resolver = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self.interpreter = Interpreter(model_path=str(path), num_threads=1, experimental_op_resolver_type=resolver)
        details = self.interpreter.get_input_details()
        seq_len = inputs["input_ids"].shape[1]
        for d in details:
            if list(d["shape"]) != [1, seq_len]:
                self.interpreter.resize_tensor_input(d["index"], [1, seq_len])
        self.interpreter.allocate_tensors()
        for d in self.interpreter.get_input_details():
            value = inputs[_canonical(d["name"])]
            scale, zero = d["quantization"]
            if np.issubdtype(d["dtype"], np.integer) and d["dtype"] in (np.int8, np.uint8) and scale:
                value = np.round(value / scale + zero)  # int8 io: quantize the mask like the model expects
            self.interpreter.set_tensor(d["index"], value.astype(d["dtype"]))

    def __call__(self):
        self.interpreter.invoke()

    def outputs(self):
        return {d["name"]: self.interpreter.get_tensor(d["index"]) for d in self.interpreter.get_output_details()}


_ORT_TYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(float)": np.float32}


class OnnxRunner:
    """An ONNX Runtime CPU session on one thread (intra- and inter-op), full graph optimisation.

    ``inputs``: one feed (:func:`realistic_inputs`), or a list of feeds that one call runs in turn (real
    sentences, each at its own length; ``outputs`` answers the first).
    """

    def __init__(self, path, inputs):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        for i in self.session.get_inputs():
            if i.type not in _ORT_TYPES:
                raise ValueError(f"{path}: input {i.name} has unsupported type {i.type}")
        self.rows = [
            {i.name: row[_canonical(i.name)].astype(_ORT_TYPES[i.type]) for i in self.session.get_inputs()}
            for row in ([inputs] if isinstance(inputs, dict) else inputs)
        ]
        self.feeds = self.rows[0]

    def __call__(self):
        for feeds in self.rows:
            self.session.run(None, feeds)

    def outputs(self):
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(None, self.feeds)))


class PteRunner:
    """An ExecuTorch program (``.pte``) in its Python runtime, on one thread.

    A ``.pte`` method has no input names: the exporter (``edge_peers``) fixes
    the order to ``input_ids, attention_mask, token_type_ids``, int64.
    """

    def __init__(self, path, inputs):
        import torch
        from executorch.extension.pybindings import portable_lib
        from executorch.runtime import Runtime

        # Its thread pool starts with one thread per core even when the process is pinned to one.
        portable_lib._unsafe_reset_threadpool(1)  # noqa: SLF001  (the runtime's only thread-count control)
        self.method = Runtime.get().load_program(str(path)).load_method("forward")
        self.args = [torch.from_numpy(inputs[name].astype(np.int64)) for name in ALIASES]

    def __call__(self):
        self.method.execute(self.args)

    def outputs(self):
        values = self.method.execute(self.args)
        return {f"output_{i}": v.numpy() for i, v in enumerate(values)}


def load_runner(path, inputs, xnnpack=True):
    """Returns the runner for ``path`` by its suffix."""
    suffix = os.path.splitext(str(path))[1]
    if suffix == ".pte":
        return PteRunner(path, inputs)
    if suffix == ".tflite":
        return TfliteRunner(path, inputs, xnnpack=xnnpack)
    if suffix == ".onnx":
        return OnnxRunner(path, inputs)
    raise ValueError(f"{path}: not a .tflite, .onnx or .pte file")
