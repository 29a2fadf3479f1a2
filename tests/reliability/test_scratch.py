"""Scratch directories of killed commands are swept by the next one (utils/scratch.py)."""

import os
import subprocess
import sys
import tempfile

from mobilebert_kit.utils import scratch


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _aged(path, seconds):
    then = path.stat().st_mtime - seconds
    os.utime(path, (then, then), follow_symlinks=False)
    return path


def test_sweep_removes_only_idle_directories_of_dead_commands_on_this_host(tmp_path):
    host, dead, stale = scratch._host(), _dead_pid(), scratch.STALE_AFTER_S + 60
    (tmp_path / "user-files").mkdir()
    gone = tmp_path / f"mbk-export-{host}-{dead}-abc"
    (gone / "tmp123").mkdir(parents=True)  # the converter's SavedModel, inside
    kept = {
        "live owner": tmp_path / f"mbk-export-{host}-{os.getppid()}-abc",
        "recent": tmp_path / f"mbk-export-{host}-{dead}-new",
        "other host": tmp_path / f"mbk-export-otherhost{host}-{dead}-abc",
        "not ours": tmp_path / f"export-{host}-{dead}-abc",
    }
    for path in kept.values():
        path.mkdir()
    for path in [gone] + [kept[name] for name in ("live owner", "other host", "not ours")]:
        _aged(path, stale)
    link = tmp_path / f"mbk-export-{host}-{dead}-link"
    link.symlink_to(tmp_path / "user-files")  # a planted link is never followed or removed
    _aged(link, stale)
    plain = tmp_path / f"mbk-export-{host}-{dead}-file"
    plain.write_text("user data")
    _aged(plain, stale)

    assert scratch.sweep(tmp_path) == [str(gone)]
    assert not gone.exists()
    assert all(path.is_dir() for path in kept.values())
    assert link.is_symlink() and (tmp_path / "user-files").is_dir() and plain.read_text() == "user data"


def test_a_capturing_scratch_directory_holds_tempfile_temporaries_and_is_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with scratch.scratch_directory("export", capture=True) as directory:
        assert directory.parent == tmp_path and f"-{os.getpid()}-" in directory.name
        inner = tempfile.mkdtemp()  # what the TFLite converter does for its SavedModel
        assert os.path.dirname(inner) == str(directory)
        assert scratch.base_directory() == str(tmp_path)
    assert tempfile.tempdir == str(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_no_room_for_a_scratch_directory_is_one_line_naming_tmpdir(tmp_path, monkeypatch):
    import errno

    import pytest

    from mobilebert_kit.errors import MbkError

    def full(**kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tempfile, "mkdtemp", full)
    with pytest.raises(MbkError) as err:
        with scratch.scratch_directory("cmd", capture=True):
            pass
    assert str(tmp_path) in str(err.value) and "TMPDIR" in str(err.value) and "\n" not in str(err.value)
    assert tempfile.tempdir == str(tmp_path)
    with scratch.scratch_directory("cmd", capture=True, required=False) as directory:  # a command's own
        assert directory is None and tempfile.tempdir == str(tmp_path)


def test_the_scratch_of_a_killed_command_goes_with_the_next_command_not_an_hour_later(tmp_path):
    """A SIGKILLed export's scratch directory (its converter's temporaries: 62 MB for MiniLM, 440 MB for bert-base)
    stayed until it had been idle for an hour, however often the command was run again. Its lock, free once its
    owner is dead, says so at once; only a directory just made (its owner about to take its lock) is left."""
    import signal

    child = subprocess.Popen([sys.executable, "-c", "import time\n"
                              "from mobilebert_kit.utils.scratch import scratch_directory\n"
                              "with scratch_directory('export') as path:\n"
                              "    (path / 'candidate-0.tflite').write_bytes(b'x' * 4096)\n"
                              "    print(path, flush=True)\n"
                              "    time.sleep(120)\n"],
                             env={**os.environ, "TMPDIR": str(tmp_path)}, stdout=subprocess.PIPE, text=True)
    left = child.stdout.readline().strip()
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert os.path.isdir(left)
    assert scratch.sweep(tmp_path) == []  # just made: its owner might not hold its lock yet
    _aged(tmp_path / os.path.basename(left), 60)  # the next command, a minute later
    assert scratch.sweep(tmp_path) == [left]
    assert os.listdir(tmp_path) == []
