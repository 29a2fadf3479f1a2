"""Runs own their directories and writers survive real file systems (issue 37): kernel locks decide who is
alive, outputs go inside an existing empty directory (a mount point), long names and signals are handled.

A writer of another PID namespace (a container sharing the volume) is played by a child process that holds
the kernel lock of a temporary whose name carries a PID that does not run here.
"""

import contextlib
import errno
import json
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


# --- runs own their directories ---------------------------------------------------------------------------------

from tests.training.test_finetune import _quiet, _sentiment, tokenizer  # noqa: E402,F401  (a fixture)
from tests.training.test_finetune_resume import CONFIG, _cli  # noqa: E402

# 32 rows, batch 8: 4 steps per epoch, 8 in all, a checkpoint every 2.
SMALL = {**CONFIG, "checkpoint_every": 2}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs_locks")
    return _sentiment(root / "train.tsv", 32, 0), _sentiment(root / "dev.tsv", 16, 1)


def _mbk(capsys, *args):
    import types

    from mobilebert_kit.cli.main import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return types.SimpleNamespace(returncode=code, stdout=out, stderr=err)


def _tuner(tokenizer, hook=None, **config):
    from mobilebert_kit.training.fine_tuner import FineTuner
    from mobilebert_kit.training.finetune_config import FinetuneConfig

    return FineTuner("tiny-bert", tokenizer, FinetuneConfig(**{**SMALL, **config}), console=_quiet(),
                     on_step_end=hook)


def _interrupted(tokenizer, data, out, step=3):
    from tests.helpers import stop_at

    with pytest.raises(KeyboardInterrupt):
        _tuner(tokenizer, stop_at(step, "sigint")).train(data[0], out)
    return out


def test_a_second_command_on_a_live_run_is_refused_naming_it(tokenizer, data, tmp_path, capsys):
    """Two fine-tunes into one --out, the second while the first trains: it is refused in one line (it crashed,
    left a stray run/ in the other's output, or asked for --resume and then trained the live run's checkpoint)."""
    from tests.helpers import assert_one_line_error

    out, seen = tmp_path / "out", {}

    def second_command(step):
        if step != 5:
            return
        # The first run is alive (this process, inside its step hook) and holds OUT's lock.
        seen["again"] = _mbk(capsys, *_cli(tokenizer, data, out))
        seen["resume"] = _mbk(capsys, "finetune", "--out", out, "--resume")
        seen["overwrite"] = _mbk(capsys, *_cli(tokenizer, data, out, "--overwrite"))
        seen["evaluate"] = _mbk(capsys, "evaluate", "--model", out, "--data", data[1])

    _tuner(tokenizer, second_command).train(data[0], out)
    for name in ("again", "resume", "overwrite", "evaluate"):
        line = assert_one_line_error(seen[name], "still alive", f"mbk finetune, process {os.getpid()}")
        assert seen[name].returncode == 2, (name, line)
    # The first run finished untouched, and its lock went with it: a reader sees a plain output now.
    assert sorted(p.name for p in out.iterdir()) == [".mbk-output.json", "model", "task.json", "tensorboard",
                                                    "vocab.txt"]
    assert _mbk(capsys, "evaluate", "--model", out, "--data", data[1]).returncode == 0


def test_an_interrupted_run_resumes_only_unheld_on_the_same_data_and_keeps_the_user_s_files(tokenizer, data,
                                                                                              tmp_path, capsys):
    """One interrupted fine-tune, three causes: a holder in another PID namespace (its recorded PID does not run
    here, its kernel lock says it lives), training data with every label swapped under the same path (same rows
    and steps: only a fingerprint tells), and files the user added meanwhile (the finished run replaced the
    whole directory)."""
    import json

    from mobilebert_kit.utils.run_state import OWNER_FILE
    from tests.helpers import assert_one_line_error

    train = tmp_path / "train.tsv"
    train.write_text(data[0].read_text())
    out = _interrupted(tokenizer, (train, data[1]), tmp_path / "out")
    (out / "notes.md").write_text("why this run")
    (out / "exports").mkdir()
    (out / "exports" / "a.onnx").write_bytes(b"the user's")
    checkpoints = sorted(p.name for p in (out / "run" / "checkpoints").iterdir())

    dead = _dead_pid()
    (out / OWNER_FILE).write_text(json.dumps({"command": "finetune", "pid": dead, "host": "container-b"}))
    with _lock_held_elsewhere(out):
        proc = _mbk(capsys, "finetune", "--out", out, "--resume")
        assert_one_line_error(proc, "still alive", f"process {dead} on container-b", "wait for it to end")
        assert proc.returncode == 2
    # Its holder gone, the record it left is stale: no one reads it without the lock held, and the next run's
    # replaces it.

    original = train.read_text()
    swapped = {"pos": "neg", "neg": "pos"}
    lines = original.splitlines()
    train.write_text("\n".join([lines[0]] + [f"{text}\t{swapped[label]}" for text, label in
                                              (line.rsplit("\t", 1) for line in lines[1:])]) + "\n")
    proc = _mbk(capsys, "finetune", "--out", out, "--resume")
    assert_one_line_error(proc, f"{train} changed since the run", "same path, other content", "--overwrite")
    assert proc.returncode == 2
    assert sorted(p.name for p in (out / "run" / "checkpoints").iterdir()) == checkpoints

    train.write_text(original)
    proc = _mbk(capsys, "finetune", "--out", out, "--resume")
    assert proc.returncode == 0 and "resuming at step 4" in proc.stdout, proc.stderr
    assert (out / "notes.md").read_text() == "why this run"
    assert (out / "exports" / "a.onnx").read_bytes() == b"the user's"
    assert (out / "task.json").is_file() and not (out / "run").exists() and not (out / OWNER_FILE).exists()
    # The marker lists what the run wrote, so the next run knows the user's files from its own.
    listed = json.loads((out / ".mbk-output.json").read_text())["files"]
    assert "task.json" in listed and "notes.md" not in listed
    proc = _mbk(capsys, *_cli(tokenizer, data, out))
    assert proc.returncode == 2 and "notes.md" in proc.stderr


# --- writers on real file systems --------------------------------------------------------------------------------

def test_an_existing_empty_directory_is_filled_not_renamed_over(tmp_path):
    """A mount point cannot be renamed over (EBUSY): the output goes inside it, which keeps its inode and mode."""
    from mobilebert_kit.models.api import SAVED_MODEL
    from mobilebert_kit.utils.atomic import atomic_dir

    mount = tmp_path / "mnt"
    mount.mkdir()
    os.chmod(mount, 0o700)
    before = os.stat(mount)
    with atomic_dir(mount, SAVED_MODEL) as tmp:
        (tmp / "config.json").write_text("{}")
        (tmp / "assets").mkdir()
        (tmp / "assets" / "vocab.txt").write_text("[PAD]\n")
    after = os.stat(mount)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert sorted(p.name for p in mount.iterdir()) == [".mbk-output.json", "assets", "config.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["mnt"]  # no temporary left beside it


def test_our_output_on_a_mount_point_is_replaced_inside_it(tmp_path, monkeypatch):
    """rename() of a mount point fails with EBUSY: the replaced output is swapped file by file instead."""
    from mobilebert_kit.models.api import SAVED_MODEL
    from mobilebert_kit.utils import atomic
    from mobilebert_kit.utils.atomic import atomic_dir

    mount = tmp_path / "mnt"
    mount.mkdir()
    with atomic_dir(mount, SAVED_MODEL) as tmp:
        (tmp / "old.bin").write_text("first")
    real_replace = os.replace

    def busy(src, dst, *args, **kwargs):
        if os.fspath(src) == str(mount):
            raise OSError(errno.EBUSY, "Device or resource busy", str(src))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(atomic.os, "replace", busy)
    with atomic_dir(mount, SAVED_MODEL) as tmp:
        (tmp / "new.bin").write_text("second")
    assert sorted(p.name for p in mount.iterdir()) == [".mbk-output.json", "new.bin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mnt"]


@contextlib.contextmanager
def _tmpfs(path):
    """A real tmpfs mounted at ``path`` (another file system than its parent's), unmounted afterwards."""
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(path)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root and a kernel that allows it here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_an_import_into_an_empty_mount_point_is_written_there(tmp_path, capsys):
    """Issue 47 item 8: ``mbk import --out MOUNT`` staged its output beside the mount (the parent's device) and the
    moves into it failed with EXDEV after the work, saying "nothing was written" while the mount held part of its
    files; files now cross the device by a copy renamed in place."""
    from tests.test_pooling import MINILM

    with _tmpfs(tmp_path / "mnt") as mount:
        assert os.stat(mount).st_dev != os.stat(tmp_path).st_dev
        proc = _mbk(capsys, "import", MINILM, "--out", mount)
        assert proc.returncode == 0, proc.stderr
        assert {"config.json", "model.safetensors", "modules.json", ".mbk-output.json"} <= {p.name for p in mount.iterdir()}
        assert not [p for p in mount.iterdir() if p.name.endswith(".partial")]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["mnt"]  # nothing staged beside it is left
        proc = _mbk(capsys, "import", MINILM, "--out", mount)  # ours now: replaced, again across the device
        assert proc.returncode == 0, proc.stderr


def test_a_finetune_into_an_empty_mount_point_is_written_there(tmp_path, capsys, tokenizer, data):
    """The same cause for ``mbk finetune --out MOUNT`` (its run state and its output inside the mount)."""
    with _tmpfs(tmp_path / "mnt") as mount:
        proc = _mbk(capsys, *_cli(tokenizer, data, mount))
        assert proc.returncode == 0, proc.stderr
        assert (mount / "task.json").is_file() and not (mount / "run").exists()


@contextlib.contextmanager
def _immutable(path):
    """``path`` made immutable (``chattr +i``: no entry added or removed, even by root) for the block."""
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("chattr +i needs root and a file system that supports it (ext4, xfs) here")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def test_a_run_whose_output_cannot_be_put_in_place_is_refused_before_it_trains(tmp_path, capsys, tokenizer, data):
    """Our earlier fine-tune at OUT, in a directory that takes no new file (immutable; a read-only parent with OUT
    on its own mount is the same): only a new OUT's directory was probed, so the run trained to the end and then
    failed to stage its output beside OUT ("nothing was written", the training lost). Refused before training."""
    from mobilebert_kit.training.finetune_run import FINETUNE_OUTPUT
    from tests.helpers import assert_one_line_error

    parent = tmp_path / "parent"
    out = parent / "ft"
    out.mkdir(parents=True)
    (out / ".mbk-output.json").write_text(json.dumps({"format": FINETUNE_OUTPUT.format, "version": 1, "files": []}))
    with _immutable(parent):
        proc = _mbk(capsys, *_cli(tokenizer, data, out))
    assert_one_line_error(proc, f"cannot write {out}", "read-only file system")
    assert proc.returncode == 2 and "fine-tuning" not in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == [".mbk-output.json"]  # no run state: nothing trained


def test_a_failure_half_way_into_a_mount_point_says_what_is_there(tmp_path, monkeypatch):
    """A write refused half-way through filling an existing directory said "nothing was written" while the
    directory held part of the output; the message says what is there, and the next run replaces it."""
    from mobilebert_kit.models.api import SAVED_MODEL
    from mobilebert_kit.utils import atomic
    from mobilebert_kit.utils.atomic import atomic_dir
    from mobilebert_kit.utils.output_check import OutputError

    mount = tmp_path / "mnt"
    mount.mkdir()
    real_replace, moved = os.replace, []

    def full_after_one(src, dst, *args, **kwargs):
        if os.fspath(dst).startswith(str(mount)) and moved:
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        moved.append(dst)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(atomic.os, "replace", full_after_one)
    with pytest.raises(OutputError) as caught:
        with atomic_dir(mount, SAVED_MODEL) as tmp:
            (tmp / "a.bin").write_text("a")
            (tmp / "b.bin").write_text("b")
    assert "nothing was written" not in str(caught.value) and f"part of the output is in {mount}" in str(caught.value)
    monkeypatch.setattr(atomic.os, "replace", real_replace)
    with atomic_dir(mount, SAVED_MODEL) as tmp:  # marked as ours: the next run replaces it
        (tmp / "c.bin").write_text("c")
    assert sorted(p.name for p in mount.iterdir()) == [".mbk-output.json", "c.bin"]


@pytest.mark.parametrize("writer", ["file", "directory"])
def test_a_valid_long_output_name_is_written_and_its_leftovers_swept(tmp_path, writer):
    """240 bytes is a valid name; its temporary sibling (``.NAME.PID.RANDOM.partial``) was not."""
    from mobilebert_kit.models.api import SAVED_MODEL
    from mobilebert_kit.utils.atomic import atomic_dir, atomic_file
    from mobilebert_kit.utils.output_check import temp_stem

    name = "é" * 100 + "m" * 34 + ".json"  # 239 bytes
    assert len(name.encode()) == 239
    dead = _dead_pid()
    leftover = tmp_path / f".{temp_stem(tmp_path / name)}.{dead}.abcd1234.partial"
    leftover.write_text("a killed writer's")
    if writer == "file":
        with atomic_file(tmp_path / name, "w") as handle:
            handle.write("{}")
    else:
        with atomic_dir(tmp_path / name, SAVED_MODEL) as tmp:
            (tmp / "config.json").write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def _corpus(tmp_path, lines=4000):
    from tests.data.conftest import write_vocab

    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{' '.join(words[i % 9:] + words[:i % 9])}.\n" + ("\n" if i % 5 == 4 else "")
                              for i in range(lines)))
    return corpus, write_vocab(tmp_path / "vocab.txt", words + ["."])


def test_a_file_size_limit_during_pretraining_data_is_one_line_and_leaves_nothing(tmp_path):
    """`ulimit -f` as a user sets it (SIGXFSZ not ignored): the process was killed by the signal with no message,
    or, with the signal ignored, TensorFlow's OutOfRangeError was an internal error; its shards were left."""
    import resource

    from tests.reliability.faults import REPO, _env

    corpus, vocab = _corpus(tmp_path, 2000)
    work = tmp_path / "work"
    work.mkdir()

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))

    command = ["pretraining-data", "--input", corpus, "--vocab", vocab, "--out", work / "data", "--seq-len", 32,
               "--dupe-factor", 20]
    proc = subprocess.run([sys.executable, "-m", "mobilebert_kit.cli.main", *map(str, command)], cwd=REPO, env=_env(), preexec_fn=limit, capture_output=True, text=True, timeout=300)
    from tests.helpers import assert_one_line_error

    assert_one_line_error(proc, "file size limit reached while writing", str(work / "data"), "nothing was written")
    assert proc.returncode == 2 and os.listdir(work) == []


def test_a_full_disk_reported_by_tensorflow_is_one_line(tmp_path, monkeypatch):
    from mobilebert_kit.backend import tf
    from mobilebert_kit.data.pretraining_examples import PretrainingDataOptions, write_pretraining_data
    from mobilebert_kit.data.text_tokenizer import TextTokenizer
    from mobilebert_kit.errors import MbkError

    corpus, vocab = _corpus(tmp_path, 200)
    real = tf.io.TFRecordWriter

    class FullDisk:
        def __init__(self, path):
            self.inner = real(path)

        def write(self, record):
            raise tf.errors.ResourceExhaustedError(None, None, "shard-00000-of-00001.tfrecord; No space left on device")

        def close(self):
            self.inner.close()

    monkeypatch.setattr(tf.io, "TFRecordWriter", FullDisk)
    with pytest.raises(MbkError, match=r"^disk full while writing .*data; free space"):
        write_pretraining_data([corpus], TextTokenizer.from_vocab(vocab), tmp_path / "data",
                               PretrainingDataOptions(seq_len=32, num_shards=1))
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "vocab.txt"]


def test_sighup_unwinds_like_ctrl_c(tmp_path):
    """A closed terminal sends SIGHUP: its default action left the .partial output and the scratch directory."""
    import signal

    from tests.reliability.faults import kill_when, start_mbk

    corpus, vocab = _corpus(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    log = tmp_path / "log.txt"
    os.environ["TMPDIR"], saved = str(scratch), os.environ.get("TMPDIR")
    try:
        proc = start_mbk("pretraining-data", "--input", corpus, "--vocab", vocab, "--out", tmp_path / "data",
                         "--seq-len", 32, "--dupe-factor", 200, log=log, terminal_signals=True)
    finally:
        os.environ.pop("TMPDIR") if saved is None else os.environ.__setitem__("TMPDIR", saved)
    kill_when(proc, lambda: any(n.endswith(".partial") for n in os.listdir(tmp_path)), signum=signal.SIGHUP)
    assert proc.returncode == 130, log.read_text()
    assert "mbk pretraining-data: interrupted" in log.read_text() and "Traceback" not in log.read_text()
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "log.txt", "tmp", "vocab.txt"]
    assert os.listdir(scratch) == []


def test_numpy_warnings_are_not_printed_before_the_one_line_error(tmp_path):
    from tests.reliability.faults import REPO, _env

    script = (
        "import sys\n"
        "import numpy as np\n"
        "from mobilebert_kit.cli import cmd_presets, main\n"
        "from mobilebert_kit.errors import MbkError\n"
        "def run(args):\n"
        "    np.float16(np.float32(1e6)); np.log(np.zeros(2)); np.zeros(2) / np.zeros(2)\n"
        "    raise MbkError('the model answers inf; re-export it')\n"
        "cmd_presets.run = run\n"
        "sys.exit(main.main(['presets']))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["mbk presets: error: the model answers inf; re-export it"]


def test_a_tflite_file_truncated_while_it_runs_cannot_kill_the_process(tmp_path):
    """`mbk profile` died with SIGBUS (exit 135, no message) when the file it had memory-mapped was truncated
    during timing; the interpreter now runs a private copy of the bytes."""
    from tests.profiler.fixture_models import build_tflite_bert
    from tests.reliability.faults import REPO, _env

    model = build_tflite_bert(tmp_path / "m.tflite")
    script = (
        "import sys\n"
        "import numpy as np\n"
        "from mobilebert_kit.artifacts.runner import load_tflite\n"
        "interpreter = load_tflite(sys.argv[1], delegate='none')\n"
        "open(sys.argv[1], 'r+b').truncate(0)  # a re-export into the same name, mid-timing\n"
        "for detail in interpreter.get_input_details():\n"
        "    interpreter.set_tensor(detail['index'], np.zeros(detail['shape'], detail['dtype']))\n"
        "interpreter.invoke()\n"
        "print('timed')\n")
    proc = subprocess.run([sys.executable, "-c", script, str(model)], cwd=REPO, env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "timed", (proc.returncode, proc.stderr[-500:])


# Each runtime as `mbk profile --runtime` reaches it: (file builder, --runtime value or None for .onnx).
_TRUNCATION_RUNTIMES = {"interpreter": ("m.tflite", "interpreter"), "compiled-model": ("m.tflite", "compiled-model"),
                        "onnxruntime": ("m.onnx", None)}


def _truncation_model(tmp_path, runtime):
    from tests.profiler.fixture_models import build_onnx_bert, build_tflite_bert

    name, _ = _TRUNCATION_RUNTIMES[runtime]
    if name.endswith(".onnx"):
        return build_onnx_bert(str(tmp_path / name), seq_len=16)
    return build_tflite_bert(tmp_path / name)  # static [1, 16]: CompiledModel runs it (no fallback)


@pytest.mark.parametrize("runtime", list(_TRUNCATION_RUNTIMES))
def test_a_file_truncated_in_place_after_loading_is_timed_from_the_bytes_read(tmp_path, runtime):
    """Issue 47: the CompiledModel path loaded with ``from_file`` (a mapping) and bypassed the in-memory load, so
    a file truncated in place while `mbk profile --runtime compiled-model` timed it died of SIGBUS (exit 135, no
    message). Every runtime's loader now runs the bytes read once: the profile completes on what was read."""
    from tests.reliability.faults import REPO, _env

    model = _truncation_model(tmp_path, runtime)
    loader = {"interpreter": "load_tflite", "compiled-model": "load_compiled_model", "onnxruntime": "load_onnx"}[runtime]
    flag = _TRUNCATION_RUNTIMES[runtime][1]
    # The real command, with its loader wrapped so the file is cut to a third right after the runtime loaded it
    # (a re-export into the same name, mid-timing).
    script = (
        "import os, sys\n"
        "from mobilebert_kit.cli import main\n"
        "from mobilebert_kit.profiler import host\n"
        f"real = host.{loader}\n"
        "def cut_after_load(path, *args, **kwargs):\n"
        "    loaded = real(path, *args, **kwargs)\n"
        "    os.truncate(path, os.path.getsize(path) // 3)\n"
        "    return loaded\n"
        f"host.{loader} = cut_after_load\n"
        "sys.exit(main.main(sys.argv[1:]))\n")
    args = ["profile", str(model), "--target", "host", "--runs", "3", "--json", str(tmp_path / "r.json")]
    args += ["--runtime", flag] if flag else []
    proc = subprocess.run([sys.executable, "-c", script, *args], cwd=REPO, env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode in (0, 2), (proc.returncode, proc.stderr[-800:])  # never -7 (SIGBUS) nor 1
    assert "Traceback" not in proc.stderr, proc.stderr[-800:]
    if proc.returncode == 2:  # a later reading of the cut file: refused in one line
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    else:
        assert (tmp_path / "r.json").is_file()
        if flag == "compiled-model":  # the path that was bypassed really ran
            assert json.loads((tmp_path / "r.json").read_text())["results"][0]["runtime"]["api"] == "compiled_model"


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("runtime", list(_TRUNCATION_RUNTIMES))
def test_mbk_profile_of_a_file_truncated_in_place_is_one_line_exit_2(tmp_path, runtime, fraction):
    """A real file cut with os.truncate before `mbk profile` reads it: one line, exit 2, no SIGBUS, no traceback,
    no report, under every runtime."""
    from tests.reliability.faults import REPO, _env

    model = _truncation_model(tmp_path, runtime)
    os.truncate(model, int(os.path.getsize(model) * fraction))
    flag = _TRUNCATION_RUNTIMES[runtime][1]
    args = ["profile", str(model), "--target", "host", "--runs", "3", "--json", str(tmp_path / "r.json")]
    args += ["--runtime", flag] if flag else []
    proc = subprocess.run([sys.executable, "-m", "mobilebert_kit.cli.main", *args], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-800:])
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("runtime", list(_TRUNCATION_RUNTIMES))
def test_every_runtime_loader_runs_the_bytes_it_read(tmp_path, runtime):
    """The loader itself: load, cut the file to nothing, run. A mapping of the file (CompiledModel.from_file)
    dies of SIGBUS here; the bytes read once cannot change."""
    from tests.reliability.faults import REPO, _env

    model = _truncation_model(tmp_path, runtime)
    run = {
        "interpreter": "m = runner.load_tflite(p, delegate='none')\n"
                       "os.truncate(p, 0)\n"
                       "for d in m.get_input_details(): m.set_tensor(d['index'], np.zeros(d['shape'], d['dtype']))\n"
                       "m.invoke()\n",
        "compiled-model": "m = runner.load_compiled_model(p, delegate='none')\n"
                          "os.truncate(p, 0)\n"
                          "m.set_inputs({d['name']: np.zeros(d['shape'], d['dtype']) for d in m.input_details})\n"
                          "m.invoke(); m.outputs()\n",
        "onnxruntime": "m = runner.load_onnx(p)\n"
                       "os.truncate(p, 0)\n"
                       "m.run(None, {i.name: np.zeros([1, 16], np.int32) for i in m.get_inputs()})\n",
    }[runtime]
    script = ("import os, sys\nimport numpy as np\nfrom mobilebert_kit.artifacts import runner\np = sys.argv[1]\n"
              + run + "print('ran')\n")
    proc = subprocess.run([sys.executable, "-c", script, str(model)], cwd=REPO, env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ran"), (proc.returncode, proc.stderr[-500:])


def test_a_model_file_emptied_after_the_commands_checks_is_named_empty(tmp_path):
    """A file cut to nothing between a command's checks and its load (``mbk evaluate`` of a file re-exported into
    the same name) reached the runtime as ``b""``, which LiteRT takes for no argument at all: "cannot be loaded by
    the TFLite interpreter: `model_path` or `model_content` must be specified". The loader says what it found."""
    from mobilebert_kit.artifacts import runner
    from mobilebert_kit.artifacts.errors import RuntimeLoadError

    model = tmp_path / "m.tflite"
    model.write_bytes(b"")
    for load in (runner.load_tflite, runner.load_onnx):
        with pytest.raises(RuntimeLoadError, match=r"m.tflite is empty \(0 bytes"):
            load(model)


@pytest.mark.parametrize("command", ["distill", "substitute"])
def test_every_resumable_command_refuses_a_run_that_is_still_alive(tmp_path, command):
    """The lock and its refusal are the same for the run directories of mbk distill and mbk substitute."""
    import json

    from mobilebert_kit.errors import TrainingError
    from mobilebert_kit.utils.run_state import OWNER_FILE

    out = tmp_path / "run"
    out.mkdir()
    if command == "distill":
        from mobilebert_kit.training.distill_config import DistillConfig
        from mobilebert_kit.training.run_directory import RunDirectory

        record = {"teacher": "t", "student": "s", "student_overrides": {}, "data": "d"}
        (out / "run.json").write_text(json.dumps({**record, "config": DistillConfig().to_dict()}))
        run = RunDirectory(out)

        def check(resume):
            run.check(record, DistillConfig(), resume, overwrite=not resume)
    else:
        from mobilebert_kit.convert.prepare.recovery_run import SUBSTITUTE_OUTPUT, RecoveryRun, substitute_record

        record = substitute_record("tiny-bert", None, {"norm": "no_norm"})
        (out / ".mbk-output.json").write_text(json.dumps({"format": SUBSTITUTE_OUTPUT.format, "version": 1,
                                                          "files": []}))
        (out / "run").mkdir()
        (out / "run" / "run.json").write_text(json.dumps({"command": "substitute", **record}))
        run = RecoveryRun(out, record)

        def check(resume):
            run.check(record, resume, overwrite=not resume)
    dead = _dead_pid()
    (out / OWNER_FILE).write_text(json.dumps({"command": command, "pid": dead, "host": "container-b"}))
    with _lock_held_elsewhere(out):
        for resume in (True, False):
            with pytest.raises(TrainingError, match=f"still alive \\(mbk {command}, process {dead} on container-b"):
                check(resume)
    check(True)  # its holder gone, the run is an interrupted one; this process holds it now, and names itself
    assert json.loads((out / OWNER_FILE).read_text())["pid"] == os.getpid()
    run.release()
    assert not (out / OWNER_FILE).exists()


def test_fuzz_output_names_targets_and_leftovers(tmp_path):
    """Seeded: valid names up to NAME_MAX bytes (multi-byte characters), into nothing, an empty directory (a mount
    point) or an earlier output of ours, beside a dead writer's leftover and a live writer's temporary whose PID
    looks dead (another PID namespace: its kernel lock is held, here by a second open file of this process)."""
    import random

    from mobilebert_kit.models.api import SAVED_MODEL
    from mobilebert_kit.utils import kernel_lock
    from mobilebert_kit.utils.atomic import atomic_dir, atomic_file
    from mobilebert_kit.utils.output_check import temp_stem

    pool = "abcXYZ09_-. " + "é" + "中" + "😀"
    dead = _dead_pid()
    for seed in range(40):
        rng = random.Random(seed)
        root = tmp_path / str(seed)
        root.mkdir()
        size = rng.choice([1, 20, 200, 230, 240, 250, 255])
        name = ""
        while len((name + "x").encode()) <= size:
            name += rng.choice(pool)
        name = name.strip(" .") or "x"
        path = root / name
        directory = rng.random() < 0.5
        state = rng.choice(["missing", "empty", "ours"])
        if state == "empty" and directory:
            path.mkdir()
        elif state == "ours":
            if directory:
                with atomic_dir(path, SAVED_MODEL) as tmp:
                    (tmp / "old.txt").write_text("old")
            else:
                with atomic_file(path, "w") as handle:
                    handle.write("old")
        stem = temp_stem(path)
        (root / f".{stem}.{dead}.aaaaaaaa.partial").write_text("dead writer")
        live = root / f".{stem}.{dead}.bbbbbbbb.partial"
        live.mkdir()
        lock = kernel_lock.hold(live)
        try:
            if directory:
                with atomic_dir(path, SAVED_MODEL) as tmp:
                    (tmp / "new.txt").write_text("new")
                assert (path / "new.txt").read_text() == "new" and not (path / "old.txt").exists(), seed
            else:
                with atomic_file(path, "w") as handle:
                    handle.write("new")
                assert path.read_text() == "new", seed
        finally:
            kernel_lock.release(lock)
        assert sorted(p.name for p in root.iterdir()) == sorted([name, live.name]), seed


def test_an_empty_directory_a_run_has_locked_is_still_empty_to_the_output_check(tmp_path):
    from mobilebert_kit.training.finetune_run import FINETUNE_OUTPUT
    from mobilebert_kit.utils.output_check import EMPTY, check_output
    from mobilebert_kit.utils.run_state import claim_run, release_run

    fd = claim_run(tmp_path, "finetune")
    try:
        assert check_output(tmp_path, FINETUNE_OUTPUT) == EMPTY
    finally:
        release_run(tmp_path, fd)
    assert list(tmp_path.iterdir()) == []


def test_a_distillation_resumed_over_regenerated_data_is_refused(tmp_path):
    import json

    from mobilebert_kit.errors import TrainingError
    from mobilebert_kit.training.distill_config import DistillConfig
    from mobilebert_kit.training.run_directory import RunDirectory
    from mobilebert_kit.utils.run_state import data_fingerprint

    data = tmp_path / "data"
    data.mkdir()
    (data / "dataset.json").write_text('{"seed": 1}')
    record = {"teacher": "t", "student": "s", "student_overrides": {}, "data": str(data),
              "data_fingerprint": data_fingerprint(data)}
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({**record, "config": DistillConfig().to_dict()}))
    first = RunDirectory(out)
    first.check(record, DistillConfig(), resume=True)
    first.release()
    (data / "dataset.json").write_text('{"seed": 2}')  # `mbk pretraining-data` again, another seed
    changed = {**record, "data_fingerprint": data_fingerprint(data)}
    with pytest.raises(TrainingError, match=f"^{data} changed since the run in {out} started"):
        RunDirectory(out).check(changed, DistillConfig(), resume=True)


@pytest.mark.parametrize("writer", ["file", "directory"])
@pytest.mark.parametrize("text, message", [("No space left on device", "disk full while writing"),
                                           ("File too large", "file size limit reached while writing")])
def test_a_library_s_own_error_for_a_full_disk_is_the_one_line_write_error(tmp_path, writer, text, message):
    """TensorFlow, onnx and safetensors report a failed write in their own error types; it was an internal
    error. The temporary output is gone either way."""
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.models.api import SAVED_MODEL
    from mobilebert_kit.utils.atomic import atomic_dir, atomic_path

    class LibraryError(RuntimeError):
        pass

    out = tmp_path / ("m.onnx" if writer == "file" else "saved")
    with pytest.raises(MbkError, match=f"^{message} {out}; .*nothing was written"):
        with (atomic_path(out) if writer == "file" else atomic_dir(out, SAVED_MODEL)) as tmp:
            raise LibraryError(f"{tmp}/variables.data; {text}")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(LibraryError, match="unrelated"):  # any other error passes through as it was
        with atomic_path(out):
            raise LibraryError("unrelated")


@pytest.mark.slow
def test_two_fine_tune_processes_into_one_out(tokenizer, data, tmp_path, capsys):
    """Two real `mbk finetune` processes: the first stops itself (SIGSTOP) at step 3, alive and holding OUT; the
    second is refused naming that process, and the first then finishes as if alone."""
    import signal

    from tests.helpers import assert_one_line_error
    from tests.reliability.faults import REPO, _env

    import time

    out = tmp_path / "out"
    log = tmp_path / "first.log"
    args = [str(a) for a in _cli(tokenizer, data, out)[1:]]
    with open(log, "w") as sink:  # a file, not a pipe: TensorFlow's log would fill a pipe and block the child
        first = subprocess.Popen([sys.executable, "-m", "tests.training.finetune_script", "STOP", "3", *args],
                                 cwd=REPO, env=_env(), stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while not (out / "run" / "run.json").is_file() or open(f"/proc/{first.pid}/stat").read().split()[2] != "T":
            assert first.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        for command in (_cli(tokenizer, data, out), ("finetune", "--out", out, "--resume")):
            proc = _mbk(capsys, *command)
            assert_one_line_error(proc, "still alive", f"mbk finetune, process {first.pid}")
        first.send_signal(signal.SIGCONT)
        assert first.wait(timeout=240) == 0, log.read_text()[-2000:]
    finally:
        first.kill()
        first.wait()
    assert (out / "task.json").is_file() and not (out / "run").exists()
