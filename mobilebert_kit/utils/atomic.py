"""Atomic writes: an interrupted run never leaves a file that looks finished.

Everything is written to a temporary sibling first and moved into place with
``os.replace`` (atomic on POSIX within one file system).

A process killed mid-write (SIGKILL, power loss) cannot clean up: its hidden
``.NAME.PID.*.partial`` sibling stays behind. Its name never looks finished,
and the next write of the same ``NAME`` removes leftovers whose writer process
is gone, so they do not pile up across crashed runs.
"""

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path

from mobilebert_kit.errors import MbkError


def _disk_error(path, err):
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return MbkError(f"disk full while writing {path}; free space and run again (nothing was written)")
    if err.errno == errno.EFBIG:
        return MbkError(
            f"file size limit reached while writing {path}; raise the limit (ulimit -f) or free space and run "
            "again (nothing was written)"
        )
    return MbkError(f"cannot write {path}: {err.strerror or err}; check the path and permissions")


def _plain_mode(tmp):
    """mkstemp makes 0600 files; a finished artifact gets what ``open()`` would give (0666 minus umask),
    so a model written for another user or a web server to read is readable like any other file."""
    umask = os.umask(0)
    os.umask(umask)
    if os.path.isfile(tmp):
        os.chmod(tmp, 0o666 & ~umask)


@contextlib.contextmanager
def atomic_file(path, mode="wb"):
    """Yields a file object whose content replaces ``path`` only if the block succeeds.

    Example:
        >>> with atomic_file("out.json", "w") as f:
        ...     f.write("{}")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep_leftovers(path)
    fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        _plain_mode(tmp)
        os.replace(tmp, path)
    except OSError as err:
        _remove(tmp)
        raise _disk_error(path, err) from err
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary path to write; it is renamed to ``path`` if the block succeeds.

    For writers that insist on a file name (TensorFlow, onnx, safetensors).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep_leftovers(path)
    fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=".partial", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        _plain_mode(tmp)
        os.replace(tmp, path)
    except OSError as err:
        _remove(tmp)
        raise _disk_error(path, err) from err
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path):
    """Yields a temporary directory that replaces directory ``path`` if the block succeeds.

    An existing ``path`` is kept until the new one is complete.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep_leftovers(path)
    tmp = Path(tempfile.mkdtemp(prefix=_prefix(path), suffix=".partial", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=_prefix(path), suffix=".old", dir=path.parent))
            os.replace(path, old / "previous")
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _disk_error(path, err) from err
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
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
        leftover = path.parent / name
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(leftover)


def _remove(path):
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
