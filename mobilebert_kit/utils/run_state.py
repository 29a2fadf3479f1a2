"""Where an interrupted ``mbk finetune`` keeps its state, for the readers that must not take it for a model.

``training/finetune_run.py`` writes ``OUT/run/run.json`` and the checkpoints beside it; ``mbk export`` and
``mbk evaluate`` read ``OUT`` (``checkpoints/``, ``training/``), and the layers below ``training/`` cannot
import it, so the layout's names live here, TensorFlow-free, and both sides read them.
"""

import os

STATE_DIR = "run"
RUN_FILE = "run.json"


def interrupted_finetune(out_dir):
    """True when ``out_dir`` holds the state of a fine-tuning run that has not completed.

    Only a real directory with a regular ``run.json`` counts (a link could point anywhere).

    Example:
        >>> interrupted_finetune("/tmp/no-such-mbk-run")
        False
    """
    state = os.path.join(os.fspath(out_dir), STATE_DIR)
    record = os.path.join(state, RUN_FILE)
    return (os.path.isdir(state) and not os.path.islink(state) and os.path.isfile(record)
            and not os.path.islink(record))


def resume_hint(out_dir):
    """The one-line explanation for a reader handed an interrupted fine-tuning run instead of a model."""
    return (f"{out_dir} holds an interrupted fine-tuning run, not a model yet; finish it with "
            f"`mbk finetune --out {out_dir} --resume`")
