"""TextTokenizer: the one tokenizer of the package, over a ``tokenizers.Tokenizer`` of any kind.

Validation, calibration, evaluation, fine-tuning, pre-training data and the
app-side tokenization of ``mbk evaluate`` / ``mbk profile --text`` all use this
class. What differs between WordPiece (BERT, MPNet), SentencePiece Unigram
(XLM-R, ALBERT) and byte-level BPE (RoBERTa) is the kind's record
(``data/tokenizer_kinds.py``); the ``tokenizers`` library runs every one of
them, from the ``tokenizer.json`` that transformers' fast tokenizer saves, or
from BERT's ``vocab.txt`` (``data/vocab.py``'s reader) with BERT's rules.

**One reading of a checkpoint** (:meth:`TextTokenizer.from_directory`): every
tokenizer file the directory carries is read once, bounded, and checked against
the others before anything is written; the packed client file (:meth:`client_unit`)
is generated from that reading. The special tokens come from
``special_tokens_map.json`` / ``tokenizer_config.json`` (as transformers reads
them), else from the post-processor.
"""

import base64
import hashlib
import string
import unicodedata
from pathlib import Path

import numpy as np
from tokenizers import BertWordPieceTokenizer, Regex, Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import Unigram

from mobilebert_kit.data import sentencepiece_model as spm
from mobilebert_kit.data.tokenizer_kinds import (
    CLIENT_KINDS, CLIENT_SPECIAL_NAMES, KINDS, VOCAB_FILE, VOCAB_KIND, ClientUnit, returns_token_types,
)
from mobilebert_kit.data.vocab import (
    TOKENIZER_FILES, VocabularyError, config_flag, lower_case_of, parse_vocab, read_tokenizer_files, read_vocab,
)
from mobilebert_kit.errors import ConfigError, DataError
from mobilebert_kit.utils.atomic import atomic_file
from mobilebert_kit.utils.structured import load_json

SPECIAL_TOKENS = tuple(CLIENT_SPECIAL_NAMES[role] for role in ("pad", "unk", "cls", "sep", "mask"))
ROLES = ("cls", "sep", "pad", "unk", "mask")
# [CLS] A [SEP] B [SEP]: a sentence pair needs three positions even with both segments truncated away
# (the fewest of any layout; each tokenizer's own count is its post-processor's, see encode_inputs).
PAIR_MIN_LENGTH = 3
# The longest row encode_inputs pads to: 8x the longest position table (ModernBERT's 8192), far below an allocation
# that could fail.
MAX_ENCODED_LENGTH = 1 << 16
_MAX_TOKENIZER_BYTES = TOKENIZER_FILES["tokenizer.json"]

# Probes of what a tokenizer.json's normalizer does, whatever its form (BertNormalizer, Lowercase, a Sequence
# of NFD, Lowercase and StripAccents, ...): upper-case letters of several scripts, precomposed accented
# letters with their bases.
_CASE_PROBES = ("A", "Z", "É", "Σ", "Ж")
_ACCENT_PROBES = (("é", "e"), ("ñ", "n"), ("ü", "u"), ("å", "a"))
# Words no tiny vocabulary holds (a private-use letter, an emoji, a rare CJK ideograph) beside ordinary ones: what
# a tokenizer does with text outside its vocabulary, and with a pair.
_UNKNOWN_PROBE = "hello \ue000 \U0001f600 \u9fa5 world"


def _normalizer_behaviour(normalizer, path):
    """``(lowercase, strip_accents)`` as ``normalizer`` (a ``tokenizers`` normalizer or None) behaves.

    Measured on text rather than read from a field: only a BertNormalizer has ``lowercase`` and
    ``strip_accents`` fields, while a Sequence of NFD, Lowercase and StripAccents lower-cases too.
    A normalizer that does it to some letters only is a ConfigError: the casing is recorded as one flag."""
    def normalize(text):
        return text if normalizer is None else normalizer.normalize_str(text)

    answers = []
    for what, probes in (("lower-cases", [(upper, upper.lower()) for upper in _CASE_PROBES]),
                         ("strips the accents of", _ACCENT_PROBES)):
        does = [normalize(text) == normalize(plain) for text, plain in probes]
        if any(does) and not all(does):
            done = ", ".join(text for (text, _), yes in zip(probes, does) if yes)
            kept = ", ".join(text for (text, _), yes in zip(probes, does) if not yes)
            raise ConfigError(
                f"{path}'s normalizer {what} {done} but not {kept}; mobilebert-kit records lower-casing and "
                "accent stripping as all or nothing: use a tokenizer.json whose normalizer is a BertNormalizer, "
                "or a vocab.txt"
            )
        answers.append(all(does))
    return tuple(answers)


def _check_one_token_per_id(vocab, path):
    """Refuses a vocabulary giving one id to two tokens, as ``data.vocab`` refuses a vocab.txt listing a token
    twice: the id's embedding row would stand for both, and decoding picks one of them."""
    first = {}
    for token, index in sorted(vocab.items(), key=lambda item: (item[1], item[0])):
        if index in first:
            raise VocabularyError(
                f"{path} gives the id {index} to both {first[index]!r} and {token!r}; every token needs its own id: "
                "remove the duplicate, or use the tokenizer.json the model was trained with"
            )
        first[index] = token


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


def _template_undefined(spec):
    """The first special token a ``TemplateProcessing`` post-processor (alone or in a ``Sequence``) places but
    does not define in its ``special_tokens``, else None (``spec`` loaded by tokenizers, so of its types)."""
    post = spec.get("post_processor")
    steps = post.get("processors", []) if isinstance(post, dict) and post.get("type") == "Sequence" else [post]
    for step in steps:
        if isinstance(step, dict) and step.get("type") == "TemplateProcessing":
            for piece in [*step.get("single", []), *step.get("pair", [])]:
                special = piece.get("SpecialToken") if isinstance(piece, dict) else None
                if special is not None and special.get("id") not in step.get("special_tokens", {}):
                    return special.get("id")
    return None


def berts_names(specials):
    """Whether ``{role: token}`` names every special token as BERT does (an absent role counts as BERT's).

    Example:
        >>> berts_names({"cls": "[CLS]"}), berts_names({"cls": "<s>"})
        (True, False)
    """
    return all(specials.get(role, name) == name for role, name in CLIENT_SPECIAL_NAMES.items())


def _ascii_lower():
    """What the clients do to the text first: ``absl::AsciiStrToLower`` (A-Z only; "É" stays)."""
    return [normalizers.Replace(upper, upper.lower()) for upper in string.ascii_uppercase]


def _bert_wordpiece(lines, lowercase, strip_accents, handle_chinese_chars=True):
    """BERT's tokenizer over vocabulary lines (BasicTokenizer normalisation, greedy longest-match ``##``)."""
    return BertWordPieceTokenizer({token: i for i, token in enumerate(lines)}, lowercase=lowercase,
                                  handle_chinese_chars=handle_chinese_chars, strip_accents=strip_accents,
                                  clean_text=True)._tokenizer


def _client_word_issue(token):
    """Why the clients' WordPiece (A-Z lower-cased, punctuation and CJK split, spaces split) never produces
    ``token`` as one word, or "" when it does."""
    if not token or any(ch.isspace() for ch in token):
        return "it holds a space"
    if any(unicodedata.category(ch).startswith("P") or (ch.isascii() and not ch.isalnum()) for ch in token):
        return "the clients split words at punctuation"
    if any(0x4E00 <= ord(ch) <= 0x9FFF or 0x3400 <= ord(ch) <= 0x4DBF for ch in token):
        return "the clients split CJK characters"
    if any("A" <= ch <= "Z" for ch in token):
        return "the clients lower-case A-Z first"
    return ""


class TextTokenizer:
    """A ``tokenizers.Tokenizer`` of any kind with the checkpoint's special tokens and the package's bookkeeping.

    Build one with :meth:`from_directory` (a checkpoint: the one reading), :meth:`from_file` (what ``--vocab``
    / ``--tokenizer`` name), :meth:`from_vocab` (BERT's ``vocab.txt``), :meth:`from_json` (a ``tokenizer.json``)
    or :meth:`from_packed` (the file packed for the app-side clients).

    Args:
        tokenizer (tokenizers.Tokenizer): the tokenizer (left without padding and truncation).
        kind (TokenizerKind): its kind's record.
        specials (dict[str, str]): ``{role: token}`` for ``cls``, ``sep`` (required), ``pad``, ``unk``, ``mask``.
        source (str): the file it was read from, for messages.
        lowercase (bool): it lower-cases the text (recorded in metadata and fingerprints).
        strip_accents (bool): it strips accents.
        token_types (bool | None): transformers' tokenizer returns ``token_type_ids`` (None: unknown).
        spec (dict | None): the ``tokenizer.json`` content, when read from one.
        files (dict[str, bytes] | None): the checkpoint's tokenizer files as read (:meth:`checkpoint_files`).

    Raises:
        DataError: a special token missing from the vocabulary, one id given to two tokens.

    Example:
        >>> tok = TextTokenizer.from_vocab("vocab.txt", lowercase=True)  # doctest: +SKIP
        >>> tok.tokenize("Unaffable tokenization")  # doctest: +SKIP
        ['una', '##ffa', '##ble', 'token', '##ization']
    """

    def __init__(self, tokenizer, kind, specials, *, source, lowercase=False, strip_accents=False, token_types=True,
                 spec=None, files=None, handle_chinese_chars=True):
        tokenizer.no_padding()
        tokenizer.no_truncation()
        vocab = dict(tokenizer.get_vocab(with_added_tokens=True))
        _check_one_token_per_id(vocab, source)
        missing = [f"{role} {token!r}" for role, token in specials.items() if token not in vocab]
        if missing:
            raise DataError(f"{source}: the special token(s) {', '.join(missing)} are not in its vocabulary; "
                            "pass the tokenizer files the checkpoint was saved with")
        for role in ("cls", "sep"):
            if role not in specials:
                raise DataError(f"{source} names no {role} token (special_tokens_map.json, tokenizer_config.json or "
                                "its post-processor); save the checkpoint's tokenizer with transformers")
        self._tokenizer, self.kind, self.source, self.vocab_path = tokenizer, kind, str(source), Path(source)
        self._spec, self._files = spec, dict(files or {})
        self.lowercase, self.strip_accents, self.token_types = bool(lowercase), bool(strip_accents), token_types
        self.handle_chinese_chars = bool(handle_chinese_chars)  # BERT's BasicTokenizer: every CJK character a word
        self.vocab = vocab
        self.inverse_vocab = {i: t for t, i in vocab.items()}
        self.vocab_size = max(vocab.values()) + 1
        self.special_tokens = dict(specials)
        for role in ROLES:
            setattr(self, f"{role}_id", vocab.get(specials.get(role)))
        self.special_ids = frozenset(vocab[t] for t in specials.values())
        if tokenizer.post_processor is None:
            cls, sep = specials["cls"], specials["sep"]
            tokenizer.post_processor = processors.TemplateProcessing(
                single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B:1 {sep}:1",
                special_tokens=[(cls, self.cls_id), (sep, self.sep_id)])
        try:
            # A WordPiece unk_token that is none of its tokens, or a Unigram model without unk_id, loads but
            # fails on the first word outside the vocabulary.
            single, pair = (len(tokenizer.encode(*texts).ids) for texts in ((_UNKNOWN_PROBE,),
                                                                          (_UNKNOWN_PROBE, _UNKNOWN_PROBE)))
        except Exception as err:  # noqa: BLE001  (the library raises bare Exceptions)
            raise DataError(f"{source} cannot tokenize a word outside its vocabulary ({str(err).splitlines()[0]}); "
                            "its unknown token must be one of its tokens: pass the tokenizer files the checkpoint was "
                            "saved with") from err
        # A template without $A (or $B) gives every text no tokens, or scores pairs on their first text alone.
        if not single or pair <= single:
            raise DataError(f"{source}: its post-processor drops the {'text' if not single else 'second text of a pair'} "
                            "(its template lacks $A or $B); pass the tokenizer files the checkpoint was saved with")
        # The pair layout's special tokens ([CLS] A [SEP] B [SEP]: 3; <s> A </s></s> B </s>: 4).
        self.pair_specials = tokenizer.num_special_tokens_to_add(is_pair=True)
        # Bracketed tokens such as [unused0] and the special tokens are reserved, never random replacements.
        self.regular_ids = sorted(i for t, i in vocab.items()
                                  if i not in self.special_ids and not (t.startswith("[") and t.endswith("]")))

    # ------------------------------------------------------------- constructors
    @classmethod
    def from_vocab(cls, vocab, lowercase=True, handle_chinese_chars=True, strip_accents=None, added=(), label=None):
        """BERT's tokenizer of a ``vocab.txt`` (uncased or cased).

        Normalisation is BERT's ``BasicTokenizer``: text cleaning, accents stripped when lower-casing (unless
        ``strip_accents`` says otherwise), punctuation split, every CJK character a word of its own, then greedy
        longest-match WordPiece with ``##`` continuations.

        Args:
            vocab (str | os.PathLike): the ``vocab.txt`` (one token per line, :func:`data.vocab.read_vocab`).
            lowercase (bool): uncased (True, also strips accents) or cased (False) model.
            handle_chinese_chars (bool): split CJK characters (BERT's default).
            strip_accents (bool | None): None follows ``lowercase`` (BERT's rule); a boolean overrides it, as
                ``tokenizer_config.json``'s ``strip_accents`` does in Hugging Face's tokenizers.
            added (Sequence[str]): tokens added after the vocabulary (``added_tokens.json``), in id order.
            label (str | None): what messages call the file (default: its path; a temporary copy names its origin).

        Example:
            >>> TextTokenizer.from_vocab("vocab.txt").kind.name  # doctest: +SKIP
            'wordpiece'
        """
        path = Path(vocab)
        if not path.is_file():
            raise DataError(f"vocabulary {vocab} does not exist; pass a BERT vocab.txt or tokenizer.json")
        tokens = read_vocab(path, label)
        missing = [t for t in SPECIAL_TOKENS if t not in tokens]
        if missing:
            raise DataError(f"{label or path} lacks the special token(s) {', '.join(missing)}; it is not a BERT vocab.txt")
        strip = bool(lowercase) if strip_accents is None else bool(strip_accents)
        tokenizer = _bert_wordpiece(tokens, bool(lowercase), strip, handle_chinese_chars)
        if added:
            tokenizer.add_tokens(list(added))
        return cls(tokenizer, VOCAB_KIND, dict(CLIENT_SPECIAL_NAMES), source=path, lowercase=lowercase,
                   strip_accents=strip, token_types=True, handle_chinese_chars=handle_chinese_chars)

    @classmethod
    def from_json(cls, path, lowercase=None, strip_accents=None, files=None, chinese_chars=None):
        """The tokenizer of a checkpoint's ``tokenizer.json``, any kind, with the special tokens beside it.

        Args:
            path (str | os.PathLike): the ``tokenizer.json``.
            lowercase (bool | None): for a tokenizer with BERT's names: the casing asked for (an error when the
                normalizer does otherwise).
            strip_accents (bool | None): for a BertNormalizer: ``tokenizer_config.json``'s ``strip_accents``.
            files (dict[str, bytes] | None): the checkpoint's files as read by :meth:`from_directory`.
            chinese_chars (bool | None): for a BertNormalizer: ``tokenizer_config.json``'s ``tokenize_chinese_chars``.

        Raises:
            DataError: an unreadable file, an unknown model kind, a special token missing from the vocabulary.

        Example:
            >>> TextTokenizer.from_json("roberta-dir/tokenizer.json").kind.name  # doctest: +SKIP
            'bpe'
        """
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
        undefined = _template_undefined(spec)
        if undefined is not None:  # tokenizers loads it, then panics on the first text (a raw traceback)
            raise DataError(f"{path}: its post-processor template adds the special token {undefined!r}, which its "
                            "special_tokens do not define; pass the tokenizer files the checkpoint was saved with")
        model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
        kind = KINDS.get(model.get("type"))
        if kind is None:
            raise DataError(f"{path} is a {model.get('type')} tokenizer; mobilebert-kit reads "
                            f"{', '.join(KINDS)} tokenizers: pass the checkpoint's own tokenizer.json")
        found = {**_processor_specials(spec), **_declared_specials(path.parent)}
        if kind.bert_names and berts_names(found):
            # BERT's own tokenizer.json: its five special tokens, its casing recorded as one flag.
            missing = [t for t in SPECIAL_TOKENS if t not in tokenizer.get_vocab()]
            if missing:
                raise DataError(f"{path} lacks the special token(s) {', '.join(missing)}; it is not a BERT tokenizer")
            found = dict(CLIENT_SPECIAL_NAMES)
            json_lower, json_strip = _normalizer_behaviour(tokenizer.normalizer, path)
            if lowercase is not None and bool(lowercase) != json_lower:
                raise DataError(
                    f"{path} is {'uncased' if json_lower else 'cased'} but "
                    f"{'--cased' if not lowercase else 'lower-casing'} was asked for; drop the option or use a vocab.txt")
            normalizer = spec.get("normalizer") if isinstance(spec.get("normalizer"), dict) else {}
            json_chinese = bool(normalizer.get("handle_chinese_chars", True)) \
                if normalizer.get("type") == "BertNormalizer" else True
            if normalizer.get("type") == "BertNormalizer" and (
                    (strip_accents is not None and bool(strip_accents) != json_strip)
                    or (chinese_chars is not None and bool(chinese_chars) != json_chinese)):
                # As transformers' fast tokenizer rewrites it for these settings (data.vocab.config_flag).
                json_strip = bool(strip_accents) if strip_accents is not None else json_strip
                json_chinese = bool(chinese_chars) if chinese_chars is not None else json_chinese
                tokenizer.normalizer = normalizers.BertNormalizer(
                    clean_text=bool(normalizer.get("clean_text", True)), handle_chinese_chars=json_chinese,
                    strip_accents=json_strip, lowercase=json_lower)
            token_types = True  # BERT's tokenizers return token_type_ids
        else:
            json_chinese = True
            try:
                json_lower, json_strip = _normalizer_behaviour(tokenizer.normalizer, path)
            except ConfigError:
                json_lower, json_strip = False, False  # partial casing: the client check measures it
            # Whether ``tokenizer(text)`` returns token_type_ids in transformers (None: unknown): the ONNX inputs.
            # The tokenizer class is in tokenizer_config.json, or in config.json (paraphrase-multilingual-MiniLM).
            declared = {}
            for name in ("config.json", "tokenizer_config.json"):
                if (path.parent / name).is_file():
                    found_spec = load_json(path.parent / name, name, expect=dict)
                    declared.update({k: found_spec[k] for k in ("tokenizer_class", "model_input_names")
                                     if k in found_spec})
            token_types = returns_token_types(declared)
        return cls(tokenizer, kind, found, source=path, lowercase=json_lower, strip_accents=json_strip,
                   token_types=token_types, spec=spec, files=files, handle_chinese_chars=json_chinese)

    @classmethod
    def from_directory(cls, directory, lowercase=None):
        """The one reading of a checkpoint's tokenizer files, checked against each other.

        ``tokenizer.json`` when the directory has one (every kind), else BERT's ``vocab.txt`` (with
        ``added_tokens.json``'s tokens after it). Every other tokenizer file it carries is read (bounded) and
        compared with that reading first: a ``vocab.txt`` or ``added_tokens.json`` that gives a token another id
        is refused, naming both files, before anything is written.

        Args:
            directory (str | os.PathLike): the model or checkpoint directory.
            lowercase (bool | None): the casing asked for (``--cased``); None: the directory's.

        Raises:
            DataError: no tokenizer file, files that disagree, a tokenizer either reader refuses.

        Example:
            >>> TextTokenizer.from_directory("all-MiniLM-L6-v2/").client_unit().file_name  # doctest: +SKIP
            'vocab.txt'
        """
        directory = Path(directory)
        files = read_tokenizer_files(directory)  # every tokenizer file, bounded, read once
        if lowercase is None:
            lowercase = lower_case_of(directory, default=None)
        strip_accents = config_flag(directory, "strip_accents")
        chinese_chars = config_flag(directory, "tokenize_chinese_chars")
        if "tokenizer.json" in files:
            tok = cls.from_json(directory / "tokenizer.json", lowercase=lowercase, strip_accents=strip_accents,
                                files=files, chinese_chars=chinese_chars)
        elif VOCAB_FILE in files:
            added = _added_tokens(files, directory, len(parse_vocab(files[VOCAB_FILE], str(directory / VOCAB_FILE))))
            # tokenize_chinese_chars as transformers' BERT tokenizers read it (false: a CJK run is one word).
            tok = cls.from_vocab(directory / VOCAB_FILE, lowercase=True if lowercase is None else lowercase,
                                 strip_accents=strip_accents, added=added,
                                 handle_chinese_chars=True if chinese_chars is None else chinese_chars)
            tok._files = files
        else:
            raise DataError(f"{directory} holds neither tokenizer.json nor vocab.txt; pass the vocabulary file")
        tok._check_files(directory)
        return tok

    @classmethod
    def from_file(cls, path, lowercase=None, strip_accents=None):
        """The tokenizer of a file or directory, whatever its kind: what ``--vocab`` / ``--tokenizer`` name.

        Args:
            path (str | os.PathLike): a model directory (:meth:`from_directory`), a ``tokenizer.json``
                (:meth:`from_json`, with the special-token files beside it) or a ``vocab.txt``
                (:meth:`from_vocab`).
            lowercase (bool | None): the casing of a ``vocab.txt`` (None: uncased; a directory's own setting for a
                directory); for a ``tokenizer.json`` with BERT's names, an error when it does otherwise.
            strip_accents (bool | None): None: BERT's rule (a directory's own setting for a directory).

        Example:
            >>> TextTokenizer.from_file("xlm-roberta-dir/tokenizer.json").kind.name  # doctest: +SKIP
            'sentencepiece'
        """
        path = Path(path)
        if path.is_dir():
            return cls.from_directory(path, lowercase=lowercase)
        if path.suffix == ".json":
            return cls.from_json(path, lowercase=lowercase, strip_accents=strip_accents)
        return cls.from_vocab(path, lowercase=True if lowercase is None else lowercase, strip_accents=strip_accents)

    @classmethod
    def from_packed(cls, client, data, source="the packed tokenizer", token_types=True):
        """The tokenizer the app-side clients run on a packed file: the ids MediaPipe and the Task Library compute.

        They ASCII-lower-case the text (``absl::AsciiStrToLower``: A-Z only, accents kept), tokenize it with the
        packed ``vocab.txt`` (BERT's WordPiece) or SentencePiece model, and add the literal ``[CLS]`` /
        ``[SEP]`` (``BertPreprocessor``), whatever the checkpoint's own tokenizer does; the TFLite Metadata has
        no field to change that (``shared/reference/clients.md``).

        Args:
            client (str): the client tokenizer (``"bert"``, ``"sentencepiece"``: ``TokenizerKind.client``).
            data (bytes): the packed file's content.
            source (str): what it is, for messages.
            token_types (bool | None): whether the model takes ``token_type_ids``.

        Raises:
            DataError: a packed file the clients could not run (no ``[CLS]``/``[SEP]``, not a model).

        Example:
            >>> TextTokenizer.from_packed("bert", b"[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\n[MASK]\\nhello\\n").tokenize("Hello")
            ['hello']
        """
        kind = CLIENT_KINDS.get(client)
        if kind is None:
            raise DataError(f"{source} is a {client} tokenizer, which mobilebert-kit cannot run; pass --tokenizer")
        tokenizer, names = _CLIENT_READERS[kind.client](bytes(data), str(source))
        specials = {role: name for role, name in CLIENT_SPECIAL_NAMES.items() if name in names}
        return cls(tokenizer, kind, specials, source=str(source), lowercase=True, strip_accents=False,
                   token_types=token_types)

    # ------------------------------------------------------------- the one reading
    def checkpoint_files(self):
        """The checkpoint's tokenizer files as read once by :meth:`from_directory`: ``{name: bytes}`` ({} else)."""
        return dict(self._files)

    def model_files(self):
        """The tokenizer model as another runtime takes it (onnxruntime-extensions' tokenizer ops), from the one
        reading: ``{name: bytes}`` named by the kind's record (``kind.model_files``).

        WordPiece: ``vocab.txt`` (added tokens included, the checkpoint's names); Unigram: a SentencePiece model
        with the checkpoint's ids and names (the checkpoint's own ``.model`` file has other ids for XLM-R);
        byte-level BPE: ``vocab.json`` and ``merges.txt`` from the ``tokenizer.json``. The special tokens are
        :attr:`special_tokens`."""
        return _MODEL_FILES[self.kind.model_files[0]](self)

    def _check_files(self, directory):
        """Compares every file of the one reading with the tokenizer: a ``vocab.txt`` must list its tokens at
        their ids (it may stop before the added tokens, which ``save_pretrained`` keeps in tokenizer.json),
        ``added_tokens.json`` must give its tokens their ids."""
        files = self._files
        lines = self.vocab_lines()
        if VOCAB_FILE in files and self._spec is not None:
            label = directory / VOCAB_FILE
            if not self.kind.bert_names:
                raise DataError(f"{label} beside a {self.kind.name} tokenizer.json: a checkpoint of this kind has no "
                                "vocab.txt; remove it, or save the checkpoint's tokenizer again with transformers")
            listed = parse_vocab(files[VOCAB_FILE], str(label))
            differ = next((i for i, token in enumerate(listed) if i >= len(lines) or lines[i] != token), None)
            base = self._tokenizer.get_vocab_size(with_added_tokens=False)
            if differ is None and len(listed) < base:
                # A vocab.txt cut short (a download that stopped) agreed line by line and was carried beside the
                # weights; whatever reads it (transformers' BertTokenizer, an app) lacks the tokens after its end.
                raise DataError(f"{label} lists {len(listed)} tokens but tokenizer.json's vocabulary has {base} (before "
                                "added tokens): the file is cut short; keep the pair the model was trained with "
                                "(save_pretrained writes both)")
            if differ is not None:
                theirs = repr(lines[differ]) if differ < len(lines) else "no token"
                raise DataError(
                    f"{label} line {differ + 1} is {listed[differ][:40]!r} but tokenizer.json gives id {differ} to "
                    f"{theirs[:42]}: the two files are different vocabularies and the packed vocab.txt would give "
                    "the app other ids; keep the pair the model was trained with (save_pretrained writes both)")
        for name in self.kind.model_files:  # the kind's own files, when the checkpoint kept them
            if name in files and name != VOCAB_FILE and self._spec is not None:
                missing = _SIDE_FILE_CHECKS[name](files[name], self.vocab, directory / name)
                if missing:
                    raise DataError(
                        f"{directory / name} holds {missing[:40]!r}, which tokenizer.json does not give the same "
                        "place: the two files are different tokenizers and the one packed for the app would follow "
                        "tokenizer.json; keep the files the model was trained with (save_pretrained writes both)")
        if "added_tokens.json" in files:
            added = load_json(directory / "added_tokens.json", "added_tokens.json", expect=dict)
            for token, index in added.items():
                if self.vocab.get(token) != index:
                    raise DataError(
                        f"{directory / 'added_tokens.json'} gives {token[:40]!r} the id {index!r} but the tokenizer "
                        f"gives it {self.vocab.get(token)!r}; keep the files the model was trained with")

    # ------------------------------------------------------------- what every consumer uses
    @property
    def do_lower_case(self):
        """The casing as recorded in exported metadata (same as ``lowercase``)."""
        return self.lowercase

    def vocab_lines(self):
        """The tokens in id order ("" at an id no token has; :meth:`client_unit` refuses those)."""
        return [self.inverse_vocab.get(i, "") for i in range(self.vocab_size)]

    def encode(self, text):
        """Returns ``(tokens, ids, offsets)`` of ``text`` without special tokens; offsets index ``text``."""
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
        pad id, truncated longest-first. A line holding a tab is a sentence pair (segment A, tab, segment B).
        """
        if seq_len < self.pair_specials and any("\t" in line for line in lines):
            # The tokenizer cannot truncate a pair below its special tokens: it returns longer rows.
            raise DataError(f"sentence pairs (lines with a tab) need a sequence length of at least "
                            f"{self.pair_specials}, got {seq_len}; use a longer --seq-len or single sentences")
        pairs = [line.split("\t", 1) for line in lines]
        return self.encode_pairs([p[0] for p in pairs], [p[1] if len(p) > 1 else None for p in pairs], seq_len)

    def encode_pairs(self, texts_a, texts_b, seq_len):
        """:meth:`encode_inputs` of texts and their second segments (``texts_b`` None, or None items: single
        texts), as the fine-tuning data gives them; the checkpoint's pair layout (RoBERTa: ``<s> a </s></s> b
        </s>``, segment ids all 0)."""
        if seq_len > MAX_ENCODED_LENGTH:
            # A corrupt or foreign .onnx claiming a length of 10**9 would make the tokenizers library abort.
            raise DataError(f"cannot pad text to {seq_len:,} tokens, more than the {MAX_ENCODED_LENGTH:,} any model "
                            "here reads; the file's inputs (or --seq-len) give a length no text model has")
        texts_b = texts_b if texts_b is not None else [None] * len(texts_a)
        pad_id = self.pad_id if self.pad_id is not None else 0
        items = [str(a) if b is None else (str(a), str(b)) for a, b in zip(texts_a, texts_b)]
        self._tokenizer.enable_truncation(max_length=seq_len)
        self._tokenizer.enable_padding(length=seq_len, pad_id=pad_id, pad_token=self.inverse_vocab.get(pad_id, ""))
        try:
            encodings = self._tokenizer.encode_batch(items)
        finally:
            # encode() and encode_words() work on unpadded, untruncated pieces.
            self._tokenizer.no_padding()
            self._tokenizer.no_truncation()
        return {
            "input_ids": np.array([e.ids for e in encodings], np.int32),
            "attention_mask": np.array([e.attention_mask for e in encodings], np.int32),
            "token_type_ids": np.array([e.type_ids for e in encodings], np.int32),
        }

    def convert_ids_to_tokens(self, ids):
        return [self.inverse_vocab.get(int(i), self.special_tokens.get("unk", "")) for i in ids]

    def fingerprint(self):
        """sha256 of the vocabulary, the special tokens and the casing: data and models must agree on it.

        A tokenizer with BERT's names hashes only vocabulary and casing, so existing datasets still match."""
        bert = self.kind.bert_names and self.special_tokens == dict(CLIENT_SPECIAL_NAMES)
        digest = hashlib.sha256() if bert else hashlib.sha256(f"{self.kind.model_type}\n".encode())
        for index, token in enumerate(self.vocab_lines()):
            if bert and not token:
                continue
            digest.update(f"{index}\t{token}\n".encode())
        if not bert:
            for role in ROLES:
                digest.update(f"{role}={self.special_tokens.get(role)}\n".encode())
        digest.update(b"lower" if self.lowercase else b"cased")
        if bert and self.strip_accents != self.lowercase:  # only then: fingerprints of BERT's rule stay as they were
            digest.update(b"strip" if self.strip_accents else b"keep-accents")
        if not self.handle_chinese_chars:  # likewise: BERT's default (split) adds nothing
            digest.update(b"cjk-unsplit")
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

    def added_tokens(self):
        """``{id: token}`` of the tokens added to the vocabulary that are not special (``add_tokens``)."""
        return {i: t for i, t in self._tokenizer.get_added_tokens_decoder().items()
                if not t.special and i not in self.special_ids and t.content not in SPECIAL_TOKENS}

    def client_unit(self):
        """The tokenizer the ``.tflite``'s TFLite Metadata packs for MediaPipe and the Task Library, or None.

        Generated from the one reading (never from a side file): a ``vocab.txt`` (WordPiece) or a SentencePiece
        model (Unigram) whose ids are the checkpoint's, special tokens renamed for the clients' literal lookups,
        added tokens packed where the client file can hold them.

        Returns:
            ClientUnit | None: None when no client can tokenize for this kind (``self.kind.no_client`` says why).

        Raises:
            DataError: a vocabulary the packed file cannot hold (a gap in the ids, a token with a line break,
                an added token the client would never produce).
        """
        return None if self.kind.client is None else _CLIENT_PACKERS[self.kind.client](self)

    def client_tokenizer(self):
        """The ids MediaPipe and the Task Library compute from the same text, or None (no client tokenizer).

        :meth:`from_packed` of :meth:`client_unit`: the export's client-fidelity check
        (``convert/validation/client_fidelity.py``) compares it with this tokenizer.

        Example:
            >>> tok = TextTokenizer.from_directory("all-MiniLM-L6-v2/")  # doctest: +SKIP
            >>> tok.tokenize("Naïve"), tok.client_tokenizer().tokenize("Naïve")  # doctest: +SKIP
            (['naive'], ['[UNK]'])
        """
        unit = self.client_unit()
        return None if unit is None else TextTokenizer.from_packed(self.kind.client, unit.data, self.source,
                                                                   self.token_types)


def _sentencepiece_missing(data, vocab, path):
    """The first ordinary piece of a checkpoint's SentencePiece model that ``tokenizer.json`` lacks (XLM-R's ids
    are the model's shifted by fairseq's specials, so names are compared, not ids), else None."""
    try:
        pieces = spm.read_model(data)["pieces"]
    except DataError as err:
        raise DataError(f"{path}: {err}; keep the SentencePiece model the checkpoint was saved with") from None
    return next((p for p, _, kind in pieces if kind == spm.NORMAL and p not in vocab), None)


def _bpe_vocab_missing(data, vocab, path):
    """The first token of a checkpoint's ``vocab.json`` whose id ``tokenizer.json`` does not give it, else None."""
    listed = load_json(path, path.name, expect=dict)
    return next((t for t, i in listed.items() if vocab.get(t) != i), None)


# How each kind's own file is compared with tokenizer.json (vocab.txt line by line in _check_files; merges.txt
# holds no ids).
_SIDE_FILE_CHECKS = {"sentencepiece.bpe.model": _sentencepiece_missing, "spiece.model": _sentencepiece_missing,
                     "vocab.json": _bpe_vocab_missing, "merges.txt": lambda data, vocab, path: None}


def _added_tokens(files, directory, size):
    """The tokens of ``added_tokens.json`` beside a bare ``vocab.txt`` of ``size`` tokens, in id order; their ids
    must follow the vocabulary (transformers' slow tokenizer gives them those ids)."""
    if "added_tokens.json" not in files:
        return []
    added = load_json(directory / "added_tokens.json", "added_tokens.json", expect=dict)
    ordered = sorted(added.items(), key=lambda kv: kv[1] if isinstance(kv[1], int) else -1)
    for offset, (token, index) in enumerate(ordered):
        if index != size + offset:
            raise DataError(f"{directory / 'added_tokens.json'} gives {token[:40]!r} the id {index!r} where the "
                            f"vocab.txt's next id is {size + offset}; keep the files the model was trained with")
    return [token for token, _ in ordered]


def _pack_vocab(tok):
    """The clients' ``vocab.txt`` (BertTokenizerOptions) from the reading: added tokens at their ids."""
    lines, renamed = tok._client_names(tok.vocab_lines())
    hole = next((i for i, t in enumerate(lines) if not t), None)
    if hole is not None:
        raise DataError(f"{tok.source} has no token at id {hole}, which a vocab.txt (one token per line, the line "
                        "its id) cannot express; export without client metadata (--no-vocab)")
    bad = [t for t in lines if "\n" in t or "\r" in t]
    if bad:
        raise DataError(f"{tok.source} has a token a vocab.txt cannot hold ({bad[0]!r}); "
                        "export without client metadata (--no-vocab)")
    for index, added in sorted(tok.added_tokens().items()):
        issue = _client_word_issue(added.content)
        if issue:
            raise DataError(
                f"{tok.source} adds the token {added.content[:40]!r} (id {index}) with add_tokens, which the packed "
                f"vocab.txt cannot serve ({issue}, so the app would never produce its id); export without client "
                "metadata (--no-vocab), or add lower-case whole words only")
    return ClientUnit(tok.kind.client_options, tok.kind.client_file, ("\n".join(lines) + "\n").encode("utf-8"),
                      renamed)


def _sentencepiece_pieces(tok):
    """``([(piece, score, type)], renamed)`` in the checkpoint's id order, special tokens renamed."""
    model = tok._spec["model"]
    vocab = model.get("vocab") or []
    unk = model.get("unk_id")
    specials = set(tok.special_tokens.values())
    added = tok._tokenizer.get_added_tokens_decoder()
    pieces = []
    for index in range(tok.vocab_size):
        if index < len(vocab):
            piece, score = vocab[index][0], float(vocab[index][1])
        else:
            piece, score = added[index].content if index in added else tok.inverse_vocab.get(index, ""), 0.0
        if index == unk:
            kind = spm.UNKNOWN
        elif piece in specials or (index in added and added[index].special):
            kind = spm.CONTROL
        elif index in added:
            kind = spm.USER_DEFINED  # add_tokens: matched anywhere in the text, as tokenizers matches it
        else:
            kind = spm.NORMAL
        pieces.append((piece, score, kind))
    names, renamed = tok._client_names([p[0] for p in pieces])
    return [(name, score, kind) for name, (_, score, kind) in zip(names, pieces)], renamed


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


def _sentencepiece_model(tok, pieces):
    model = tok._spec["model"]
    return spm.write_model(pieces, unk_id=int(model.get("unk_id") or 0),
                           precompiled_charsmap=_find_precompiled(tok._spec.get("normalizer")),
                           add_dummy_prefix=_prepends_space(tok._spec))


def _pack_sentencepiece(tok):
    """The clients' SentencePiece model (SentencePieceTokenizerOptions) from the reading."""
    pieces, renamed = _sentencepiece_pieces(tok)
    return ClientUnit(tok.kind.client_options, tok.kind.client_file, _sentencepiece_model(tok, pieces), renamed)


def _read_packed_vocab(data, source):
    """``(tokenizer, tokens)``: the clients' BERT tokenizer on a packed ``vocab.txt``, A-Z lower-cased, accents
    kept."""
    lines = parse_vocab(data, source)
    # What the clients look up literally ([PAD] and [MASK] they never need: a file without them is still ready).
    missing = [t for t in ("[CLS]", "[SEP]", "[UNK]") if t not in lines]
    if missing:
        raise DataError(f"{source} lacks the special token(s) {', '.join(missing)}, which the clients look up; "
                        "re-export the model")
    tokenizer = _bert_wordpiece(lines, lowercase=False, strip_accents=False)
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False)]
        + _ascii_lower())
    return tokenizer, lines


def _read_packed_sentencepiece(data, source):
    """``(tokenizer, pieces)``: the clients' SentencePiece tokenizer on a packed model, with the literal
    ``[CLS]``/``[SEP]``."""
    try:
        model = spm.read_model(data)
    except DataError as err:
        raise DataError(f"{source}: {err}; re-export the model") from None
    pieces = model["pieces"]
    ids = {p: i for i, (p, _, _) in enumerate(pieces)}
    for name in ("[CLS]", "[SEP]"):
        if name not in ids:
            raise DataError(f"{source} has no {name} piece, which the clients add to every text; re-export the model")
    tokenizer = Tokenizer(Unigram([(p, s) for p, s, _ in pieces], unk_id=model["unk_id"], byte_fallback=False))
    user = [p for p, _, t in pieces if t == spm.USER_DEFINED]
    if user:
        tokenizer.add_tokens(user)
    steps = _ascii_lower()
    if model["precompiled_charsmap"]:
        try:
            steps.append(normalizers.Precompiled(model["precompiled_charsmap"]))
        except Exception as err:  # noqa: BLE001  (the library raises bare Exceptions)
            raise DataError(f"{source}: its SentencePiece normalization rules cannot be read "
                            f"({str(err).splitlines()[0]}); re-export the model") from None
    # SentencePiece's remove_extra_whitespaces: no leading, trailing or repeated spaces.
    steps += [normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="always" if model["add_dummy_prefix"] else "never")
    # No post-processor: TextTokenizer's is BERT's ([CLS] A [SEP] B [SEP]) around the literal pieces.
    return tokenizer, ids


def _vocab_file(tok):
    return {VOCAB_FILE: ("\n".join(tok.vocab_lines()) + "\n").encode("utf-8")}


def _sentencepiece_file(tok):
    pieces, _ = _sentencepiece_pieces(tok)
    names = tok.vocab_lines()  # the checkpoint's names, not the clients'
    return {tok.kind.client_file: _sentencepiece_model(tok, [(n, s, k) for n, (_, s, k) in zip(names, pieces)])}


def _bpe_files(tok):
    import json  # noqa: PLC0415  (only this hand-out writes JSON)

    model = tok._spec["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    return {"vocab.json": json.dumps(model.get("vocab") or {}, ensure_ascii=False).encode("utf-8"),
            "merges.txt": ("#version: 0.2\n" + "\n".join(merges) + "\n").encode("utf-8")}


# Keyed by the records' fields (the client tokenizer, the kind's first model file), never by a kind's name.
_CLIENT_PACKERS = {"bert": _pack_vocab, "sentencepiece": _pack_sentencepiece}
_CLIENT_READERS = {"bert": _read_packed_vocab, "sentencepiece": _read_packed_sentencepiece}
_MODEL_FILES = {VOCAB_FILE: _vocab_file, "sentencepiece.bpe.model": _sentencepiece_file, "vocab.json": _bpe_files}


def tokenizer_of(directory):
    """The tokenizer of a model directory (:meth:`TextTokenizer.from_directory`), or None when it has none."""
    directory = Path(directory)
    if not ((directory / "tokenizer.json").is_file() or (directory / VOCAB_FILE).is_file()):
        return None
    return TextTokenizer.from_directory(directory)


def check_tokenizer_fits(tokenizer, vocab_size, model):
    """Refuses (DataError) a tokenizer (None passes) whose ids run past ``vocab_size``, the rows of ``model``'s
    embedding table; returns the tokenizer.

    The app would fail with ``gather index out of bounds`` on text using the extra tokens. A smaller vocabulary
    is fine: checkpoints pad their tables (multiples of 8), and rows no id reaches are never read."""
    size = getattr(tokenizer, "vocab_size", None)
    if tokenizer is not None and size is not None and size > vocab_size:
        added = [t.content for i, t in tokenizer.added_tokens().items() if i >= vocab_size]
        why = (f" (the tokens added with add_tokens, {', '.join(repr(a[:20]) for a in added[:3])}, need "
               "model.resize_token_embeddings before saving)" if added else "")
        raise DataError(f"the vocabulary {tokenizer.source} has {size} tokens but {model} embeds only {vocab_size} "
                        f"(its config's vocab_size){why}: text using the other ids would fail in the app ('gather "
                        "index out of bounds'); use the vocab.txt the model was trained with (or its tokenizer files)")
    return tokenizer


def train_wordpiece_vocab(files, out_path, vocab_size, lowercase=True):
    """Trains a BERT WordPiece vocabulary of ``vocab_size`` entries (specials included) on text ``files`` and
    writes it to ``out_path`` (tests, demos)."""
    tokenizer = BertWordPieceTokenizer(lowercase=lowercase, handle_chinese_chars=True, strip_accents=None)
    tokenizer.train([str(f) for f in files], vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIAL_TOKENS),
                    show_progress=False, wordpieces_prefix="##")
    vocab = tokenizer.get_vocab()
    with atomic_file(out_path, "w") as handle:
        for token, _ in sorted(vocab.items(), key=lambda kv: kv[1]):
            handle.write(token + "\n")
    return Path(out_path)


__all__ = ["TextTokenizer", "tokenizer_of", "check_tokenizer_fits", "berts_names", "train_wordpiece_vocab",
           "SPECIAL_TOKENS", "PAIR_MIN_LENGTH"]
