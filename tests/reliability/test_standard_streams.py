"""Results written to a standard output that cannot take them: one line and an exit code that says so.

An outside probe (session 12) found ``mbk validate --json > /dev/full`` reported as "internal error ...
report it" with exit 1, which for ``validate`` and ``evaluate`` means "the numbers failed", and
``mbk evaluate --json >&-`` exiting 0 having printed nothing.
"""

import os
import subprocess
import sys

import pytest

from tests.helpers import REPO


def _mbk(*args, stdout):
    return subprocess.run([sys.executable, "-m", "mobilebert_kit.cli.main", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=300, cwd=REPO)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_on_stdout_is_one_line_and_not_the_exit_code_of_a_failed_check():
    # The first `mbk presets` of a code version counts the presets' parameters and says so on stderr (then caches
    # them): count them first, so that stderr holds only the line under test whichever test ran before.
    assert _mbk("presets", stdout=subprocess.DEVNULL).returncode == 0
    with open("/dev/full", "w") as full:
        proc = _mbk("presets", stdout=full)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "mbk presets: error: cannot write the results to standard output (No space left on device); free space on "
        "its device or redirect it elsewhere"], proc.stderr


def test_a_closed_stdout_is_refused_rather_than_the_results_dropped():
    proc = subprocess.run([sys.executable, "-m", "mobilebert_kit.cli.main", "presets"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=300, cwd=REPO,
                          preexec_fn=lambda: os.close(1))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("mbk: error: standard output is closed, so the results would be lost"), proc.stderr


def test_a_reader_that_left_the_pipe_stops_the_command_quietly():
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written: the first write fails with EPIPE
    try:
        proc = _mbk("presets", stdout=write)
    finally:
        os.close(write)
    # 141 (128 + SIGPIPE, as a tool the signal stopped) from print(); rich's console exits 1 on its own.
    assert proc.returncode in (1, 141), proc.stderr
    assert "Traceback" not in proc.stderr and "error" not in proc.stderr and not proc.stderr.strip(), proc.stderr
