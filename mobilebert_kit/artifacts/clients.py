"""Which app-side clients a ``.tflite`` / ``.onnx`` file is ready for, and why not: the readiness lint as data.

Each client is one :class:`Client` record in :data:`CLIENTS`, holding what it requires of a file, as measured
by loading files into it (``shared/reference/clients.md``). Each requirement kind is one rule function in
:data:`RULES` returning the reasons a file fails it; a client is ready when no rule gives a reason. Read from
the file alone (TensorFlow-free).
"""

from dataclasses import dataclass

from mobilebert_kit.artifacts.client_metadata import packed_disagreements, read_with_client_metadata
from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.formats import FORMATS
from mobilebert_kit.artifacts.metadata import parse_mbk_metadata
from mobilebert_kit.artifacts.metadata_schema import CLIENT_INPUT_NAMES, PACKED_AS, TFLITE_METADATA

# BertPreprocessor builds either from the first input process unit (measured in MediaPipe 1.2.2 with both).
CLIENT_TOKENIZERS = tuple(name for name, packed in PACKED_AS.items() if packed)  # what the clients tokenize with


@dataclass(frozen=True)
class Client:
    """What one client requires of a model file.

    Args:
        name (str): how reports name it.
        format (str): ``"tflite"`` or ``"onnx"``.
        input_dtype (str): the dtype of every input.
        shape (str): ``"static"``: every input ``[1, seq]`` with one ``seq``; ``"dynamic"``: batch and
            sequence axes free (optimum-style code feeds any batch and the tokenizer's natural length); ``"text"``:
            one string per text (``[batch]``).
        input_names (tuple): graph input names the client feeds by name (empty: by position).
        optional_inputs (tuple): inputs it feeds when the graph takes them (optimum-style code feeds what the
            checkpoint's tokenizer returns: ``token_type_ids`` only for the families that have token types).
        metadata (bool): needs TFLite Metadata: input metadata named ``ids``/``mask``/``segment_ids``, a
            BertTokenizer or SentencePiece process unit with its file packed, one output metadata per graph
            output.
        seq_len (int | None): the one sequence length it runs.
        vector_output (bool): reads the first output as one vector, ``[1, N]`` (or ``[1, 1, 1, N]``).
        output_names (tuple): output names it looks up (metadata names in TFLite, graph names in ONNX).
        output_sets (tuple): ``((task, names), ...)``: the outputs must hold one task's names.
        labels (bool): names the first output's classes from a packed TENSOR_AXIS_LABELS file.
        max_op_versions (tuple): ``((op type, highest version its runtime knows), ...)``: a newer kernel
            version is refused when the file is loaded.
    """

    name: str
    format: str
    input_dtype: str
    shape: str
    input_names: tuple = ()
    optional_inputs: tuple = ()
    metadata: bool = False
    seq_len: int = None
    vector_output: bool = False
    output_names: tuple = ()
    output_sets: tuple = ()
    labels: bool = False
    max_op_versions: tuple = ()


# A span answerer's outputs: one logit per token position, which an embedder would read as a vector.
SPAN_OUTPUTS = ("start_logits", "end_logits")
_TEXT_TFLITE = {"format": "tflite", "input_dtype": "int32", "shape": "static", "metadata": True}
# tflite-support 0.4.4's runtime predates FULLY_CONNECTED version 12, which dynamic-range files use
# (tests/clients/test_task_library.py loads one and sees it refused).
_TASK_LIBRARY = {**_TEXT_TFLITE, "max_op_versions": (("FULLY_CONNECTED", 11),)}
CLIENTS = (
    Client("MediaPipe TextEmbedder", **_TEXT_TFLITE, vector_output=True),
    Client("MediaPipe TextClassifier", **_TEXT_TFLITE, labels=True),
    # BertNLClassifier finds its scores by the metadata name "probability" (with "score" classify crashed).
    Client("Task Library BertNLClassifier", **_TASK_LIBRARY, output_names=("probability",), labels=True),
    # At 128 tokens BertQuestionAnswerer fails with "Bad StatusOr access".
    Client("Task Library BertQuestionAnswerer", **_TASK_LIBRARY, output_names=SPAN_OUTPUTS, seq_len=384),
    # Without a tokenizer in the metadata it returns one vector for every sentence; [1, seq, hidden] is refused.
    Client("Task Library TextEmbedder", **_TASK_LIBRARY, vector_output=True),
    # Code written for optimum's exports: the tokenizer's int64 arrays fed by name, outputs read by name.
    Client("onnxruntime (optimum-style)", "onnx", "int64", "dynamic",
           input_names=("input_ids", "attention_mask"), optional_inputs=("token_type_ids",),
           output_sets=(("feature-extraction", ("last_hidden_state",)), ("text-classification", ("logits",)),
                        ("question-answering", SPAN_OUTPUTS))),
    # A text-in file (mbk export --tokenizer-in-graph): the app feeds its strings, with onnxruntime-extensions'
    # custom-ops library registered (onnxruntime-android + onnxruntime-extensions-android, the iOS pods, Python).
    Client("onnxruntime + onnxruntime-extensions (text in)", "onnx", "string", "text", input_names=("text",),
           output_sets=(("feature-extraction", ("last_hidden_state",)), ("sentence-embedding", ("sentence_embedding",)),
                        ("text-classification", ("logits",)))),
)


@dataclass(frozen=True)
class FileFacts:
    """What the rules read of one file: ``format``, graph ``inputs``/``outputs`` specs, and ``meta``
    (:class:`~mobilebert_kit.artifacts.client_metadata.ClientMetadata`, None without TFLite Metadata)."""

    format: str
    inputs: list
    outputs: list
    meta: object = None
    op_versions: dict = None  # {op type: highest version in the file} (TFLite)
    # Where the packed vocab.txt / labels.txt disagree with the model (client_metadata.packed_disagreements).
    disagreements: tuple = ()

    def output_names(self):
        """The names clients look outputs up by: the metadata's in TFLite (when present), the graph's in ONNX."""
        if FORMATS[self.format].client_metadata:
            return self.meta.output_names if self.meta is not None else ()
        return tuple(spec["name"] for spec in self.outputs)


def _join(names):
    return ", ".join(names) if names else "none"


def _dtypes(client, facts):
    wrong = [f"{s['name']} is {s['dtype']}" for s in facts.inputs if s["dtype"] != client.input_dtype]
    return [f"every input must be {client.input_dtype}; {', '.join(wrong)}"] if wrong else []


def _input_names(client, facts):
    have = [s["name"] for s in facts.inputs]
    missing = [n for n in client.input_names if n not in have]
    found = f"found {_join(have)}" if have else "the graph has no inputs"
    reasons = [f"it feeds inputs named {_join(missing)} ({found})"] if missing else []
    unknown = [n for n in have if n not in client.input_names + client.optional_inputs] if client.input_names else []
    if unknown:
        reasons.append(f"it feeds nothing to {_join(unknown)} (it feeds "
                       f"{_join(client.input_names + client.optional_inputs)})")
    return reasons


def _shapes(client, facts):
    shapes = [s["shape"] for s in facts.inputs]
    if client.shape == "text":
        fixed = [s["name"] for s in facts.inputs if len(s["shape"]) != 1]
        return [f"inputs {_join(fixed)} are not one string per text ([batch])"] if fixed else []
    if client.shape == "static":
        if any(len(s) != 2 or s[0] != 1 for s in shapes) or len({s[1] for s in shapes}) > 1:
            return [f"inputs must be [1, seq] with one seq (found {shapes})"]
        return []
    # A text-in file's [batch] string input has no fixed length: it was said to have one.
    rank = [s["name"] for s in facts.inputs if len(s["shape"]) != 2]
    fixed = [s["name"] for s in facts.inputs if len(s["shape"]) == 2 and any(d >= 0 for d in s["shape"])]
    return ([f"inputs {_join(rank)} are not [batch, sequence] tensors"] if rank else []) + (
        [f"inputs {_join(fixed)} have a fixed batch or sequence length, but it feeds any batch size and "
         "sequence length (export with dynamic axes, as mbk export writes .onnx)"] if fixed else [])


def _seq_len(client, facts):
    if client.seq_len is None or not facts.inputs:
        return []
    # A client of one length copies its padded rows into the tensors as allocated, without resizing: a
    # dynamic-length file serves it when it allocates that length (its default shape, [1, --seq-len]).
    found = sorted({(s.get("allocated") or s["shape"])[-1] for s in facts.inputs if s["shape"]})
    return [f"sequence length {found}; it runs {client.seq_len} (re-export with --seq-len {client.seq_len})"] \
        if found != [client.seq_len] else []


def _metadata(client, facts):
    if not client.metadata:
        return []
    meta = facts.meta
    if meta is None:
        return [f"no TFLite Metadata ({TFLITE_METADATA}): the client finds neither the inputs nor the tokenizer"]
    reasons = []
    if len(facts.inputs) != len(CLIENT_INPUT_NAMES):
        reasons.append(f"the graph has {len(facts.inputs)} inputs; it feeds {len(CLIENT_INPUT_NAMES)} "
                       f"({_join(CLIENT_INPUT_NAMES)})")
    if meta.input_names != CLIENT_INPUT_NAMES:
        reasons.append(f"input metadata names are {_join(meta.input_names)}; it looks up "
                       f"{_join(CLIENT_INPUT_NAMES)}, one per graph input in order")
    if meta.tokenizer not in CLIENT_TOKENIZERS:
        reasons.append(f"no BertTokenizer or SentencePiece input process unit (found {meta.tokenizer or 'none'}), so "
                       "it cannot tokenize text for the model" + (
                           "; mbk writes none for a byte-level BPE tokenizer (RoBERTa, ModernBERT), which the TFLite "
                           "Metadata cannot describe: feed the checkpoint tokenizer's ids through LiteRT, or use the .onnx"
                           if meta.tokenizer is None else ""))
    elif not meta.vocab_file or meta.vocab_file not in meta.packed_files:
        reasons.append(f"the tokenizer's file {meta.vocab_file or '(unnamed)'} is not packed in the model "
                       f"(packed: {_join(meta.packed_files)})")
    elif PACKED_AS[meta.tokenizer] == "model":
        pass  # a binary model: no lines to count
    elif not meta.vocab_size:
        reasons.append(f"the packed vocabulary {meta.vocab_file} is empty")
    elif meta.blank_lines.get(meta.vocab_file):
        # Measured: MediaPipe 1.2.2 skips an empty vocabulary line, so every later token gets the next id.
        reasons.append(f"the packed vocabulary {meta.vocab_file} has {meta.blank_lines[meta.vocab_file]} blank "
                       "line(s), which the client skips: every token id after one is off by one")
    if len(meta.outputs) != len(facts.outputs):
        reasons.append(f"{len(meta.outputs)} output metadata entries for {len(facts.outputs)} graph outputs")
    return reasons


def _packed_files(client, facts):
    if not client.metadata or facts.meta is None:
        return []
    return [f"{reason}; re-export the model" for reason in facts.disagreements]


def _vector_output(client, facts):
    if not client.vector_output or not facts.outputs:
        return []
    if facts.meta is not None and facts.meta.labels_file is not None:
        # It would load, and call a classifier's class scores an embedding.
        return [f"the first output is a classifier's scores (labels {facts.meta.labels_file}), not a sentence vector "
                "(export an embedder with --task embedding)"]
    first = facts.output_names()[:1]
    if first and first[0] in SPAN_OUTPUTS:  # [1, seq]: it loaded, and its start logits were "the embedding"
        return [f"the first output {first[0]} is a span answerer's logits, one per token, not a sentence vector "
                "(export an embedder with --task embedding)"]
    shape = facts.outputs[0]["shape"]
    if len(shape) >= 2 and all(d == 1 for d in shape[:-1]) and len(shape) in (2, 4):
        return []
    return [f"the first output {facts.outputs[0]['name']} is {shape}; it reads one [1, N] vector "
            "(export with --task embedding)"]


def _output_names(client, facts):
    have = facts.output_names()
    missing = [n for n in client.output_names if n not in have]
    where = "output metadata" if FORMATS[client.format].client_metadata else "output"
    return [f"no {where} named {_join(missing)} (found {_join(have)})"] if missing else []


def _output_sets(client, facts):
    if not client.output_sets:
        return []
    have = facts.output_names()
    if any(all(n in have for n in names) for _, names in client.output_sets):
        return []
    wanted = " | ".join(f"{'+'.join(names)} ({task})" for task, names in client.output_sets)
    return [f"outputs {_join(have)} match none of {wanted}"]


def _labels(client, facts):
    if not client.labels or facts.meta is None or not facts.meta.outputs:
        return []
    meta = facts.meta
    if meta.labels_file is None:
        return ["the first output has no TENSOR_AXIS_LABELS file (labels.txt): categories would have no names"]
    if meta.labels_file not in meta.packed_files:
        return [f"the labels file {meta.labels_file} is not packed in the model"]
    classes = facts.outputs[0]["shape"][-1] if facts.outputs and facts.outputs[0]["shape"] else None
    if classes is not None and classes >= 0 and meta.label_count != classes:
        return [f"{meta.label_count} labels for {classes} scores in the first output"]
    return []


def _op_versions(client, facts):
    found = facts.op_versions or {}
    newer = [f"{op} version {found[op]}" for op, highest in client.max_op_versions if found.get(op, 0) > highest]
    return [f"its runtime knows {', '.join(f'{op} up to version {v}' for op, v in client.max_op_versions)}; the file "
            f"has {', '.join(newer)} (dynamic-range int8: export float32 or --quantize int8)"] if newer else []


# One rule per requirement kind, in report order; each returns its reasons ([] when met or not required).
RULES = (_dtypes, _input_names, _shapes, _seq_len, _metadata, _packed_files, _vector_output, _output_names,
         _output_sets, _labels, _op_versions)


def readiness(facts):
    """``{client name: [reasons]}`` for every client of the file's format (an empty list: ready), from its
    :class:`FileFacts`."""
    return {c.name: [r for rule in RULES for r in rule(c, facts)] for c in CLIENTS if c.format == facts.format}


def client_readiness(path, fmt=None):
    """Reads a model file and returns ``{client name: [reasons it is not ready]}`` for its format's clients.

    Args:
        path (str | os.PathLike): the ``.tflite`` or ``.onnx`` file.
        fmt (str | None): the format when the suffix does not say.

    Raises:
        ArtifactError: the file, its metadata or its packed files are unreadable.

    Example:
        >>> client_readiness("model.tflite")["Task Library BertQuestionAnswerer"]  # doctest: +SKIP
        ['no output metadata named start_logits, end_logits (found sentence_embedding)', ...]
    """
    graph, meta = read_with_client_metadata(path, fmt)
    return readiness(facts_of(graph, meta))


def facts_of(graph, meta):
    """The :class:`FileFacts` of an :class:`ArtifactGraph` and its client metadata."""
    versions = {}
    for op in graph.ops:
        versions[op["type"]] = max(versions.get(op["type"], 0), int(op.get("version") or 0))
    try:
        recorded, vocab = parse_mbk_metadata(graph.metadata, graph.path)
    except ArtifactError:
        recorded, vocab = {}, []  # a file we did not write, or one whose entry is damaged: nothing to compare with
    return FileFacts(graph.format, graph.input_specs(), graph.output_specs(), meta, versions,
                     tuple(packed_disagreements(meta, recorded, vocab)))
