"""Where an interrupted run keeps its state inside its output, for the writers and for the readers that must
not take it for a model.

Layout, one decision for every command that resumes into its ``--out``
(``mbk finetune``, the recovery of ``mbk substitute``)::

    OUT/run/run.json        what the run was started with: the record a resume must match
    OUT/run/progress.json   the newest checkpoint's step, the run's steps, what the run shows at its end
    OUT/run/checkpoints/    tf.train checkpoints (``checkpoints/checkpoint_files.py``)

The writers (``checkpoints/resumable_run.py`` and its subclasses in ``training/`` and ``convert/``) and the
readers (``mbk export`` and ``mbk evaluate`` through ``checkpoints/`` and ``training/``) sit in different
layers, so the layout's names live here, TensorFlow-free, and all of them read them.

A live run holds the kernel lock of its directory (``OUT`` for ``mbk finetune`` and ``mbk substitute``, the
run directory of ``mbk distill``) from its check until its end (:func:`claim_run`), and names itself in
``OWNER_FILE`` there: a second command on that directory is refused in one line naming the run and its
process, whether it would resume it, start it over or read it. The kernel drops the lock when the process
dies however it dies, so a killed run is an interrupted one at once; a PID would not tell (another PID
namespace, a reused number).
"""

import hashlib
import json
import os
import re
import socket
import time
from pathlib import Path

from mobilebert_kit.errors import MbkError, TrainingError
from mobilebert_kit.utils import kernel_lock
from mobilebert_kit.utils.structured import load_json

STATE_DIR = "run"
RUN_FILE = "run.json"
PROGRESS_FILE = "progress.json"
CHECKPOINT_DIR = "checkpoints"
# A run record names its command ("command", one word) and what messages call the run ("kind"): the commands
# own those words (checkpoints/resumable_run.py subclasses), this floor only reads them back.
_WORD = re.compile(r"[a-z][a-z-]{0,31}")
_KIND = re.compile(r"[a-z][a-z -]{0,31}")
# A run.json is a few kB; a larger one is not ours (and is not read whole to find out).
RECORD_BYTES = 1 << 20
# Who holds a live run's lock: its command, process and host, for the refusal of a second command. Hidden, and
# never listed as an output's file (utils/output_check.files_under).
OWNER_FILE = ".mbk-owner.json"


def interrupted_run(out_dir, command=None):
    """True when ``out_dir`` holds the state of a run that has not completed (of ``command``, when given).

    Only a real directory with a regular ``run.json`` counts (a link could point anywhere). A record that
    cannot be read counts as a run of any command: whoever resumes it is told what is wrong with it.
    """
    state = os.path.join(os.fspath(out_dir), STATE_DIR)
    record = os.path.join(state, RUN_FILE)
    if not (os.path.isdir(state) and not os.path.islink(state) and os.path.isfile(record)
            and not os.path.islink(record)):
        return False
    return command is None or run_command(out_dir) in (command, None)


def run_command(out_dir):
    """The command whose interrupted run ``out_dir`` holds: ``"finetune"``, ``"substitute"``, or None when
    its ``run.json`` is missing, unreadable or names no command we know.
    """
    return _record_word(out_dir, "command", _WORD, "finetune")


def run_kind(out_dir):
    """What messages call the interrupted run in ``out_dir`` (``"fine-tuning"``), as its record says; None when
    the record says nothing readable.
    """
    return _record_word(out_dir, "kind", _KIND, "fine-tuning")


def _record_word(out_dir, key, pattern, old):
    """``key`` of ``out_dir``'s ``run.json`` when it is a ``pattern`` word, else None; ``old``: its value in the
    oldest records, of mbk finetune before a record named its command."""
    try:
        record = load_json(Path(out_dir) / STATE_DIR / RUN_FILE, RUN_FILE, max_bytes=RECORD_BYTES, expect=dict,
                           error=MbkError)
    except MbkError:
        return None
    value = record.get(key, old if "command" not in record else None)
    return value if isinstance(value, str) and pattern.fullmatch(value) else None


def data_fingerprint(path):
    """SHA-256 of a data directory's listing and of its small files (each file's name and size, and the bytes of
    those up to 1 MB: ``dataset.json`` with its inputs' hashes and options); of a file, its bytes. None when
    ``path`` is not a file or directory. Shards of gigabytes are known by their size beside that record, so a
    resume does not read them all once more.
    """
    path = Path(path)
    digest = hashlib.sha256()
    try:
        if path.is_file():
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            return digest.hexdigest()
        if not path.is_dir():
            return None
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if not entry.is_file(follow_symlinks=False):
                continue
            size = entry.stat(follow_symlinks=False).st_size
            digest.update(f"{entry.name}\0{size}\0".encode())
            if size <= 1 << 20:
                digest.update(Path(entry.path).read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def describe_path(spec):
    """How a run record names an input: the real path of an existing file or directory, the name given (a
    preset), or the class of an object passed through the API (its repr differs in every process).
    """
    if spec is None:
        return None
    if isinstance(spec, (str, os.PathLike)):
        return os.path.realpath(spec) if os.path.exists(spec) else os.fspath(spec)
    return type(spec).__name__


def read_run_record(run_file, kind, fix):
    """A run's ``run.json``: a JSON object with a ``config`` object (the shared bounded reader); a one-line
    TrainingError naming the run's ``kind`` (``"fine-tuning"``) and ending with ``fix`` otherwise.
    """
    stored = load_json(Path(run_file), f"the {kind} run record", expect=dict, error=TrainingError, fix=fix)
    if not isinstance(stored.get("config"), dict):
        raise TrainingError(f"{run_file} is not a {kind} run record (no 'config'); {fix}")
    return stored


def resume_hint(out_dir):
    """The one-line explanation for a reader handed an interrupted run instead of a model."""
    line = live_line(out_dir)
    if line is not None:
        return line
    command = run_command(out_dir)
    if command is None:
        return (f"{out_dir} holds the state of an interrupted run ({STATE_DIR}/{RUN_FILE}), not a model yet; "
                "finish it with the command that started it and --resume")
    kind = run_kind(out_dir)
    return (f"{out_dir} holds an interrupted {kind + ' run' if kind else f'run of mbk {command}'}, not a model yet; "
            f"finish it with `mbk {command} --out {out_dir} --resume`")


def live_run(directory):
    """How the refusal names the live run holding ``directory``'s lock (``"mbk finetune, process 42 on host
    h, since 2026-11-27 22:40"``), or None when no live process holds it.
    """
    if not kernel_lock.held(directory):
        return None
    try:
        owner = load_json(Path(directory) / OWNER_FILE, OWNER_FILE, max_bytes=1 << 16, expect=dict, error=MbkError)
    except MbkError:
        owner = {}  # between the lock and its record, or a record that cannot be read: the lock alone decides
    parts = [f"mbk {owner['command']}" if isinstance(owner.get("command"), str) else "an mbk command"]
    if isinstance(owner.get("pid"), int):
        parts.append(f"process {owner['pid']}" + (f" on {owner['host']}" if isinstance(owner.get("host"), str)
                                                  else ""))
    if isinstance(owner.get("started"), str):
        parts.append(f"since {owner['started']}")
    return ", ".join(parts)


def live_line(directory):
    """The one-line refusal of a command on ``directory`` while a live run holds it (None when none does)."""
    owner = live_run(directory)
    if owner is None:
        return None
    return (f"{directory} is in use by a run that is still alive ({owner}); wait for it to end, or stop it "
            "(Ctrl-C) and run again")


def claim_run(directory, command):
    """Takes the kernel lock of the (existing) run directory ``directory`` for this process and names the owner
    in it, with ``command`` for the refusal a second command gets. Returns the descriptor holding the lock, for
    :func:`release_run`, or None where the file system takes no lock (no ``flock``): the run goes on unlocked.
    Raises TrainingError when a live run holds ``directory`` (:func:`live_line`).
    """
    fd = kernel_lock.hold(directory)
    if fd is None:
        line = live_line(directory)
        if line is not None:
            raise TrainingError(line)
        return None
    owner = {"command": command, "pid": os.getpid(), "host": socket.gethostname(),
             "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    tmp = Path(directory) / f"{OWNER_FILE}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(owner) + "\n")
        os.replace(tmp, Path(directory) / OWNER_FILE)
    except OSError:  # the lock decides; the record only names the owner
        tmp.unlink(missing_ok=True)
    return fd


def release_run(directory, fd):
    """Removes this process's owner record from ``directory`` and drops its lock (:func:`claim_run`'s ``fd``)."""
    if fd is None:
        return
    try:
        owner = load_json(Path(directory) / OWNER_FILE, OWNER_FILE, max_bytes=1 << 16, expect=dict, error=MbkError)
        if owner.get("pid") == os.getpid():
            os.remove(Path(directory) / OWNER_FILE)
    except (MbkError, OSError):
        pass
    kernel_lock.release(fd)
