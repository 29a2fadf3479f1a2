"""Who is alive, as the kernel knows it: an ``flock`` held on a file or directory for as long as its owner runs.

A process id says nothing across PID namespaces: two containers writing to one volume each see the other's
writers as ids that do not run (or that belong to someone else), and the leftover sweep deleted a live
writer's temporary directory (issue 37). A lock the kernel releases when its holder dies, however it dies
(SIGKILL, out of memory, a closed container), is the same for every process that shares the file system.

``flock`` and not ``fcntl`` record locks: an ``fcntl`` lock belongs to the process and is dropped when *any*
descriptor of the file closes, and a second lock from the same process succeeds, so two runs in one Python
process (the API, the tests) would not see each other. An ``flock`` belongs to the open file description:
a second ``open`` of the same path in the same process conflicts like another process's would. Locks are
advisory; every writer of mobilebert-kit takes them. On a network file system without ``flock`` a lock
cannot be taken (``hold`` returns None) and liveness falls back to what the caller knew before.

Standard library only: the profiler and the atomic writers use it.
"""

import contextlib
import errno
import fcntl
import os


def hold(path):
    """Takes the exclusive lock of ``path`` (a file or directory; a symbolic link is never followed) for as long
    as the returned descriptor is open (close it with :func:`release`); None when someone else holds it or the
    path cannot be opened or locked.
    """
    fd = _open(path)
    if fd is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def release(fd):
    """Closes ``fd`` from :func:`hold`, which drops its lock (None is ignored)."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def held(path):
    """True when a live process holds the lock of ``path``; False when nobody does, or it cannot be told.

    Taking the lock is the question: when it is free this takes it for an instant and drops it.
    """
    fd = _open(path)
    if fd is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        return err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)
    return False


def same_file(fd, path):
    """True when descriptor ``fd`` is (still) the file or directory at ``path``: one removed and made again is
    another, and a lock held on the old one guards nothing.
    """
    if fd is None:
        return False
    try:
        held_st, path_st = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (held_st.st_dev, held_st.st_ino) == (path_st.st_dev, path_st.st_ino)


def _open(path):
    """A read-only descriptor of ``path`` that does not follow a link (``flock`` needs no write access, so a
    directory and a read-only file can be locked too); None when it cannot be opened."""
    try:
        return os.open(os.fspath(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
