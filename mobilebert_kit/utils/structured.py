"""The one safe reader of a user's JSON and TOML: bounded size and depth, one-line errors.

Every JSON or TOML file that comes from a user (config.json, a safetensors
index, run.json, the preset cache, artifact metadata, recipes) goes through
:func:`load_json` / :func:`load_toml`, so that a bad file ends as one
:class:`~mobilebert_kit.errors.MbkError` line instead of a traceback. Why each
bound exists:

- size: ``json.loads`` of a multi-gigabyte file (a download that never
  finished, a wrong path) holds the whole text and every parsed object in
  memory; no config, index or metadata we read is near 64 MiB.
- depth: CPython's JSON and tomllib parsers recurse, so ``[[[...]]]`` 100,000
  deep raises RecursionError (issue 12); structures nested deeper than
  ``MAX_DEPTH`` are refused too, because code that later walks or re-dumps
  them recurses again.
- special files: opening a FIFO for reading blocks forever, so only regular
  files are read.

This module imports neither TensorFlow nor numpy: the profiler and the
artifact readers use it.
"""

import json
import math
import os
import re
import stat
import tomllib
from pathlib import Path

from mobilebert_kit.errors import ConfigError, first_line

MAX_BYTES = 64 * 1024 * 1024
# The deepest structure we write ourselves (a recipe, run.json) is < 6 levels; 64 leaves room for any real file.
MAX_DEPTH = 64


def read_bounded(path, what, max_bytes=MAX_BYTES, error=ConfigError):
    """Returns the bytes of the regular file ``path``, refusing special files and files over ``max_bytes`` with
    a one-line ``error`` naming ``what`` the file is (``"the model config"``).
    """
    path = Path(path)
    try:
        info = os.stat(path)
    except OSError as err:
        raise error(f"cannot read {what} {path} ({err.strerror or err}); check the path") from err
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{what} {path} is not a regular file; pass a file")
    if info.st_size > max_bytes:
        raise error(f"{what} {path} is {info.st_size:,} bytes, over the {max_bytes:,}-byte limit; pass the right file")
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as err:
        raise error(f"cannot read {what} {path} ({err.strerror or err}); check its permissions") from err
    if len(data) > max_bytes:  # it grew after the stat
        raise error(f"{what} {path} is over the {max_bytes:,}-byte limit; pass the right file")
    return data


def _source(path_or_text, what, max_bytes, error):
    """``(text, label)``: a ``Path`` is read (bounded); ``str``/``bytes`` is the text itself."""
    if isinstance(path_or_text, os.PathLike):
        data, label = read_bounded(path_or_text, what, max_bytes, error), f"{what} {Path(path_or_text)}"
    else:
        data, label = path_or_text, what
        if len(data) > max_bytes:
            raise error(f"{label} is {len(data):,} bytes, over the {max_bytes:,}-byte limit")
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            data = bytes(data).decode("utf-8-sig")  # a BOM some editors add is not part of the document
        except UnicodeDecodeError as err:
            raise error(f"{label} is not UTF-8 text (byte {err.start}); save it as UTF-8") from err
    elif data.startswith("\ufeff"):
        data = data[1:]
    return data, label


def _check_depth(value, label, max_depth, error, fix):
    """Refuses nesting deeper than ``max_depth`` (iterative: deep input cannot exhaust the stack here)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        if depth > max_depth:
            raise error(f"{label} nests deeper than {max_depth} levels; {fix}")
        stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))


def load_json(path_or_text, what, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, expect=None, error=ConfigError,
              fix="fix or regenerate it"):
    """Parses untrusted JSON: a bounded read, UTF-8 (BOM allowed), bounded depth, one-line errors.

    A ``pathlib.Path`` is read from disk; a ``str`` or ``bytes`` is the JSON text itself. ``what`` names the
    document in messages (``"config.json"``), ``expect`` is the required type of the top-level value (None:
    any), ``error`` the MbkError subclass raised (missing, special, oversized, non-UTF-8, invalid, too deep or
    of the wrong type) and ``fix`` what the user should do, ending each message. An object naming a key twice
    is refused (Python would keep the last, other readers the first); ``NaN``/``Infinity`` literals are kept:
    the consumer checks the fields it uses for finiteness, with the field's name.

    Example:
        >>> load_json('{"hidden_size": 32}', "the test config", expect=dict)
        {'hidden_size': 32}
    """
    text, label = _source(path_or_text, what, max_bytes, error)
    try:
        value = json.loads(text, object_pairs_hook=_unique_object)
    except _DuplicateKey as err:
        raise error(f"{label} names {err.args[0]!r} twice (which one counts is ambiguous); {fix}") from err
    except RecursionError as err:
        raise error(f"{label} nests too deeply to parse; {fix}") from err
    except ValueError as err:  # JSONDecodeError, and ints over Python's digit limit
        raise error(f"{label} is not valid JSON ({first_line(err)}); {fix}") from err
    _check_depth(value, label, max_depth, error, fix)
    if _SURROGATE_ESCAPE.search(text):  # cheap: most documents hold no such escape at all
        _check_surrogates(value, label, error)
    if expect is not None and not isinstance(value, expect):
        raise error(f"{label} must hold a JSON {_KIND.get(expect, expect.__name__)}, not {_kind(value)}; {fix}")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_surrogates(value, label, error):
    """Refuses a string holding half of a UTF-16 surrogate pair (``"\\ud83d"``: an emoji cut in two), which
    JSON escapes allow and Python keeps: no tokenizer or UTF-8 writer takes it (an internal error later)."""
    stack = [value]
    while stack:
        item = stack.pop()
        strings = [item] if isinstance(item, str) else list(item) if isinstance(item, dict) else []
        for text in strings:
            half = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
            if half is not None:
                raise error(f"{label} holds \\u{ord(half):04x}, half of a UTF-16 surrogate pair without its other "
                            "half, which is no character: remove it or write the whole character")
        if isinstance(item, (dict, list)):
            stack.extend(item.values() if isinstance(item, dict) else item)


def load_toml(path_or_text, what, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, error=ConfigError, fix="fix it"):
    """Parses untrusted TOML with the same bounds and arguments as :func:`load_json`; returns a dict.

    Example:
        >>> load_toml('[export]\\nformats = ["tflite"]', "the recipe")
        {'export': {'formats': ['tflite']}}
    """
    text, label = _source(path_or_text, what, max_bytes, error)
    try:
        value = tomllib.loads(text)
    except RecursionError as err:
        raise error(f"{label} nests too deeply to parse; {fix}") from err
    except (tomllib.TOMLDecodeError, ValueError) as err:
        raise error(f"{label} is not valid TOML ({first_line(err)}); {fix}") from err
    _check_depth(value, label, max_depth, error, fix)
    return value


class _DuplicateKey(ValueError):
    pass


def _unique_object(pairs):
    value = dict(pairs)
    if len(value) != len(pairs):
        seen = set()
        raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return value


_KIND = {dict: "object", list: "array", str: "string"}


def _kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {dict: "an object", list: "an array", str: "a string"}.get(type(value), type(value).__name__)


def strict_json_values(value):
    """``value`` with every non-finite float written as the string ``"inf"``, ``"-inf"`` or ``"nan"``.

    Why: ``json.dumps`` writes ``Infinity`` and ``NaN``, which Python reads back but strict JSON tools (``jq``,
    JavaScript's ``JSON.parse``) refuse; an exact comparison's SNR is infinite, not an error.

    Example:
        >>> strict_json_values({"snr_db": float("inf"), "rows": [1.0, float("nan")]})
        {'snr_db': 'inf', 'rows': [1.0, 'nan']}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: strict_json_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json_values(item) for item in value]
    return value
