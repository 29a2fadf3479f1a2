"""Helpers of the fault tests: run ``mbk`` in a child process under a file-size limit, or kill it mid-run."""

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="0")


def mbk_with_file_size_limit(limit_bytes, *args, timeout=300):
    """Runs ``mbk ARGS`` with RLIMIT_FSIZE set: any write past ``limit_bytes`` fails like a full disk.

    SIGXFSZ is ignored in the child, so the write returns EFBIG (an OSError) instead of killing it.
    """

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-m", "mobilebert_kit.cli.main", *map(str, args)], cwd=REPO, env=_env(),
                          preexec_fn=limit, capture_output=True, text=True, timeout=timeout)


def start_mbk(*args, log=None, terminal_signals=False):
    """Starts ``mbk ARGS`` in the background; stdout/stderr go to ``log`` (a path) if given.

    ``terminal_signals``: SIGHUP at its default action in the child, as in a terminal's session; a test run
    under ``nohup`` (or any runner that ignores SIGHUP) would otherwise hand its children an ignored SIGHUP,
    which mbk rightly leaves ignored.
    """
    out = open(log, "w") if log else subprocess.DEVNULL
    reset = (lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL)) if terminal_signals else None
    return subprocess.Popen([sys.executable, "-m", "mobilebert_kit.cli.main", *map(str, args)], cwd=REPO, env=_env(),
                            stdout=out, stderr=subprocess.STDOUT, preexec_fn=reset)


def kill_when(proc, condition, timeout=240, poll=0.05, signum=signal.SIGKILL):
    """Sends ``signum`` (SIGKILL) to ``proc`` as soon as ``condition()`` holds; fails if it exits or times out first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before the kill point was reached")
        if condition():
            proc.send_signal(signum)
            proc.wait(timeout=60)
            if signum == signal.SIGKILL:
                assert proc.returncode == -signal.SIGKILL
            return
        time.sleep(poll)
    proc.kill()
    proc.wait()
    raise AssertionError("the kill point was not reached in time")
