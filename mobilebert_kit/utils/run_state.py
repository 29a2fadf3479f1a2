"""Where an interrupted run keeps its state inside its output, for the writers and for the readers that must
not take it for a model.

Layout, one decision for every command that resumes into its ``--out``
(``mbk finetune``, the recovery of ``mbk substitute``)::

    OUT/run/run.json        what the run was started with: the record a resume must match
    OUT/run/progress.json   the newest checkpoint's step, the run's steps, what the run shows at its end
    OUT/run/checkpoints/    tf.train checkpoints (``checkpoints/checkpoint_files.py``)

The writers (``checkpoints/resumable_run.py`` and its subclasses in ``training/`` and ``convert/``) and the
readers (``mbk export`` and ``mbk evaluate`` through ``checkpoints/`` and ``training/``) sit in different
layers, so the layout's names live here, TensorFlow-free, and all of them read them. ``run.json`` names the
command that wrote it (``"command"``); a record without one was written by ``mbk finetune`` before
``mbk substitute`` resumed.
"""

import os
from pathlib import Path

from mobilebert_kit.errors import MbkError, TrainingError
from mobilebert_kit.utils.structured import load_json

STATE_DIR = "run"
RUN_FILE = "run.json"
PROGRESS_FILE = "progress.json"
CHECKPOINT_DIR = "checkpoints"
# The commands that keep a run in OUT/run, and what a message calls such a run.
RUN_KINDS = {"finetune": "fine-tuning", "substitute": "substitution"}
# A run.json is a few kB; a larger one is not ours (and is not read whole to find out).
RECORD_BYTES = 1 << 20


def interrupted_run(out_dir, command=None):
    """True when ``out_dir`` holds the state of a run that has not completed (of ``command``, when given).

    Only a real directory with a regular ``run.json`` counts (a link could point anywhere). A record that
    cannot be read counts as a run of any command: whoever resumes it is told what is wrong with it.

    Args:
        out_dir (str | Path): the run's output directory.
        command (str | None): ``"finetune"`` or ``"substitute"``; None: any.

    Example:
        >>> interrupted_run("/tmp/no-such-mbk-run")
        False
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

    Example:
        >>> run_command("/tmp/no-such-mbk-run") is None
        True
    """
    try:
        record = load_json(Path(out_dir) / STATE_DIR / RUN_FILE, RUN_FILE, max_bytes=RECORD_BYTES, expect=dict,
                           error=MbkError)
    except MbkError:
        return None
    command = record.get("command", "finetune")  # records of mbk finetune from before the key existed
    return command if command in RUN_KINDS else None


def describe_path(spec):
    """How a run record names an input: the real path of an existing file or directory, the name given (a
    preset), or the class of an object passed through the API (its repr differs in every process).

    Example:
        >>> describe_path("tiny-bert"), describe_path(None)
        ('tiny-bert', None)
    """
    if spec is None:
        return None
    if isinstance(spec, (str, os.PathLike)):
        return os.path.realpath(spec) if os.path.exists(spec) else os.fspath(spec)
    return type(spec).__name__


def read_run_record(run_file, kind, fix):
    """A run's ``run.json``: a JSON object with a ``config`` object (the shared bounded reader).

    Args:
        run_file (Path): the file.
        kind (str): ``"distillation"``, ``"fine-tuning"`` or ``"substitution"``, for the message.
        fix (str): what the message tells the user to do.

    Raises:
        TrainingError: unreadable, too deep, not an object, or without ``config``.

    Example:
        >>> read_run_record(Path("/tmp/no-such-mbk-run/run.json"), "fine-tuning", "start over")  # doctest: +SKIP
        Traceback (most recent call last):
        mobilebert_kit.errors.TrainingError: the fine-tuning run record /tmp/no-such-mbk-run/run.json does not exist; ...
    """
    stored = load_json(Path(run_file), f"the {kind} run record", expect=dict, error=TrainingError, fix=fix)
    if not isinstance(stored.get("config"), dict):
        raise TrainingError(f"{run_file} is not a {kind} run record (no 'config'); {fix}")
    return stored


def resume_hint(out_dir):
    """The one-line explanation for a reader handed an interrupted run instead of a model.

    Example:
        >>> resume_hint("runs/sst2")  # doctest: +SKIP
        'runs/sst2 holds an interrupted fine-tuning run, not a model yet; finish it with `mbk finetune --out runs/sst2 --resume`'
    """
    command = run_command(out_dir)
    if command is None:
        return (f"{out_dir} holds the state of an interrupted run ({STATE_DIR}/{RUN_FILE}), not a model yet; "
                "finish it with the command that started it and --resume")
    return (f"{out_dir} holds an interrupted {RUN_KINDS[command]} run, not a model yet; finish it with "
            f"`mbk {command} --out {out_dir} --resume`")
