"""The resumable state of one ``mbk finetune`` run, kept in ``OUT/run/`` until the output is complete.

The layout and its rules are ``checkpoints/resumable_run.py``'s; what ``run.json`` and ``progress.json`` hold,
when the state is written and why the optimizer's step is the whole data position (each epoch's order keyed by
``(seed, epoch)``, ``FineTuner._epoch_dataset``): docs/distillation.md, "Resuming a fine-tuning run".
"""

from mobilebert_kit.checkpoints.resumable_run import ResumableRun
from mobilebert_kit.training.finetune_config import RESUME_INSENSITIVE
from mobilebert_kit.utils.output_check import OutputKind

# The output kind of a finished ``mbk finetune --out`` (model/, task.json, tensorboard/; written by
# ``fine_tuner.FineTuner``): its marker lets a re-run replace it (utils.output_check).
FINETUNE_OUTPUT = OutputKind("finetune", True, "a fine-tuning output directory")


class FinetuneRun(ResumableRun):
    """Reads and writes the resumable state of a fine-tuning run in ``OUT/run`` (``out_dir``: ``--out``).

    Example:
        >>> run = FinetuneRun("runs/sst2")
        >>> run.interrupted()
        False
    """

    command = "finetune"
    kind = "fine-tuning"
    output_kind = FINETUNE_OUTPUT
    finished_file = "task.json"
    # Where the metrics are measured and how often checkpoints are written do not change the training.
    record_insensitive = ("eval",)
    config_insensitive = RESUME_INSENSITIVE

    def scalars(self, step):
        """The TensorBoard scalars ``progress.json`` kept, up to ``step``: ``[(step, {tag: value})]``."""
        kept = []
        for item in self.progress().get("scalars", []):
            if (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int) and item[0] <= step
                    and isinstance(item[1], dict)):
                kept.append((item[0], {str(k): float(v) for k, v in item[1].items() if isinstance(v, (int, float))}))
        return kept

    def save(self, manager, step, total, scalars):
        """Saves the checkpoint of ``step`` (of ``total``) with ``manager``, then ``progress.json`` pointing at it,
        with the TensorBoard ``scalars`` so far (``[(step, {tag: value})]``)."""
        super().save(manager, step, total, {"scalars": [[s, values] for s, values in scalars]})
