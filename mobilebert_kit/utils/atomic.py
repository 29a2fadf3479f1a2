"""The atomic writers: the one place where mobilebert-kit writes a user-named path.

Every artifact is written to a temporary sibling first and moved into place with
``os.replace`` (atomic on POSIX within one file system), so an interrupted run
never leaves a file that looks finished. Whether the path may be written at all
is decided by :func:`~mobilebert_kit.utils.output_check.check_output` (new,
replace, empty, overwrite or refuse), before the work and again just before the
rename; a finished directory carries the marker ``.mbk-output.json`` of its
kind, so that a later run may replace it.

The kinds are :class:`~mobilebert_kit.utils.output_check.OutputKind` records that
the modules owning the formats declare; this module names no format.

A process killed mid-write (SIGKILL, power loss) cannot clean up: its hidden
``.NAME.PID.*.partial`` sibling stays behind. Its name never looks finished,
and the next write of the same ``NAME`` removes leftovers whose writer is gone,
so they do not pile up across crashed runs. A writer holds the kernel lock of
its temporary while it writes (``utils/kernel_lock.py`` says why a PID does not tell).

This module must stay free of TensorFlow: the profiler writes its reports here.
"""

import contextlib
import errno
import json
import os
import shutil
import signal
import stat
import tempfile
import threading
import time
from pathlib import Path

from mobilebert_kit.utils import kernel_lock
from mobilebert_kit.utils.scratch import alive
from mobilebert_kit.utils.run_state import STATE_DIR, interrupted_run
from mobilebert_kit.utils.output_check import (
    EMPTY,
    MARKER_FILE,
    MAX_LISTED,
    MARKER_VERSION,
    NEW,
    OVERWRITE,
    REPLACE,
    OutputError,
    check_output,
    check_parent,
    files_under,
    json_object,
    marker_format,
    marker_record,
    os_error_in,
    require_kind,
    temp_prefix,
    temp_stem,
    write_error,
)


def _plain_mode(path):
    """mkstemp/mkdtemp make 0600 files and 0700 directories; a finished artifact gets what ``open()`` and
    ``mkdir`` would give (0666 / 0777 minus umask), so a model written for another user or a web server to read
    is readable like any other file. Applied to every file and directory under ``path``."""
    umask = os.umask(0)
    os.umask(umask)
    if os.path.islink(path):
        return
    if os.path.isfile(path):
        os.chmod(path, 0o666 & ~umask)
    elif os.path.isdir(path):
        os.chmod(path, 0o777 & ~umask)
        for root, dirs, files in os.walk(path):
            for names, mode in ((dirs, 0o777), (files, 0o666)):
                for name in names:
                    if not os.path.islink(os.path.join(root, name)):
                        os.chmod(os.path.join(root, name), mode & ~umask)


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

def _begin(path, kind, overwrite, sources, keep_foreign=False):
    if kind is not None:  # given the path as named: a Path drops the trailing '/' of a directory's name
        check_output(path, kind, overwrite=overwrite, sources=sources, keep_foreign=keep_foreign)
    else:
        _check_internal(Path(path))
    path = Path(path)
    # The directories made for it: a failed write removes them again (they would be strays of a run that left
    # nothing).
    made = next((p for p in reversed(path.parents) if not os.path.lexists(p)), None)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_error(path, err) from err
    _sweep_leftovers(path)
    return path, made


def _check_internal(path):
    """A file the package keeps inside its own outputs (progress, manifests, caches): never a link or special
    file, and never a directory."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        check_parent(path)
        return
    except OSError as err:
        raise write_error(path, err) from err
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{path} is not a regular file; mbk replaces only files it wrote: move it away")


UNCHECKED = object()  # no ``unchanged_since`` given: what is at the path now is judged by check_output alone


def check_unchanged(path, since, who="this one", error=OutputError, installed_nothing=True):
    """Refuses ``path`` when it is no longer what the command found when it began (``since``, its
    :func:`file_signature` then): ``--overwrite`` and our own kind allow replacing what the user had, not what
    another command installed meanwhile (two ``mbk import`` into one ``--out`` at once: one was silently
    replaced). ``since`` may be :data:`UNCHECKED` (nothing to compare); ``who`` is the command as the message
    names it (``"this export"``), ``error`` the command's own error type; ``installed_nothing=False`` where the
    caller may already have written other outputs and says so itself.
    """
    if since is UNCHECKED:
        return
    now = file_signature(path)
    if since is not None and now is not None and os.path.isdir(path) and not os.path.islink(path):
        # A directory is known by its identity: its size and time change with what is made inside it (the
        # output check's write probe of an empty directory or our own output), a replacement has another inode.
        since, now = since[:2], now[:2]
    if now != since:
        nothing = " and nothing of this run was installed" if installed_nothing else ""
        raise error(f"another command wrote {path} while {who} ran; what it wrote is kept{nothing}: run again to "
                    "replace it")


def _finish(tmp, path, kind, overwrite, sources, keep_foreign=False, since=UNCHECKED):
    """Moves the finished ``tmp`` onto ``path`` after checking ``path`` again (it may have changed meanwhile).

    A directory goes *inside* an existing empty directory, and inside a run's directory whose user added files
    (``keep_foreign``), rather than being renamed over it (:func:`_install_inside`): ``rename()`` cannot replace
    a mount point (EBUSY), and a user's empty directory keeps its owner, mode and inode.
    """
    check_unchanged(path, since)
    decision = (check_output(path, kind, overwrite=overwrite, sources=sources, keep_foreign=keep_foreign)
                if kind is not None else None)
    if kind is None:
        _check_internal(path)
    _plain_mode(tmp)
    exists = decision in (REPLACE, EMPTY, OVERWRITE) or (decision is None and os.path.lexists(path))
    in_place = os.path.isdir(tmp) and not os.path.islink(path) and os.path.isdir(path)
    if in_place and (decision == EMPTY or keep_foreign):
        _install_inside(tmp, path, keep_foreign)
        return
    if exists:
        _keep_access(path, tmp)
    if exists and (os.path.isdir(path) or os.path.isdir(tmp)):
        # rename() cannot put a directory over a non-empty one (or a file over a directory): move the old one
        # aside first, and delete it only once the new one is in place.
        # Ctrl-C or SIGTERM between the two renames would leave neither the old output nor the new one at
        # ``path`` (and the clean-up below would then delete the old one): both signals wait until the swap
        # is done or undone.
        old = Path(tempfile.mkdtemp(prefix=temp_prefix(path), suffix=".old", dir=path.parent))
        lock = kernel_lock.hold(old)  # it holds the old output for a moment: no sweep may take it for a leftover
        try:
            with _signals_held():
                try:
                    os.replace(path, old / "previous")
                except OSError as err:
                    if not (in_place and err.errno in (errno.EBUSY, errno.EXDEV, errno.EPERM)):
                        raise
                    # A mount point (or a directory the kernel will not move): replace what is inside it.
                    _install_inside(tmp, path, keep_foreign)
                    return
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
            kernel_lock.release(lock)
    else:
        os.replace(tmp, path)


def _install_inside(tmp, path, keep_foreign):
    """Puts the finished directory ``tmp`` in place inside the existing directory ``path``, file by file.

    What ``path`` holds is removed first, except, with ``keep_foreign``, the files its marker does not list (the
    user's, added while a run was interrupted: a run's marker lists what the run wrote). A file of the user's
    where the output puts one of its own is refused before anything changes. Crash-safe in order: the marker
    first lists old and new files (so a half-done install is ours to replace, never the user's), a run's state
    (``run/``) goes last (so ``--resume`` can write the output again), and the final marker comes in last.
    """
    path, tmp = Path(path), Path(tmp)
    found = files_under(path)
    if found is None:
        raise OutputError(f"{path} holds more than {MAX_LISTED} files; move them away and run again "
                          "(nothing was written)")
    listed = (marker_record(path) or {}).get("files")
    state = [f for f in found if f.split(os.sep)[0] == STATE_DIR] if interrupted_run(path) else []
    if keep_foreign and isinstance(listed, list):
        ours = (set(listed) & set(found)) | set(state)
    else:
        ours = set(found)  # nothing is kept: an empty directory, or one whose files are all ours
    new = files_under(tmp) or []
    foreign = set(found) - ours
    clash = sorted(f for f in foreign if f in new or any(n.startswith(f + os.sep) for n in new)
                   or any(f.startswith(n + os.sep) for n in new))
    if clash:
        raise OutputError(f"{path / clash[0]} is not mbk's, and the finished output puts its own file there; move it "
                          "away and run again (nothing was written)")
    _store_marker(path, {**(marker_record(tmp) or {}), "files": sorted(ours | set(new))})
    try:
        _move_inside(tmp, path, ours, state)
    except OSError as err:
        err.partly_written = True  # the message must not say "nothing was written" (utils.output_check.write_error)
        raise


def _move_inside(tmp, path, ours, state):
    """The second half of :func:`_install_inside`: our old files out of ``path``, the new ones in."""
    for name in sorted(ours - set(state), key=lambda f: -f.count(os.sep)):
        remove_path(path / name)
        _prune_empty(path, Path(name).parent)
    for root, dirs, files in os.walk(tmp):
        here = path / os.path.relpath(root, tmp)
        for name in dirs:
            if os.path.islink(os.path.join(root, name)):
                _move(os.path.join(root, name), here / name)
            elif not os.path.isdir(here / name):
                os.mkdir(here / name)
        for name in files:
            if not (root == str(tmp) and name == MARKER_FILE):
                _move(os.path.join(root, name), here / name)
    _move(tmp / MARKER_FILE, path / MARKER_FILE)
    if state:
        remove_path(path / STATE_DIR)
    shutil.rmtree(tmp, ignore_errors=True)


def _move(source, target):
    """Renames ``source`` onto ``target``; across file systems (``target`` in a mount point, ``source`` in the
    temporary beside it, on the parent's device: EXDEV) it is copied beside ``target`` first, then renamed there,
    so ``target`` still changes in one step. ``mbk import --out MOUNT`` failed with EXDEV after the work, saying
    "nothing was written" while the mount held part of its files."""
    try:
        os.replace(source, target)
        return
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
    target = Path(target)
    fd, staged = tempfile.mkstemp(prefix=temp_prefix(target), suffix=".partial", dir=target.parent)
    os.close(fd)
    try:
        if os.path.islink(source):
            os.unlink(staged)
            os.symlink(os.readlink(source), staged)
        else:
            shutil.copyfile(source, staged)
            with open(staged, "rb+") as handle:
                os.fsync(handle.fileno())
        os.replace(staged, target)
    except BaseException:
        remove_path(staged)
        raise
    remove_path(source)


def _prune_empty(root, relative):
    """Removes the now empty directories ``relative`` and its parents below ``root`` (a user's file keeps its
    directory)."""
    while relative.parts:
        try:
            os.rmdir(root / relative)
        except OSError:
            return
        relative = relative.parent


@contextlib.contextmanager
def _signals_held(signals=("SIGINT", "SIGTERM", "SIGHUP")):
    """Holds ``signals`` back inside the block; one that arrives is delivered, to the handler it would have
    reached, when the block ends.

    Python handlers, not a thread signal mask: TensorFlow's threads would take a process signal that this
    thread blocks, and Python would still run the handler in the main thread at once. Outside the main thread
    (where handlers cannot be set), for a handler that was not set from Python and for an ignored signal,
    nothing is held.
    """
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
    """
    data = json_object(Path(directory) / MARKER_FILE, limit=1 << 20)
    if not data or not isinstance(data.get("files"), list):
        return
    files = files_under(directory)
    if files is None:
        data.pop("files")
    else:
        data["files"] = files
    _store_marker(directory, data)


def relist_as(directory, record):
    """Replaces our output ``directory``'s marker with ``record`` (a run listing what its ``OUT`` holds)."""
    _store_marker(directory, record)


def _write_marker(directory, kind):
    # The files written are listed, so that a later run replacing the directory can tell the user's own files
    # put there since (notes, exports) from ours, and refuse instead of deleting them.
    record = {"format": require_kind(kind).format, "version": MARKER_VERSION}
    files = files_under(directory)
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
    """Yields a file object (``mode`` ``"wb"`` or ``"w"``) whose content replaces ``path`` only if the block
    succeeds. ``kind``: the :class:`OutputKind` its owner declares for a user-named path (checked by
    :func:`check_output`), None for a file inside the package's own outputs; ``overwrite``: replace a regular
    file that is not ours; ``sources``: the command's inputs, never written.

    Example:
        >>> with atomic_file("out.json", "w", kind=PROFILE_JSON) as f:  # doctest: +SKIP
        ...     f.write("{}")
    """
    # On atomic_path: one place creates, checks, moves and cleans up the temporary sibling.
    with atomic_path(path, kind=kind, overwrite=overwrite, sources=sources) as tmp:
        with open(tmp, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())


def write_text(path, text, *, kind=None, overwrite=False, sources=()):
    """Writes ``text`` (UTF-8) to ``path`` atomically; returns ``path`` as a string."""
    with atomic_file(path, "w", kind=kind, overwrite=overwrite, sources=sources) as handle:
        handle.write(text)
    return str(path)


def file_signature(path):
    """``(device, inode, size, mtime_ns)`` of ``path`` as it is now (not following a link), None when absent:
    a file replaced by a rename has another inode, even at the same size and time.
    """
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class _InstallLock:
    """The lock of a directory, taken when :meth:`hold` is called and kept until the ``with`` block ends."""

    def __init__(self, directory, wait_s):
        self.directory, self.wait_s, self.fd = directory, wait_s, None

    def hold(self):
        deadline = time.monotonic() + self.wait_s
        while self.fd is None:
            self.fd = kernel_lock.hold(self.directory)
            if self.fd is None and not kernel_lock.held(self.directory):
                return  # no lock can be taken here (a file system without flock): installed as before locks existed
            if self.fd is None and time.monotonic() > deadline:
                raise OutputError(f"{self.directory} stayed locked by another mbk command for {self.wait_s:.0f} s; "
                                  "run again once it is done")
            if self.fd is None:
                time.sleep(0.05)


@contextlib.contextmanager
def install_lock(path, wait_s=120.0):
    """Yields an object whose ``hold()`` takes the lock of ``path``'s directory until the block ends.

    Writers that install several files that belong together (a file and its report) call ``hold()`` just before
    their first rename: their installs then follow one another instead of interleaving. A block that never calls
    it takes no lock. The lock of a directory is also what a running command holds on its own run directory, so
    waiting is bounded (``wait_s``).
    """
    lock = _InstallLock(os.path.dirname(os.path.realpath(path)), wait_s)
    try:
        yield lock
    finally:
        kernel_lock.release(lock.fd)


@contextlib.contextmanager
def atomic_path(path, *, kind=None, overwrite=False, sources=()):
    """Yields a temporary path to write; it is renamed to ``path`` if the block succeeds.

    For writers that insist on a file name (TensorFlow, onnx, safetensors). Arguments as :func:`atomic_file`.

    Example:
        >>> with atomic_path("m.onnx", kind=ONNX_OUTPUT) as tmp:  # doctest: +SKIP
        ...     onnx.save(model, str(tmp))
    """
    with _temporary(*_begin(path, kind, overwrite, sources), is_dir=False) as (path, tmp):
        yield tmp
        _finish(tmp, path, kind, overwrite, sources)


@contextlib.contextmanager
def atomic_dir(path, kind, *, overwrite=False, sources=(), keep_foreign=False, unchanged_since=UNCHECKED):
    """Yields a temporary directory that replaces directory ``path`` if the block succeeds.

    The finished directory carries the marker ``.mbk-output.json`` of ``kind``, so a later run may replace it;
    an existing ``path`` is kept until the new one is complete. An existing empty directory (a mount point) is
    filled, not renamed over. Arguments as :func:`atomic_file`; ``keep_foreign``: ``path`` is a run's own
    directory (``checkpoints/resumable_run.py``), whose files the user put there while the run was interrupted
    stay; ``unchanged_since``: as :func:`check_unchanged`'s ``since``.

    Example:
        >>> with atomic_dir("runs/model", SAVED_MODEL) as tmp:  # doctest: +SKIP
        ...     save_into(tmp)
    """
    with _temporary(*_begin(path, kind, overwrite, sources, keep_foreign), is_dir=True) as (path, tmp):
        yield tmp
        _write_marker(tmp, kind)
        _finish(tmp, path, kind, overwrite, sources, keep_foreign=keep_foreign, since=unchanged_since)


@contextlib.contextmanager
def _temporary(path, made, is_dir):
    """Yields ``(path, tmp)``, ``tmp`` a new hidden ``.partial`` sibling of ``path``, held by its kernel lock (the
    sign that its writer lives, for a sweep in another PID namespace). When the block fails ``tmp`` is removed,
    with the directories ``made`` for ``path`` (the topmost, or None) where they are empty, and an OSError, or a
    library's own error that reports a full disk or a file size limit in words (TensorFlow's
    ResourceExhaustedError / OutOfRangeError, onnx's and safetensors' errors), becomes the one-line
    :func:`write_error`."""
    try:
        if is_dir:
            tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(path), suffix=".partial", dir=path.parent))
        else:
            fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".partial", dir=path.parent)
            os.close(fd)
    except OSError as err:
        raise write_error(path, err) from err
    lock = kernel_lock.hold(tmp)
    try:
        yield path, Path(tmp)
    except BaseException as err:
        remove_path(tmp, ignore_errors=True)
        if made is not None:
            _prune_empty(made.parent, path.parent.relative_to(made.parent))
        if isinstance(err, OutputError) and str(tmp) in str(err):
            # A writer nested in the block (a model saved into the directory) names its path under the hidden
            # temporary directory, which is gone now: name the place the user will look for instead.
            raise OutputError(str(err).replace(str(tmp), str(path))) from err
        failed = err if isinstance(err, OSError) else os_error_in(err) if isinstance(err, Exception) else None
        if failed is not None:
            raise write_error(path, failed) from err
        raise
    finally:
        kernel_lock.release(lock)


def prepare_dir(path, kind, *, overwrite=False, sources=(), fresh=False):
    """Makes ``path`` ready as a directory that a command fills in place (a distillation run, a pipeline's
    outputs): checked by :func:`check_output`, created with its marker; a directory that is not ours is
    removed first only with ``overwrite``, one of ours only with ``fresh`` (start over). Returns the decision
    of :func:`check_output`.
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
        if decision != REPLACE or marker_format(path) != require_kind(kind).format:
            _store_marker(path, {"format": require_kind(kind).format, "version": MARKER_VERSION})
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
    swept: after a SIGKILL the user's files are still there. Yields :func:`check_output`'s decision.
    """
    path = Path(path)
    decision = check_output(path, kind, overwrite=overwrite, sources=sources)
    aside = None
    if decision == OVERWRITE:
        aside = path.parent / f"{temp_prefix(path)}{os.urandom(4).hex()}.overwritten"
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
def prepared_dir(path, kind, *, overwrite=False, sources=(), fresh=False):
    """:func:`prepare_dir` for a command that may still fail before writing anything: a directory it created
    (or found empty) that holds only its marker when the block fails is put back as it was found, so a
    refused recipe leaves no empty output behind; a path replaced with ``overwrite`` comes back
    (:func:`foreign_set_aside`). Arguments as :func:`prepare_dir`; yields its decision.
    """
    with foreign_set_aside(path, kind, overwrite=overwrite, sources=sources) as found:
        # One check: a path set aside is gone now, so it is prepared as new.
        decision = _make_ready(Path(path), kind, NEW if found == OVERWRITE else found, fresh)
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


def _sweep_leftovers(path):
    """Removes ``.NAME.PID.*.partial`` / ``.old`` siblings of ``path`` left by writers that no longer run."""
    prefix = f".{temp_stem(path)}."
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
        if pid == os.getpid() or alive(pid):
            continue  # ours, or a writer still at work
        # The PID is one of this namespace: a writer in another one (a container sharing the volume) has an id
        # that looks dead here. Its kernel lock says it lives; the lock taken here keeps it from starting to
        # write meanwhile.
        lock = kernel_lock.hold(path.parent / name)
        if lock is None and os.path.lexists(path.parent / name) and not os.path.islink(path.parent / name):
            continue
        try:
            remove_path(path.parent / name, ignore_errors=True)
        finally:
            kernel_lock.release(lock)


def remove_path(path, ignore_errors=False):
    """Removes what is at ``path`` (nothing there is no error): a directory tree, or a file, link or special
    file (a link is never followed); ``ignore_errors`` as ``shutil.rmtree``'s.
    """
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=ignore_errors)
        return
    with contextlib.suppress(OSError if ignore_errors else FileNotFoundError):
        os.remove(path)
