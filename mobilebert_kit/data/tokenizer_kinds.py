"""The kinds of tokenizer a checkpoint ships, as records: what the app-side clients can do with each.

A ``tokenizer.json`` names its model (``WordPiece``, ``Unigram``, ``BPE``).
The TFLite Metadata schema describes three tokenizers (``BertTokenizerOptions``,
``SentencePieceTokenizerOptions``, ``RegexTokenizerOptions``); MediaPipe Tasks
and the Task Library run the first two on the packed files (measured in
MediaPipe 1.2.2 with a model that returns the ids it is fed, issue 35):

- **WordPiece** (BERT, DistilBERT, ELECTRA, MPNet): ``BertTokenizerOptions``
  with a ``vocab.txt``. The client inserts the literal ``[CLS]`` and
  ``[SEP]`` and looks up ``[UNK]``, so a vocabulary whose special tokens have
  other names (MPNet's ``<s>``/``</s>``) is packed with those lines renamed,
  the ids unchanged.
- **Unigram** (XLM-R, ALBERT, multilingual MiniLM): ``SentencePieceTokenizerOptions``
  with a SentencePiece model written from the ``tokenizer.json`` in the
  checkpoint's id order (``data/sentencepiece_model.py``), its class and
  separator pieces renamed ``[CLS]``/``[SEP]``.
- **byte-level BPE** (RoBERTa, GPT-2 style): nothing in the schema describes
  it, so no client can tokenize for it; the ``.tflite`` serves LiteRT users who
  feed the checkpoint tokenizer's ids, the ``.onnx`` optimum users.

Each record names its client unit builder; ``CheckpointTokenizer.client_unit``
calls it. TensorFlow-free.

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
        name (str): how reports name it (``"wordpiece"``, ``"sentencepiece"``, ``"bpe"``).
        client_options (str | None): the TFLite Metadata process unit the clients run; None: none can.
        client_file (str | None): the file that unit names, packed into the ``.tflite``.
        no_client (str): why no client can tokenize for it (empty when one can).

    Example:
        >>> KINDS["WordPiece"].client_file
        'vocab.txt'
    """

    model_type: str
    name: str
    client_options: str = None
    client_file: str = None
    no_client: str = ""


KINDS = MappingProxyType({kind.model_type: kind for kind in (
    TokenizerKind("WordPiece", "wordpiece", "BertTokenizerOptions", VOCAB_FILE),
    TokenizerKind("Unigram", "sentencepiece", "SentencePieceTokenizerOptions", SENTENCEPIECE_FILE),
    TokenizerKind("BPE", "bpe", no_client=(
        "the checkpoint's tokenizer is byte-level BPE, which the TFLite Metadata cannot describe: MediaPipe and the "
        "Task Library cannot tokenize text for this model; feed it the ids of the checkpoint's own tokenizer "
        "through LiteRT, or use the .onnx export")),
)})


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
    """The tokenizer process unit of a ``.tflite``'s TFLite Metadata and the file it packs.

    Args:
        options (str): ``"BertTokenizerOptions"`` or ``"SentencePieceTokenizerOptions"``.
        file_name (str): the packed file's name.
        data (bytes): its contents.
        renamed (tuple[tuple[str, str], ...]): ``(checkpoint token, client name)`` of the special tokens renamed
            for the clients' literal lookups.

    Example:
        >>> ClientUnit("BertTokenizerOptions", "vocab.txt", b"[PAD]\\n").file_name
        'vocab.txt'
    """

    options: str
    file_name: str
    data: bytes
    renamed: tuple = ()


__all__ = ["TokenizerKind", "KINDS", "ClientUnit", "returns_token_types", "NO_TOKEN_TYPES", "CLIENT_SPECIAL_NAMES", "VOCAB_FILE", "SENTENCEPIECE_FILE"]
