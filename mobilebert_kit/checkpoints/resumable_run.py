"""The resumable state of one run in ``OUT/run/``, kept until its output is complete: the part every command
that resumes into its ``--out`` shares (the layout: ``utils/run_state.py``).

Inside ``OUT`` because it is the one path the user named: an interrupted run is found where the user looks,
and nothing is written beside it. How the finished output replaces ``OUT`` (``run/`` gone, an earlier output
kept until then) and why a run over a path mbk did not write keeps no state (:meth:`ResumableRun.start` never
removes one): docs/distillation.md, "Resuming a fine-tuning run".

The subclasses say which command they are and what a resume may change: ``training/finetune_run.py``
(``mbk finetune``) and ``convert/prepare/recovery_run.py`` (the recovery of ``mbk substitute``). Here, in
``checkpoints/``, because ``convert/`` may not import ``training/``.
"""

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from mobilebert_kit.checkpoints.checkpoint_files import checkpoint_writes, newest_readable_checkpoint
from mobilebert_kit.errors import MbkError, TrainingError
from mobilebert_kit.utils.atomic import atomic_file, check_output, prepare_dir, relist_as, remove_path
from mobilebert_kit.utils.output_check import marker_record
from mobilebert_kit.utils.run_state import (
    CHECKPOINT_DIR,
    PROGRESS_FILE,
    RUN_FILE,
    STATE_DIR,
    claim_run,
    interrupted_run,
    read_run_record,
    release_run,
    resume_hint,
    run_command,
    run_kind,
)
from mobilebert_kit.utils.structured import load_json


def array_digest(arrays):
    """SHA-256 of ``arrays`` (numpy arrays or values; dtype, shape and values, in order): the fingerprint of
    what a run reads.

    Example:
        >>> array_digest([np.zeros(2, np.int32)])[:8]
        '8bfc794a'
    """
    digest = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


class RunLock:
    """The kernel lock of a run's ``out_dir`` and the run's files in ``path`` (its ``checkpoints/`` and
    ``progress.json``): what :class:`ResumableRun` and ``training.run_directory.RunDirectory`` share."""

    command = None
    locks = True  # False for the workers of a cluster, which share the chief's OUT and its lock

    def __init__(self, out_dir, path):
        self.out_dir, self.path = Path(out_dir), Path(path)
        self._lock = None  # the descriptor holding OUT's kernel lock while this run lives (utils.run_state)

    def claim(self):
        """Takes ``OUT``'s run lock, if ``OUT`` exists and this run does not hold it yet; TrainingError (naming it
        and its process) when a live run holds ``OUT``."""
        if self.locks and self._lock is None and self.out_dir.is_dir() and not self.out_dir.is_symlink():
            self._lock = claim_run(self.out_dir, self.command)

    def release(self):
        """Drops ``OUT``'s run lock (at the end of the command, however it ends)."""
        release_run(self.out_dir, self._lock)
        self._lock = None

    @property
    def checkpoint_dir(self):
        """Where the ``tf.train`` checkpoints go."""
        return self.path / CHECKPOINT_DIR

    def latest_checkpoint(self, say=None):
        """The newest checkpoint that reads whole (its path prefix), or None; ``say`` reports each damaged
        newer one, passed over (``checkpoint_files.newest_readable_checkpoint``)."""
        skipped = []
        latest = newest_readable_checkpoint(self.checkpoint_dir, skipped)
        for name in skipped:
            if say is not None:
                say(f"checkpoint {name} cannot be read; resuming from the one before")
        return latest

    def progress(self):
        """``progress.json`` as a dict (empty when missing or unreadable: the checkpoint holds the state)."""
        try:
            return load_json(self.path / PROGRESS_FILE, PROGRESS_FILE, expect=dict, error=MbkError)
        except MbkError:
            return {}


class ResumableRun(RunLock):
    """Reads and writes the resumable state of one run in ``OUT/run``; subclasses name the command.

    Class attributes a subclass sets:
        command (str): the command (``"finetune"``, ``"substitute"``), recorded in ``run.json``.
        kind (str): what messages call the run (``"fine-tuning"``), recorded beside it.
        output_kind (OutputKind): the output kind of the finished ``OUT`` (``utils.output_check``), declared
            beside the subclass (``training.finetune_run.FINETUNE_OUTPUT``).
        finished_file (str): the file only a finished output holds (``"task.json"``).
        done_verb (str): how ``describe`` says the steps are done (``"trained"``).
        record_insensitive (tuple): record keys a resume may change.
        config_insensitive (tuple): ``config`` keys a resume may change.

    Args:
        out_dir (str | Path): the run's output directory (``--out``).

    Example:
        >>> from mobilebert_kit.training.finetune_run import FinetuneRun  # doctest: +SKIP
        >>> FinetuneRun("runs/sst2").interrupted()  # doctest: +SKIP
        False
    """

    kind = None
    output_kind = None
    finished_file = None
    done_verb = "trained"
    record_insensitive = ()
    config_insensitive = ()

    def __init__(self, out_dir):
        super().__init__(out_dir, Path(out_dir) / STATE_DIR)
        self._found_run = False  # whether check() found an interrupted run in OUT (start() removes only that one)

    def interrupted(self):
        """True when ``OUT`` holds the state of a run of this command that has not completed
        (``utils.run_state.interrupted_run``)."""
        return interrupted_run(self.out_dir, self.command)

    def check(self, record, resume, overwrite=False, sources=()):
        """Refuses to start over an interrupted run, or to resume a missing or different one.

        Called before the inputs are read and the model built, so that a refused ``--out`` costs nothing.
        ``record``: this run's inputs and ``config`` (a dict of the options); ``overwrite``: start over in an
        ``OUT`` holding an interrupted run or anything mbk did not write; ``sources``: the run's inputs, which
        ``OUT`` may never be or contain. Returns ``check_output``'s decision on ``OUT``. The TrainingError says
        what to do (``--resume``, ``--overwrite``, another ``--out``, the same options), or names the live run
        that holds ``OUT`` (never resumed or started over).
        """
        self.claim()
        self._found_run = interrupted_run(self.out_dir)
        if resume:
            self.require_interrupted()
            differences = self.differences(record)
            if differences:
                raise TrainingError(
                    f"{self.out_dir} was started with different {', '.join(differences)}; resume with the same "
                    f"options (see {STATE_DIR}/{RUN_FILE}) or start over with --overwrite"
                )
        elif self.interrupted() and not overwrite:
            raise TrainingError(
                f"{self.out_dir} holds an interrupted {self.kind} run ({self.describe()}); pass --resume to "
                "continue it, --overwrite to start it over, or choose a new --out"
            )
        elif interrupted_run(self.out_dir) and not overwrite:  # another command's run: not ours to discard
            raise TrainingError(f"{resume_hint(self.out_dir)}, or choose a new --out")
        # The files the user put in OUT while the run was interrupted stay: the finished output keeps them.
        return check_output(self.out_dir, self.output_kind, overwrite=overwrite, sources=sources, keep_foreign=resume)

    def check_fingerprint(self, fingerprints, names):
        """Refuses (TrainingError) a resume whose inputs changed under the same path since the run started:
        ``fingerprints`` holds this run's :func:`array_digest` of each input, ``names`` each key's name in the
        message (``{"train": "train.tsv"}``). A record written before fingerprints existed passes."""
        stored = self.read_record().get("fingerprint")
        if not isinstance(stored, dict):
            return
        changed = [names[key] for key in fingerprints if key in stored and stored[key] != fingerprints[key]]
        if changed:
            raise TrainingError(f"{' and '.join(map(str, changed))} changed since the run in {self.out_dir} started "
                                "(same path, other content); restore it, or start over with --overwrite")

    def require_interrupted(self):
        """Raises the one-line TrainingError of ``--resume`` where there is nothing of this command to resume."""
        if self.interrupted():
            return
        if interrupted_run(self.out_dir):
            other = run_command(self.out_dir)
            raise TrainingError(f"nothing to resume in {self.out_dir} for mbk {self.command}: it holds an interrupted "
                                f"{run_kind(self.out_dir) or 'other'} run; finish it with `mbk {other} --out "
                                f"{self.out_dir} --resume`")
        finished = (self.out_dir / self.finished_file).is_file()
        raise TrainingError(
            f"nothing to resume in {self.out_dir}: "
            + ("its run has finished" if finished else f"it holds no interrupted {self.kind} run")
            + f" ({self._why_no_record()}); start without --resume"
        )

    def differences(self, record):
        """Names of the options in ``record`` that differ from the stored run's (``command`` is the run's
        identity, checked by :meth:`interrupted`, not an option)."""
        stored = self.read_record()
        config, stored_config = record.get("config", {}), stored.get("config", {})
        names = [k for k in record if k not in ("config", "command") and k not in self.record_insensitive
                 and stored.get(k) != record[k]]
        return names + [k for k in config if k not in self.config_insensitive and stored_config.get(k) != config[k]]

    def describe(self):
        """``"checkpoint at step K of N"`` from ``progress.json``, or ``"no checkpoint yet"``."""
        progress = self.progress()
        if isinstance(progress.get("step"), int) and isinstance(progress.get("total"), int):
            if progress["step"] >= progress["total"]:
                return f"{self.done_verb} to step {progress['total']}, its output not written"
            return f"checkpoint at step {progress['step']} of {progress['total']}"
        return "no checkpoint yet"

    def _why_no_record(self):
        """Why ``OUT`` holds no run to resume, as ``interrupted_run`` judged it: the words of the refusal."""
        record = self.path / RUN_FILE
        if self.path.is_symlink():
            return f"{STATE_DIR} is a symbolic link, which a run never writes"
        if not os.path.lexists(record):
            return f"{STATE_DIR}/{RUN_FILE} is missing"
        if record.is_symlink() or not record.is_file():
            return f"{STATE_DIR}/{RUN_FILE} is not a regular file"
        return f"{STATE_DIR}/{RUN_FILE} is not a {self.kind} run's record"

    def read_record(self):
        """The stored ``run.json`` (``utils.run_state.read_run_record``)."""
        return read_run_record(self.path / RUN_FILE, self.kind, "start over with --overwrite")

    def bad_field(self, key, given="options"):
        """The one-line refusal of a stored ``run.json`` field ``key`` that this command would not have written;
        ``given``: what the user may give on the command line instead ("options", "inputs").

        Example:
            >>> str(RecoveryRun("runs/x").bad_field("seed"))  # doctest: +SKIP
            "runs/x/run/run.json has a bad 'seed'; resume with the options on the command line or ..."
        """
        return TrainingError(f"{self.path / RUN_FILE} has a bad {key!r}; resume with the {given} on the command line "
                             f"or start over with --overwrite (it is {STATE_DIR}/{RUN_FILE} of an interrupted run)")

    def start(self, record, sources=()):
        """Makes ``OUT`` hold a fresh run state: ``OUT`` checked and marked, an earlier ``run/`` removed, the
        record written (with this run's ``command``). An earlier finished output in ``OUT`` is left in place
        until the run completes.

        Never with ``overwrite``: a path mbk did not write is replaced only by the finished output, so a run
        that ``check`` found one in keeps no state (the module's docstring); here it would be refused.
        ``sources``: as in :meth:`check`.
        """
        prepare_dir(self.out_dir, self.output_kind, sources=sources)
        self.claim()  # OUT is new: the lock is taken once it exists
        if interrupted_run(self.out_dir) and not self._found_run:
            # Another run started in OUT since this one checked it (two commands on one new --out), and died:
            # its state is not this run's to discard.
            raise TrainingError(f"{resume_hint(self.out_dir)}; another run started there after this one began, "
                                "or choose a new --out")
        remove_path(self.path)
        self.path.mkdir()
        self._list_files()
        with atomic_file(self.path / RUN_FILE, "w") as handle:
            handle.write(json.dumps({"command": self.command, "kind": self.kind, **record}, indent=2) + "\n")

    def _list_files(self):
        """Makes OUT's marker list the files of the output it holds (none for a new one): a file the user adds
        while the run is interrupted is then known as the user's, and the finished output keeps it
        (``utils.atomic.atomic_dir``'s ``keep_foreign``)."""
        marker = marker_record(self.out_dir)
        if marker is not None and not isinstance(marker.get("files"), list):
            relist_as(self.out_dir, {**marker, "files": []})

    def save(self, manager, step, total, shown=None):
        """Saves the checkpoint of ``step`` (optimizer steps done, of ``total``) with ``manager`` (the
        ``tf.train.CheckpointManager`` of :attr:`checkpoint_dir`), then ``progress.json`` pointing at it, with
        ``shown``: JSON values the command shows at its end (scalars, losses)."""
        with checkpoint_writes(self.checkpoint_dir):
            manager.save(checkpoint_number=step)
            state = {"step": step, "total": total, "checkpoint": manager.latest_checkpoint, **(shown or {})}
            with atomic_file(self.path / PROGRESS_FILE, "w") as handle:
                handle.write(json.dumps(state) + "\n")
