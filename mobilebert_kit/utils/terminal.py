"""Escaping of untrusted text (tensor names, file names, metadata) before it reaches a terminal.

A tensor name read from a checkpoint can hold ``\\n`` and ANSI escapes: printed
raw it forged an ``imported OK`` line and cleared the screen (issue 12). Every
name or path that came from a file or from the file system goes through
:func:`escape` before it is printed; the error printer of ``cli/main.py``
escapes whole messages, so an error is one line whatever it quotes.

Standard library only: the profiler and the artifact readers use it without TensorFlow.
"""

import os
import unicodedata

# Explicit bidirectional formatting characters (Unicode TR9, "Trojan Source", CVE-2021-42574): they reorder
# what a terminal shows without being visible themselves.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Categories escaped outright: controls (C0, DEL, C1), lone surrogates, and the line/paragraph separators
# that str.splitlines() and some terminals treat as line breaks.
_ESCAPED_CATEGORIES = frozenset(("Cc", "Cs", "Zl", "Zp"))
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b"}


def _escape_char(ch):
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:
        # A byte that was not UTF-8, kept by os.fsdecode's surrogateescape: show the byte.
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape(text, markup=False):
    """``text`` with control, separator and bidi characters written as Python escapes; always one printable line.

    Args:
        text: any object; bytes and ``os.PathLike`` are decoded with ``os.fsdecode`` (non-UTF-8 bytes
            become ``\\xNN``).
        markup: also escape ``rich`` markup (``[bold]``) for text printed through a rich Console.

    Returns:
        str: safe to print and to encode as UTF-8.

    Example:
        >>> escape("a\\n\\x1b[2Jimported OK")
        'a\\\\n\\\\x1b[2Jimported OK'
        >>> escape(b"model-\\xff.tflite")
        'model-\\\\xff.tflite'
    """
    if isinstance(text, (bytes, os.PathLike)):
        text = os.fsdecode(text)
    text = str(text)
    out = "".join(_escape_char(ch) if ch in _BIDI or unicodedata.category(ch) in _ESCAPED_CATEGORIES else ch
                  for ch in text)
    if markup:
        from rich.markup import escape as rich_escape

        out = rich_escape(out)
    return out
