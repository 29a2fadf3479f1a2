"""ArtifactRunner: runs a ``.tflite`` (ai-edge-litert) or ``.onnx`` (onnxruntime) file on numpy inputs.

Inputs are given as the Keras model takes them (int32 ``[n, seq]``, mask 1/0); the runner casts, quantizes and
dequantizes with the tensors' own scale and zero point, splits rows into the static batch and resizes an open
(``-1``) ``.tflite`` axis to the rows given. :func:`load_tflite`, :func:`load_compiled_model` and :func:`load_onnx`
are the one place an interpreter, compiled model or session is created, with one-line errors; which LiteRT API runs
a ``.tflite`` is decided by :func:`~mobilebert_kit.artifacts.runtimes.choose_tflite_runtime`.
"""

import gc
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from mobilebert_kit.artifacts.errors import ArtifactError, RuntimeLoadError
from mobilebert_kit.artifacts.formats import EXTENSIONS_DOMAIN, FORMATS
from mobilebert_kit.artifacts.reader import artifact_format, read_artifact, takes_text
from mobilebert_kit.artifacts.runtimes import (
    RUNTIMES,
    CompiledModel,
    choose_tflite_runtime,
    compiled_model_options,
    file_needs,
)
from mobilebert_kit.artifacts.text_session import TextSession
from mobilebert_kit.utils.quiet import quiet_fd2, quiet_teardown
from mobilebert_kit.errors import first_line

# ``delegate`` -> LiteRT op resolver: XNNPACK (the default delegate) or the builtin kernels alone.
TFLITE_RESOLVERS = {"xnnpack": OpResolverType.AUTO, "none": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
# onnxruntime's input type strings -> numpy dtype names.
_ORT_TYPES = {"tensor(int32)": "int32", "tensor(int64)": "int64", "tensor(float)": "float32",
              "tensor(float16)": "float16", "tensor(int8)": "int8", "tensor(uint8)": "uint8",
              "tensor(string)": "string"}


def read_model(path):
    """The bytes of model file ``path``, read once: what every runtime is handed, never the path.

    LiteRT memory-maps a path and reads weights from the mapping at every invoke, so a file rewritten meanwhile
    kills the process with SIGBUS; a private copy cannot change under the runtime. Bytes also serve a path whose
    name is not UTF-8 (the runtimes encode a path argument as UTF-8).

    Args:
        path (str | os.PathLike): the model file.

    Returns:
        bytes: the file's content.

    Raises:
        RuntimeLoadError: the file cannot be read.

    Example:
        >>> len(read_model("model.tflite")) > 0  # doctest: +SKIP
        True
    """
    try:
        with open(path, "rb") as handle:
            content = handle.read()
    except OSError as err:
        raise RuntimeLoadError(f"{path} cannot be read: {err.strerror or err}; check the file") from err
    if not content:  # emptied after the commands' checks; the runtimes take b"" for no model at all
        raise RuntimeLoadError(f"{path} is empty (0 bytes; it was cut while it was read?); re-export the model or "
                               "check that the download finished")
    return content


def load_tflite(path, *, num_threads=None, delegate="xnnpack", input_shapes=None, preserve_all_tensors=False,
                per_op_delegate_nodes=False):
    """Creates and allocates a LiteRT interpreter for ``path``.

    Args:
        path (str | os.PathLike): the ``.tflite`` file.
        num_threads (int | None): interpreter threads.
        delegate (str): ``"xnnpack"`` (default delegates) or ``"none"`` (builtin kernels).
        input_shapes (dict[str, list[int]] | None): inputs to resize before allocation (dynamic models).
        preserve_all_tensors (bool): keep intermediate tensors readable after ``invoke``.
        per_op_delegate_nodes (bool): one delegate node per delegated op
            (``experimental_disable_delegate_node_fusion``), for coverage checks.

    Returns:
        Interpreter: allocated, ready for ``set_tensor`` / ``invoke``.

    Raises:
        RuntimeLoadError: LiteRT cannot load, resize or allocate the model.

    Example:
        >>> load_tflite("model.tflite", num_threads=1).get_input_details()[0]["name"]  # doctest: +SKIP
        'input_ids'
    """
    try:
        # quiet: LiteRT's C++ "Created TensorFlow Lite XNNPACK delegate" banner would split CLI output.
        with quiet_fd2():
            content = read_model(path)  # bytes, never the path: read_model says why
            interpreter = Interpreter(
                model_content=content, num_threads=num_threads,
                experimental_op_resolver_type=TFLITE_RESOLVERS[delegate],
                experimental_preserve_all_tensors=preserve_all_tensors,
                experimental_disable_delegate_node_fusion=per_op_delegate_nodes,
            )
            if any(np.dtype(d["dtype"]) == np.int16 for d in interpreter.get_tensor_details()):
                _survives_in_a_child(path, content, delegate, input_shapes)
            for detail in interpreter.get_input_details():
                want = (input_shapes or {}).get(detail["name"])
                if want is not None and list(detail["shape"]) != list(want):
                    interpreter.resize_tensor_input(detail["index"], list(want))
            interpreter.allocate_tensors()
    except (ValueError, RuntimeError, OSError) as err:
        raise RuntimeLoadError(f"{path} cannot be loaded by the TFLite interpreter: {first_line(err)}") from err
    return interpreter


# Run in a child: load, allocate and invoke once on zeros (a crash here is the file's, never the caller's).
_CHILD = """
import json, sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
resolver, shapes = sys.argv[1], json.loads(sys.argv[2])
kind = OpResolverType.AUTO if resolver == "xnnpack" else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
it = Interpreter(model_content=sys.stdin.buffer.read(), experimental_op_resolver_type=kind)
for d in it.get_input_details():
    if d["name"] in shapes:
        it.resize_tensor_input(d["index"], shapes[d["name"]])
it.allocate_tensors()
for d in it.get_input_details():
    it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
it.invoke()
"""


def _survives_in_a_child(path, content, delegate, input_shapes):
    """Raises RuntimeLoadError when a child process that prepares and runs ``path`` fails: LiteRT's int16 kernels
    abort the process (SIGABRT, no message) on some graphs, and refuse others (an int16x8 LayerNorm's
    SQUARED_DIFFERENCE: "only supports FLOAT32 and INT32"), which the run said as "re-export the model"."""
    try:  # the bytes already read go in on stdin: the child runs what the caller will run, not the path again
        done = subprocess.run([sys.executable, "-c", _CHILD, delegate,
                               json.dumps({k: list(map(int, v)) for k, v in (input_shapes or {}).items()})],
                              input=content, capture_output=True, timeout=600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    except (OSError, subprocess.TimeoutExpired):
        return
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["no message"]
        how = (f"crashes the TFLite interpreter ({signal.Signals(-done.returncode).name} while preparing or running "
               f"it)" if done.returncode < 0 else f"cannot run in the TFLite interpreter ({first_line(lines[-1])})")
        raise RuntimeLoadError(f"{path} {how}: a kernel of this LiteRT build cannot run one of its int16 ops; "
                               "export it with --quantize int8 or dynamic instead")


class CompiledTflite:
    """A LiteRT ``CompiledModel`` (first signature, shapes as compiled) with its buffers made once, run like an
    allocated Interpreter; ``input_details`` / ``output_details`` list ``{"name", "index", "dtype", "shape"}``.
    Built by :func:`load_compiled_model`."""

    def __init__(self, model, content=None):
        self.model = model
        self._content = content  # the bytes from_buffer compiled: kept alive as long as the model that reads them
        key = model.get_signature_by_index(0)["key"]
        self.input_details = list(model.get_input_tensor_details(key).values())
        self.output_details = list(model.get_output_tensor_details(key).values())
        self._inputs = model.create_input_buffers(0)
        self._outputs = model.create_output_buffers(0)

    def set_inputs(self, feeds):
        """Copies ``{name: array}`` into the input buffers (cast to each input's dtype)."""
        for detail, buffer in zip(self.input_details, self._inputs):
            buffer.write(np.ascontiguousarray(feeds[detail["name"]], dtype=detail["dtype"]))

    def invoke(self):
        """Runs the model once on the inputs last set."""
        self.model.run_by_index(0, self._inputs, self._outputs)

    def outputs(self):
        """``{name: array}`` of the outputs of the last run."""
        return {d["name"]: b.read(int(np.prod(d["shape"])), d["dtype"]).reshape(d["shape"])
                for d, b in zip(self.output_details, self._outputs)}


_LITERT_ENVIRONMENT = {}


def _release_litert():
    """Drops the shared environment at exit (its teardown then logs into the quiet block, not after the output)."""
    _LITERT_ENVIRONMENT.clear()
    gc.collect()


def load_compiled_model(path, *, num_threads=None, delegate="xnnpack"):
    """Compiles ``path`` with LiteRT's CompiledModel API on the CPU accelerator.

    Args:
        path (str | os.PathLike): a ``.tflite`` file with static input shapes.
        num_threads (int | None): CPU threads (None: LiteRT decides).
        delegate (str): ``"xnnpack"`` or ``"none"`` (``CpuKernelMode.BUILTIN``: the builtin kernels).

    Returns:
        CompiledTflite: compiled, buffers made, ready for ``set_inputs`` / ``invoke``.

    Raises:
        RuntimeLoadError: LiteRT cannot compile the model, or this ai-edge-litert has no CompiledModel.

    Example:
        >>> load_compiled_model("model.tflite", num_threads=1).input_details[0]["name"]  # doctest: +SKIP
        'input_ids'
    """
    if CompiledModel is None:
        raise RuntimeLoadError(f"{path} cannot be compiled: this ai-edge-litert has no CompiledModel (2.x adds it)")
    try:
        # quiet: CompiledModel's environment logs a dozen INFO / WARNING lines (accelerator and plugin registry).
        with quiet_fd2():
            content = read_model(path)  # from_buffer, never from_file (a mapping): read_model says why
            compiled = CompiledModel.from_buffer(content, options=compiled_model_options(num_threads, delegate),
                                                 environment=_LITERT_ENVIRONMENT.get("shared"))
            # One environment for the process: each model's own one registers the accelerators again and logs
            # their teardown to fd 2 whenever Python collects it, outside any quiet block.
            _LITERT_ENVIRONMENT.setdefault("shared", compiled.environment)
            quiet_teardown(_release_litert)
            loaded = CompiledTflite(compiled, content)
            # The first buffer write of the process creates LiteRT's global environment, with the same log lines.
            loaded.set_inputs({d["name"]: np.zeros(d["shape"], d["dtype"]) for d in loaded.input_details})
            return loaded
    except (ValueError, RuntimeError) as err:
        raise RuntimeLoadError(f"{path} cannot be compiled by LiteRT's CompiledModel: {first_line(err)}") from err


def load_onnx(path, options=None):
    """Creates an onnxruntime CPU session for ``path``.

    Args:
        path (str | os.PathLike): the ``.onnx`` file.
        options (onnxruntime.SessionOptions | None): threads, optimization level, profiling.

    Returns:
        onnxruntime.InferenceSession: on the CPU execution provider.

    Raises:
        RuntimeLoadError: onnxruntime cannot load the model.

    Example:
        >>> load_onnx("model.onnx").get_inputs()[0].name  # doctest: +SKIP
        'input_ids'
    """
    content = read_model(path)
    options = options or ort.SessionOptions()
    if needs_extensions(content):
        if importlib.util.find_spec("onnxruntime_extensions") is None:  # found, not loaded: the child loads it
            raise RuntimeLoadError(f"{path} tokenizes its text with onnxruntime-extensions' custom ops "
                                   "(--tokenizer-in-graph): pip install onnxruntime-extensions")
        # Run where an app runs it: a process holding onnxruntime and onnxruntime-extensions only (text_session).
        return TextSession(path, options.intra_op_num_threads or None)
    try:
        return ort.InferenceSession(content, options, providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001  (onnxruntime raises its own Fail/InvalidGraph/... types)
        raise RuntimeLoadError(f"{path} cannot be loaded by onnxruntime: {first_line(err)}") from err


def needs_extensions(content):
    """Whether an ``.onnx`` file's bytes import onnxruntime-extensions' custom-op domain (its opset imports)."""
    if EXTENSIONS_DOMAIN.encode() not in content:
        return False
    import onnx  # noqa: PLC0415  (only a file that names the domain is parsed)

    try:
        model = onnx.load_model_from_string(content)
    except Exception:  # noqa: BLE001  (a damaged file: onnxruntime says what is wrong with it)
        return False
    return any(o.domain == EXTENSIONS_DOMAIN for o in model.opset_import)


class ArtifactRunner:
    """Loads an artifact once and runs it on input dicts.

    Args:
        path: a ``.tflite`` or ``.onnx`` file.
        num_threads: interpreter / session threads.
        fmt: ``"tflite"`` or ``"onnx"`` when the suffix does not say (a temporary file).
        runtime (str): the LiteRT API of a ``.tflite``: ``auto`` (CompiledModel where it serves, see
            :mod:`~mobilebert_kit.artifacts.runtimes`), ``interpreter`` or ``compiled_model``.

    Attributes:
        input_specs: ``[{"name", "shape", "dtype"}]`` in graph order.
        output_names: output names in graph order.
        runtime (Runtime): the record of what runs the file (``artifacts.runtimes``: a LiteRT API or ONNX Runtime).
        runtime_warnings (tuple[str, ...]): why a requested or preferred API was passed over.

    Example:
        >>> runner = ArtifactRunner("model.tflite")  # doctest: +SKIP
        >>> runner.run(inputs)["sequence_output"].shape  # doctest: +SKIP
        (16, 128, 512)
    """

    def __init__(self, path, num_threads=None, fmt=None, runtime="auto"):
        self.path = Path(path)
        if not self.path.is_file():
            raise ArtifactError(f"{self.path} does not exist")
        self.format = artifact_format(self.path, fmt)
        self.runtime, self.runtime_warnings = RUNTIMES[FORMATS[self.format].runtimes[0]], ()
        if FORMATS[self.format].litert:  # which LiteRT API: decided once from what the file needs
            graph = read_artifact(self.path, self.format)
            choice = choose_tflite_runtime(runtime, **file_needs(graph))
            self.runtime, self.runtime_warnings = choice.runtime, choice.warnings
        # The record names its loader (load_tflite, load_compiled_model, load_onnx): each one's set-up here.
        {"load_tflite": lambda: self._init_tflite(num_threads),
         "load_compiled_model": lambda: self._init_compiled(num_threads, [s["name"] for s in graph.output_specs()]),
         "load_onnx": lambda: self._init_onnx(num_threads)}[self.runtime.load]()
        if not self.input_specs:  # every caller feeds token arrays
            raise ArtifactError(f"{self.path} has no inputs, so it is not an encoder export; pass a file that "
                                "takes input_ids (mbk export writes one)")

    def _init_tflite(self, num_threads, preserve_all_tensors=False):
        self._interpreter = load_tflite(self.path, num_threads=num_threads, preserve_all_tensors=preserve_all_tensors)
        self._inputs = self._interpreter.get_input_details()
        self._outputs = self._interpreter.get_output_details()
        # The signature's shape, None where it is open (-1), as onnxruntime reports a dynamic axis: a dynamic
        # file's current shape is only the length it allocated last.
        self.input_specs = [
            {"name": d["name"], "shape": [int(x) if x >= 0 else None for x in _signature(d)],
             "dtype": np.dtype(d["dtype"]).name}
            for d in self._inputs
        ]
        self.output_names = [d["name"] for d in self._outputs]
        # Outputs whose second axis follows the open sequence (a sequence output, span logits): run_as_app pads them.
        self._sequence_outputs = {d["name"] for d in self._outputs if _signature(d)[1:2] == [-1]}
        self._run_batch = self._run_tflite

    def _run_tflite(self, feeds):
        it = self._interpreter
        resized = False
        for detail in self._inputs:
            shape = list(np.shape(feeds[detail["name"]]))
            if -1 in _signature(detail) and shape != [int(x) for x in detail["shape"]]:
                # strict: only the open axes change; a static axis fed another size fails in set_tensor below.
                it.resize_tensor_input(detail["index"], shape, strict=True)
                resized = True
        if resized:
            it.allocate_tensors()
            self._inputs, self._outputs = it.get_input_details(), it.get_output_details()
        for detail in self._inputs:
            it.set_tensor(detail["index"], _to_input_type(feeds[detail["name"]], detail))
        it.invoke()
        out = {}
        for detail in self._outputs:
            value = it.get_tensor(detail["index"])
            scale, zero = detail["quantization"]
            if np.issubdtype(value.dtype, np.integer) and scale:
                value = (value.astype(np.float32) - zero) * scale
            out[detail["name"]] = value
        return out

    # === TFLite through CompiledModel (static shapes, float / int32 inputs and outputs: see artifacts.runtimes) ===
    def _init_compiled(self, num_threads, graph_outputs):
        self._compiled = load_compiled_model(self.path, num_threads=num_threads)
        self.input_specs = [{"name": d["name"], "shape": [int(x) for x in d["shape"]], "dtype": np.dtype(d["dtype"]).name}
                            for d in self._compiled.input_details]
        # Graph order, as the Interpreter lists them (callers take output_names[0] as the hidden states); the
        # signature may list them in another order.
        names = [d["name"] for d in self._compiled.output_details]
        self.output_names = sorted(names, key=lambda n: graph_outputs.index(n) if n in graph_outputs else len(names))
        self._sequence_outputs = set()  # a static file: run_as_app runs its rows as given
        self._run_batch = self._run_compiled

    def _run_compiled(self, feeds):
        self._compiled.set_inputs(feeds)
        self._compiled.invoke()
        return self._compiled.outputs()

    def _init_onnx(self, num_threads):
        options = ort.SessionOptions()
        # A kernel failure is raised to run()'s caller, which reports it in one line; ORT's own copy of it
        # on stderr (an ANSI-coloured log line) would be a second, unasked-for line.
        options.log_severity_level = 4
        if num_threads:
            options.intra_op_num_threads = num_threads
        self._session = load_onnx(self.path, options)
        self.input_specs = [
            {"name": i.name, "shape": [d if isinstance(d, int) else None for d in i.shape], "dtype": _ORT_TYPES.get(i.type, i.type)}
            for i in self._session.get_inputs()
        ]
        self.output_names = [o.name for o in self._session.get_outputs()]
        # A text-in file's outputs whose second axis is the tokens: it pads them to its batch's longest text (run_text).
        self._sequence_outputs = {o.name for o in self._session.get_outputs() if self.takes_text and (
            len(o.shape) > 2 or (len(o.shape) == 2 and not isinstance(o.shape[1], int)))}
        self._run_batch = self._run_onnx

    def _run_onnx(self, feeds):
        return dict(zip(self.output_names, self._session.run(None, feeds)))

    @property
    def takes_text(self):
        """Whether the file's one input is text (a string tensor: the tokenizer runs inside it)."""
        return takes_text(self.input_specs)

    def run_text(self, texts, seq_len=None):
        """Runs a text-in file on ``texts``; outputs that follow the tokens are zero-padded to ``seq_len`` (laid
        out as the plain file's on the tokenizer's arrays at that length).

        Example:
            >>> ArtifactRunner("text.onnx").run_text(["Hello world"])["sentence_embedding"].shape  # doctest: +SKIP
            (1, 384)
        """
        if not self.takes_text:
            raise ArtifactError(f"{self.path} takes token arrays, not text; tokenize the text first")
        out = self.run({self.input_specs[0]["name"]: np.asarray([str(t) for t in texts], dtype=object)})
        return out if seq_len is None else self._padded(out, seq_len)

    def _padded(self, out, length):
        """``out`` with the outputs that follow the sequence zero-padded to ``length`` positions."""
        for name in self._sequence_outputs & set(out):
            pad = [(0, 0)] * out[name].ndim
            pad[1] = (0, max(length - out[name].shape[1], 0))
            out[name] = np.pad(out[name], pad)
        return out

    @property
    def batch_size(self):
        """The static batch of the first input (None when dynamic)."""
        shape = self.input_specs[0]["shape"]
        return shape[0] if shape and shape[0] not in (None, -1) else None

    @property
    def seq_len(self):
        shape = self.input_specs[0]["shape"]
        return shape[1] if len(shape) > 1 and shape[1] not in (None, -1) else None

    def run_as_app(self, inputs):
        """Runs the rows of ``inputs`` as the client apps feed this file; returns what :meth:`run` returns.

        A file with batch 1 and an open sequence (``[1, -1]``, the default ``.tflite``) is fed by MediaPipe and
        the Task Library each text at its own token count, no padding: each row is cut after its last real
        token (``attention_mask``) and run alone. Outputs that follow the sequence are padded back to the rows'
        length with zeros, positions the app never computes. Any other file runs the rows as given.

        Example:
            >>> ArtifactRunner("model.tflite").run_as_app(inputs)["probability"].shape  # doctest: +SKIP
            (16, 2)
        """
        if self.seq_len is not None or self.batch_size != 1 or "attention_mask" not in inputs:
            return self.run(inputs)
        mask = np.asarray(inputs["attention_mask"])
        parts = []
        for row in range(len(mask)):
            real = np.flatnonzero(mask[row])
            length = int(real[-1]) + 1 if real.size else 1
            out = self.run({name: np.asarray(value)[row : row + 1, :length] for name, value in inputs.items()})
            parts.append(self._padded(out, mask.shape[1]))  # a file that cuts long text returns fewer
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def batches(self, inputs):
        """``[(feeds, rows kept)]``: the runs that :meth:`run` makes of ``inputs``, each cast to the graph's inputs.

        The static batch splits the rows (the last filled with repeated rows); ``emulated_runner`` feeds the same.

        Example:
            >>> [kept for _, kept in ArtifactRunner("model.tflite").batches(inputs)]  # doctest: +SKIP
            [1, 1, 1]
        """
        n = len(next(iter(inputs.values())))
        batch = self.batch_size or n
        runs = []
        for start in range(0, n, batch):
            index = np.arange(start, start + batch) % n  # the last batch is filled with repeated rows
            feeds = {}
            for spec in self.input_specs:
                if spec["name"] not in inputs:
                    raise ArtifactError(f"{self.path} expects input {spec['name']!r}; inputs given: {sorted(inputs)}")
                if spec["dtype"] == "string":
                    feeds[spec["name"]] = np.asarray(inputs[spec["name"]], dtype=object)[index]
                    continue
                feeds[spec["name"]] = np.asarray(inputs[spec["name"]])[index].astype(
                    spec["dtype"] if spec["dtype"] in ("int32", "int64", "float32", "float16") else np.float32
                )
            runs.append((feeds, min(batch, n - start)))
        return runs

    def run(self, inputs):
        """Runs every row of ``inputs`` (``{name: [n, seq]}``) and returns ``{output: [n, ...]}``."""
        parts = []
        for feeds, keep in self.batches(inputs):
            try:
                result = self._run_batch(feeds)
            except ArtifactError:
                raise
            except Exception as err:  # noqa: BLE001  (ORT's error types are pybind11's, outside Python's hierarchy)
                raise ArtifactError(f"the runtime could not run {self.path.name}: {first_line(err)}; re-export the "
                                    "model (or report it with the file)") from err
            parts.append({k: np.asarray(v)[:keep] for k, v in result.items()})
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _signature(detail):
    """A LiteRT tensor detail's shape signature (-1: an open axis); its shape when it records none."""
    signature = detail.get("shape_signature")
    return [int(x) for x in (signature if signature is not None and len(signature) else detail["shape"])]


def _to_input_type(value, detail):
    dtype = np.dtype(detail["dtype"])
    scale, zero = detail["quantization"]
    if np.issubdtype(dtype, np.integer) and scale:
        info = np.iinfo(dtype)
        return np.clip(np.round(np.asarray(value, np.float32) / scale + zero), info.min, info.max).astype(dtype)
    return np.asarray(value).astype(dtype)
