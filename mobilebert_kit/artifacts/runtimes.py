"""The runtimes that run a model file on this machine, as records in one table: LiteRT's two Python APIs for
``.tflite`` files, ONNX Runtime for ``.onnx`` files (docs/profiler.md, "LiteRT's two APIs").

Every runtime loads a file from bytes read once (``artifacts.runner.read_model``) by the loader its record's
``load`` names. :func:`choose_tflite_runtime` decides once, per use, which LiteRT API runs a file, with the
reason for every fallback (its record's ``why_not``, measured on ai-edge-litert 2.3.0) in its warnings.

Example:
    >>> choice = choose_tflite_runtime("auto", dynamic=True)
    >>> choice.runtime.name, choice.warnings[0][:40]
    ('interpreter', 'CompiledModel cannot resize inputs in ai')
"""

import dataclasses

from mobilebert_kit.errors import check_choice

try:  # CompiledModel arrived in ai-edge-litert 2.x; an older install keeps the Interpreter alone.
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.cpu_kernel_mode import CpuKernelMode
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import CpuOptions, Options
except ImportError:  # pragma: no cover  (2.3.0 is pinned; the branch keeps an older install working)
    CompiledModel = None


@dataclasses.dataclass(frozen=True)
class Runtime:
    """One runtime and what it can do.

    Args:
        name (str): the key in :data:`RUNTIMES` (``mbk profile --runtime`` spells ``_`` as ``-``).
        format (str): the format of the files it runs (``artifacts.formats``).
        load (str): its loader in ``artifacts/runner.py`` (each reads the file's bytes once).
        api (str): the class that runs the file, as a report names it.
        available (bool): the installed ai-edge-litert offers it.
        dynamic_shapes (bool): inputs with an open axis can be resized per call.
        delegates (tuple[str, ...]): the ``delegate`` values it runs (``xnnpack``, ``none``: builtin kernels).
        preserve_all_tensors (bool): intermediate tensors can be read after a run.
        quantized_io (bool): int8 inputs / outputs with their scale and zero point.
        int16_guard (bool): its loader first runs a file with int16 tensors in a child process, since
            LiteRT's int16 kernels abort (SIGABRT) on some graphs instead of raising.
        repeated_output_names (bool): a file whose outputs share a name (a drift probe whose last layer is also
            the model's output) gets each output's own values.
        why_not (dict[str, str]): for each capability it lacks, the evidence (the fallback warning's text).
    """

    name: str
    format: str
    load: str
    api: str
    available: bool
    dynamic_shapes: bool
    delegates: tuple
    preserve_all_tensors: bool
    quantized_io: bool
    int16_guard: bool
    repeated_output_names: bool
    why_not: dict = dataclasses.field(default_factory=dict)


RUNTIMES = {
    "interpreter": Runtime(
        name="interpreter", format="tflite", load="load_tflite", api="ai_edge_litert.interpreter.Interpreter",
        available=True,
        dynamic_shapes=True, delegates=("xnnpack", "none"), preserve_all_tensors=True, quantized_io=True,
        int16_guard=True, repeated_output_names=True,
    ),
    "compiled_model": Runtime(
        name="compiled_model", format="tflite", load="load_compiled_model",
        api="ai_edge_litert.compiled_model.CompiledModel", available=CompiledModel is not None,
        # delegate "none": CpuKernelMode.BUILTIN (TFLite's builtin kernels, no XNNPACK), as the Interpreter's resolver.
        dynamic_shapes=False, delegates=("xnnpack", "none"), preserve_all_tensors=False, quantized_io=False,
        int16_guard=False, repeated_output_names=False,
        why_not={
            "available": "this ai-edge-litert has no ai_edge_litert.compiled_model (2.x adds it)",
            # After resize_input_tensor its create_output_buffers still sizes outputs for the old shape.
            "dynamic_shapes": "CompiledModel cannot resize inputs in ai-edge-litert 2.3.0 (its output buffers keep "
                              "the old size and the run overflows them)",
            "preserve_all_tensors": "CompiledModel exposes no intermediate tensors",
            "quantized_io": "CompiledModel reports no scale / zero point for int8 inputs or outputs",
            "int16_guard": "int16 kernels may abort the process and only the Interpreter's loader tries them in a "
                           "child first",
            "repeated_output_names": "CompiledModel in ai-edge-litert 2.3.0 keys outputs by signature name and "
                                     "returned wrong values (NaN) for an output whose name another output repeats",
        },
    ),
    # ONNX Runtime's CPU execution provider: open axes, int8 I/O and every output by its own name; intermediate
    # tensors only as graph outputs (the ONNX drift probes add them), no delegates to choose.
    "onnxruntime": Runtime(
        name="onnxruntime", format="onnx", load="load_onnx", api="onnxruntime.InferenceSession", available=True,
        dynamic_shapes=True, delegates=("cpu",), preserve_all_tensors=False, quantized_io=True, int16_guard=False,
        repeated_output_names=True,
        why_not={"preserve_all_tensors": "an ONNX Runtime session returns graph outputs only"},
    ),
}
TFLITE_RUNTIMES = {name: r for name, r in RUNTIMES.items() if r.format == "tflite"}
# What ``--runtime`` accepts: a runtime's name, or ``auto`` (CompiledModel where it serves, else the Interpreter).
RUNTIME_CHOICES = ("auto", *TFLITE_RUNTIMES)
_PREFERRED = ("compiled_model", "interpreter")


@dataclasses.dataclass(frozen=True)
class RuntimeChoice:
    """The ``runtime`` one use gets for what the caller ``requested`` (``auto`` or a name), with one warning line per
    runtime passed over."""

    runtime: Runtime
    requested: str
    warnings: tuple = ()


def file_needs(graph):
    """What running a ``.tflite`` (its :class:`ArtifactGraph`) needs of its runtime: ``dynamic``, ``quantized_io``,
    ``int16_guard`` and ``repeated_output_names``, as :func:`choose_tflite_runtime` takes them."""
    io = graph.input_specs() + graph.output_specs()
    return {
        "dynamic": any(-1 in spec["shape"] for spec in graph.input_specs()),
        "quantized_io": any(spec["dtype"] in ("int8", "uint8", "int16") for spec in io),
        "int16_guard": any(tensor["dtype"] == "int16" for tensor in graph.tensors.values()),
        "repeated_output_names": len({spec["name"] for spec in graph.output_specs()}) < len(graph.output_specs()),
    }


def choose_tflite_runtime(requested="auto", *, dynamic=False, delegate="xnnpack", preserve_all_tensors=False,
                          quantized_io=False, int16_guard=False, repeated_output_names=False):
    """Decides once which LiteRT API runs a file for one use.

    ``auto`` takes CompiledModel where it can do all the use needs and the Interpreter otherwise; a named
    runtime that cannot do it falls back to the Interpreter too, and says so (a profile still runs).

    Args:
        requested (str): ``auto``, ``interpreter`` or ``compiled_model`` (``compiled-model`` accepted).
        dynamic (bool): the use resizes an open input axis.
        delegate (str): ``xnnpack`` or ``none``.
        preserve_all_tensors (bool): the use reads intermediate tensors.
        quantized_io (bool): the file has quantized (int8 with a scale) inputs or outputs.
        int16_guard (bool): the file has int16 tensors.
        repeated_output_names (bool): two of the file's outputs share a name.

    Returns:
        RuntimeChoice: the runtime and the fallback warnings.

    Raises:
        ConfigError: ``requested`` is not one of :data:`RUNTIME_CHOICES`.

    Example:
        >>> choose_tflite_runtime("compiled-model").runtime.api
        'ai_edge_litert.compiled_model.CompiledModel'
    """
    requested = check_choice("TFLite runtime", str(requested).replace("-", "_"), RUNTIME_CHOICES)
    needs = {"available": True, "dynamic_shapes": dynamic, "preserve_all_tensors": preserve_all_tensors,
             "quantized_io": quantized_io, "int16_guard": int16_guard, "repeated_output_names": repeated_output_names}
    warnings = []
    for name in (_PREFERRED if requested == "auto" else (requested, "interpreter")):
        runtime = TFLITE_RUNTIMES[name]
        lacking = [need for need, wanted in needs.items() if wanted and not getattr(runtime, need)]
        if delegate not in runtime.delegates:
            lacking.append("delegates")
        if not lacking:
            return RuntimeChoice(runtime, requested, tuple(warnings))
        reasons = "; ".join(runtime.why_not.get(need, f"{runtime.name} lacks {need}") for need in lacking)
        warnings.append(f"{reasons}: ran on the Interpreter instead")
    raise AssertionError("the Interpreter can do every use")  # pragma: no cover  (its record has every capability)


def compiled_model_options(num_threads=None, delegate="xnnpack"):
    """CompiledModel's CPU ``Options`` for ``num_threads`` (None: LiteRT decides) and ``delegate`` (``none``: the
    builtin kernels).

    Example:
        >>> compiled_model_options(1, "none").cpu_options.kernel_mode.name
        'BUILTIN'
    """
    kernel_mode = CpuKernelMode.BUILTIN if delegate == "none" else CpuKernelMode.XNNPACK
    return Options(HardwareAccelerator.CPU,
                   cpu_options=CpuOptions(num_threads=int(num_threads or 0), kernel_mode=kernel_mode))
