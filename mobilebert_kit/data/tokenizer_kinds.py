"""The kinds of tokenizer a checkpoint ships, as records: what the app-side clients can do with each.

A ``tokenizer.json`` names its model (``WordPiece``, ``Unigram``, ``BPE``). Of the TFLite Metadata's three
tokenizers, MediaPipe Tasks and the Task Library run ``BertTokenizerOptions`` (WordPiece, a ``vocab.txt``) and
``SentencePieceTokenizerOptions`` (Unigram, a model in the checkpoint's id order: ``data/sentencepiece_model.py``);
none describes byte-level BPE (:data:`KINDS`' ``no_client``). Which family packs what, and why the special tokens
are renamed with the ids unchanged (``TextTokenizer._client_names``): docs/models.md, "Supported checkpoints".

``TextTokenizer`` (``data/text_tokenizer.py``) asks the record, never the kind's
name: what to read, which client unit to pack, how to read one back.
TensorFlow-free.

Example:
    >>> KINDS["BPE"].client_options is None, KINDS["Unigram"].name
    (True, 'sentencepiece')
"""

from dataclasses import dataclass
from types import MappingProxyType

# The names the clients' BertPreprocessor inserts (cls, sep) or looks up (unk) literally, and the other special
# tokens as BERT names them: a WordPiece vocabulary is packed with the checkpoint's names replaced by these.
CLIENT_SPECIAL_NAMES = MappingProxyType({"cls": "[CLS]", "sep": "[SEP]", "unk": "[UNK]", "pad": "[PAD]",
                                         "mask": "[MASK]"})
VOCAB_FILE = "vocab.txt"
SENTENCEPIECE_FILE = "sentencepiece.model"


@dataclass(frozen=True)
class TokenizerKind:
    """One tokenizer model of ``tokenizer.json`` and what the TFLite clients can do with it.

    Args:
        model_type (str): ``tokenizer.json``'s ``model.type``.
        name (str): how reports and ``mbk_metadata`` name it (``"wordpiece"``, ``"sentencepiece"``, ``"bpe"``).
        model_files (tuple[str, ...]): the kind's own files a checkpoint may carry beside ``tokenizer.json``
            (each compared with it); :meth:`TextTokenizer.model_files` hands them out for another runtime.
        client (str | None): the clients' tokenizer (``"bert"``, ``"sentencepiece"``: the names ``artifacts``
            reads back from a file's TFLite Metadata); None: none can tokenize for it.
        client_options (str | None): the TFLite Metadata process unit the clients run; None: none can.
        client_file (str | None): the file that unit names, packed into the ``.tflite``.
        no_client (str): why no client can tokenize for it (empty when one can).
        bert_names (bool): BERT's ``[CLS]``/``[SEP]``/``[PAD]``/``[UNK]``/``[MASK]`` are its default special
            tokens, so a bare ``vocab.txt`` describes it (token types and casing follow BERT's rules).
        extensions_op (str | None): onnxruntime-extensions' operator that runs it inside an ``.onnx``
            (``mbk export --tokenizer-in-graph``, ``convert/onnx/text_graph.py``); None: none can.

    Example:
        >>> KINDS["WordPiece"].client_file, KINDS["BPE"].client
        ('vocab.txt', None)
    """

    model_type: str
    name: str
    model_files: tuple = ()
    client: str = None
    client_options: str = None
    client_file: str = None
    no_client: str = ""
    bert_names: bool = False
    extensions_op: str = None


KINDS = MappingProxyType({kind.model_type: kind for kind in (
    TokenizerKind("WordPiece", "wordpiece", (VOCAB_FILE,), "bert", "BertTokenizerOptions", VOCAB_FILE,
                  bert_names=True, extensions_op="WordpieceTokenizer"),
    TokenizerKind("Unigram", "sentencepiece", ("sentencepiece.bpe.model", "spiece.model"), "sentencepiece",
                  "SentencePieceTokenizerOptions", SENTENCEPIECE_FILE, extensions_op="SentencepieceTokenizer"),
    TokenizerKind("BPE", "bpe", ("vocab.json", "merges.txt"), no_client=(
        "the checkpoint's tokenizer is byte-level BPE, which the TFLite Metadata cannot describe: MediaPipe and the "
        "Task Library cannot tokenize text for this model; feed it the ids of the checkpoint's own tokenizer "
        "through LiteRT, or use the .onnx export"), extensions_op="RobertaTokenizer"),
)})
# The kind a bare vocab.txt describes (no tokenizer.json): the one kind with BERT's names.
VOCAB_KIND = next(kind for kind in KINDS.values() if kind.bert_names)
# The kind of each client tokenizer a file can carry (``artifacts``' names), for reading a packed file back.
CLIENT_KINDS = MappingProxyType({kind.client: kind for kind in KINDS.values() if kind.client})


# transformers' tokenizer classes whose ``model_input_names`` have no ``token_type_ids`` (what ``tokenizer(text)``
# returns, and so what optimum's ONNX exports take): a checkpoint with one of these gets an ONNX file without that
# input, whatever its token-type table (paraphrase-multilingual-MiniLM: a BERT with XLM-R's tokenizer).
NO_TOKEN_TYPES = ("RobertaTokenizer", "XLMRobertaTokenizer", "DistilBertTokenizer", "MPNetTokenizer",
                  "CamembertTokenizer", "BartTokenizer", "LongformerTokenizer")


def returns_token_types(tokenizer_config):
    """Whether the checkpoint's tokenizer returns ``token_type_ids``, from its ``tokenizer_config.json``; None: unknown.

    ``model_input_names`` when the file lists them, else the tokenizer class (``...Fast`` as its base).

    Example:
        >>> returns_token_types({"tokenizer_class": "XLMRobertaTokenizerFast"}), returns_token_types({})
        (False, None)
    """
    names = tokenizer_config.get("model_input_names")
    if isinstance(names, list) and all(isinstance(n, str) for n in names) and "input_ids" in names:
        return "token_type_ids" in names
    kind = tokenizer_config.get("tokenizer_class")
    if not isinstance(kind, str) or not kind:
        return None
    base = kind[:-4] if kind.endswith("Fast") else kind
    return False if base in NO_TOKEN_TYPES else True if base.endswith("Tokenizer") else None


@dataclass(frozen=True)
class ClientUnit:
    """The tokenizer process unit (``options``) of a ``.tflite``'s TFLite Metadata and the file it packs, with
    ``renamed``: ``(checkpoint token, client name)`` of the special tokens renamed for the clients' lookups.

    Example:
        >>> ClientUnit("BertTokenizerOptions", "vocab.txt", b"[PAD]\\n").file_name
        'vocab.txt'
    """

    options: str
    file_name: str
    data: bytes
    renamed: tuple = ()


__all__ = ["TokenizerKind", "KINDS", "VOCAB_KIND", "CLIENT_KINDS", "ClientUnit", "returns_token_types", "NO_TOKEN_TYPES", "CLIENT_SPECIAL_NAMES", "VOCAB_FILE", "SENTENCEPIECE_FILE"]
