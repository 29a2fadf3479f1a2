"""A model file format as one record: how a file of it is named, recognised, run and described, and what the export plan decides by it.

TensorFlow-free on purpose (``artifacts/`` and ``profiler/`` import no TensorFlow): the writer side of a format
(the function that writes it and the output kind it declares) sits beside its writer, in
``convert/tflite/writer.py`` and ``convert/onnx/writer.py`` (``convert.artifact_writer.WRITERS``). Every module
asks the record (``FORMATS[name].<capability>``) instead of comparing a format's name.

Example:
    >>> FORMATS["tflite"].suffix, FORMATS["onnx"].runtime_package
    ('.tflite', 'onnxruntime')
"""

from dataclasses import dataclass

from mobilebert_kit.utils.limits import Limit

# The shapes a file of any format is planned at, bounded alike wherever they are given or read back: every
# command's --seq-len, --batch-size and --vocab-size, a recipe's keys, a file's mbk_metadata (metadata.BOUNDED).
# 8192 tokens is 16x BERT's 512 positions; longer builds an attention matrix of > 256 MiB per head.
SEQ_LEN = Limit(int, 2, 8192)
BATCH_SIZE = Limit(int, 1, 65536)
VOCAB_SIZE = Limit(int, 2, 10_000_000)


@dataclass(frozen=True)
class ArtifactFormat:
    """One model file format and everything decided by it.

    Args:
        name (str): ``--format``'s value and the name reports carry (``tflite``, ``onnx``).
        suffix (str): the file suffix that names the format.
        label (str): how messages name it (``TFLite``, ``ONNX``).
        magic (tuple[int, bytes] | None): ``(offset, bytes)`` every file of it holds (TFLite's ``TFL3`` flatbuffer
            identifier at byte 4); None for a protobuf, which has no magic number.
        runtimes (tuple[str, ...]): the host runtimes that run it (``artifacts.runtimes`` for LiteRT's).
        runtime_package (str): the Python package of those runtimes, as reports and emulation name it.
        emulated_kernels (str): the kernels its runtime runs under emulation (what ``mbk validate --arch`` says).
        client_metadata (bool): files carry the TFLite metadata the Android clients read inputs, outputs and the
            tokenizer from; their output names are the metadata's.
        xnnpack (bool): ``mbk inspect --xnnpack`` reports the file's XNNPACK coverage.
        on_device (bool): the phone's ``benchmark_model`` runs it (``mbk profile --target adb``).
        open_dim (str): how an open axis shows in a tensor's shape: ``-1`` (TFLite) or a symbolic name (ONNX).
        input_dtype (str): the int type of the token inputs: TFLite clients accept int32 only (or all-string);
            code written for optimum's ONNX exports feeds the tokenizer's int64 arrays.
        dynamic_axes (tuple): the input axes ``--dynamic-axes`` leaves open: ONNX batch and sequence (optimum's
            signature); TFLite the sequence only (the clients refuse any batch but 1 and resize a -1 sequence axis
            to each text's token count).
        open_by_default (bool): a default export leaves ``dynamic_axes`` open whatever its batch (ONNX, as
            optimum's exports); TFLite opens them for one text at a time only.
        clips_in_graph (bool): a dynamic-length file cuts a text longer than its position table itself (TFLite:
            MediaPipe truncates only for static inputs; ONNX: optimum users' tokenizers truncate).
        every_input (bool): the graph takes ids, mask and segment ids whatever the tokenizer returns (TFLite: the
            clients fill all three); else only what the checkpoint's tokenizer returns (ONNX, as optimum's).
        quantized_io (bool): ``--io-type int8`` can write int8 inputs / outputs in this format.
        contrib_ops (bool): operators carry a domain; those outside the standard one (``com.microsoft``) need the
            runtime's full package: ``mbk inspect`` names them.
        text_input (bool): ``--tokenizer-in-graph`` can put the tokenizer into the file (ONNX: onnxruntime-extensions'
            custom ops of the :data:`EXTENSIONS_DOMAIN`, registered by the runtime that loads it).

    Example:
        >>> FORMATS["tflite"].dynamic_axes
        ('sequence',)
    """

    name: str
    suffix: str
    label: str
    magic: tuple
    runtimes: tuple
    runtime_package: str
    emulated_kernels: str
    client_metadata: bool
    xnnpack: bool
    on_device: bool
    open_dim: str
    input_dtype: str
    dynamic_axes: tuple
    open_by_default: bool
    clips_in_graph: bool
    every_input: bool
    quantized_io: bool
    contrib_ops: bool
    text_input: bool = False

    @property
    def litert(self):
        """Whether LiteRT (its Interpreter or CompiledModel, ``artifacts.runtimes``) runs files of this format."""
        return "interpreter" in self.runtimes


# onnxruntime-extensions' custom-op domain: a file whose opset imports name it needs the library registered
# (``SessionOptions.register_custom_ops_library(onnxruntime_extensions.get_library_path())``).
EXTENSIONS_DOMAIN = "ai.onnx.contrib"
# The name prefix of every node and tensor of a text-in file's tokenizer graph (convert/onnx/text_graph.py): its
# ops move strings and ids, they compute nothing the census calls float.
TOKENIZER_PREFIX = "mbk_tokenizer/"

FORMATS = {f.name: f for f in (
    ArtifactFormat("tflite", suffix=".tflite", label="TFLite", magic=(4, b"TFL3"),
                   runtimes=("interpreter", "compiled_model"), runtime_package="ai-edge-litert",
                   emulated_kernels="XNNPACK", client_metadata=True, xnnpack=True, on_device=True, open_dim="-1",
                   input_dtype="int32", dynamic_axes=("sequence",), open_by_default=False, clips_in_graph=True,
                   every_input=True, quantized_io=True, contrib_ops=False),
    ArtifactFormat("onnx", suffix=".onnx", label="ONNX", magic=None,
                   runtimes=("onnxruntime",), runtime_package="onnxruntime",
                   emulated_kernels="CPU provider", client_metadata=False, xnnpack=False, on_device=False,
                   open_dim="name", input_dtype="int64", dynamic_axes=("batch", "sequence"), open_by_default=True,
                   clips_in_graph=False, every_input=False, quantized_io=False, contrib_ops=True, text_input=True),
)}
