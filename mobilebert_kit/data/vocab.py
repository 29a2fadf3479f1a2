"""The one reader of a WordPiece ``vocab.txt``, the one list of tokenizer files, and the one casing rule.

Every consumer (``mbk pretraining-data``, ``mbk finetune``, ``mbk export``'s
calibration/validation tokenizer and the vocabulary it embeds in the artifact)
reads a vocabulary through :func:`read_vocab`, so they cannot disagree on it.

Rules, each for a reason:

- line ``n`` (1-based) is the token of id ``n - 1``: ids are positions, so a
  checkpoint's embedding rows line up with them;
- a leading UTF-8 BOM is dropped (editors on Windows add one);
- trailing whitespace (``\\r`` of CRLF files included) is dropped, as the
  ``tokenizers`` library does (``WordPiece::read_file`` trims line ends);
- blank lines at the end of the file are ignored (they hold no id); a blank
  line before a token is refused, because removing it would shift every later
  id and keeping it makes an id no text can produce;
- a token listed twice is refused with both line numbers: one of the two ids
  would be unreachable, and readers differ on which;
- non-UTF-8 bytes are refused with their line number;
- at most ``MAX_TOKENS`` tokens and ``MAX_BYTES`` bytes (the largest published
  vocabularies have ~250,000 tokens, a few MB).
"""

import os
import unicodedata
from pathlib import Path

from mobilebert_kit.data.tokenizer_kinds import KINDS
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.atomic import atomic_file
from mobilebert_kit.utils.structured import load_json, read_bounded

MAX_TOKENS = 1_000_000  # the same bound as Encoder's vocab_size (models/encoder.py CONFIG_FIELDS)
MAX_BYTES = 64 * 1024 * 1024
# The files that make up a model's tokenizer, copied next to every model we write from one that has them, each
# with the most bytes read of it (a 3 GB tokenizer side file was read whole: MemoryError, issue 37). XLM-R's
# tokenizer.json (250,002 tokens) is 17 MB; a special-tokens map lists a few names.
TOKENIZER_FILES = {"vocab.txt": MAX_BYTES, "tokenizer.json": MAX_BYTES, "tokenizer_config.json": MAX_BYTES,
                   "special_tokens_map.json": 16 * 1024 * 1024,
                   # transformers' slow tokenizers keep the tokens added with add_tokens here, with their ids.
                   "added_tokens.json": 16 * 1024 * 1024}
# Each kind's own files (a SentencePiece model, BPE's vocab.json and merges.txt): read and carried the same way.
TOKENIZER_FILES.update({name: MAX_BYTES for kind in KINDS.values() for name in kind.model_files
                        if name not in TOKENIZER_FILES})


class VocabularyError(ConfigError):
    """A ``vocab.txt`` that cannot be used as is (BOM-free UTF-8, one distinct token per line)."""


def parse_vocab(data, label="the vocabulary"):
    """The tokens (index = id) of a ``vocab.txt``'s bytes or text, by the rules of this module; ``label`` names it.

    Example:
        >>> parse_vocab(b"\\xef\\xbb\\xbf[PAD]\\r\\n[UNK]\\nhello\\n\\n")
        ['[PAD]', '[UNK]', 'hello']
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    tokens = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        try:
            tokens.append(raw.decode("utf-8").rstrip())
        except UnicodeDecodeError as err:
            raise VocabularyError(f"{label} line {number} is not UTF-8 (byte {err.start}); save the file as UTF-8") from err
    while tokens and not tokens[-1]:
        tokens.pop()
    if not tokens:
        raise VocabularyError(f"{label} is empty; pass the vocab.txt the model was trained with")
    if len(tokens) > MAX_TOKENS:
        raise VocabularyError(f"{label} has {len(tokens):,} tokens, over the {MAX_TOKENS:,} limit; pass a vocab.txt")
    first_line = {}
    for number, token in enumerate(tokens, 1):
        if not token:
            raise VocabularyError(
                f"{label} line {number} is blank; every line is one token (its id is the line number): "
                "remove the line if the model was trained without it, else put a placeholder such as [unused0] there"
            )
        control = next((ch for ch in token if unicodedata.category(ch) == "Cc"), None)
        if control is not None:
            # A NUL or escape byte is no WordPiece token: the file is binary or damaged, and the
            # tokenizer would silently never produce that id.
            raise VocabularyError(
                f"{label} line {number} holds the control character {control!r}; pass the vocab.txt the model "
                "was trained with (a text file, one token per line)"
            )
        if token in first_line:
            raise VocabularyError(
                f"{label} lists {token!r} twice (lines {first_line[token]} and {number}); one id would be "
                "unreachable: remove the duplicate, or use the vocab.txt the model was trained with"
            )
        first_line[token] = number
    return tokens


def read_vocab(path, label=None):
    """:func:`parse_vocab` of the file ``path`` (bounded read); ``label`` names it in messages (default: the path)."""
    path = Path(path)
    return parse_vocab(read_bounded(path, "the vocabulary", MAX_BYTES, VocabularyError), label or str(path))


def _flag(value, name, key):
    """``value`` of the boolean setting ``key`` in the file ``name``: a bool, or None when absent or null.

    Anything else is refused: transformers' fast tokenizer refuses a non-bool while its slow one tests
    truthiness, so ``0`` or ``"false"`` has no one meaning."""
    if value is None or isinstance(value, bool):
        return value
    raise ConfigError(f"{name}: {key} is {repr(value)[:40]} ({type(value).__name__}), not true, false or null; "
                      f"write {key} as a JSON boolean")


def lower_case_of(directory, default=True):
    """The casing recorded in a model directory: the one rule every tokenizer consumer uses.

    ``tokenizer_config.json``'s ``do_lower_case`` wins; else ``tokenizer.json``'s
    normalizer ``lowercase``; else ``default`` (uncased, as BERT's original vocabularies).
    Unreadable files are skipped here (the tokenizer reports them when it loads); a value that is
    no boolean is a ConfigError (:func:`_flag`)."""
    directory = Path(directory)
    for name, read in (("tokenizer_config.json", lambda spec: (spec.get("do_lower_case"), "do_lower_case")),
                       ("tokenizer.json", lambda spec: ((spec.get("normalizer") or {}).get("lowercase"),
                                                        "normalizer.lowercase"))):
        if (directory / name).is_file():
            try:
                value, key = read(load_json(directory / name, name, expect=dict))
            except (ConfigError, AttributeError):
                continue
            value = _flag(value, directory / name, key)
            if value is not None:
                return value
    return default


# tokenizer_config.json's booleans that transformers' fast tokenizer applies by rewriting the tokenizer.json
# normalizer (its slow one reads them too): ``strip_accents`` (null or absent: follow lower-casing, as BERT's
# BasicTokenizer: all-MiniLM-L6-v2's null with do_lower_case true makes "naïve café" "naive cafe", and false
# makes it [UNK] [UNK], measured) and ``tokenize_chinese_chars`` (false: "你好世界" is one word, not four).
def config_flag(directory, key):
    """``tokenizer_config.json``'s boolean ``key`` in ``directory``; None when the file or the key does not say, a
    ConfigError when it is no boolean (:func:`_flag`)."""
    path = Path(directory) / "tokenizer_config.json"
    if path.is_file():
        try:
            value = load_json(path, "tokenizer_config.json", expect=dict).get(key)
        except ConfigError:
            return None
        return _flag(value, path, key)
    return None


def read_tokenizer_files(source_dir):
    """The :data:`TOKENIZER_FILES` ``source_dir`` (None: none) has, read with their bounds: ``{name: bytes}``.

    The vocabulary is parsed (:func:`read_vocab`'s rules) and the casing settings typed (:func:`lower_case_of`,
    :func:`config_flag`), so a command can check them all before its first write (ConfigError)."""
    if source_dir is None:
        return {}
    source_dir = Path(source_dir)
    # Whatever stands at a tokenizer file's name is read (a FIFO or a directory there is refused by read_bounded,
    # not skipped: a model would be written without the file its consumers look for).
    files = {name: read_bounded(source_dir / name, "the tokenizer file", limit)
             for name, limit in TOKENIZER_FILES.items() if os.path.lexists(source_dir / name)}
    if "vocab.txt" in files:
        parse_vocab(files["vocab.txt"], str(source_dir / "vocab.txt"))
    lower_case_of(source_dir)
    config_flag(source_dir, "strip_accents")
    config_flag(source_dir, "tokenize_chinese_chars")
    return files


def write_tokenizer_files(files, target_dir):
    """Writes :func:`read_tokenizer_files`' ``{name: bytes}`` into ``target_dir``; returns the names written.

    Each file appears whole or not at all: an interrupted copy must not leave half a vocabulary."""
    for name, data in files.items():
        with atomic_file(Path(target_dir) / name, "wb") as handle:
            handle.write(data)
    return list(files)


def copy_tokenizer_files(source_dir, target_dir):
    """Copies the :data:`TOKENIZER_FILES` that ``source_dir`` has into ``target_dir``; returns their names.

    Every file is read and checked first (:func:`read_tokenizer_files`), so a model is never written next
    to a vocabulary its consumers would refuse."""
    return write_tokenizer_files(read_tokenizer_files(source_dir), target_dir)
