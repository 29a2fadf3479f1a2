"""One check for every input path a command takes: what is there must be what the command reads.

Every input path goes through :func:`check_input_path` (or :func:`open_regular`,
which never blocks: ``O_NONBLOCK`` and ``fstat`` of what was opened) before
anything reads it, and the error names the path, escaped: a FIFO hung a run and
a dangling symlink was an internal error (docs/reliability.md rows 71, 72).

Standard library only: the profiler and artifact readers use it without TensorFlow.
"""

import argparse
import os
import stat

from mobilebert_kit.errors import MbkError
from mobilebert_kit.utils.terminal import escape

_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory", stat.S_IFREG: "a regular file"}


class InputPathError(MbkError):
    """An input path that is missing, dangling, special, or of the wrong kind."""


def _kind(mode):
    return _KINDS.get(stat.S_IFMT(mode), "a special file")


def _name(what, path):
    return f"{what} {escape(path)}".strip()


def _stat(path, what):
    try:
        return os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputPathError(f"{_name(what, path)} is a dangling symlink (its target "
                                 f"{escape(os.readlink(path))} does not exist); fix or remove the link") from None
        raise InputPathError(f"{_name(what, path)} does not exist; check the path") from None
    except OSError as err:
        raise InputPathError(f"cannot read {_name(what, path)} ({escape(err.strerror or err)}); check the path "
                             "and its permissions") from None


def check_input_path(path, what, kind="file", tree=False):
    """Returns ``path`` (a str, bytes-safe) if it exists and is a ``kind``; else raises InputPathError.

    Args:
        path: str, bytes or os.PathLike; non-UTF-8 names are kept (``os.fsdecode``'s surrogateescape).
        what: how the message names it (``--data``, ``model file``, ``[calibration] data``; ``""``: the path alone).
        kind: ``"file"`` (a regular file), ``"dir"`` or ``"any"`` (a regular file or a directory).
        tree: for a directory, also check every entry below it (hidden entries included): no FIFO,
            device, socket or dangling symlink, so nothing that reads the tree can block or crash.
    """
    path = os.fsdecode(path)
    mode = _stat(path, what).st_mode
    if stat.S_ISDIR(mode):
        if kind == "file":
            raise InputPathError(f"{_name(what, path)} is a directory; pass a file")
        if tree:
            _check_tree(path, what)
    elif stat.S_ISREG(mode):
        if kind == "dir":
            raise InputPathError(f"{_name(what, path)} is a file; pass a directory")
    else:
        raise InputPathError(f"{_name(what, path)} is {_kind(mode)}, not a regular file; pass a regular file")
    return path


def _check_tree(root, what):
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(parent, name)
            mode = _stat(full, what).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise InputPathError(f"{_name(what, full)} is {_kind(mode)}, not a regular file; remove it "
                                     f"from {escape(root)}")


def open_regular(path, what, mode="rb"):
    """Opens a regular file for reading without ever blocking; raises InputPathError for anything else.

    The file is opened with ``O_NONBLOCK`` (a FIFO opens at once instead of waiting for a writer) and
    checked with ``fstat`` on the open descriptor, so a path swapped after a check cannot slip through.
    ``path`` and ``what`` as :func:`check_input_path`'s; ``mode`` ``"rb"`` or ``"r"`` (UTF-8 text).
    """
    path = os.fsdecode(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        check_input_path(path, what)  # names the cause (missing, dangling, directory, permissions)
        raise
    try:
        st_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(st_mode):
            raise InputPathError(f"{_name(what, path)} is {_kind(st_mode)}, not a regular file; pass a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb") if mode == "rb" else os.fdopen(fd, "r", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def text_line(raw, number):
    """One line (bytes) of a user's text file, decoded as UTF-8; the first loses a byte-order mark.

    Notepad and Excel start UTF-8 files with one, which SentencePiece and BPE tokenizers read as a token of its
    own (docs/reliability.md row 308). The calibration and validation reader (``convert/plan/input_set``) streams
    with the same ``utf-8-sig``. A line that is not UTF-8 raises UnicodeDecodeError (each caller names its file
    and line), and so does one holding a NUL: UTF-16 without a byte-order mark is valid UTF-8 with a NUL after
    every ASCII character, which would be tokenized as text.

    Example:
        >>> text_line(b"\\xef\\xbb\\xbfhello", 1), text_line(b"\\xef\\xbb\\xbfhello", 2)
        ('hello', '\\ufeffhello')
    """
    if b"\0" in raw:
        at = raw.index(b"\0")
        raise UnicodeDecodeError("utf-8", raw, at, at + 1, "a NUL character: UTF-16 or binary data, not UTF-8 text")
    return raw.decode("utf-8-sig" if number == 1 else "utf-8")


def input_path_option(kind="file", tree=False, or_name=False):
    """An argparse ``type=`` running :func:`check_input_path` (``kind``, ``tree``) at parse time, before any
    model work. With ``or_name`` the value may also name something that is not a path (a preset, a TF1
    checkpoint prefix): it is checked only when something exists at that path (a dangling symlink counts).
    """

    def parse(text):
        if or_name and not os.path.lexists(text):
            return text
        try:
            return check_input_path(text, "", kind, tree)
        except InputPathError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = "path"
    return parse
