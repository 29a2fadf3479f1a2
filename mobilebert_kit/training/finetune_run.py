"""The resumable state of one ``mbk finetune`` run, kept in ``OUT/run/`` until the output is complete.

Layout (the loop that fills it is ``fine_tuner.FineTuner``)::

    OUT/run/run.json        model, data, vocabulary, columns and FinetuneConfig of the run
    OUT/run/progress.json   the newest checkpoint's step, the run's steps, the TensorBoard scalars so far
    OUT/run/checkpoints/    tf.train checkpoints: the task model and its optimizer

Why inside ``OUT``: it is the one path the user named, so an interrupted run
is found where the user looks, and nothing is written beside it. The finished
output replaces ``OUT`` as a whole (``utils.atomic.atomic_dir``), so ``run/``
is gone once the run completes; until then ``OUT`` has no ``task.json`` and is
never taken for a finished output. An earlier finished output in ``OUT`` is
kept, and stays usable, until the new run completes.

The state is written once the data is read and the model built, before the
first step: a run that fails while reading its data or building its model
leaves nothing behind, and one killed before its first checkpoint resumes from
step 0.

The optimizer's step is the whole data position: every epoch's order is a
permutation keyed by ``(seed, epoch)`` (``FineTuner._epoch_dataset``), so a
resumed run sees the batches an uninterrupted run would have seen.
"""

import json
import os
from pathlib import Path

from mobilebert_kit.checkpoints.checkpoint_files import checkpoint_writes, newest_readable_checkpoint
from mobilebert_kit.errors import MbkError
from mobilebert_kit.training.finetune_config import RESUME_INSENSITIVE
from mobilebert_kit.training.run_directory import read_run_record
from mobilebert_kit.utils.atomic import atomic_file, check_output, prepare_dir, remove_path
from mobilebert_kit.utils.run_state import RUN_FILE, STATE_DIR, interrupted_finetune
from mobilebert_kit.utils.structured import load_json

PROGRESS_FILE = "progress.json"
CHECKPOINT_DIR = "checkpoints"
# Record keys a resume may change: where the metrics are measured does not change the training.
RECORD_INSENSITIVE = ("eval",)


def describe_path(spec):
    """How a run record names an input: the real path of an existing file or directory, the name given (a
    preset), or the class of an object passed through the API (its repr differs in every process)."""
    if spec is None:
        return None
    if isinstance(spec, (str, os.PathLike)):
        return os.path.realpath(spec) if os.path.exists(spec) else os.fspath(spec)
    return type(spec).__name__


class FinetuneRun:
    """Reads and writes the resumable state of a fine-tuning run in ``OUT/run``.

    Args:
        out_dir (str | Path): the run's output directory (``mbk finetune --out``).

    Example:
        >>> run = FinetuneRun("runs/sst2")
        >>> run.interrupted()
        False
    """

    def __init__(self, out_dir):
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / STATE_DIR

    @property
    def checkpoint_dir(self):
        """Where the ``tf.train`` checkpoints go."""
        return self.path / CHECKPOINT_DIR

    def interrupted(self):
        """True when ``OUT`` holds the state of a run that has not completed.

        Only a real directory with a regular ``run.json`` counts (``utils.run_state``): a run resumed
        through a symbolic link would write its checkpoints wherever the link points.
        """
        return interrupted_finetune(self.out_dir)

    def check(self, record, resume, overwrite=False, sources=()):
        """Refuses to start over an interrupted run, or to resume a missing or different one.

        Called before the data is read and the model built, so that a refused ``--out`` costs nothing.

        Args:
            record (dict): this run's record (``model``, ``train``, ..., and ``config``, a dict).
            resume (bool): whether the run continues the one in ``OUT``.
            overwrite (bool): start over in an ``OUT`` holding an interrupted run or anything mbk did not write.
            sources (list): the run's inputs, which ``OUT`` may never be or contain (``utils.atomic``).

        Raises:
            MbkError: naming what to do (``--resume``, ``--overwrite``, another ``--out``, the same options).
        """
        if resume:
            self.require_interrupted()
            differences = self.differences(record)
            if differences:
                raise MbkError(
                    f"{self.out_dir} was started with different {', '.join(differences)}; resume with the same "
                    f"options (see {STATE_DIR}/{RUN_FILE}) or start over with --overwrite"
                )
        elif self.interrupted() and not overwrite:
            raise MbkError(
                f"{self.out_dir} holds an interrupted fine-tuning run ({self.describe()}); pass --resume to "
                "continue it, --overwrite to start it over, or choose a new --out"
            )
        check_output(self.out_dir, "finetune", overwrite=overwrite, sources=sources)

    def require_interrupted(self):
        """Raises the one-line MbkError of ``--resume`` where there is nothing to resume."""
        if not self.interrupted():
            finished = (self.out_dir / "task.json").is_file()
            raise MbkError(
                f"nothing to resume in {self.out_dir}: "
                + ("its run has finished" if finished else "it holds no interrupted fine-tuning run")
                + f" ({STATE_DIR}/{RUN_FILE} is missing); start without --resume"
            )

    def differences(self, record):
        """Names of the options in ``record`` that differ from the stored run's."""
        stored = self.read_record()
        config, stored_config = record.get("config", {}), stored.get("config", {})
        names = [k for k in record if k != "config" and k not in RECORD_INSENSITIVE and stored.get(k) != record[k]]
        return names + [k for k in config if k not in RESUME_INSENSITIVE and stored_config.get(k) != config[k]]

    def describe(self):
        """``"step K of N"`` from ``progress.json``, or ``"no checkpoint yet"``."""
        progress = self.progress()
        if isinstance(progress.get("step"), int) and isinstance(progress.get("total"), int):
            if progress["step"] >= progress["total"]:
                return f"trained to step {progress['total']}, its output not written"
            return f"checkpoint at step {progress['step']} of {progress['total']}"
        return "no checkpoint yet"

    def read_record(self):
        """The stored ``run.json``: a JSON object with a ``config`` object (the shared bounded reader).

        Raises:
            MbkError: unreadable, too deep, not an object, or without ``config``.
        """
        return read_run_record(self.path / RUN_FILE, "fine-tuning", "start over with --overwrite")

    def start(self, record, overwrite=False, sources=()):
        """Makes ``OUT`` hold a fresh run state: ``OUT`` checked and marked, an earlier ``run/`` removed, the
        record written. An earlier finished output in ``OUT`` is left in place until the run completes.

        Args:
            record (dict): the run record.
            overwrite (bool), sources (list): as in :meth:`check`.
        """
        prepare_dir(self.out_dir, "finetune", overwrite=overwrite, sources=sources)
        remove_path(self.path)
        self.path.mkdir()
        with atomic_file(self.path / RUN_FILE, "w") as handle:
            handle.write(json.dumps(record, indent=2) + "\n")

    def latest_checkpoint(self, skipped=None):
        """The newest checkpoint that reads whole (its path prefix), or None; ``skipped`` collects damaged
        newer ones (``checkpoint_files.newest_readable_checkpoint``)."""
        return newest_readable_checkpoint(self.checkpoint_dir, skipped)

    def progress(self):
        """``progress.json`` as a dict (empty when missing or unreadable: the checkpoint holds the state)."""
        try:
            return load_json(self.path / PROGRESS_FILE, PROGRESS_FILE, expect=dict, error=MbkError)
        except MbkError:
            return {}

    def scalars(self, step):
        """The TensorBoard scalars ``progress.json`` kept, up to ``step``: ``[(step, {tag: value})]``."""
        kept = []
        for item in self.progress().get("scalars", []):
            if (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int) and item[0] <= step
                    and isinstance(item[1], dict)):
                kept.append((item[0], {str(k): float(v) for k, v in item[1].items() if isinstance(v, (int, float))}))
        return kept

    def save(self, manager, step, total, scalars):
        """Saves the checkpoint of ``step``, then ``progress.json`` pointing at it.

        Args:
            manager (tf.train.CheckpointManager): the manager of :attr:`checkpoint_dir`.
            step (int): the optimizer steps done.
            total (int): the run's steps.
            scalars (list): the TensorBoard scalars so far, ``[(step, {tag: value})]``.
        """
        with checkpoint_writes(self.checkpoint_dir):
            manager.save(checkpoint_number=step)
            state = {"step": step, "total": total, "checkpoint": manager.latest_checkpoint,
                     "scalars": [[s, values] for s, values in scalars]}
            with atomic_file(self.path / PROGRESS_FILE, "w") as handle:
                handle.write(json.dumps(state) + "\n")
