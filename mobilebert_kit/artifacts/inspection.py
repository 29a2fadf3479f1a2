"""``inspect_artifact``: what a ``.tflite`` or ``.onnx`` file holds, read from the file alone (docs/export.md,
"Inspect"); the op split and the normalization/activation check are :mod:`~mobilebert_kit.artifacts.taxonomy`'s,
the client readiness :mod:`~mobilebert_kit.artifacts.clients`'.
"""

from collections import Counter
from dataclasses import dataclass, field

from mobilebert_kit.artifacts import taxonomy
from mobilebert_kit.artifacts.carried_tokenizer import carried_tokenizer
from mobilebert_kit.artifacts.client_metadata import read_with_client_metadata
from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.formats import EXTENSIONS_DOMAIN, FORMATS
from mobilebert_kit.artifacts.metadata import parse_mbk_metadata
from mobilebert_kit.artifacts.clients import facts_of, readiness
from mobilebert_kit.utils.terminal import escape


@dataclass
class ArtifactInfo:
    """What :func:`inspect_artifact` found.

    ``op_counts`` counts every operator by type; ``quantized_ops``, ``hybrid_ops``,
    ``float_ops`` and ``conversion_ops`` split the same operators by how they compute.
    ``contrib_ops`` counts the ONNX operators outside the standard domain (``com.microsoft.Attention``...):
    a reduced (mobile) ONNX Runtime build runs the file only if it includes them.
    ``client_metadata`` is the file's TFLite Metadata (None without one); ``clients`` maps each client of
    the file's format to the reasons it is not ready for it (empty: ready).
    """

    path: str
    format: str
    size_bytes: int
    inputs: list
    outputs: list
    op_counts: Counter
    quantized_ops: Counter = field(default_factory=Counter)
    hybrid_ops: Counter = field(default_factory=Counter)
    float_ops: Counter = field(default_factory=Counter)
    conversion_ops: Counter = field(default_factory=Counter)
    other_ops: Counter = field(default_factory=Counter)
    metadata_keys: list = field(default_factory=list)
    client_metadata: object = None
    clients: dict = field(default_factory=dict)
    # What tokenizes text for the file (artifacts.carried_tokenizer: the rule evaluate and profile --text use).
    text_tokenizer: object = None
    contrib_ops: Counter = field(default_factory=Counter)

    def variant_ops(self):
        """``{"layer_norm": {op: n}, "gelu": {op: n}}``: the operators left of each family."""
        return taxonomy.variant_ops(self.op_counts, self.format)

    def to_dict(self):
        return {
            "path": self.path, "format": self.format, "size_bytes": self.size_bytes,
            "inputs": self.inputs, "outputs": self.outputs,
            **{key: dict(getattr(self, key)) for key in ("op_counts", "quantized_ops", "hybrid_ops", "float_ops",
                                                         "conversion_ops", "other_ops", "contrib_ops")},
            "metadata_keys": self.metadata_keys,
            "variant_ops": self.variant_ops(),
            "client_metadata": self.client_metadata.to_dict() if self.client_metadata is not None else None,
            "clients": {name: {"ready": not reasons, "reasons": reasons} for name, reasons in self.clients.items()},
            "text_tokenizer": None if self.text_tokenizer is None else {
                "runs_as": self.text_tokenizer.runs_as, "tokenizer": self.text_tokenizer.tokenizer,
                "file": self.text_tokenizer.file_name, "missing": self.text_tokenizer.missing or None,
                "in_graph": self.text_tokenizer.in_graph},
        }

    def format_text(self):
        """The human-readable report ``mbk inspect`` prints."""
        # Tensor, op and metadata names come from the file: escaped, one line each whatever they hold.
        lines = [f"{escape(self.path)}: {self.format}, {self.size_bytes / 1e6:.2f} MB"]
        for title, tensors in (("inputs", self.inputs), ("outputs", self.outputs)):
            lines.append(f"{title}:")
            lines += [f"  {escape(t['name']):<24} {escape(t['dtype']):<8} {escape(t['shape'])}" for t in tensors]
            if title == "inputs" and FORMATS[self.format].open_dim == "-1" and any(-1 in list(t["shape"])[1:] for t in tensors):
                lines.append("  (dynamic length: the clients feed each text at its own token count, unpadded)")
        lines.append(f"operators: {sum(self.op_counts.values())} ({len(self.op_counts)} types)")
        for op, n in sorted(self.op_counts.items(), key=lambda kv: (-kv[1], kv[0])):
            parts = [f"{label} {c[op]}" for label, c in (
                ("int", self.quantized_ops), ("hybrid", self.hybrid_ops), ("float", self.float_ops),
                ("q/dq", self.conversion_ops), ("other", self.other_ops)) if c.get(op)]
            lines.append(f"  {escape(op):<28} {n:>5}   {', '.join(parts)}")
        lines.append(
            f"integer ops: {sum(self.quantized_ops.values())}, hybrid (int8 or int4 weights, float activations): "
            f"{sum(self.hybrid_ops.values())}, float ops: {sum(self.float_ops.values())}, "
            f"quantize/dequantize: {sum(self.conversion_ops.values())}"
        )
        if self.float_ops:
            lines.append("float ops: " + ", ".join(f"{escape(op)} x{n}" for op, n in sorted(self.float_ops.items())))
        if FORMATS[self.format].contrib_ops:
            lines.append(self._contrib_line())
        left = {k: v for k, v in self.variant_ops().items() if v}
        lines.append("layer_norm/gelu ops: " + (str(left) if left else "none"))
        if self.metadata_keys:
            lines.append("metadata: " + ", ".join(escape(k) for k in self.metadata_keys))
        lines += self._client_lines()
        return "\n".join(lines)

    def _contrib_line(self):
        # onnxruntime's full package (onnxruntime-android included) has the com.microsoft kernels; a reduced
        # (mobile) build has only the ops its build config lists, so the app developer needs the names.
        if not self.contrib_ops:
            return "contrib ops: none (standard ONNX operators only)"
        tokenizer = {op: n for op, n in self.contrib_ops.items() if op.startswith(EXTENSIONS_DOMAIN + ".")}
        others = {op: n for op, n in self.contrib_ops.items() if op not in tokenizer}
        lines = []
        if others:
            named = ", ".join(f"{escape(op)} x{n}" for op, n in sorted(others.items()))
            lines.append(f"contrib ops: {named} (in onnxruntime's full package; a reduced build must include them)")
        if tokenizer:
            named = ", ".join(f"{escape(op)} x{n}" for op, n in sorted(tokenizer.items()))
            lines.append(f"tokenizer ops: {named} (onnxruntime-extensions: register "
                         "onnxruntime_extensions.get_library_path() in the SessionOptions, docs/clients/text-in-onnx.md)")
        return "\n".join(lines)

    def _client_lines(self):
        meta = self.client_metadata
        lines = []
        if meta is not None:
            def names(tensors):
                return ", ".join(escape(t.name) for t in tensors) or "none"

            size = f"{meta.vocab_size} tokens" if meta.vocab_size is not None else "not packed"
            vocab = f" ({escape(meta.vocab_file)}, {size})" if meta.vocab_file else ""
            labels = (f"; labels: {meta.label_count if meta.label_count is not None else 'not packed'} "
                      f"({escape(meta.labels_file)})") if meta.labels_file else ""
            lines.append(f"client metadata: inputs {names(meta.inputs)}; tokenizer {escape(meta.tokenizer or 'none')}"
                         f"{vocab}; outputs {names(meta.outputs)}{labels}; packed files: "
                         f"{', '.join(escape(n) for n in meta.packed_files) or 'none'}")
        elif FORMATS[self.format].client_metadata:
            lines.append("client metadata: none (no TFLITE_METADATA entry)")
        ready = [name for name, reasons in self.clients.items() if not reasons]
        if self.clients:
            lines.append("ready for: " + (", ".join(ready) or "none"))
        lines += [f"not ready for {name}: {escape('; '.join(reasons))}" for name, reasons in self.clients.items() if reasons]
        if self.text_tokenizer is not None:
            lines.append(f"text (mbk evaluate, mbk profile --text): tokenized by {escape(self.text_tokenizer.describe())}")
        return lines


def inspect_artifact(path, fmt=None):
    """Inspects a ``.tflite`` or ``.onnx`` file.

    Args:
        path: the file.
        fmt: ``"tflite"`` or ``"onnx"`` when the suffix does not say (a temporary file).

    Raises:
        ArtifactError: the file is missing, of another type, or not readable.

    Example:
        >>> info = inspect_artifact("model.tflite")  # doctest: +SKIP
        >>> info.float_ops  # doctest: +SKIP
        Counter({'SOFTMAX': 24})
    """
    graph, meta = read_with_client_metadata(path, fmt)
    census = taxonomy.compute_census(graph)
    return ArtifactInfo(
        str(path), graph.format, graph.size_bytes,
        [_shown(graph, key) for key in graph.inputs], [_shown(graph, key) for key in graph.outputs],
        Counter(op["label"] for op in graph.ops),
        quantized_ops=census["quantized"], hybrid_ops=census["hybrid"], float_ops=census["float"],
        conversion_ops=census["conversion"], other_ops=census["other"], metadata_keys=list(graph.metadata),
        client_metadata=meta, clients=readiness(facts_of(graph, meta)), text_tokenizer=_text_tokenizer(graph, meta),
        contrib_ops=Counter(op["label"] for op in graph.ops if op["domain"] not in ("", "ai.onnx")),
    )


def _text_tokenizer(graph, meta):
    """The :class:`CarriedTokenizer` of a file we wrote (None for a file without ``mbk_metadata``)."""
    try:
        recorded, vocab = parse_mbk_metadata(graph.metadata, graph.path)
    except ArtifactError:
        return None  # a damaged entry: the readiness lines say what the clients find
    if not recorded and meta is None:
        return None
    return carried_tokenizer(graph.path, meta, recorded, vocab)


def _shown(graph, key):
    """A tensor as ``mbk inspect`` prints it: dynamic dimensions by their ONNX name (``?`` when unnamed)."""
    tensor = graph.tensors[key]
    names = tensor.get("dim_names") or [None] * len(tensor["signature"])
    shape = [d if d >= 0 or FORMATS[graph.format].open_dim == "-1" else (name or "?") for d, name in zip(tensor["signature"], names)]
    return {"name": tensor["name"], "shape": shape, "dtype": tensor["dtype"]}
