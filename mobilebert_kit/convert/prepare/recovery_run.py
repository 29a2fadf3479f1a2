"""The resumable state of one ``mbk substitute`` recovery, kept in ``OUT/run/`` until the output is complete.

Layout (``utils/run_state.py``; the shared part is ``checkpoints/resumable_run.py``, the loop that fills it
``recovery.recover``)::

    OUT/run/run.json        source, data and every option that changes the result; the inputs' fingerprint
    OUT/run/progress.json   the newest checkpoint's step, the recovery's steps, the losses so far
    OUT/run/checkpoints/    tf.train checkpoints: the student encoder and Adam (moments and step)

Until the run completes ``OUT`` has no ``substitution.json`` and is never taken for a substituted model.

The state is written once the inputs are read, the model substituted and the
recovery built, before the first step: a run that fails before leaves nothing,
and one killed before its first checkpoint resumes from step 0.

Adam's step is the whole position (``recovery.step_rows`` keys each step's rows, the schedule its learning
rate), so a resumed recovery ends with the weights an uninterrupted one ends with; :func:`fingerprint` refuses
inputs changed under the same path.
"""

import math
import os

import numpy as np

from mobilebert_kit.backend import tf
from mobilebert_kit.checkpoints.resumable_run import ResumableRun, array_digest
from mobilebert_kit.convert.plan.export_options import SUBSTITUTE_LIMITS
from mobilebert_kit.convert.prepare.scale_migration import MIGRATION_POLICIES
from mobilebert_kit.convert.prepare.substitution import SUBSTITUTIONS
from mobilebert_kit.errors import MbkError
from mobilebert_kit.utils.input_paths import check_input_path
from mobilebert_kit.utils.limits import within
from mobilebert_kit.utils.output_check import OutputKind
from mobilebert_kit.utils.run_state import RUN_FILE, describe_path

# The output kind of a finished ``mbk substitute --out`` (a saved model with substitution.json; written by
# ``cli/cmd_substitute.py``): its marker lets a re-run replace it (utils.output_check).
SUBSTITUTE_OUTPUT = OutputKind("substitute", True, "a substituted model directory")
# Steps between checkpoints when the command line does not say: a recovery step of all-MiniLM-L6-v2 at batch
# 8 takes about half a second on 2 cores (docs/export.md: 600 steps in about 5 minutes), so at most about a
# minute is lost to a crash, while a checkpoint of its 22M weights and Adam's moments (~270 MB) is written
# at most every minute or so.
DEFAULT_CHECKPOINT_EVERY = 100
KEEP_CHECKPOINTS = 2  # a damaged newest checkpoint falls back to the one before (checkpoint_files)
# run.json's config: the options of the recovery, by the name of their command-line flag (--recover-steps:
# recover_steps), so a refusal names what the user typed. Every one changes the result but checkpoint_every.
CONFIG_KEYS = ("norm", "act", "intermediate_size", "recover_steps", "seq_len", "learning_rate", "batch_size", "seed", "fit",
               "scale_migration", "checkpoint_every")
_CHOICES = {"norm": SUBSTITUTIONS["norm"].choices, "act": SUBSTITUTIONS["act"].choices,
            "scale_migration": MIGRATION_POLICIES}


def substitute_record(src, data, config):
    """The run record of a substitution (source spec, recovery data file, options keyed as :data:`CONFIG_KEYS`):
    what a resume must match."""
    return {"source": describe_path(src), "data": describe_path(data),
            "config": {key: config.get(key) for key in CONFIG_KEYS}}


def fingerprint(original, inputs):
    """SHA-256 of what the recovery reads besides its options: the inputs' rows and the source's weights.

    A file replaced under the same path (a re-tokenized corpus, a retrained source) changes it, so a resume
    over it is refused instead of continuing on other rows or towards another teacher. ``inputs``: every row
    (training and held out).
    """
    # Values in build order, not by name: Keras' generated layer names differ between processes.
    return {"inputs": array_digest(np.asarray(inputs.arrays[k]) for k in sorted(inputs.arrays)),
            "source": array_digest(np.asarray(w) for w in original.weights)}


class RecoveryRun(ResumableRun):
    """Reads and writes the resumable state of a ``mbk substitute`` recovery in ``OUT/run``.

    Args:
        out_dir (str | Path): the output directory (``mbk substitute --out``).
        record (dict | None): this run's record (:func:`substitute_record`); None only to read a stored run.
        resume (bool): continue the interrupted run in ``out_dir``.
        sources (list): the run's inputs, which ``OUT`` may never be or contain.
        checkpoint_every (int): steps between checkpoints.

    Example:
        >>> run = RecoveryRun("runs/nonorm", substitute_record("tiny-bert", None, {"norm": "no_norm"}))
        >>> run.interrupted()
        False
    """

    command = "substitute"
    kind = "substitution"
    output_kind = SUBSTITUTE_OUTPUT
    finished_file = "substitution.json"
    done_verb = "recovered"
    config_insensitive = ("checkpoint_every",)  # how often the state is saved does not change the result
    on_step_end = None  # callable(step) after every step: tests stop a run at a chosen step with it

    def __init__(self, out_dir, record=None, resume=False, sources=(),
                 checkpoint_every=DEFAULT_CHECKPOINT_EVERY):
        super().__init__(out_dir)
        self.record, self.resume, self.sources = record, resume, list(sources)
        self.checkpoint_every = int(checkpoint_every)
        self.total = None
        self._manager = None

    def stored_settings(self):
        """The stored run's source, data and options, each checked as the command line's would be.

        Keys: ``src``, ``data`` and :data:`CONFIG_KEYS`. The record is a file on disk: a value of the wrong
        type, out of range or naming a missing or special file is refused (MbkError) before anything uses it.
        """
        self.require_interrupted()
        stored = self.read_record()
        where = f"{self.path / RUN_FILE}"
        bad = self.bad_field

        settings = {}
        src = stored.get("source")
        if not isinstance(src, str) or not src or "\0" in src:
            raise bad("source")
        # A preset name is no path; anything at that path gets the check --out's SRC gets on the command line.
        settings["src"] = check_input_path(src, f"{where}'s source", "any", tree=True) if os.path.lexists(src) else src
        data = stored.get("data")
        if data is not None and (not isinstance(data, str) or not data or "\0" in data):
            raise bad("data")
        settings["data"] = None if data is None else check_input_path(data, f"{where}'s data", "file")
        config = stored["config"]
        for key, choices in _CHOICES.items():
            value = config.get(key)
            if not (value in choices if isinstance(value, str) else value is None and key != "scale_migration"):
                raise bad(key)
        if config.get("norm") is None and config.get("act") is None and config.get("intermediate_size") is None:
            raise bad("norm")
        width = config.get("intermediate_size")
        if width is not None and not within(SUBSTITUTE_LIMITS["intermediate_size"], width):
            raise bad("intermediate_size")
        for key in ("recover_steps", "seq_len", "learning_rate", "batch_size", "seed", "checkpoint_every"):
            value = config.get(key)
            if key == "seq_len" and value is None:
                continue  # the export rule's length, decided when the recovery runs
            if not within(SUBSTITUTE_LIMITS[key], value) or (key == "recover_steps" and value < 1):
                raise bad(key)  # a run with no step keeps no state: a record of 0 steps is not ours
        if not isinstance(config.get("fit"), bool):
            raise bad("fit")
        settings.update({key: config.get(key) for key in CONFIG_KEYS})  # runs recorded before a key existed lack it
        if isinstance(settings["learning_rate"], int):
            settings["learning_rate"] = float(settings["learning_rate"])
        return settings

    def begin(self, checkpoint, optimizer, variables, total, fingerprints, log=None):
        """Starts the run's state (a new run) or restores its newest readable checkpoint (``--resume``).

        Called by ``recovery.recover`` before the first step; returns ``(steps done, their losses)``. Inputs or a
        source changed since the run started, or a checkpoint not the run's, is an MbkError.
        """
        say = log or (lambda *_: None)
        self.total = int(total)
        self._manager = tf.train.CheckpointManager(checkpoint, str(self.checkpoint_dir),
                                                   max_to_keep=KEEP_CHECKPOINTS)
        if not self.resume:
            self.start({**self.record, "fingerprint": fingerprints}, sources=self.sources)
            return 0, []
        stored = self.read_record().get("fingerprint")
        stored = stored if isinstance(stored, dict) else {}
        changed = [what for key, what in (("source", "the source model's weights"), ("inputs", "the recovery data"))
                   if stored.get(key) != fingerprints[key]]
        if changed:
            raise MbkError(f"{' and '.join(changed)} changed since the run in {self.out_dir} started (same "
                           "path, other content); restore them, or start over with --overwrite")
        latest = self.latest_checkpoint(say)
        if latest is None:  # killed before its first checkpoint
            say(f"resuming the recovery at step 1 of {self.total}")
            return 0, []
        optimizer.build(variables)  # the slots exist before their values are restored
        try:
            checkpoint.restore(latest).assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError) as err:
            raise MbkError(f"checkpoint {latest} does not hold this recovery's model ({str(err).splitlines()[0][:160]}); "
                           "start over with --overwrite") from err
        done = int(optimizer.iterations.numpy())
        if done > self.total:
            raise MbkError(f"checkpoint {latest} is at step {done}, past the run's {self.total}; start over with "
                           "--overwrite")
        losses = self.progress().get("losses")
        losses = [float(v) for v in losses[:done] if isinstance(v, (int, float)) and math.isfinite(v)] \
            if isinstance(losses, list) else []
        say(f"resuming the recovery at step {done + 1} of {self.total}" if done < self.total else
            "the recovery is complete; writing the output")
        return done, losses

    def after_step(self, step, losses, interrupt):
        """Checkpoints when due (every ``checkpoint_every`` steps, the last step, a SIGINT/SIGTERM); returns the
        line saying how to continue when the run must stop now, else None."""
        hook = type(self).on_step_end  # through the class: a plain function, not a bound method
        if hook is not None:
            hook(step)
        stop = interrupt.raised
        if stop or step % self.checkpoint_every == 0 or step == self.total:
            self.save(self._manager, step, self.total, {"losses": losses})
        if not stop:
            return None
        return (f"recovery stopped at step {step} of {self.total}, checkpointed in {self.path}; continue with the "
                f"same command and --resume, or `mbk substitute --out {self.out_dir} --resume`")
