"""CheckpointTokenizer: a checkpoint's own ``tokenizer.json`` (WordPiece, Unigram or byte-level BPE), as transformers runs it.

``WordPieceTokenizer`` reads BERT's ``vocab.txt`` with BERT's special tokens;
most checkpoints users bring are tokenized otherwise: XLM-R and ALBERT by a
SentencePiece Unigram model, RoBERTa by byte-level BPE, MPNet by WordPiece
with ``<s>``/``</s>`` for its class and separator tokens. The ``tokenizers``
library runs every one of them from the ``tokenizer.json`` that transformers'
fast tokenizer saves (normalizer, pre-tokenizer, model, post-processor), so
validation, calibration and evaluation text get exactly the checkpoint's ids.

The special tokens come from ``special_tokens_map.json`` / ``tokenizer_config.json``
(as transformers reads them), else from the post-processor. What the app-side
clients can do with the tokenizer is its kind's record
(``data/tokenizer_kinds.py``): :meth:`client_unit` builds the packed file,
:meth:`client_tokenizer` computes the ids the client will compute.

:func:`tokenizer_of` picks the tokenizer of a model directory: BERT's
``vocab.txt`` path when the directory has one with BERT's special tokens (the
path every BERT export took before), else the ``tokenizer.json``.

Example:
    >>> tok = tokenizer_of("xlm-roberta-dir/")  # doctest: +SKIP
    >>> tok.kind.name, tok.encode_inputs(["Hello world"], 8)["input_ids"][0].tolist()  # doctest: +SKIP
    ('sentencepiece', [0, 35378, 8999, 2, 1, 1, 1, 1])
"""

import base64
import hashlib
import string
import tempfile
from pathlib import Path

from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import Unigram

from mobilebert_kit.data import sentencepiece_model as spm
from mobilebert_kit.data.tokenizer_kinds import CLIENT_SPECIAL_NAMES, KINDS, ClientUnit, returns_token_types
from mobilebert_kit.data.vocab import TOKENIZER_FILES, read_vocab
from mobilebert_kit.data.word_piece_tokenizer import (
    PAIR_MIN_LENGTH, SPECIAL_TOKENS, WordPieceTokenizer, _check_one_token_per_id, _normalizer_behaviour, padded_batch,
)
from mobilebert_kit.errors import ConfigError, DataError
from mobilebert_kit.utils.structured import load_json

ROLES = ("cls", "sep", "pad", "unk", "mask")
_MAX_TOKENIZER_BYTES = TOKENIZER_FILES["tokenizer.json"]


def _content(value):
    """A special token as the config files write it: a string, or ``{"content": ...}`` (AddedToken)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _declared_specials(directory):
    """``{role: token}`` from ``special_tokens_map.json`` over ``tokenizer_config.json`` (transformers' order)."""
    found = {}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        path = Path(directory) / name
        if path.is_file():
            spec = load_json(path, name, expect=dict)
            for role in ROLES:
                token = _content(spec.get(f"{role}_token"))
                if token is not None:
                    found[role] = token
    return found


def _processor_specials(spec):
    """``{role: token}`` the ``tokenizer.json`` itself names (post-processor, padding, the model's unk)."""
    found = {}
    post = spec.get("post_processor") if isinstance(spec.get("post_processor"), dict) else {}
    for role in ("cls", "sep"):  # BertProcessing, RobertaProcessing
        pair = post.get(role)
        if isinstance(pair, list) and pair and isinstance(pair[0], str):
            found[role] = pair[0]
    # TemplateProcessing: the special token before the sequence is the class token, the one after it the separator.
    single = post.get("single") if isinstance(post.get("single"), list) else []
    pieces = [p for p in single if isinstance(p, dict)]
    for role, piece in (("cls", pieces[0] if pieces else None), ("sep", pieces[-1] if pieces else None)):
        special = piece.get("SpecialToken") if isinstance(piece, dict) else None
        if role not in found and isinstance(special, dict) and isinstance(special.get("id"), str):
            found[role] = special["id"]
    padding = spec.get("padding") if isinstance(spec.get("padding"), dict) else {}
    if isinstance(padding.get("pad_token"), str):
        found["pad"] = padding["pad_token"]
    model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
    if isinstance(model.get("unk_token"), str):
        found["unk"] = model["unk_token"]
    return found


def _first_node(node, kind):
    """The first object of ``"type": kind`` anywhere in a ``tokenizer.json`` section (depth first), else None."""
    if isinstance(node, dict):
        if node.get("type") == kind:
            return node
        node = list(node.values())
    for value in node if isinstance(node, list) else ():
        found = _first_node(value, kind)
        if found is not None:
            return found
    return None


def _find_precompiled(node):
    """The base64 ``precompiled_charsmap`` of a ``Precompiled`` normalizer anywhere in ``node``, else b""."""
    found = _first_node(node, "Precompiled")
    charsmap = found.get("precompiled_charsmap") if found is not None else None
    return base64.b64decode(charsmap) if isinstance(charsmap, str) else b""


def _prepends_space(spec):
    """Whether the pre-tokenizer puts a space before the text (SentencePiece's ``add_dummy_prefix``)."""
    found = _first_node(spec.get("pre_tokenizer"), "Metaspace")
    if found is None:
        return True
    scheme = found.get("prepend_scheme")
    return scheme != "never" if scheme is not None else bool(found.get("add_prefix_space", True))


def berts_names(specials):
    """Whether ``{role: token}`` names every special token as BERT does (an absent role counts as BERT's): then
    BERT's ``WordPieceTokenizer`` path and an embedded ``vocab.txt`` serve the checkpoint.

    Example:
        >>> berts_names({"cls": "[CLS]"}), berts_names({"cls": "<s>"})
        (True, False)
    """
    return all(specials.get(role, name) == name for role, name in CLIENT_SPECIAL_NAMES.items())


def _ascii_lower():
    """What the clients do to the text first: ``absl::AsciiStrToLower`` (A-Z only; "É" stays)."""
    return [normalizers.Replace(upper, upper.lower()) for upper in string.ascii_uppercase]


class CheckpointTokenizer:
    """The tokenizer of a checkpoint's ``tokenizer.json``, of any kind, with the checkpoint's special tokens.

    Args:
        path (str | os.PathLike): the ``tokenizer.json``.
        specials (dict[str, str] | None): ``{role: token}`` for ``cls``, ``sep``, ``pad``, ``unk``, ``mask``
            (None: from the files beside ``path``, else from the ``tokenizer.json``).

    Raises:
        DataError: an unreadable file, an unknown model kind, a special token missing from the vocabulary.

    Example:
        >>> tok = CheckpointTokenizer("roberta-dir/tokenizer.json")  # doctest: +SKIP
        >>> tok.kind.name, tok.cls_id, tok.pad_id  # doctest: +SKIP
        ('bpe', 0, 1)
    """

    def __init__(self, path, specials=None):
        path = Path(path)
        if not path.is_file():
            raise DataError(f"tokenizer {path} does not exist; pass the checkpoint's tokenizer.json")
        if path.stat().st_size > _MAX_TOKENIZER_BYTES:
            raise DataError(f"tokenizer {path} is {path.stat().st_size} bytes, more than any tokenizer.json "
                            f"({_MAX_TOKENIZER_BYTES}); pass the checkpoint's own tokenizer.json")
        spec = load_json(path, "the tokenizer", expect=dict)
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as err:  # noqa: BLE001  (the library raises bare Exceptions)
            raise DataError(f"cannot read tokenizer {path} ({str(err).splitlines()[0]}); "
                            "pass a valid tokenizer.json") from err
        model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
        kind = KINDS.get(model.get("type"))
        if kind is None:
            raise DataError(f"{path} is a {model.get('type')} tokenizer; mobilebert-kit reads "
                            f"{', '.join(KINDS)} tokenizers: pass the checkpoint's own tokenizer.json")
        found = {**_processor_specials(spec), **_declared_specials(path.parent)} if specials is None else specials
        self._spec, self.kind, self.source, self.vocab_path = spec, kind, str(path), path
        # Whether ``tokenizer(text)`` returns token_type_ids in transformers (None: unknown): the ONNX inputs.
        # The tokenizer class is in tokenizer_config.json, or in config.json (paraphrase-multilingual-MiniLM).
        declared = {}
        for name in ("config.json", "tokenizer_config.json"):
            if (path.parent / name).is_file():
                found_spec = load_json(path.parent / name, name, expect=dict)
                declared.update({k: found_spec[k] for k in ("tokenizer_class", "model_input_names") if k in found_spec})
        self.token_types = returns_token_types(declared)
        self._setup(tokenizer, found, path)

    def _setup(self, tokenizer, specials, path):
        tokenizer.no_padding()
        tokenizer.no_truncation()
        _check_one_token_per_id(tokenizer.get_vocab(with_added_tokens=True), path)
        self._tokenizer = tokenizer
        self.vocab = dict(tokenizer.get_vocab(with_added_tokens=True))
        self.inverse_vocab = {i: t for t, i in self.vocab.items()}
        self.vocab_size = max(self.vocab.values()) + 1
        missing = [f"{role} {token!r}" for role, token in specials.items() if token not in self.vocab]
        if missing:
            raise DataError(f"{path}: the special token(s) {', '.join(missing)} are not in its vocabulary; "
                            "pass the tokenizer files the checkpoint was saved with")
        for role in ("cls", "sep"):
            if role not in specials:
                raise DataError(f"{path} names no {role} token (special_tokens_map.json, tokenizer_config.json or "
                                "its post-processor); save the checkpoint's tokenizer with transformers")
        self.special_tokens = dict(specials)
        for role in ROLES:
            setattr(self, f"{role}_id", self.vocab.get(specials.get(role)))
        self.special_ids = frozenset(self.vocab[t] for t in specials.values())
        if tokenizer.post_processor is None:
            cls, sep = specials["cls"], specials["sep"]
            tokenizer.post_processor = processors.TemplateProcessing(
                single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B:1 {sep}:1",
                special_tokens=[(cls, self.cls_id), (sep, self.sep_id)])
        try:
            self.lowercase, self.strip_accents = _normalizer_behaviour(tokenizer.normalizer, path)
        except ConfigError:
            self.lowercase, self.strip_accents = False, False  # partial casing: the client check measures it

    @classmethod
    def from_directory(cls, directory):
        """The ``tokenizer.json`` of a Hugging Face model directory, with its special-token files."""
        path = Path(directory) / "tokenizer.json"
        if not path.is_file():
            raise DataError(f"{directory} has no tokenizer.json; save the checkpoint's tokenizer with transformers "
                            "(tokenizer.save_pretrained) beside it")
        return cls(path)

    @property
    def do_lower_case(self):
        """The casing as recorded in exported metadata."""
        return self.lowercase

    def vocab_lines(self):
        """The tokens in id order (the ids are dense: ``_check_one_token_per_id`` and ``vocab_size``)."""
        return [self.inverse_vocab.get(i, "") for i in range(self.vocab_size)]

    def encode(self, text):
        """``(tokens, ids, offsets)`` of ``text`` without special tokens."""
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return list(encoding.tokens), list(encoding.ids), list(encoding.offsets)

    def tokenize(self, text):
        """The tokens of ``text``."""
        return self.encode(text)[0]

    def encode_words(self, words):
        """Tokenizes pre-split words; returns ``(ids, word_index per token)``."""
        encoding = self._tokenizer.encode(list(words), is_pretokenized=True, add_special_tokens=False)
        return list(encoding.ids), list(encoding.word_ids)

    def encode_inputs(self, lines, seq_len):
        """Model inputs of text lines as transformers makes them: int32 ``input_ids`` / ``attention_mask`` /
        ``token_type_ids`` ``[len(lines), seq_len]``, the checkpoint's special tokens, right padded with its
        pad id, truncated longest-first. A line holding a tab is a sentence pair."""
        if seq_len < PAIR_MIN_LENGTH + 1 and any("\t" in line for line in lines):
            raise DataError(f"sentence pairs (lines with a tab) need a sequence length of at least "
                            f"{PAIR_MIN_LENGTH + 1}, got {seq_len}; use a longer --seq-len or single sentences")
        pairs = [line.split("\t", 1) for line in lines]
        return self.encode_pairs([p[0] for p in pairs], [p[1] if len(p) > 1 else None for p in pairs], seq_len)

    def encode_pairs(self, texts_a, texts_b, seq_len):
        """:meth:`encode_inputs` of texts and their second segments (``texts_b`` None, or None items: single
        texts), as the fine-tuning data gives them; the checkpoint's pair layout (RoBERTa: ``<s> a </s></s> b
        </s>``, segment ids all 0)."""
        texts_b = texts_b if texts_b is not None else [None] * len(texts_a)
        pad_id = self.pad_id if self.pad_id is not None else 0
        items = [str(a) if b is None else (str(a), str(b)) for a, b in zip(texts_a, texts_b)]
        return padded_batch(self._tokenizer, items, seq_len, pad_id, self.inverse_vocab.get(pad_id, ""))

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab.get(t, self.unk_id) for t in tokens]

    def convert_ids_to_tokens(self, ids):
        return [self.inverse_vocab.get(int(i), self.special_tokens.get("unk", "")) for i in ids]

    def fingerprint(self):
        """sha256 of the kind, the vocabulary in id order, the special tokens and the casing."""
        digest = hashlib.sha256(f"{self.kind.model_type}\n".encode())
        for index, token in enumerate(self.vocab_lines()):
            digest.update(f"{index}\t{token}\n".encode())
        for role in ROLES:
            digest.update(f"{role}={self.special_tokens.get(role)}\n".encode())
        digest.update(b"lower" if self.lowercase else b"cased")
        return digest.hexdigest()

    # ------------------------------------------------------------- the app-side clients
    def _client_names(self, names):
        """``names`` (tokens in id order) with the special tokens given the names the clients look up.

        A name the clients look up that already belongs to another token (MPNet's vocabulary holds BERT's
        ``[CLS]`` at 104 besides its own ``<s>`` at 0) moves that other token aside, so the client finds the
        checkpoint's token: text never produces a bracketed special token (the tokenizers split punctuation).
        """
        names, renamed = list(names), []
        for role, client_name in CLIENT_SPECIAL_NAMES.items():
            token = self.special_tokens.get(role)
            if token is None or token == client_name:
                continue
            index = self.vocab[token]
            if client_name in names:
                other = names.index(client_name)
                names[other] = f"[unused-{client_name[1:-1].lower()}-{other}]"
            names[index] = client_name
            renamed.append((token, client_name))
        return names, tuple(renamed)

    def client_unit(self):
        """The tokenizer the ``.tflite``'s TFLite Metadata packs for MediaPipe and the Task Library, or None.

        Returns:
            ClientUnit | None: a ``vocab.txt`` (WordPiece) or a SentencePiece model (Unigram) whose ids are the
            checkpoint's, special tokens renamed for the clients' literal lookups; None when no client can
            tokenize for this kind (``self.kind.no_client`` says why).

        Raises:
            DataError: a vocabulary the packed file cannot hold (a token with a line break in a ``vocab.txt``).
        """
        kind = self.kind
        if kind.client_options is None:
            return None
        if kind.model_type == "WordPiece":
            lines, renamed = self._client_names(self.vocab_lines())
            bad = [t for t in lines if not t or "\n" in t or "\r" in t]
            if bad:
                raise DataError(f"{self.source} has a token a vocab.txt cannot hold ({bad[0]!r}); "
                                "export without client metadata (--no-vocab)")
            return ClientUnit(kind.client_options, kind.client_file, ("\n".join(lines) + "\n").encode("utf-8"),
                              renamed)
        pieces, renamed = self._sentencepiece_pieces()
        model = self._spec["model"]
        data = spm.write_model(pieces, unk_id=int(model.get("unk_id") or 0),
                               precompiled_charsmap=_find_precompiled(self._spec.get("normalizer")),
                               add_dummy_prefix=_prepends_space(self._spec))
        return ClientUnit(kind.client_options, kind.client_file, data, renamed)

    def _sentencepiece_pieces(self):
        model = self._spec["model"]
        vocab = model.get("vocab") or []
        unk = model.get("unk_id")
        specials = {t for t in self.special_tokens.values()}
        added = {entry.get("id"): entry.get("content") for entry in self._spec.get("added_tokens") or []
                 if isinstance(entry, dict) and entry.get("special")}
        pieces = []
        for index in range(self.vocab_size):
            if index < len(vocab):
                piece, score = vocab[index][0], float(vocab[index][1])
            else:
                piece, score = added.get(index) or self.inverse_vocab.get(index, ""), 0.0
            kind = spm.UNKNOWN if index == unk else (
                spm.CONTROL if piece in specials or index in added else spm.NORMAL)
            pieces.append((piece, score, kind))
        names, renamed = self._client_names([p[0] for p in pieces])
        return [(name, score, kind) for name, (_, score, kind) in zip(names, pieces)], renamed

    def client_tokenizer(self):
        """The ids MediaPipe and the Task Library compute from the same text, or None (no client tokenizer).

        They ASCII-lower-case the text, tokenize it with the packed file and add the literal ``[CLS]`` /
        ``[SEP]`` (``BertPreprocessor``); the packed file keeps the checkpoint's ids. Used by the export's
        client-fidelity check (``convert/validation/client_fidelity.py``).

        Returns:
            WordPieceTokenizer | CheckpointTokenizer | None: a tokenizer with this one's ids.
        """
        unit = self.client_unit()
        if unit is None:
            return None
        if self.kind.model_type == "WordPiece":
            with tempfile.TemporaryDirectory(prefix="mbk-vocab-") as tmp:
                vocab = Path(tmp) / "vocab.txt"
                vocab.write_bytes(unit.data)
                return WordPieceTokenizer(vocab, lowercase=True).client_tokenizer()
        model = spm.read_model(unit.data)
        pieces = model["pieces"]
        tokenizer = Tokenizer(Unigram([(p, s) for p, s, _ in pieces], unk_id=model["unk_id"], byte_fallback=False))
        steps = _ascii_lower()
        if model["precompiled_charsmap"]:
            steps.append(normalizers.Precompiled(model["precompiled_charsmap"]))
        # SentencePiece's remove_extra_whitespaces: no leading, trailing or repeated spaces.
        steps += [normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
        tokenizer.normalizer = normalizers.Sequence(steps)
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement="▁", prepend_scheme="always" if model["add_dummy_prefix"] else "never")
        ids = {p: i for i, (p, _, _) in enumerate(pieces)}
        tokenizer.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
        client = CheckpointTokenizer.__new__(CheckpointTokenizer)
        client._spec, client.kind, client.source, client.vocab_path = self._spec, self.kind, self.source, None
        client.token_types = self.token_types
        specials = {role: name for role, name in CLIENT_SPECIAL_NAMES.items()
                    if self.special_tokens.get(role) is not None and name in ids}
        specials["pad"] = pieces[self.pad_id][0] if self.pad_id is not None else specials.get("pad")
        client._setup(tokenizer, {k: v for k, v in specials.items() if v}, self.source)
        client.lowercase, client.strip_accents = True, False
        return client


def tokenizer_of(directory):
    """The tokenizer of a model directory, or None when it has none.

    BERT's ``vocab.txt`` with BERT's special tokens gives a :class:`WordPieceTokenizer` (the path of every BERT
    export so far); otherwise the ``tokenizer.json`` gives a :class:`CheckpointTokenizer` (any kind).

    Example:
        >>> tokenizer_of("all-MiniLM-L6-v2/").kind.name  # doctest: +SKIP
        'wordpiece'
    """
    directory = Path(directory)
    vocab = directory / "vocab.txt"
    if vocab.is_file():
        tokens = set(read_vocab(vocab))
        if all(t in tokens for t in SPECIAL_TOKENS) and berts_names(_declared_specials(directory)):
            return WordPieceTokenizer.from_directory(directory)
    if (directory / "tokenizer.json").is_file():
        found = CheckpointTokenizer.from_directory(directory)
        if found.kind.model_type == "WordPiece" and berts_names(found.special_tokens):
            return WordPieceTokenizer.from_file(directory)  # BERT's own, without a vocab.txt beside it
        return found
    if vocab.is_file():
        return WordPieceTokenizer.from_directory(directory)  # its one-line error names the missing tokens
    return None


def check_tokenizer_fits(tokenizer, vocab_size, model):
    """Refuses a tokenizer whose ids run past the model's embedding table; returns the tokenizer.

    A vocabulary larger than the table imported and exported with exit 0, and the app then failed with
    ``gather index out of bounds`` on text that used the extra tokens (issue 37). A smaller one is fine:
    checkpoints pad their tables (multiples of 8), and rows no id reaches are never read.

    Args:
        tokenizer: a :class:`WordPieceTokenizer` or :class:`CheckpointTokenizer` (None passes).
        vocab_size (int): the rows of the model's token embedding table.
        model (str): the model, for the message (``"the model"``).

    Raises:
        DataError: the tokenizer has ids >= ``vocab_size``.

    Example:
        >>> check_tokenizer_fits(None, 30522, "tiny-bert") is None
        True
    """
    size = getattr(tokenizer, "vocab_size", None)
    if tokenizer is not None and size is not None and size > vocab_size:
        raise DataError(f"the vocabulary {tokenizer.source} has {size} tokens but {model} embeds only {vocab_size} "
                        "(its config's vocab_size): text using the other ids would fail in the app ('gather index out "
                        "of bounds'); use the vocab.txt the model was trained with (or its tokenizer files)")
    return tokenizer


def load_tokenizer(path, lowercase=None):
    """The tokenizer of a file or directory, whatever its kind: what ``--vocab`` / ``--tokenizer`` name.

    A directory is :func:`tokenizer_of`'s; a ``tokenizer.json`` that is not BERT's WordPiece (another model kind,
    or other special tokens) is a :class:`CheckpointTokenizer`; a ``vocab.txt`` or BERT's ``tokenizer.json`` is a
    :class:`WordPieceTokenizer` (``lowercase`` applies to a ``vocab.txt``, as ``--cased`` asks).

    Args:
        path (str | os.PathLike): a model directory, a ``tokenizer.json`` or a ``vocab.txt``.
        lowercase (bool | None): the casing of a ``vocab.txt`` (None: ``tokenizer_config.json``'s, else uncased).

    Example:
        >>> load_tokenizer("xlm-roberta-dir/tokenizer.json").kind.name  # doctest: +SKIP
        'sentencepiece'
    """
    path = Path(path)
    if path.is_dir():
        found = tokenizer_of(path)
        if isinstance(found, WordPieceTokenizer) and lowercase is not None:
            return WordPieceTokenizer.from_file(path, lowercase=lowercase)
        if found is None:
            raise DataError(f"{path} holds neither tokenizer.json nor vocab.txt; pass the vocabulary file")
        return found
    if path.suffix == ".json" and path.is_file():
        spec = load_json(path, "the tokenizer", expect=dict)
        model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
        declared = _declared_specials(path.parent)
        if model.get("type") != "WordPiece" or not berts_names(declared):
            return CheckpointTokenizer(path)
    return WordPieceTokenizer.from_file(path, lowercase=lowercase)


__all__ = ["CheckpointTokenizer", "tokenizer_of", "load_tokenizer", "berts_names", "check_tokenizer_fits"]
