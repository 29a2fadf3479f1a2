"""The output contract: whether a user-named path may be written, one rule for every command.

:func:`check_output` decides before anything is written (the writers in ``utils/atomic.py`` ask again
just before the final rename):

* a path that does not exist is written;
* an output of the same kind that mobilebert-kit wrote is replaced atomically: a directory is recognised
  by its marker (``.mbk-output.json`` naming the kind), a file by the sniff its owner declares with the
  format it writes; an empty directory where a directory is expected is fine;
* anything else (a user's file or directory, a file of another kind, a directory where a file is
  expected and vice versa, a directory written before markers existed) is refused unless ``overwrite``;
* the command's own source (the path itself, a path inside it or one containing it), a symlink and a
  special file (device node, FIFO, socket) are refused even with ``overwrite``: writing there destroys
  the input or follows a link.

Each kind of output is one :class:`OutputKind` record, declared by the module that owns the format
(``PROFILE_CSV`` beside the profiler's CSV header, ``SAVED_MODEL`` beside the saved-model format):
this module knows the mechanism, never a format. The sniff helpers below take the owner's literals.

No TensorFlow here: the profiler checks its reports with this module.
"""

import contextlib
import errno
import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from mobilebert_kit.errors import MbkError
from mobilebert_kit.utils.run_state import OWNER_FILE, STATE_DIR, interrupted_run
from mobilebert_kit.utils.structured import load_json

MARKER_FILE = ".mbk-output.json"
MARKER_VERSION = 1
FORMAT_PREFIX = "mobilebert-kit/"  # a marker's "format" is FORMAT_PREFIX + the kind's name
HEAD_BYTES = 65536  # a text sniff reads at most this much
MAX_LISTED = 4096  # files a marker lists (a model directory holds a handful); more: the directory is not checked
NAME_MAX = 255  # bytes in one file name on Linux and macOS file systems
# What a temporary sibling adds to the name it stands for: ".", ".PID." (10 digits at most), the random part of
# mkstemp (8) or of foreign_set_aside (8) and the longest suffix (".overwritten"), with room to spare.
TEMP_EXTRA = 40
# The help of every writing command's --overwrite flag.
OVERWRITE_HELP = ("replace a file or directory at the output path that mbk did not write (never the command's own "
                  "input, a special file or a symbolic link)")
NEW, REPLACE, EMPTY, OVERWRITE = "new", "replace", "empty", "overwrite"
_SPECIAL = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFIFO: "a FIFO",
            stat.S_IFSOCK: "a socket"}


class OutputError(MbkError):
    """An output path that must not be written (or cannot be): the message names it and says what to do."""


# --- sniffs: building blocks of a file kind's recogniser, given the owner's literals ---------------------------

SCAN_CHUNK = 1 << 20  # what :func:`contains` reads at a time


def _open_regular(path):
    """A read-only descriptor of the regular file at ``path``, or None: opened without blocking (a FIFO put there
    since the output check's ``lstat`` would wait for a writer for ever) and checked on the descriptor."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.set_blocking(fd, True)
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def head(path, size=HEAD_BYTES):
    """The first ``size`` bytes of ``path`` (``b""`` when unreadable or not a regular file)."""
    fd = _open_regular(path)
    if fd is None:
        return b""
    try:
        with os.fdopen(fd, "rb") as handle:
            return handle.read(size)
    except OSError:
        return b""


def json_object(path, limit=64 << 20):
    """The JSON object in ``path`` (None when missing, unreadable, too large or deep, or not an object)."""
    try:
        return load_json(Path(path), "an output marker", max_bytes=limit, expect=dict)
    except MbkError:
        return None


def json_field(key, value):
    """A recogniser: the file is a JSON object whose ``key`` is ``value`` (a report's ``"schema"``)."""
    return lambda path: (json_object(path) or {}).get(key) == value


def text_starts(prefix):
    """A recogniser: the file starts with ``prefix`` (bytes, or text encoded as UTF-8)."""
    prefix = prefix.encode() if isinstance(prefix, str) else prefix
    return lambda path: head(path, len(prefix)) == prefix


def bytes_at(offset, data):
    """A recogniser: the file holds ``data`` at byte ``offset`` (a binary format's file identifier)."""
    return lambda path: head(path, offset + len(data))[offset:] == data


def contains(needle):
    """A recogniser: ``needle`` (bytes or text) occurs in the file, read in chunks that overlap by the needle's
    length (a 100 MB model in some 30 ms).

    Read, never memory-mapped: the file is the user's, and one truncated in place while a mapping of it was
    scanned (a re-export or a copy into the same name) killed the command with SIGBUS, no message.
    """
    needle = needle.encode() if isinstance(needle, str) else needle

    def sniff(path):
        fd = _open_regular(path)
        if fd is None:
            return False
        try:
            with os.fdopen(fd, "rb") as handle:
                keep = len(needle) - 1  # a needle across two chunks: the end of one and the start of the next
                tail = b""
                while chunk := handle.read(SCAN_CHUNK):
                    if needle in chunk or (keep and needle in tail + chunk[:keep]):
                        return True
                    tail = (tail + chunk)[-keep:] if keep else b""
        except OSError:
            pass
        return False
    return sniff


def generator_meta(kind):
    """The ``<meta name=generator>`` tag an HTML page of kind ``kind`` (its name) carries, so a later run
    recognises it (:func:`html_generator`)."""
    return f"<meta name='generator' content='{FORMAT_PREFIX}{kind}'>"


def html_generator(kind):
    """A recogniser: an HTML page carrying :func:`generator_meta` of ``kind`` in its head."""
    return lambda path: generator_meta(kind).encode() in head(path)


# --- kinds -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OutputKind:
    """One kind of artifact the package writes, declared by the module that owns its format.

    Args:
        name: the kind's name; a directory's marker holds ``mobilebert-kit/NAME``.
        is_dir: True for a directory, False for a file.
        what: how a message names it ("a saved model directory").
        recognises: for a file, ``callable(path) -> bool``: the owner's sniff of its own content (schema,
            header, metadata), built from the constants its writer writes. A directory is recognised by
            its marker only, so none is given for one (and ``recognises`` then reads the marker).

    Example:
        >>> OutputKind("notes", False, "a notes file", text_starts("# notes")).is_dir
        False
    """

    name: str
    is_dir: bool
    what: str
    recognises: Callable = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.is_dir and self.recognises is not None:
            raise ValueError(f"output kind {self.name!r}: a directory is recognised by its marker only")
        if not self.is_dir and not callable(self.recognises):
            raise ValueError(f"output kind {self.name!r}: a file kind needs its owner's recogniser")
        if self.is_dir:
            object.__setattr__(self, "recognises", lambda path: marker_format(path) == self.format)

    @property
    def format(self):
        """What a marker (or an HTML page's generator tag) says: ``mobilebert-kit/NAME``."""
        return f"{FORMAT_PREFIX}{self.name}"


def require_kind(kind):
    """``kind`` itself when it is an :class:`OutputKind`; a name or anything else is a programming error."""
    if not isinstance(kind, OutputKind):
        raise TypeError(f"output kind {kind!r} is not an OutputKind: pass the record its owner declares "
                        "(e.g. models.api.SAVED_MODEL)")
    return kind


# --- markers ---------------------------------------------------------------------------------------------------

def marker_record(path):
    """The marker of directory ``path`` as a dict (None when missing or unreadable)."""
    return json_object(Path(path) / MARKER_FILE, limit=1 << 20)


def marker_format(path):
    """The ``format`` the marker of directory ``path`` names (None without one)."""
    data = marker_record(path)
    return data.get("format") if data else None


def files_under(directory):
    """Relative paths of the files (and links) under ``directory``, the marker and a live run's owner record
    (``utils.run_state.OWNER_FILE``) left out; None past MAX_LISTED."""
    found = []
    for root, dirs, files in os.walk(directory):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            rel = os.path.relpath(os.path.join(root, name), directory)
            if rel not in (MARKER_FILE, OWNER_FILE):
                found.append(rel)
            if len(found) > MAX_LISTED:
                return None
    return sorted(found)


def _foreign_files(path, data):
    """Files in our output directory ``path`` that its marker (``data``, read once) does not list: the user's
    own, put there since.

    In-place directories (runs, pipelines) list none: nothing is known about them, so nothing is reported.
    """
    listed = data.get("files") if data else None
    if not isinstance(listed, list):
        return []
    now = files_under(path)
    if now is None:
        return ["(more than %d files)" % MAX_LISTED]
    # A resumable run keeps its state in OUT/run/ beside the finished output it will replace (run_state.py).
    ours = STATE_DIR if interrupted_run(path) else None
    return sorted(f for f in set(now) - set(listed) if f.split(os.sep)[0] != ours)


# --- the decision ----------------------------------------------------------------------------------------------

def _source_paths(sources):
    """Existing paths among ``sources`` (a preset name is no path; a TF1 prefix stands for its .index file)."""
    found = []
    for source in sources or ():
        if source is None or not isinstance(source, (str, os.PathLike)):
            continue
        for candidate in (os.fspath(source), os.fspath(source) + ".index"):
            if os.path.lexists(candidate):
                found.append(Path(os.path.realpath(candidate)))
                break
    return found


def overlap(path, other):
    """How ``path`` lies to ``other`` once both are resolved: ``"is"``, ``"is inside"``, ``"contains"`` or None.

    Example:
        >>> overlap("/tmp/a/b", "/tmp/a")
        'is inside'
    """
    path, other = (Path(os.path.realpath(p)) for p in (path, other))
    if path == other:
        return "is"
    if path.is_relative_to(other):
        return "is inside"
    if other.is_relative_to(path):
        return "contains"
    # The same directory or file under another name: a bind mount (`mount --bind data alias`) or a hard link
    # has its own path but the same device and inode numbers, and --overwrite of `alias/x` replaced `data/x`.
    own, ancestors = _identities(path)
    theirs, their_ancestors = _identities(other)
    if own is not None and own == theirs:
        return "is"
    if theirs is not None and theirs in ancestors:
        return "is inside"
    return "contains" if own is not None and own in their_ancestors else None


def _identities(path):
    """``(id of path or None, ids of its existing ancestors)``, an id being ``(st_dev, st_ino)``; the root, which
    every path has, is left out."""
    return _identity(path), {_identity(a) for a in path.parents} - {None, _identity(path.anchor or "/")}


def _identity(path):
    with contextlib.suppress(OSError):
        st = os.stat(path)
        return st.st_dev, st.st_ino
    return None


def temp_prefix(path):
    """The name prefix of ``path``'s temporary siblings, ``.NAME.PID.``: the writer's pid in the name tells a
    later run whether the writer is still alive (``utils.atomic`` sweeps the leftovers of dead ones).

    A name near the file system's limit (NAME_MAX, 255 bytes) is shortened in the prefix (:func:`temp_stem`):
    the sibling of a valid 240-byte name was refused as "the name is too long".
    """
    return f".{temp_stem(path)}.{os.getpid()}."


def temp_stem(path):
    """``path``'s name as its temporary siblings carry it: whole when ``.NAME.PID.RANDOM.overwritten`` fits in
    NAME_MAX (255 bytes), else cut to fit, with a hash of the whole name so two long names do not share it.
    """
    name = Path(path).name
    raw = os.fsencode(name)
    if len(raw) <= NAME_MAX - TEMP_EXTRA:
        return name
    digest = hashlib.sha256(raw).hexdigest()[:12]
    keep = raw[:NAME_MAX - TEMP_EXTRA - len(digest) - 1]
    try:
        raw.decode("utf-8")
        stem = keep.decode("utf-8", "ignore")  # a character cut in two is dropped
    except UnicodeDecodeError:
        stem = os.fsdecode(keep)
    return f"{stem}~{digest}"


def check_parent(path):
    """Refuses a path whose nearest existing ancestor is not a directory (mkdir would fail with ENOTDIR)."""
    for ancestor in path.parents:
        try:
            st = os.stat(ancestor)
        except FileNotFoundError:
            continue
        except OSError as err:
            raise write_error(path, err) from err
        if not stat.S_ISDIR(st.st_mode):
            raise OutputError(f"cannot write {path}: {ancestor} is not a directory; choose another path")
        _probe(path, ancestor)
        return


def _probe(path, directory):
    """Refuses ``path`` when ``directory`` (where its writer puts the output or its temporary) takes no file.

    A real write, not os.access: root passes access checks on an immutable (chattr +i) directory or a read-only
    bind mount, and a long run would then fail only when it writes its output.
    """
    try:
        fd, probe = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".partial", dir=directory)
        os.close(fd)
        os.remove(probe)
    except OSError as err:
        raise write_error(path, err) from err


def _check_writable(path, kind, decision):
    """Refuses an existing ``path`` whose output could not be put in place, before the command's work.

    Only a new path was probed: a fine-tune replacing its own output in a directory that takes no file (an
    immutable or read-only parent, ``OUT`` itself writable) trained to the end and then failed to stage the
    output beside ``OUT``, "nothing was written". Every writer stages beside the path or moves what is there
    aside beside it (``utils.atomic``), and a directory of ours or an empty one is also written inside (a run's
    state, an install into a mount point).
    """
    _probe(path, path.parent)
    if kind.is_dir and decision in (REPLACE, EMPTY):
        _probe(path, path)


def check_output(path, kind, *, overwrite=False, sources=(), keep_foreign=False):
    """Decides whether ``path`` may be written as an output of ``kind``; the one place of that rule.

    Args:
        path: the output path the user named.
        kind (OutputKind): the record the output's owner declares (``models.api.SAVED_MODEL``).
        overwrite: the user passed ``--overwrite``: a regular file or directory that is not ours may be replaced.
        sources: the command's inputs; the output may be none of them, inside one, or contain one.
        keep_foreign (bool): ``path`` is a run's own directory, whose finished output keeps files the user added
            (``utils.atomic.atomic_dir``): they are no reason to refuse.

    Returns:
        ``"new"`` (nothing there), ``"replace"`` (our own output of this kind), ``"empty"`` (an empty
        directory where a directory is expected) or ``"overwrite"`` (not ours, allowed by ``overwrite``).

    Raises:
        OutputError: a one-line refusal naming the path and what to do.

    Example:
        >>> check_output("/tmp/no-such-dir/notes", OutputKind("notes", True, "a notes directory"))
        'new'
    """
    kind = require_kind(kind)
    decision = _decide(path, kind, overwrite, sources, keep_foreign)
    if decision != NEW:  # a new path's nearest existing directory was probed already (check_parent)
        _check_writable(Path(os.path.abspath(os.fspath(path))), kind, decision)
    return decision


def _decide(path, kind, overwrite, sources, keep_foreign):
    """:func:`check_output`'s decision, before the write probe of an existing path."""
    tail = next((t for t in (os.sep, os.sep + ".") if os.fspath(path).endswith(t)), None)
    if tail and not kind.is_dir:  # `--out x.onnx/` named a directory; pathlib drops the tail and wrote the file
        raise OutputError(f"{os.fspath(path)} ends in '{tail}', which names a directory, but {kind.what} is a file: "
                          f"drop the '{tail}' (or add a file name after it)")
    try:
        path = Path(os.path.abspath(os.fspath(path)))
    except FileNotFoundError:  # a relative path, and the working directory was deleted (os.getcwd fails)
        raise OutputError(f"cannot write {os.fspath(path)}: the working directory no longer exists; cd to an "
                          "existing directory or give an absolute path") from None
    real = Path(os.path.realpath(path))
    for source in _source_paths(sources):
        relation = overlap(real, source)
        if relation:
            raise OutputError(f"{path} {relation} the command's input {source}; writing there would destroy it: "
                              "choose another output path")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        check_parent(path)
        return NEW
    except OSError as err:
        raise write_error(path, err) from err
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        raise OutputError(f"{path} is a symbolic link; mbk never writes through links: choose another path "
                          "(--overwrite does not apply)")
    if stat.S_IFMT(mode) in _SPECIAL:
        raise OutputError(f"{path} is {_SPECIAL[stat.S_IFMT(mode)]}; mbk never writes to special files: choose "
                          "another path (--overwrite does not apply)")
    is_dir = stat.S_ISDIR(mode)
    if is_dir == kind.is_dir:
        if is_dir and not set(os.listdir(path)) - {OWNER_FILE}:  # a run's lock names its owner in it
            return EMPTY
        marker = marker_record(path) if is_dir else None
        ours = (marker or {}).get("format") == kind.format if is_dir else kind.recognises(path)
        if ours:
            foreign = _foreign_files(path, marker) if is_dir and not keep_foreign else []
            if not foreign:
                return REPLACE
            if not overwrite:
                shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
                raise OutputError(f"{path} is {kind.what} mbk wrote, but it now also holds files mbk did not write "
                                  f"({shown}); move them away, or pass --overwrite to replace the directory with them")
    if overwrite:
        return OVERWRITE
    if is_dir != kind.is_dir:
        found = "a directory" if is_dir else "a file"
        raise OutputError(f"{path} is {found}, not {kind.what}; choose another path or pass --overwrite to "
                          "replace it")
    if is_dir:
        # A directory mbk wrote before markers existed is no different: --overwrite replaces it.
        raise OutputError(f"{path} is a directory not written by mbk as {kind.what} (no {MARKER_FILE}); choose "
                          "another path, or pass --overwrite to replace it")
    raise OutputError(f"{path} is a file that is not {kind.what}; choose another path or pass --overwrite to "
                      "replace it")


# --- write errors ---------------------------------------------------------------------------------------------

# What a library that reports a failed write in its own error type (TensorFlow's OpError) says, by errno: only
# conditions no read has (a permission error might be an input's).
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


def os_error_in(err):
    """The ``OSError`` a third-party error reports in words (TensorFlow: ``OutOfRangeError: ...; File too
    large``), so that :func:`write_error` gives it the one-line contract; None when it names none.

    Example:
        >>> os_error_in(RuntimeError("shard-1.tfrecord; No space left on device")).errno == errno.ENOSPC
        True
    """
    text = str(err)
    for code in _WRITE_ERRNOS:
        if os.strerror(code) in text:
            return OSError(code, os.strerror(code))
    return None


def write_error(path, err):
    """The one-line :class:`OutputError` for an ``OSError`` met while writing ``path``; it says "nothing was
    written" unless the error came while the output was moved into an existing directory (``err.partly_written``,
    set by ``utils.atomic``): then it says what is there.
    """
    error = _write_error(path, err)
    if getattr(err, "partly_written", False):
        return OutputError(str(error).replace("(nothing was written)", f"(part of the output is in {path}, marked as "
                                              "mbk's: the next run replaces it)"))
    return error


# What a failed write says, by errno (each ends "(nothing was written)"); any other errno quotes its reason.
_WRITE_REASONS = {
    (errno.ENOSPC, errno.EDQUOT): "disk full while writing {}; free space and run again",
    (errno.EFBIG,): "file size limit reached while writing {}; raise the limit (ulimit -f) or free space and run again",
    (errno.EACCES, errno.EPERM, errno.EROFS): "cannot write {}: permission denied or read-only file system; choose "
                                              "a writable path",
    (errno.ENOTDIR, errno.EEXIST): "cannot write {}: a parent of it is not a directory; choose another path",
    (errno.ENAMETOOLONG,): "cannot write {}: the name is too long; choose a shorter path",
}


def _write_error(path, err):
    code = getattr(err, "errno", None)
    reason = next((text.format(path) for codes, text in _WRITE_REASONS.items() if code in codes), None)
    if reason is None:
        reason = f"cannot write {path}: {' '.join(str(err.strerror or err).split())}; check the path and permissions"
    return OutputError(f"{reason} (nothing was written)")
