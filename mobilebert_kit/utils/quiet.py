"""Silencing C++ runtimes that print straight to file descriptor 2 (TensorFlow, LiteRT delegates)."""

import contextlib
import os


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
