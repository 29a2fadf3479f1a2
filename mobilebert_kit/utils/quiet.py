"""Silencing C++ runtimes that print straight to file descriptor 2 (TensorFlow, LiteRT delegates)."""

import atexit
import contextlib
import os
import sys


@contextlib.contextmanager
def quiet_fd2():
    """Points fd 2 at /dev/null for the block, unless ``MBK_VERBOSE_TF=1``.

    Why fd 2 and not ``sys.stderr``: the banners come from C++ (``INFO: Created
    TensorFlow Lite XNNPACK delegate``), which Python's stream objects never see.
    """
    if os.environ.get("MBK_VERBOSE_TF") == "1":
        yield
        return
    try:
        saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        yield
        return
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


_TEARDOWN = {}


def quiet_teardown(release=None):
    """Points fd 2 at /dev/null once the process exits, after ``release()`` has run in quiet, unless ``MBK_VERBOSE_TF=1``.

    Why: LiteRT's CompiledModel keeps a global environment whose C++ destructor logs its accelerators'
    teardown (``INFO: ... DestroyAccelerator``) after Python has finished, where no block can quiet it;
    a command's last lines would be those. Registered once per process; the handler runs when the
    interpreter exits, after everything the command printed (its Python streams are flushed first).
    ``release`` drops what Python holds of the runtime.
    """
    if _TEARDOWN or os.environ.get("MBK_VERBOSE_TF") == "1":
        return
    _TEARDOWN["release"] = release

    def _quiet_exit():
        with quiet_fd2():
            if _TEARDOWN.get("release"):
                _TEARDOWN["release"]()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)

    atexit.register(_quiet_exit)
