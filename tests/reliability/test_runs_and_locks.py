"""Runs own their directories and writers survive real file systems (issue 37): kernel locks decide who is
alive, outputs go inside an existing empty directory (a mount point), long names and signals are handled.

A writer of another PID namespace (a container sharing the volume) is played by a child process that holds
the kernel lock of a temporary whose name carries a PID that does not run here.
"""

import contextlib
import errno
import os
import subprocess
import sys

import pytest

HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@contextlib.contextmanager
def _lock_held_elsewhere(path):
    """A child process holding the kernel lock of ``path``, as a live writer of another PID namespace does."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_the_leftover_sweep_keeps_a_temporary_whose_writer_holds_its_lock(tmp_path):
    from mobilebert_kit.models.api import SAVED_MODEL
    from mobilebert_kit.utils.atomic import atomic_dir

    dead = _dead_pid()  # what another namespace's live writer looks like from here
    live = tmp_path / f".saved.{dead}.abc123.partial"
    live.mkdir()
    (live / "model.safetensors").write_bytes(b"being written")
    gone = tmp_path / f".saved.{dead}.def456.partial"
    gone.mkdir()
    with _lock_held_elsewhere(live):
        with atomic_dir(tmp_path / "saved", SAVED_MODEL) as tmp:
            (tmp / "config.json").write_text("{}")
        assert (live / "model.safetensors").read_bytes() == b"being written"
    assert not gone.exists()  # a dead writer's leftover still goes


def test_the_scratch_sweep_keeps_a_directory_whose_owner_holds_its_lock(tmp_path):
    from mobilebert_kit.utils import scratch

    dead, stale = _dead_pid(), scratch.STALE_AFTER_S + 60
    live = tmp_path / f"mbk-export-{scratch._host()}-{dead}-abc"
    gone = tmp_path / f"mbk-export-{scratch._host()}-{dead}-def"
    for path in (live, gone):
        path.mkdir()
        then = path.stat().st_mtime - stale  # a long export: idle past the age guard
        os.utime(path, (then, then))
    with _lock_held_elsewhere(live):
        assert scratch.sweep(tmp_path) == [str(gone)]
    assert live.is_dir()
    # Our own scratch directories hold their lock while they live.
    from mobilebert_kit.utils import kernel_lock

    with scratch.scratch_directory("export") as mine:
        assert kernel_lock.held(mine)
    assert not scratch._locks
