"""What tokenizer a model file carries for its app: the one rule ``mbk inspect``, ``mbk evaluate`` and ``mbk profile --text`` use.

A text-in ``.onnx`` (``mbk export --tokenizer-in-graph``) tokenizes itself (``runs_as="graph"``). Otherwise:

1. a ``.tflite`` whose TFLite Metadata packs a client tokenizer (a ``vocab.txt`` for BertTokenizer, a
   SentencePiece model) that agrees with the model: the app's own tokenization runs on that file;
2. else our ``mbk_vocab`` when the export recorded BERT's WordPiece: the checkpoint's tokenizer rebuilt from it;
3. else none: the reason names what the file lacks and ``--tokenizer``.

TensorFlow-free: the record hands the bytes and the casing to ``data.text_tokenizer.TextTokenizer.from_packed``.
"""

from dataclasses import dataclass
from pathlib import Path

from mobilebert_kit.artifacts.client_metadata import packed_disagreements, read_with_client_metadata
from mobilebert_kit.artifacts.metadata import parse_mbk_metadata
from mobilebert_kit.artifacts.clients import CLIENT_TOKENIZERS

_BERT_NAMES = {"cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "unk": "[UNK]", "mask": "[MASK]"}


@dataclass(frozen=True)
class CarriedTokenizer:
    """The tokenizer a file carries for its app, by the one rule of this module.

    Args:
        runs_as (str | None): ``"client"`` (the app's client tokenizer on the packed file), ``"checkpoint"``
            (the checkpoint's WordPiece from ``mbk_vocab``), ``"graph"`` (the file's own tokenizer ops: it
            takes text), None (the file carries none).
        tokenizer (str | None): the file's kind as the clients name it: ``"bert"`` (a ``vocab.txt``) or
            ``"sentencepiece"`` (a model).
        file_name (str | None): the file it is read from (``vocab.txt``, ``sentencepiece.model``, ``mbk_vocab``).
        data (bytes): that file's content.
        lowercase (bool | None): the recorded casing (``"checkpoint"`` only; the clients always lower-case A-Z).
        missing (str): why the file carries none, with the fix (empty when it carries one).
        in_graph (dict | None): ``runs_as="graph"``: the ``tokenizer_in_graph`` record of a text-in ``.onnx``
            (``mbk export --tokenizer-in-graph``): library, op, kind, the length it truncates to.

    Example:
        >>> CarriedTokenizer(None, missing="it carries no vocabulary").ready
        False
    """

    runs_as: str = None
    tokenizer: str = None
    file_name: str = None
    data: bytes = b""
    lowercase: bool = None
    missing: str = ""
    in_graph: dict = None

    @property
    def ready(self):
        """Whether text can be tokenized from the file alone."""
        return self.runs_as is not None

    def describe(self):
        """One phrase for ``mbk inspect``: what tokenizes text for this file, or what is missing."""
        if self.runs_as == "client":
            return f"the packed {self.file_name}, as MediaPipe and the Task Library run it"
        if self.runs_as == "checkpoint":
            return "the recorded WordPiece vocabulary (mbk_vocab)"
        if self.runs_as == "graph":
            record = self.in_graph
            return (f"the file itself: {record.get('library', 'onnxruntime-extensions')}'s {record.get('op')} "
                    f"({record.get('kind')} tokenizer of the checkpoint, truncating to {record.get('truncates_to')} "
                    f"tokens) on its string input {record.get('input', 'text')!r}")
        return f"none ({self.missing})"


def carried_tokenizer(path, client, recorded, vocab):
    """The tokenizer a file carries, by the rule every command uses (module docstring).

    Args:
        path (str | os.PathLike): the file, for messages.
        client (ClientMetadata | None): its TFLite Metadata (None: none, or not a ``.tflite``).
        recorded (dict): its ``mbk_metadata`` ({} when absent).
        vocab (list[str]): its ``mbk_vocab`` lines ([] when absent).

    Returns:
        CarriedTokenizer: what tokenizes text for the file, or why nothing does.

    Example:
        >>> carried_tokenizer("m.onnx", None, {}, []).ready
        False
    """
    in_graph = recorded.get("tokenizer_in_graph")
    if isinstance(in_graph, dict):
        # A text-in .onnx: its onnxruntime-extensions ops tokenize; it is fed the text itself.
        return CarriedTokenizer("graph", str(in_graph.get("kind")), in_graph=dict(in_graph))
    if client is not None and client.tokenizer in CLIENT_TOKENIZERS and client.packed_tokenizer:
        if problems := packed_disagreements(client, recorded, vocab):
            return CarriedTokenizer(missing=f"{path}: {'; '.join(problems)}; the app would not run the model as "
                                            "exported: re-export it")
        return CarriedTokenizer("client", client.tokenizer, client.vocab_file, client.packed_tokenizer)
    kind = recorded.get("tokenizer_kind")
    specials = recorded.get("special_tokens") if isinstance(recorded.get("special_tokens"), dict) else {}
    # The one comparison of a kind's name outside data/tokenizer_kinds.py: this floor imports no data/ code, and
    # mbk_metadata records the kind by its name (TokenizerKind.name).
    if kind not in (None, "wordpiece") or any(specials.get(r, n) != n for r, n in _BERT_NAMES.items()):
        # Only a BERT vocab.txt travels in mbk_vocab; any other tokenizer is the checkpoint's own.
        return CarriedTokenizer(missing=(
            f"{path} was exported from a checkpoint whose tokenizer is {kind or 'WordPiece'} with its own special "
            "tokens, which the file does not carry for its app; pass --tokenizer with the checkpoint's directory "
            "(its tokenizer.json)"))
    if not vocab:
        # The export records the casing only when its source had a tokenizer: without one, the source had no
        # vocab.txt (a preset, random weights) and --no-vocab is not the cause to name.
        why = ("exported with --no-vocab or embed_vocab = false" if recorded.get("do_lower_case") is not None else
               f"its source, {recorded.get('source') or 'the model'}, had no vocab.txt")
        return CarriedTokenizer(missing=f"{path} carries no vocabulary ({why}), so the data cannot be tokenized; "
                                        "pass --tokenizer with the model's vocab.txt or directory")
    lowercase = recorded.get("do_lower_case")
    return CarriedTokenizer("checkpoint", "bert", "mbk_vocab", ("\n".join(vocab) + "\n").encode("utf-8"),
                            True if lowercase is None else bool(lowercase))


def carries_app_tokenizer(path):
    """Whether the file at ``path`` carries the tokenizer its app feeds it (:func:`carried_tokenizer`'s ``ready``):
    a RoBERTa file does not, nor an ``.onnx`` of a SentencePiece checkpoint (its ``.tflite`` packs the model)."""
    graph, client = read_with_client_metadata(Path(path))
    meta, vocab = parse_mbk_metadata(graph.metadata, path)
    return carried_tokenizer(path, client, meta, vocab).ready


__all__ = ["CarriedTokenizer", "carried_tokenizer", "carries_app_tokenizer"]
