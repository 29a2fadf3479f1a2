"""Atomic writes: an interrupted run never leaves a file that looks finished.

Everything is written to a temporary sibling first and moved into place with
``os.replace`` (atomic on POSIX within one file system).
"""

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path

from mobilebert_kit.errors import MbkError


def _disk_error(path, err):
    if err.errno == errno.ENOSPC:
        return MbkError(f"disk full while writing {path}; free space and run again (nothing was written)")
    return MbkError(f"cannot write {path}: {err.strerror or err}; check the path and permissions")


@contextlib.contextmanager
def atomic_file(path, mode="wb"):
    """Yields a file object whose content replaces ``path`` only if the block succeeds.

    Example:
        >>> with atomic_file("out.json", "w") as f:
        ...     f.write("{}")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
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
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
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


def _remove(path):
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
