"""What a WordPiece checkpoint's tokenizer does to each character, measured on the ``tokenizers`` library itself.

onnxruntime-extensions' ``BasicTokenizer`` decides what is a control character, a space, punctuation or CJK by
tables of its own, which differ from the Rust tables transformers' fast tokenizers use: U+007F, the byte-order
mark U+FEFF, fullwidth ``！``/``？`` and the Devanagari danda were kept or joined where transformers removes or
splits them, and ``tokenize_chinese_chars: false`` was not expressible. The text-in graph therefore asks the
checkpoint's own normalizer and pre-tokenizer (:func:`char_classes`), one character at a time, what becomes of
each Unicode scalar value, and writes the answer as RE2 character classes and a ``StringMapping`` table
(``text_graph._wordpiece``). This holds because every normalizer step it accepts (:data:`PER_CHARACTER`) acts on
each character alone; ``text_graph.refusal`` refuses the others.

Example:
    >>> re2_class([0x41, 0x42, 0x43, 0x5D])
    '[\\\\x{41}-\\\\x{43}\\\\x{5d}]'
"""

import functools
from typing import NamedTuple

# Normalizer steps that act on each character alone (NFD/NFKD decompose one character at a time; the rest map
# or drop characters), so the text's normalization is the concatenation of its characters'.
PER_CHARACTER = ("BertNormalizer", "NFD", "NFKD", "Lowercase", "StripAccents", "Sequence")
# Pre-tokenizers whose words are the text split at whitespace and, for BertPreTokenizer, at each punctuation
# character (isolated), so a character's effect does not depend on its neighbours.
SPLITTING = ("BertPreTokenizer", "WhitespaceSplit", "Sequence")
# Noncharacters (never assigned): one stands for each special token typed in the text (text_graph), the last
# for a noncharacter the user typed, so that none of theirs is read as a special token.
SENTINEL_FIRST, SENTINEL_LAST = 0xFDD0, 0xFDEE
PLACEHOLDER = 0xFDEF
_MAX_CODE = 0x110000
_CHUNK = 4096


class CharClasses(NamedTuple):
    """What a WordPiece tokenizer does to each code point (:func:`char_classes`): the code points the normalizer
    ``removed`` (control and format characters; accents when it strips them), made ``spaces`` (or the
    pre-tokenizer ends a word at), ``padded`` with a space on each side (CJK), ``mapped`` to other text
    (``(code, normalized)``: lower-casing, accents), and those of the normalized text the pre-tokenizer
    ``isolated`` as words of their own (punctuation)."""

    removed: tuple
    spaces: tuple
    padded: tuple
    mapped: tuple
    isolated: tuple


def re2_class(codes):
    """An RE2 character class matching ``codes`` (code points), as ranges: ``[\\x{41}-\\x{43}]``."""
    spans = []
    for code in sorted(codes):
        if spans and spans[-1][1] == code - 1:
            spans[-1][1] = code
        else:
            spans.append([code, code])
    return "[" + "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in spans) + "]"


def re2_literal(text):
    """``text`` as an RE2 pattern matching it literally (every character as ``\\x{..}``)."""
    return "".join(f"\\x{{{ord(char):x}}}" for char in text)


def _codes():
    # The placeholder is measured: a noncharacter the user typed becomes it, and is treated as the tokenizer
    # treats noncharacters.
    return [code for code in range(_MAX_CODE)
            if not (0xD800 <= code <= 0xDFFF or SENTINEL_FIRST <= code <= SENTINEL_LAST)]


def _normalized_all(normalize, codes):
    """``{code: normalized}`` for every code, normalized in chunks joined by ``~`` (which per-character steps
    leave alone and produce for no other character); a chunk whose pieces do not line up is done one by one."""
    out = {}
    for start in range(0, len(codes), _CHUNK):
        chunk = codes[start:start + _CHUNK]
        pieces = normalize("~".join(chr(code) for code in chunk)).split("~")
        if len(pieces) != len(chunk) or 0x7E in chunk:
            pieces = [normalize(chr(code)) for code in chunk]
        out.update(zip(chunk, pieces))
    return out


@functools.lru_cache(maxsize=8)
def _classes(normalizer_state, pre_tokenizer_state):
    normalizer = _rebuild("normalizer", normalizer_state)
    pre_tokenizer = _rebuild("pre_tokenizer", pre_tokenizer_state)
    normalize = normalizer.normalize_str if normalizer is not None else (lambda text: text)

    def words(text):
        return [w for w, _ in pre_tokenizer.pre_tokenize_str(text)] if pre_tokenizer is not None else text.split()

    codes = _codes()
    normalized = _normalized_all(normalize, codes)
    removed, spaces, padded, mapped, isolated = [], set(), [], {}, []
    for code in codes:
        char, out = chr(code), normalized[code]
        if out == "":
            removed.append(code)
        elif out != char and out.isspace():  # the normalizer's (an unchanged one is the pre-tokenizer's, below)
            spaces.add(code)
        elif out == f" {char} ":
            padded.append(code)  # CJK characters (handle_chinese_chars)
        elif out != char:
            mapped[code] = out
    # What the pre-tokenizer does to each character of the normalized text: ends a word (whitespace), makes a
    # word of it alone (punctuation), or leaves it inside the word; "a" on both sides shows which.
    seen, padded_set = set(), set(padded)
    for code in codes:
        out = normalized[code]
        for char in out if code in mapped else (chr(code) if code in padded_set or out == chr(code) else ""):
            if char in seen or char.isalnum() or char == " ":
                continue
            seen.add(char)
            split = words("a" + char + "a")
            if split == ["a", "a"]:
                spaces.add(ord(char))
            elif split == ["a", char, "a"]:
                isolated.append(ord(char))
    return CharClasses(tuple(removed), tuple(sorted(spaces)), tuple(padded), tuple(sorted(mapped.items())),
                       tuple(sorted(isolated)))


def _rebuild(part, state):
    """The ``tokenizers`` normalizer or pre-tokenizer (``part``) of its JSON state (None: none)."""
    if state is None:
        return None
    import json  # noqa: PLC0415

    from tokenizers import Tokenizer  # noqa: PLC0415

    spec = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": None, "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}}
    spec[part] = json.loads(state)
    return getattr(Tokenizer.from_str(json.dumps(spec)), part)


def char_classes(tokenizer):
    """What the checkpoint's WordPiece tokenizer does to each character (:class:`CharClasses`), measured once per
    normalizer and pre-tokenizer (a few seconds) and cached."""
    backend = tokenizer._tokenizer
    state = lambda part: None if part is None else part.__getstate__().decode("utf-8")  # noqa: E731
    return _classes(state(backend.normalizer), state(backend.pre_tokenizer))


@functools.lru_cache(maxsize=8)
def _single_effects(normalizer_state):
    normalizer = _rebuild("normalizer", normalizer_state)
    if normalizer is None:
        return (), ()
    codes = _codes()
    normalized = _normalized_all(normalizer.normalize_str, codes)
    removed = tuple(code for code in codes if normalized[code] == "")
    spaces = tuple(code for code in codes if normalized[code] == " ")
    return removed, spaces


def single_char_effects(tokenizer):
    """``(removed, spaces)``: the code points the tokenizer's normalizer (any kind) removes, and those it makes
    one space (NBSP, the ideographic space under NFKC), each measured alone; cached per normalizer."""
    normalizer = tokenizer._tokenizer.normalizer
    return _single_effects(None if normalizer is None else normalizer.__getstate__().decode("utf-8"))


def normalized_text(tokenizer, text):
    """``text`` as the tokenizer's normalizer leaves it (how transformers matches a ``normalized`` added token)."""
    normalizer = tokenizer._tokenizer.normalizer
    return normalizer.normalize_str(text) if normalizer is not None else text


def unsupported_step(tokenizer):
    """What of a WordPiece tokenizer's normalizer or pre-tokenizer is not per character (:data:`PER_CHARACTER`,
    :data:`SPLITTING`), as ``"normalizes with NFKC, which does not act on each character alone"``; None when
    every step is."""
    import json  # noqa: PLC0415

    backend = tokenizer._tokenizer
    if backend.pre_tokenizer is None:
        return "has no pre-tokenizer (the whole text is one word, where the graph splits it at spaces)"
    for part, allowed, key in (("normalizer", PER_CHARACTER, "normalizers"),
                               ("pre_tokenizer", SPLITTING, "pretokenizers")):
        step = getattr(backend, part)
        todo = [json.loads(step.__getstate__())] if step is not None else []
        while todo:
            node = todo.pop(0)
            kind = node.get("type")
            if kind not in allowed:
                what = "normalizes with" if part == "normalizer" else "pre-tokenizes with"
                return f"{what} {kind}, which does not act on each character alone"
            todo += node.get(key) or []
    return None


__all__ = ["single_char_effects", "normalized_text", "unsupported_step", "CharClasses", "char_classes", "re2_class", "re2_literal", "PER_CHARACTER", "SPLITTING", "SENTINEL_FIRST",
           "SENTINEL_LAST", "PLACEHOLDER"]
