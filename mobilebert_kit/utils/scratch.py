"""Scratch directories that a killed command does not leave behind for good (docs/reliability.md rows 186, 321).

Python removes a command's temporary directory when the command ends, even on
Ctrl-C, but not after SIGKILL (the out-of-memory killer, ``kill -9``). So a
scratch directory is named after its owner, ``mbk-KIND-HOST-PID-*``, and the
next command removes those of dead owners: same host and user, a process id
that no longer runs, and no owner holding its kernel lock (``utils/kernel_lock.py``:
a process of another PID namespace has an id that looks dead here; where no
lock can be taken, untouched for :data:`STALE_AFTER_S`). Every ``mbk`` command
runs inside one (``cli/main.py``) that captures Python's ``tempfile``
(``capture=True``): the converters' temporary SavedModels and AutoGraph's
generated modules (which TensorFlow removes only at a normal exit) land inside
it and go with it. Only the command line captures: the process is then ours,
while a program calling the library may have threads whose temporary files
must outlive an export.

Example:
    >>> with scratch_directory("export") as tmp:  # doctest: +SKIP
    ...     (tmp / "candidate-0.tflite").write_bytes(data)
"""

import contextlib
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path

from mobilebert_kit.errors import MbkError
from mobilebert_kit.utils import kernel_lock

STALE_AFTER_S = 3600.0
# A directory younger than this is never swept: its owner takes its lock just after making it (new_scratch), and
# an owner in another PID namespace (whose id looks dead here) has no other sign of life until then.
GRACE_S = 10.0
_NAME = re.compile(r"^mbk-[a-z]+-(?P<host>[A-Za-z0-9_.-]{1,64})-(?P<pid>[0-9]{1,10})-")


def _host():
    """The host name as it appears in a scratch name: characters a file name and the pattern both allow."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname())[:64] or "host"


def alive(pid):
    """Whether process ``pid`` runs (a writer's or a scratch directory's owner), as the kernel answers ``kill(pid, 0)``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # a process of another user, or a number the kernel does not take: not ours to judge
    return True


def base_directory():
    """The system's temporary directory (``TMPDIR``), even inside a capturing :func:`scratch_directory`."""
    return _outer[-1] if _outer else tempfile.gettempdir()


def sweep(directory=None, now=None):
    """Removes the scratch directories of mbk commands that died on this host from ``directory`` (default
    :func:`base_directory`); returns their paths. ``now``: the current time, for tests."""
    directory = Path(directory or base_directory())
    now = time.time() if now is None else now
    host, uid, removed = _host(), os.getuid(), []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        match = _NAME.match(entry.name)
        if not match or match["host"] != host or int(match["pid"]) == os.getpid():
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        # A real directory of ours (never a link someone planted), past its creation, whose owner is gone.
        idle = now - info.st_mtime
        if not entry.is_dir(follow_symlinks=False) or info.st_uid != uid or idle < GRACE_S:
            continue
        if alive(int(match["pid"])):
            continue
        # Its lock, taken here, says no owner lives (in any PID namespace): the directory goes at once, not an hour
        # later. Where no lock can be taken (held, or a file system without flock) only an hour's idleness says so.
        lock = kernel_lock.hold(entry.path)
        if lock is None and (kernel_lock.held(entry.path) or idle < STALE_AFTER_S):
            continue
        try:
            shutil.rmtree(entry.path, ignore_errors=True)
        finally:
            kernel_lock.release(lock)
        removed.append(entry.path)
    return removed


def new_scratch(kind):
    """A fresh scratch directory ``mbk-KIND-HOST-PID-*`` (the caller removes it); dead commands' ones are swept first.
    ``kind``: what it is for, in lowercase letters (``"export"``, ``"worker"``)."""
    base = "TMPDIR"
    try:
        base = base_directory()  # tempfile raises when no candidate directory (TMPDIR, /tmp, ...) is writable
        sweep(base)
        path = Path(tempfile.mkdtemp(prefix=f"mbk-{kind}-{_host()}-{os.getpid()}-", dir=base))
    except OSError as err:
        raise MbkError(f"cannot make a scratch directory in {base} ({err.strerror or err}); set TMPDIR to a writable "
                       "directory with free space") from None
    # Held until the process ends (the kernel drops it then, however it ends): a descriptor per scratch directory,
    # a handful per command.
    _locks[str(path)] = kernel_lock.hold(path)
    return path


def _drop_lock(path):
    """Releases the kernel lock of scratch directory ``path`` once it is removed."""
    kernel_lock.release(_locks.pop(str(path), None))


_locks = {}  # scratch directory -> the descriptor holding its kernel lock
_outer = []  # the temporary directories that capturing scratch directories replaced, innermost last


@contextlib.contextmanager
def scratch_directory(kind, capture=False, required=True):
    """:func:`new_scratch`, removed on exit. With ``capture``, ``tempfile`` (and so the TFLite converter and
    tf2onnx) makes its temporary files inside it while it is open. Without a directory (a full or unwritable
    ``TMPDIR``) it raises when ``required``, else yields None and leaves ``tempfile`` alone (a command that
    needs no temporary space still runs)."""
    try:
        path = new_scratch(kind)
    except MbkError:
        if required:
            raise
        yield None
        return
    saved = tempfile.tempdir
    try:
        if capture:
            _outer.append(base_directory())
            tempfile.tempdir = str(path)
        yield path
    finally:
        if capture:
            tempfile.tempdir = saved
            _outer.pop()
        shutil.rmtree(path, ignore_errors=True)
        _drop_lock(path)
