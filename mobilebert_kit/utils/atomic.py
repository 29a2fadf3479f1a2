"""The output contract and the atomic writers: the one place where mobilebert-kit writes a user-named path.

Every artifact is written to a temporary sibling first and moved into place with
``os.replace`` (atomic on POSIX within one file system), so an interrupted run
never leaves a file that looks finished.

Before anything is written, :func:`check_output` decides whether the path may be
written at all (one rule for every command):

* a path that does not exist is written;
* an output of the same kind that mobilebert-kit wrote (recognised by its marker:
  ``.mbk-output.json`` in a directory, the kind's own sniff for a file) is
  replaced atomically; an empty directory where a directory is expected is fine;
* anything else (a user's file or directory, a file of another kind, a directory
  where a file is expected and vice versa) is refused unless ``overwrite``;
* the command's own source (the path itself, a path inside it or one containing
  it), a symlink and a special file (device node, FIFO, socket) are refused even
  with ``overwrite``: writing there destroys the input or follows a link.

The kinds are data: one :class:`OutputKind` record per kind in :data:`OUTPUT_KINDS`.

A process killed mid-write (SIGKILL, power loss) cannot clean up: its hidden
``.NAME.PID.*.partial`` sibling stays behind. Its name never looks finished,
and the next write of the same ``NAME`` removes leftovers whose writer process
is gone, so they do not pile up across crashed runs.

This module must stay free of TensorFlow: the profiler writes its reports here.
"""

import contextlib
import errno
import json
import mmap
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mobilebert_kit.errors import MbkError
from mobilebert_kit.utils.structured import load_json

MARKER_FILE = ".mbk-output.json"
MARKER_VERSION = 1
# The "format" of a saved model's config.json (models/api.py FORMAT) and of a
# pretraining-data dataset.json (data/records.py FORMAT): outputs written before
# the marker existed carry these, so they are still recognised as ours.
SAVED_MODEL_FORMAT = "mobilebert-kit"
PRETRAINING_FORMAT = "mobilebert-kit-pretraining"
HEAD_BYTES = 65536  # a text sniff reads at most this much
# The help of every writing command's --overwrite flag.
OVERWRITE_HELP = ("replace a file or directory at the output path that mbk did not write (never the command's own "
                  "input, a special file or a symbolic link)")


class OutputError(MbkError):
    """An output path that must not be written (or cannot be): the message names it and says what to do."""


# --- sniffs: is this existing path an output of the kind, written by us? -------------------------------------

def _head(path, size=HEAD_BYTES):
    try:
        with open(path, "rb") as handle:
            return handle.read(size)
    except OSError:
        return b""


def _json_object(path, limit=64 << 20):
    """The JSON object in ``path`` (None when missing, unreadable, too large or deep, or not an object)."""
    try:
        return load_json(Path(path), "an output marker", max_bytes=limit, expect=dict)
    except MbkError:
        return None


def _contains(path, needle):
    """True if ``needle`` occurs in the file (memory-mapped: a 100 MB model is scanned in milliseconds)."""
    try:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(needle) >= 0
    except (OSError, ValueError):
        return False  # empty file (mmap refuses length 0) or unreadable


def _marker_record(path):
    """The marker of directory ``path`` as a dict (None when missing or unreadable)."""
    return _json_object(Path(path) / MARKER_FILE, limit=1 << 20)


def _marker(path):
    data = _marker_record(path)
    return data.get("format") if data else None


MAX_LISTED = 4096  # files a marker lists (a model directory holds a handful); more: the directory is not checked


def _files_under(directory):
    """Relative paths of the files (and links) under ``directory``, the marker left out; None past MAX_LISTED."""
    found = []
    for root, dirs, files in os.walk(directory):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            rel = os.path.relpath(os.path.join(root, name), directory)
            if rel != MARKER_FILE:
                found.append(rel)
            if len(found) > MAX_LISTED:
                return None
    return sorted(found)


def _foreign_files(path, data):
    """Files in our output directory ``path`` that its marker (``data``, read once) does not list: the user's
    own, put there since.

    Outputs written before markers listed their files, and in-place directories (runs, pipelines), list none:
    nothing is known about them, so nothing is reported.
    """
    listed = data.get("files") if data else None
    if not isinstance(listed, list):
        return []
    from mobilebert_kit.utils.run_state import RUN_FILE, STATE_DIR

    now = _files_under(path)
    if now is None:
        return ["(more than %d files)" % MAX_LISTED]
    # A resumable run keeps its state in OUT/run/ beside the finished output it will replace (run_state.py).
    state = Path(path) / STATE_DIR
    ours = STATE_DIR if state.is_dir() and not state.is_symlink() and (state / RUN_FILE).is_file() else None
    return sorted(f for f in set(now) - set(listed) if f.split(os.sep)[0] != ours)


def _json_field(name, key, value):
    def sniff(path):
        data = _json_object(Path(path) / name if name else path)
        return bool(data) and data.get(key) == value
    return sniff


def _any(*sniffs):
    return lambda path: any(sniff(path) for sniff in sniffs)


def _tflite(path):
    # The flatbuffer's file identifier is "TFL3"; every export embeds mbk_metadata.
    return _head(path, 8)[4:8] == b"TFL3" and _contains(path, b"mbk_metadata")


def _onnx(path):
    return _head(path, 8)[4:8] != b"TFL3" and _contains(path, b"mbk_metadata")


def _text_starts(prefix):
    return lambda path: _head(path, len(prefix)) == prefix


def generator_meta(kind):
    """The ``<meta name=generator>`` tag an HTML page of ``kind`` carries, so a later run recognises it."""
    return f"<meta name='generator' content='mobilebert-kit/{kind}'>"


def _html(kind, title):
    # Pages written before the generator tag existed carry only their title.
    return lambda path: any(tag.encode() in _head(path) for tag in (generator_meta(kind), f"<title>{title}</title>"))


def _saved_model(path):
    return _json_field("config.json", "format", SAVED_MODEL_FORMAT)(path)


def _stage_manifests(path):
    try:
        return any(name.endswith(".stage.json") for name in os.listdir(path))
    except OSError:
        return False


@dataclass(frozen=True)
class OutputKind:
    """One kind of artifact the package writes.

    Args:
        name: the kind's name; a directory's marker holds ``mobilebert-kit/NAME``.
        is_dir: True for a directory, False for a file.
        what: how a message names it ("a saved model directory").
        legacy: recognises an output of this kind written before markers existed (a directory), or the
            kind's own content (a file: its schema, metadata or header); ``None``: nothing older exists.

    Example:
        >>> OUTPUT_KINDS["profile-json"].is_dir
        False
    """

    name: str
    is_dir: bool
    what: str
    legacy: Callable | None = None

    @property
    def format(self):
        return f"mobilebert-kit/{self.name}"

    def recognises(self, path, marker=None):
        """True if ``path`` (an existing directory or regular file) is an output of this kind that we wrote
        (``marker``: the directory's marker when already read)."""
        if self.is_dir and (marker or _marker_record(path) or {}).get("format") == self.format:
            return True
        return bool(self.legacy and self.legacy(path))


OUTPUT_KINDS = {kind.name: kind for kind in (
    OutputKind("model", True, "a saved model directory", _saved_model),
    OutputKind("pretraining-data", True, "a pretraining-data directory",
               _json_field("dataset.json", "format", PRETRAINING_FORMAT)),
    OutputKind("finetune", True, "a fine-tuning output directory",
               _any(lambda p: os.path.isfile(os.path.join(p, "task.json")) and _saved_model(os.path.join(p, "model")))),
    OutputKind("substitute", True, "a substituted model directory",
               lambda p: os.path.isfile(os.path.join(p, "substitution.json")) and _saved_model(p)),
    OutputKind("distill-run", True, "a distillation run directory",
               lambda p: "config" in (_json_object(os.path.join(p, "run.json")) or {})),
    OutputKind("pipeline", True, "a pipeline output directory", _stage_manifests),
    OutputKind("stdlib-corpus", True, "a standard-library corpus directory"),
    OutputKind("tflite", False, "a .tflite model exported by mbk", _tflite),
    OutputKind("onnx", False, "an .onnx model exported by mbk", _onnx),
    OutputKind("export-report", False, "an export report", _any(
        _json_field(None, "schema", "mobilebert_kit.export"),
        lambda p: {"path", "format", "quantize", "validation"} <= set(_json_object(p) or {}))),
    OutputKind("profile-json", False, "a profile JSON report", _json_field(None, "schema", "mobilebert_kit.profile")),
    OutputKind("profile-csv", False, "a profile CSV table", _text_starts(b"model,format,precision,")),
    OutputKind("profile-md", False, "a profile Markdown table", _text_starts(b"# mbk profile report")),
    OutputKind("profile-html", False, "a profile HTML page", _html("profile-html", "mbk profile report")),
    OutputKind("pipeline-json", False, "a pipeline JSON report", _json_field(None, "schema", "mobilebert_kit.pipeline")),
    OutputKind("pipeline-html", False, "a pipeline HTML page", _html("pipeline-html", "mbk pipeline report")),
    OutputKind("evaluation-json", False, "a task-metrics JSON report",
               _json_field(None, "schema", "mobilebert_kit.evaluation")),
)}


# --- the decision ----------------------------------------------------------------------------------------------

NEW, REPLACE, EMPTY, OVERWRITE = "new", "replace", "empty", "overwrite"
_SPECIAL = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFIFO: "a FIFO",
            stat.S_IFSOCK: "a socket"}


def _kind(kind):
    if isinstance(kind, OutputKind):
        return kind
    try:
        return OUTPUT_KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown output kind {kind!r}; add it to OUTPUT_KINDS") from None


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
    own = None
    with contextlib.suppress(OSError):
        st = os.stat(path)
        own = (st.st_dev, st.st_ino)
    ancestors = set()
    for ancestor in path.parents:
        with contextlib.suppress(OSError):
            st = os.stat(ancestor)
            ancestors.add((st.st_dev, st.st_ino))
    with contextlib.suppress(OSError):
        root = os.stat(path.anchor or "/")
        ancestors.discard((root.st_dev, root.st_ino))
    return own, ancestors


def _check_parent(path):
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
        # A real write, not os.access: root passes access checks on an immutable (chattr +i) directory or a
        # read-only bind mount, and a long run would then fail only when it writes its output.
        try:
            fd, probe = tempfile.mkstemp(prefix=_prefix(path), suffix=".partial", dir=ancestor)
            os.close(fd)
            os.remove(probe)
        except OSError as err:
            raise write_error(path, err) from err
        return


def check_output(path, kind, *, overwrite=False, sources=()):
    """Decides whether ``path`` may be written as an output of ``kind``; the one place of that rule.

    Args:
        path: the output path the user named.
        kind: a key of :data:`OUTPUT_KINDS` (or an :class:`OutputKind`).
        overwrite: the user passed ``--overwrite``: a regular file or directory that is not ours may be replaced.
        sources: the command's inputs; the output may be none of them, inside one, or contain one.

    Returns:
        ``"new"`` (nothing there), ``"replace"`` (our own output of this kind), ``"empty"`` (an empty
        directory where a directory is expected) or ``"overwrite"`` (not ours, allowed by ``overwrite``).

    Raises:
        OutputError: a one-line refusal naming the path and what to do.

    Example:
        >>> check_output("/tmp/no-such-dir/model", "model")
        'new'
    """
    kind = _kind(kind)
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
        _check_parent(path)
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
        if is_dir and not os.listdir(path):
            return EMPTY
        marker = _marker_record(path) if is_dir else None
        if kind.recognises(path, marker):
            foreign = _foreign_files(path, marker) if is_dir else []
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
        # Older outputs without the marker are recognised by their own format fields (OUTPUT_KINDS' legacy).
        raise OutputError(f"{path} is a directory not written by mbk as {kind.what} (no {MARKER_FILE}); choose "
                          "another path, or pass --overwrite to replace it")
    raise OutputError(f"{path} is a file that is not {kind.what}; choose another path or pass --overwrite to "
                      "replace it")


# --- write errors ---------------------------------------------------------------------------------------------

def write_error(path, err):
    """The one-line :class:`OutputError` for an ``OSError`` met while writing ``path``.

    Example:
        >>> str(write_error("/x", OSError(errno.ENOSPC, "No space left on device")))[:30]
        'disk full while writing /x; fr'
    """
    code = getattr(err, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT):
        return OutputError(f"disk full while writing {path}; free space and run again (nothing was written)")
    if code == errno.EFBIG:
        return OutputError(
            f"file size limit reached while writing {path}; raise the limit (ulimit -f) or free space and run "
            "again (nothing was written)"
        )
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return OutputError(f"cannot write {path}: permission denied or read-only file system; choose a writable "
                           "path (nothing was written)")
    if code in (errno.ENOTDIR, errno.EEXIST):
        return OutputError(f"cannot write {path}: a parent of it is not a directory; choose another path "
                           "(nothing was written)")
    if code == errno.ENAMETOOLONG:
        return OutputError(f"cannot write {path}: the name is too long; choose a shorter path (nothing was written)")
    reason = " ".join(str(err.strerror or err).split())
    return OutputError(f"cannot write {path}: {reason}; check the path and permissions (nothing was written)")


def _plain_mode(path):
    """mkstemp/mkdtemp make 0600 files and 0700 directories; a finished artifact gets what ``open()`` and
    ``mkdir`` would give (0666 / 0777 minus umask), so a model written for another user or a web server to read
    is readable like any other file. Applied to every file and directory under ``path``."""
    umask = os.umask(0)
    os.umask(umask)
    if os.path.islink(path):
        return
    if os.path.isdir(path):
        os.chmod(path, 0o777 & ~umask)
        for root, dirs, files in os.walk(path):
            for name in dirs:
                if not os.path.islink(os.path.join(root, name)):
                    os.chmod(os.path.join(root, name), 0o777 & ~umask)
            for name in files:
                if not os.path.islink(os.path.join(root, name)):
                    os.chmod(os.path.join(root, name), 0o666 & ~umask)
    elif os.path.isfile(path):
        os.chmod(path, 0o666 & ~umask)


def _keep_access(path, tmp):
    """Gives ``tmp`` the permission bits (and, as root, the owner) of the ``path`` it replaces, when both are
    files or both directories: a 0700 directory or a 0600 file a user had made private stays private when
    its contents are replaced (the umask's 0755 / 0644 had opened it to everyone)."""
    with contextlib.suppress(OSError):
        _apply_access(os.lstat(path), tmp)


def _apply_access(old, target):
    """:func:`_keep_access` from the ``os.lstat`` result ``old`` of what ``target`` replaces."""
    try:
        new = os.lstat(target)
    except OSError:
        return
    if stat.S_IFMT(old.st_mode) != stat.S_IFMT(new.st_mode) or stat.S_ISLNK(old.st_mode):
        return
    os.chmod(target, stat.S_IMODE(old.st_mode))
    if hasattr(os, "geteuid") and os.geteuid() == 0 and (old.st_uid, old.st_gid) != (new.st_uid, new.st_gid):
        with contextlib.suppress(OSError):
            os.chown(target, old.st_uid, old.st_gid)


# --- the writers ----------------------------------------------------------------------------------------------

def _begin(path, kind, overwrite, sources):
    path = Path(path)
    if kind is not None:
        check_output(path, kind, overwrite=overwrite, sources=sources)
    else:
        _check_internal(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_error(path, err) from err
    _sweep_leftovers(path)
    return path


def _check_internal(path):
    """A file the package keeps inside its own outputs (progress, manifests, caches): never a link or special
    file, and never a directory."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        _check_parent(path)
        return
    except OSError as err:
        raise write_error(path, err) from err
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{path} is not a regular file; mbk replaces only files it wrote: move it away")


def _finish(tmp, path, kind, overwrite, sources):
    """Moves the finished ``tmp`` onto ``path`` after checking ``path`` again (it may have changed meanwhile)."""
    decision = check_output(path, kind, overwrite=overwrite, sources=sources) if kind is not None else None
    if kind is None:
        _check_internal(path)
    _plain_mode(tmp)
    exists = decision in (REPLACE, EMPTY, OVERWRITE) or (decision is None and os.path.lexists(path))
    if exists:
        _keep_access(path, tmp)
    if exists and (os.path.isdir(path) or os.path.isdir(tmp)):
        # rename() cannot put a directory over a non-empty one (or a file over a directory): move the old one
        # aside first, and delete it only once the new one is in place.
        # Ctrl-C or SIGTERM between the two renames would leave neither the old output nor the new one at
        # ``path`` (and the clean-up below would then delete the old one): both signals wait until the swap
        # is done or undone.
        old = Path(tempfile.mkdtemp(prefix=_prefix(path), suffix=".old", dir=path.parent))
        try:
            with _signals_held():
                os.replace(path, old / "previous")
                try:
                    os.replace(tmp, path)
                except BaseException:
                    os.replace(old / "previous", path)
                    raise
        finally:
            # The old output once the new one is in place, or the empty directory of an undone swap; never the
            # old output while nothing else is at the path (a failed undo leaves it there to be recovered).
            if os.path.lexists(path):
                shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


@contextlib.contextmanager
def _signals_held(signals=("SIGINT", "SIGTERM")):
    """Holds ``signals`` back inside the block; one that arrives is delivered, to the handler it would have
    reached, when the block ends.

    Python handlers, not a thread signal mask: TensorFlow's threads would take a process signal that this
    thread blocks, and Python would still run the handler in the main thread at once. Outside the main thread
    (where handlers cannot be set), for a handler that was not set from Python and for an ignored signal,
    nothing is held.

    Example:
        >>> with _signals_held():
        ...     pass
    """
    import signal
    import threading

    caught, previous = [], {}
    if threading.current_thread() is threading.main_thread():
        for name in signals:
            number = getattr(signal, name, None)
            if number is not None and signal.getsignal(number) not in (None, signal.SIG_IGN):
                previous[number] = signal.signal(number, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in caught:
            signal.raise_signal(number)


def relist(directory):
    """Updates the file list of our output ``directory``'s marker after mbk added files to it (a vocabulary, a
    pooling config copied beside a saved model), so that a later run does not take them for the user's.

    Example:
        >>> relist("runs/distill/student")  # doctest: +SKIP
    """
    data = _json_object(Path(directory) / MARKER_FILE, limit=1 << 20)
    if not data or not isinstance(data.get("files"), list):
        return
    files = _files_under(directory)
    if files is None:
        data.pop("files")
    else:
        data["files"] = files
    _store_marker(directory, data)


def _write_marker(directory, kind):
    # The files written are listed, so that a later run replacing the directory can tell the user's own files
    # put there since (notes, exports) from ours, and refuse instead of deleting them.
    record = {"format": _kind(kind).format, "version": MARKER_VERSION}
    files = _files_under(directory)
    if files is not None:
        record["files"] = files
    _store_marker(directory, record, in_place=True)


def _store_marker(directory, record, in_place=False):
    """Writes ``record`` as ``directory``'s marker (the one writer of markers): whole or not at all, or
    ``in_place`` inside a hidden ``.partial`` directory that nobody reads before it is renamed into place."""
    path = Path(directory) / MARKER_FILE
    with (open(path, "w") if in_place else atomic_file(path, "w")) as handle:
        json.dump(record, handle)
        handle.write("\n")


@contextlib.contextmanager
def atomic_file(path, mode="wb", *, kind=None, overwrite=False, sources=()):
    """Yields a file object whose content replaces ``path`` only if the block succeeds.

    Args:
        path: the file to write.
        mode: ``"wb"`` or ``"w"``.
        kind: the output kind (a key of :data:`OUTPUT_KINDS`) for a user-named path, checked by
            :func:`check_output`; ``None`` for a file inside the package's own outputs.
        overwrite: replace a regular file that is not ours.
        sources: the command's inputs, never written.

    Example:
        >>> with atomic_file("out.json", "w", kind="profile-json") as f:  # doctest: +SKIP
        ...     f.write("{}")
    """
    # On atomic_path: one place creates, checks, moves and cleans up the temporary sibling.
    with atomic_path(path, kind=kind, overwrite=overwrite, sources=sources) as tmp:
        with open(tmp, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())


def write_text(path, text, *, kind=None, overwrite=False, sources=()):
    """Writes ``text`` (UTF-8) to ``path`` atomically; returns ``path`` as a string.

    Example:
        >>> write_text("r.md", "# report\\n", kind="profile-md")  # doctest: +SKIP
        'r.md'
    """
    with atomic_file(path, "w", kind=kind, overwrite=overwrite, sources=sources) as handle:
        handle.write(text)
    return str(path)


@contextlib.contextmanager
def atomic_path(path, *, kind=None, overwrite=False, sources=()):
    """Yields a temporary path to write; it is renamed to ``path`` if the block succeeds.

    For writers that insist on a file name (TensorFlow, onnx, safetensors). Arguments as :func:`atomic_file`.

    Example:
        >>> with atomic_path("m.onnx", kind="onnx") as tmp:  # doctest: +SKIP
        ...     onnx.save(model, str(tmp))
    """
    path = _begin(path, kind, overwrite, sources)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=".partial", dir=path.parent)
        os.close(fd)
    except OSError as err:
        raise write_error(path, err) from err
    try:
        yield Path(tmp)
        _finish(tmp, path, kind, overwrite, sources)
    except OSError as err:
        remove_path(tmp)
        raise write_error(path, err) from err
    except BaseException:
        remove_path(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path, kind, *, overwrite=False, sources=()):
    """Yields a temporary directory that replaces directory ``path`` if the block succeeds.

    The finished directory carries the marker ``.mbk-output.json`` of ``kind``, so a later run may replace it;
    an existing ``path`` is kept until the new one is complete. Arguments as :func:`atomic_file`.

    Example:
        >>> with atomic_dir("runs/model", "model") as tmp:  # doctest: +SKIP
        ...     (tmp / "config.json").write_text("{}")
    """
    path = _begin(path, kind, overwrite, sources)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(path), suffix=".partial", dir=path.parent))
    except OSError as err:
        raise write_error(path, err) from err
    try:
        yield tmp
        _write_marker(tmp, kind)
        _finish(tmp, path, kind, overwrite, sources)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise write_error(path, err) from err
    except OutputError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        # A writer nested in the block (a model saved into the directory) names its path under the hidden
        # temporary directory, which is gone now: name the place the user will look for instead.
        if str(tmp) in str(err):
            raise OutputError(str(err).replace(str(tmp), str(path))) from err
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def prepare_dir(path, kind, *, overwrite=False, sources=(), fresh=False):
    """Makes ``path`` ready as a directory that a command fills in place (a distillation run, a pipeline's
    outputs): checked by :func:`check_output`, created with its marker; a directory that is not ours is
    removed first only with ``overwrite``, one of ours only with ``fresh`` (start over). Returns the decision
    of :func:`check_output`.

    Example:
        >>> prepare_dir("runs/distill", "distill-run")  # doctest: +SKIP
        'new'
    """
    return _make_ready(Path(path), kind, check_output(path, kind, overwrite=overwrite, sources=sources), fresh)


def _make_ready(path, kind, decision, fresh):
    """:func:`prepare_dir` once ``decision`` (:func:`check_output`'s) is known."""
    try:
        replaced = None
        if decision == OVERWRITE or (fresh and decision == REPLACE):
            replaced = os.lstat(path)
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        path.mkdir(parents=True, exist_ok=True)
        if replaced is not None:
            _apply_access(replaced, path)
        if decision != REPLACE or _marker(path) != _kind(kind).format:
            _store_marker(path, {"format": _kind(kind).format, "version": MARKER_VERSION})
    except OSError as err:
        raise write_error(path, err) from err
    return decision


@contextlib.contextmanager
def foreign_set_aside(path, kind, *, overwrite=False, sources=()):
    """``--overwrite`` of a path mbk did not write, for a command that fills the path in place (a pipeline,
    a distillation run): the path is moved to a hidden sibling before the command writes, put back if the
    block fails or is interrupted, and removed once the block succeeds. Anything else passes through.

    Without this, the user's directory was deleted when the run started, and a run that then failed or
    was stopped left neither it nor an output. The sibling (``.NAME.PID.RANDOM.overwritten``) is never
    swept: after a SIGKILL the user's files are still there.

    Yields:
        str: :func:`check_output`'s decision for ``path``.

    Example:
        >>> with foreign_set_aside("runs/x", "pipeline", overwrite=True):  # doctest: +SKIP
        ...     fill("runs/x")
    """
    path = Path(path)
    decision = check_output(path, kind, overwrite=overwrite, sources=sources)
    aside = None
    if decision == OVERWRITE:
        aside = path.parent / f"{_prefix(path)}{os.urandom(4).hex()}.overwritten"
        try:
            os.rename(path, aside)
        except OSError as err:
            raise write_error(path, err) from err
    try:
        yield decision
    except BaseException:
        if aside is not None:
            with _signals_held():
                remove_path(path, ignore_errors=True)
                os.rename(aside, path)
        raise
    if aside is not None:
        _keep_access(aside, path)
        remove_path(aside, ignore_errors=True)


@contextlib.contextmanager
def prepared_dir(path, kind, **kwargs):
    """:func:`prepare_dir` for a command that may still fail before writing anything: a directory it created
    (or found empty) that holds only its marker when the block fails is put back as it was found, so a
    refused recipe leaves no empty output behind; a path replaced with ``overwrite`` comes back
    (:func:`foreign_set_aside`).

    Args:
        path, kind, kwargs: as :func:`prepare_dir`.

    Yields:
        str: :func:`prepare_dir`'s decision.

    Example:
        >>> with prepared_dir("out/pipeline", "pipeline") as decision:  # doctest: +SKIP
        ...     run_stages()
    """
    with foreign_set_aside(path, kind, overwrite=kwargs.get("overwrite", False),
                           sources=kwargs.get("sources", ())) as found:
        # One check: a path set aside is gone now, so it is prepared as new.
        decision = _make_ready(Path(path), kind, NEW if found == OVERWRITE else found, kwargs.get("fresh", False))
        try:
            yield found
        except BaseException:
            if decision in (NEW, EMPTY):
                with contextlib.suppress(OSError):
                    if os.listdir(path) == [MARKER_FILE]:
                        os.remove(Path(path) / MARKER_FILE)
                        if decision == NEW:
                            os.rmdir(path)
            raise


def _prefix(path):
    # The writer's pid in the name tells a later run whether the writer is still alive.
    return f".{path.name}.{os.getpid()}."


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def _sweep_leftovers(path):
    """Removes ``.NAME.PID.*.partial`` / ``.old`` siblings of ``path`` left by writers that no longer run."""
    prefix = f".{path.name}."
    try:
        names = os.listdir(path.parent)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith((".partial", ".old"))):
            continue
        parts = name[len(prefix):].split(".")
        # Exactly PID.RANDOM.partial: ".a.5.123.x.partial" belongs to the file "a.5", not to "a".
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        pid = int(parts[0])
        if pid == os.getpid() or _alive(pid):
            continue  # ours, or a writer still at work
        remove_path(path.parent / name, ignore_errors=True)


def remove_path(path, ignore_errors=False):
    """Removes what is at ``path``: a directory tree, or a file, link or special file (a link is never followed).

    Args:
        path: the path; nothing there is not an error.
        ignore_errors (bool): carry on past what cannot be removed, as ``shutil.rmtree(ignore_errors=True)``.

    Example:
        >>> remove_path("/tmp/no-such-mbk-path")
    """
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=ignore_errors)
        return
    with contextlib.suppress(OSError if ignore_errors else FileNotFoundError):
        os.remove(path)
