"""WordPieceTokenizer: BERT's tokenization through the ``tokenizers`` library, the one tokenizer of the package.

The data pipeline (``pretraining-data``, ``finetune``) and the exporter
(calibration and validation text, the vocabulary embedded in an artifact) use
this class, so they read a vocabulary and decide its casing the same way
(``data/vocab.py``).
"""

import copy
import hashlib
import string
from pathlib import Path

import numpy as np
from tokenizers import BertWordPieceTokenizer, Tokenizer, normalizers

from mobilebert_kit.data.tokenizer_kinds import CLIENT_SPECIAL_NAMES, KINDS, ClientUnit
from mobilebert_kit.data.vocab import VocabularyError, lower_case_of, read_vocab, strip_accents_of, vocab_ids
from mobilebert_kit.errors import ConfigError, DataError
from mobilebert_kit.utils.atomic import atomic_file
from mobilebert_kit.utils.structured import load_json

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# [CLS] A [SEP] B [SEP]: a sentence pair needs three positions even with both segments truncated away.
PAIR_MIN_LENGTH = 3


def _is_cjk(char):
    """The CJK Unified Ideograph blocks BERT splits into single characters (BasicTokenizer._is_chinese_char)."""
    cp = ord(char)
    return (
        0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F
    )


# Probes of what a tokenizer.json's normalizer does, whatever its form (BertNormalizer, Lowercase, a Sequence
# of NFD, Lowercase and StripAccents, ...): upper-case letters of several scripts, precomposed accented
# letters with their bases.
_CASE_PROBES = ("A", "Z", "É", "Σ", "Ж")
_ACCENT_PROBES = (("é", "e"), ("ñ", "n"), ("ü", "u"), ("å", "a"))


def _normalizer_behaviour(normalizer, path):
    """``(lowercase, strip_accents)`` as ``normalizer`` (a ``tokenizers`` normalizer or None) behaves.

    Measured on text rather than read from a field: only a BertNormalizer has ``lowercase`` and
    ``strip_accents`` fields, and a Sequence of NFD, Lowercase and StripAccents was recorded as cased while
    it lower-cased the text. StripAccents strips only after an NFD/NFKD, which the measurement sees too.

    Raises:
        ConfigError: a normalizer that lower-cases (or strips) some letters and not others: the casing is
            recorded as one flag (dataset.json, the fingerprint, exported metadata) and could not say so.
    """
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
    """Refuses a tokenizer.json vocabulary giving one id to two tokens, as ``data.vocab`` refuses a vocab.txt
    listing a token twice: the id's embedding row would stand for both, and decoding picks one of them."""
    first = {}
    for token, index in sorted(vocab.items(), key=lambda item: (item[1], item[0])):
        if index in first:
            raise VocabularyError(
                f"{path} gives the id {index} to both {first[index]!r} and {token!r}; every token needs its own id: "
                "remove the duplicate, or use the tokenizer.json the model was trained with"
            )
        first[index] = token


class WordPieceTokenizer:
    """BERT WordPiece tokenization (uncased or cased), from a ``vocab.txt`` or a ``tokenizer.json``.

    Normalisation is BERT's ``BasicTokenizer``: text cleaning, accents stripped
    when lower-casing (unless ``strip_accents`` says otherwise), punctuation split, and every CJK character made a word
    of its own (``handle_chinese_chars``), then greedy longest-match WordPiece
    with ``##`` continuations. The ``tokenizers`` library does the work; this
    class adds the vocabulary bookkeeping the data pipeline needs.

    Args:
        vocab: path of a ``vocab.txt`` (one token per line).
        lowercase: uncased (True, also strips accents) or cased (False) model.
        handle_chinese_chars: split CJK characters (BERT's default).
        strip_accents: None follows ``lowercase`` (BERT's rule); a boolean overrides it, as
            ``tokenizer_config.json``'s ``strip_accents`` does in Hugging Face's tokenizers.

    Example:
        >>> tok = WordPieceTokenizer("vocab.txt", lowercase=True)  # doctest: +SKIP
        >>> tok.tokenize("Unaffable tokenization")  # doctest: +SKIP
        ['una', '##ffa', '##ble', 'token', '##ization']
    """

    def __init__(self, vocab, lowercase=True, handle_chinese_chars=True, strip_accents=None):
        path = Path(vocab)
        if not path.is_file():
            raise DataError(f"vocabulary {vocab} does not exist; pass a BERT vocab.txt or tokenizer.json")
        tokens = read_vocab(path)
        missing = [t for t in SPECIAL_TOKENS if t not in tokens]
        if missing:
            raise DataError(f"{path} lacks the special token(s) {', '.join(missing)}; it is not a BERT vocab.txt")
        self.lowercase = bool(lowercase)
        self.strip_accents = self.lowercase if strip_accents is None else bool(strip_accents)
        self.source = str(path)
        self.vocab_path = path
        self._vocab_lines = tokens
        self._tokenizer = BertWordPieceTokenizer(
            vocab_ids(tokens), lowercase=self.lowercase, handle_chinese_chars=handle_chinese_chars,
            strip_accents=self.strip_accents, clean_text=True,
        )
        self._finish()

    @classmethod
    def from_file(cls, path, lowercase=None, strip_accents=None):
        """Loads from a ``vocab.txt``, a ``tokenizer.json`` or a model directory holding either.

        Args:
            path: the file or directory.
            lowercase: for a ``vocab.txt``; default from ``tokenizer_config.json``
                (``do_lower_case``) next to it, else True. A ``tokenizer.json``
                carries its own normalisation; a contradicting value is an error.
            strip_accents: None: ``tokenizer_config.json``'s ``strip_accents`` next to it
                (``data.vocab.strip_accents_of``), else BERT's rule (strip when lower-casing).
        """
        path = Path(path)
        if path.is_dir():
            if lowercase is None:
                lowercase = lower_case_of(path, default=None)
            if strip_accents is None:
                strip_accents = strip_accents_of(path)
            if (path / "tokenizer.json").is_file():
                path = path / "tokenizer.json"
            elif (path / "vocab.txt").is_file():
                path = path / "vocab.txt"
            else:
                raise DataError(f"{path} holds neither tokenizer.json nor vocab.txt; pass the vocabulary file")
        if path.suffix == ".json":
            return cls._from_json(path, lowercase, strip_accents)
        return cls(path, lowercase=True if lowercase is None else lowercase, strip_accents=strip_accents)

    @classmethod
    def from_directory(cls, directory):
        """The tokenizer of a model directory for export: :meth:`from_file` of the directory, whose
        ``vocab.txt`` is the vocabulary an artifact embeds (so the directory needs one).

        Example:
            >>> tok = WordPieceTokenizer.from_directory("all-MiniLM-L6-v2/")  # doctest: +SKIP
            >>> tok.encode_inputs(["a short sentence"], seq_len=16)["input_ids"].shape  # doctest: +SKIP
            (1, 16)
        """
        vocab = Path(directory) / "vocab.txt"
        if not vocab.is_file():
            raise DataError(f"vocabulary {vocab} not found; pass the model's vocab.txt")
        self = cls.from_file(directory)
        self.vocab_path = vocab
        self._vocab_lines = read_vocab(vocab)
        return self

    @property
    def do_lower_case(self):
        """The casing as recorded in exported metadata (same as ``lowercase``)."""
        return self.lowercase

    def client_tokenizer(self):
        """The tokenizer the app-side TFLite clients run: the ids the phone computes from the same text.

        MediaPipe's ``BertPreprocessorCalculator`` and the Task Library's BERT preprocessors call
        ``absl::AsciiStrToLower`` on the text and then tokenize with the packed ``vocab.txt``: they
        lower-case A-Z only (an "É" stays upper case) and never strip accents, whatever the
        checkpoint's tokenizer does, and the TFLite Metadata has no field to change that
        (``shared/reference/clients.md``). all-MiniLM-L6-v2 strips accents, so "naïve café" gives
        other ids on the phone (cosine 0.37 to the checkpoint's embedding, issue 14).

        Returns:
            WordPieceTokenizer: the same vocabulary with the clients' normalisation
            (``lowercase`` True: the clients always lower-case; ``strip_accents`` False).

        Example:
            >>> tok = WordPieceTokenizer.from_directory("all-MiniLM-L6-v2/")  # doctest: +SKIP
            >>> tok.tokenize("Naïve"), tok.client_tokenizer().tokenize("Naïve")  # doctest: +SKIP
            (['naive'], ['[UNK]'])
        """
        client = copy.copy(self)
        client._tokenizer = BertWordPieceTokenizer(vocab_ids(self.vocab_lines()), lowercase=False, strip_accents=False,
                                                   handle_chinese_chars=True, clean_text=True)
        client._tokenizer.normalizer = normalizers.Sequence(
            [normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False,
                                        lowercase=False)]
            + [normalizers.Replace(upper, upper.lower()) for upper in string.ascii_uppercase])
        client.lowercase, client.strip_accents = True, False
        client._finish()
        return client

    def client_unit(self):
        """The ``vocab.txt`` the ``.tflite``'s TFLite Metadata packs for the clients (BERT's names, unchanged).

        Example:
            >>> WordPieceTokenizer.from_directory("all-MiniLM-L6-v2/").client_unit().file_name  # doctest: +SKIP
            'vocab.txt'
        """
        return ClientUnit(self.kind.client_options, self.kind.client_file,
                          ("\n".join(self.vocab_lines()) + "\n").encode("utf-8"))

    def vocab_lines(self):
        """The tokens in id order: the directory's ``vocab.txt`` for :meth:`from_directory`, else the vocabulary."""
        if self._vocab_lines is not None:
            return list(self._vocab_lines)
        return sorted(self.vocab, key=self.vocab.get)

    @classmethod
    def _from_json(cls, path, lowercase, strip_accents=None):
        spec = load_json(path, "the tokenizer", expect=dict)
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as err:  # noqa: BLE001  (the library raises bare Exceptions)
            raise DataError(f"cannot read tokenizer {path} ({str(err).splitlines()[0]}); pass a valid tokenizer.json") from err
        model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
        if model.get("type") != "WordPiece":
            raise DataError(f"{path} is a {model.get('type')} tokenizer; mobilebert-kit needs a WordPiece (BERT) tokenizer")
        normalizer = spec.get("normalizer") if isinstance(spec.get("normalizer"), dict) else {}
        json_lowercase, json_strip = _normalizer_behaviour(tokenizer.normalizer, path)
        if lowercase is not None and bool(lowercase) != json_lowercase:
            raise DataError(
                f"{path} is {'uncased' if json_lowercase else 'cased'} but "
                f"{'--cased' if not lowercase else 'lower-casing'} was asked for; drop the option or use a vocab.txt"
            )
        if strip_accents is not None and bool(strip_accents) != json_strip and normalizer.get("type") == "BertNormalizer":
            # transformers' fast tokenizer rewrites the normalizer the same way when tokenizer_config.json
            # sets strip_accents (measured: "naïve café" -> [UNK] [UNK] with strip_accents false).
            tokenizer.normalizer = normalizers.BertNormalizer(
                clean_text=bool(normalizer.get("clean_text", True)),
                handle_chinese_chars=bool(normalizer.get("handle_chinese_chars", True)),
                strip_accents=bool(strip_accents), lowercase=json_lowercase)
            json_strip = bool(strip_accents)
        self = cls.__new__(cls)
        self.lowercase = json_lowercase
        self.strip_accents = json_strip
        self.source = str(path)
        self.vocab_path = path
        self._vocab_lines = None  # the JSON's vocabulary, in id order (see vocab_lines)
        tokenizer.no_padding()
        tokenizer.no_truncation()
        _check_one_token_per_id(tokenizer.get_vocab(), path)
        self._tokenizer = tokenizer
        self._finish()
        missing = [t for t in SPECIAL_TOKENS if t not in self.vocab]
        if missing:
            raise DataError(f"{path} lacks the special token(s) {', '.join(missing)}; it is not a BERT tokenizer")
        return self

    def _finish(self):
        self.kind = KINDS["WordPiece"]
        self.token_types = True  # BERT's tokenizers return token_type_ids
        self.special_tokens = dict(CLIENT_SPECIAL_NAMES)  # BERT's names: the clients' own
        self.vocab = dict(self._tokenizer.get_vocab())
        self.inverse_vocab = {i: t for t, i in self.vocab.items()}
        self.vocab_size = max(self.vocab.values()) + 1
        self.pad_id = self.vocab.get("[PAD]")
        self.unk_id = self.vocab.get("[UNK]")
        self.cls_id = self.vocab.get("[CLS]")
        self.sep_id = self.vocab.get("[SEP]")
        self.mask_id = self.vocab.get("[MASK]")
        self.special_ids = frozenset(self.vocab[t] for t in SPECIAL_TOKENS if t in self.vocab)
        # Bracketed tokens such as [unused0] are reserved, never random replacements.
        self.regular_ids = sorted(i for t, i in self.vocab.items() if not (t.startswith("[") and t.endswith("]")))

    def encode(self, text):
        """Returns ``(tokens, ids, offsets)`` of ``text`` without special tokens; offsets index ``text``."""
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return list(encoding.tokens), list(encoding.ids), list(encoding.offsets)

    def encode_inputs(self, lines, seq_len):
        """Model inputs of text lines: int32 ``input_ids`` / ``attention_mask`` / ``token_type_ids``
        ``[len(lines), seq_len]``, with [CLS]/[SEP], right padded, truncated longest-first. A line
        holding a tab is a sentence pair (segment A, tab, segment B); ``token_type_ids`` are 1 on B.
        """
        if seq_len < PAIR_MIN_LENGTH and any("\t" in line for line in lines):
            # The tokenizer cannot truncate a pair below its three special tokens: it returns longer rows.
            raise DataError(f"sentence pairs (lines with a tab) need a sequence length of at least {PAIR_MIN_LENGTH}, "
                            f"got {seq_len}; use a longer --seq-len or single sentences")
        items = [tuple(line.split("\t", 1)) if "\t" in line else line for line in lines]
        return padded_batch(self._tokenizer, items, seq_len, self.pad_id or 0, "[PAD]")

    def tokenize(self, text):
        """The WordPiece tokens of ``text``."""
        return self.encode(text)[0]

    def encode_words(self, words):
        """Tokenizes pre-split words; returns ``(ids, word_index per token)``."""
        encoding = self._tokenizer.encode(list(words), is_pretokenized=True, add_special_tokens=False)
        return list(encoding.ids), list(encoding.word_ids)

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab.get(t, self.unk_id) for t in tokens]

    def convert_ids_to_tokens(self, ids):
        return [self.inverse_vocab.get(int(i), "[UNK]") for i in ids]

    def decode(self, ids):
        """Joins word pieces back into text (``##`` continuations glued)."""
        text = " ".join(self.convert_ids_to_tokens(ids))
        return text.replace(" ##", "").replace("##", "")

    def fingerprint(self):
        """sha256 of the vocabulary and casing: data and models must agree on it."""
        digest = hashlib.sha256()
        for token, index in sorted(self.vocab.items(), key=lambda kv: kv[1]):
            digest.update(f"{index}\t{token}\n".encode())
        digest.update(b"lower" if self.lowercase else b"cased")
        if self.strip_accents != self.lowercase:  # only then: fingerprints of BERT's rule stay as they were
            digest.update(b"strip" if self.strip_accents else b"keep-accents")
        return digest.hexdigest()


def padded_batch(tokenizer, items, seq_len, pad_id, pad_token):
    """int32 ``input_ids`` / ``attention_mask`` / ``token_type_ids`` ``[len(items), seq_len]`` of a ``tokenizers``
    Tokenizer on texts or ``(a, b)`` pairs: its special tokens, right padded, truncated longest-first.

    The tokenizer is left without padding and truncation again: ``encode()`` and ``encode_words()`` work on
    unpadded, untruncated pieces.
    """
    tokenizer.enable_truncation(max_length=seq_len)
    tokenizer.enable_padding(length=seq_len, pad_id=pad_id, pad_token=pad_token)
    try:
        encodings = tokenizer.encode_batch(list(items))
    finally:
        tokenizer.no_padding()
        tokenizer.no_truncation()
    return {
        "input_ids": np.array([e.ids for e in encodings], np.int32),
        "attention_mask": np.array([e.attention_mask for e in encodings], np.int32),
        "token_type_ids": np.array([e.type_ids for e in encodings], np.int32),
    }


def train_wordpiece_vocab(files, out_path, vocab_size, lowercase=True):
    """Trains a small BERT WordPiece vocabulary on text files and writes ``vocab.txt`` (tests, demos).

    Args:
        files: text files.
        out_path: where to write ``vocab.txt``.
        vocab_size: number of entries, special tokens included.
        lowercase: uncased vocabulary.
    """
    tokenizer = BertWordPieceTokenizer(lowercase=lowercase, handle_chinese_chars=True, strip_accents=None)
    tokenizer.train([str(f) for f in files], vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIAL_TOKENS),
                    show_progress=False, wordpieces_prefix="##")
    vocab = tokenizer.get_vocab()
    with atomic_file(out_path, "w") as handle:
        for token, _ in sorted(vocab.items(), key=lambda kv: kv[1]):
            handle.write(token + "\n")
    return Path(out_path)


__all__ = ["WordPieceTokenizer", "train_wordpiece_vocab", "_is_cjk"]
