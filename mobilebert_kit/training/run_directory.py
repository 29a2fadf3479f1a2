"""The directory of one distillation run: its record, its progress, its checkpoints, the resume check.

The layout: docs/distillation.md, "Checkpoints and resume". ``run.json`` makes ``--resume`` safe: a resume with
other options would continue a run on a different model or data, so it is refused, naming what differs.
"""

import json

from mobilebert_kit.backend import tf
from mobilebert_kit.checkpoints.checkpoint_files import checkpoint_writes
from mobilebert_kit.checkpoints.resumable_run import RunLock
from mobilebert_kit.errors import TrainingError
from mobilebert_kit.training.distill_config import DistillConfig
from mobilebert_kit.utils import kernel_lock
from mobilebert_kit.utils.atomic import check_output, prepare_dir, write_text
from mobilebert_kit.utils.output_check import OutputKind
from mobilebert_kit.utils.run_state import PROGRESS_FILE, RUN_FILE, read_run_record

# The output kind of a distillation run directory, filled in place; its marker lets a later run with
# --overwrite start over in it (utils.output_check).
DISTILL_RUN = OutputKind("distill-run", True, "a distillation run directory")
# The run record's keys compared on resume besides the config.
RECORD_KEYS = ("teacher", "student", "student_overrides", "data")


class RunDirectory(RunLock):
    """Reads and writes the bookkeeping files of one distillation run in ``path`` (``mbk distill --out``);
    the run lock and the checkpoints as :class:`~mobilebert_kit.checkpoints.resumable_run.RunLock` keeps them."""

    command = "distill"

    def __init__(self, path):
        super().__init__(path, path)

    def check(self, record, config, resume, overwrite=False, sources=()):
        """Refuses to start over an existing run, or to resume a missing or different one.

        Called before the models are built, so that a refused ``--out`` costs nothing. ``overwrite`` starts over
        in a directory holding another run or anything mbk did not write; ``sources`` are the run's inputs, which
        the directory may never be or contain (``utils.atomic``)."""
        self.claim()
        run_file = self.path / RUN_FILE
        if resume:
            if not run_file.is_file():
                raise TrainingError(f"nothing to resume in {self.path}: {RUN_FILE} is missing; start without --resume")
            stored = self.read_record()
            # A record of the data's content (same path, other content: regenerated shards); records from
            # before it existed have none to compare.
            if stored.get("data_fingerprint") not in (None, record.get("data_fingerprint")):
                raise TrainingError(
                    f"{record['data']} changed since the run in {self.path} started (same path, other content); "
                    "restore it, or start over with --overwrite")
            differences = DistillConfig.from_dict(stored["config"]).differences(config)
            differences += [k for k in RECORD_KEYS if stored.get(k) != record[k]]
            if differences:
                raise TrainingError(
                    f"{self.path} was started with different {', '.join(differences)}; "
                    "resume with the same options (see run.json) or use a new --out"
                )
        elif run_file.is_file() and not overwrite:
            raise TrainingError(
                f"{self.path} already holds a distillation run; pass --resume to continue it, --overwrite to "
                "start it over, or choose a new --out"
            )
        if not resume:
            check_output(self.path, DISTILL_RUN, overwrite=overwrite, sources=sources)

    def read_record(self):
        """The stored ``run.json``: a JSON object with a ``config`` object (the shared bounded reader)."""
        return read_run_record(self.path / RUN_FILE, "distillation", "start a new run in another directory")

    def write_record(self, record, overwrite=False, sources=()):
        """Makes the directory a fresh run directory and writes ``run.json`` (``record`` with its ``config``);
        ``overwrite`` and ``sources`` as in :meth:`check` (an earlier run's files are discarded)."""
        prepare_dir(self.path, DISTILL_RUN, overwrite=overwrite, fresh=overwrite, sources=sources)
        if self._lock is not None and not kernel_lock.same_file(self._lock, self.path):
            self.release()  # a directory started over is a new one: its lock is taken again below
        self.claim()
        write_text(self.path / RUN_FILE, json.dumps(record, indent=2) + "\n")

    def checkpoint_progress(self, path):
        """``(stage, stage_step, global_step)`` stored in checkpoint ``path`` (written by ``mbk distill``)."""
        reader = tf.train.load_checkpoint(path)
        names = {n for n in reader.get_variable_to_shape_map()}

        def value(field):
            key = f"progress/{field}/.ATTRIBUTES/VARIABLE_VALUE"
            if key not in names:
                raise TrainingError(f"checkpoint {path} has no progress record; it was not written by mbk distill")
            return int(reader.get_tensor(key))

        return value("stage"), value("step"), value("global_step")

    def history(self):
        """The stage history of ``progress.json`` (empty when it is missing or unreadable)."""
        history = self.progress().get("history", [])  # for display: the checkpoint holds the state
        return [h for h in history if isinstance(h, dict)] if isinstance(history, list) else []

    def save(self, manager, state, history):
        """Saves a checkpoint numbered ``state["global_step"]`` with the stage's ``manager``, then
        ``progress.json`` pointing at it (with ``history``, the finished stages)."""
        with checkpoint_writes(self.checkpoint_dir):
            manager.save(checkpoint_number=state["global_step"])
            self.write_progress({**state, "checkpoint": manager.latest_checkpoint, "history": history})

    def write_progress(self, state):
        """Replaces ``progress.json`` with ``state`` (atomically)."""
        write_text(self.path / PROGRESS_FILE, json.dumps(state, indent=2) + "\n")
