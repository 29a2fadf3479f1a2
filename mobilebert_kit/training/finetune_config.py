"""FinetuneConfig: the options of a fine-tuning run."""

import dataclasses

from mobilebert_kit.errors import check_choice
from mobilebert_kit.training.task_data import TASKS

# Numeric options, each checked against its utils/limits.py record (a recipe or a Python caller is held to the
# CLI's bounds).
NUMERIC_OPTIONS = ("epochs", "batch_size", "learning_rate", "warmup_proportion", "weight_decay", "seq_len",
                   "doc_stride", "max_query_length", "dropout", "seed", "checkpoint_every")
# Options a resumed run may change: they do not change what is trained.
RESUME_INSENSITIVE = ("checkpoint_every",)


@dataclasses.dataclass
class FinetuneConfig:
    """Options of :class:`FineTuner` (BERT's GLUE/SQuAD recipe by default).

    Args:
        task: ``"classification"``, ``"regression"``, ``"span_qa"`` or ``"token_classification"``.
        epochs: passes over the training data.
        batch_size: global batch size.
        learning_rate: peak rate (linear warm-up over ``warmup_proportion``, then linear decay).
        warmup_proportion: share of the steps warming up.
        optimizer: ``"adamw"`` or ``"lamb"``.
        weight_decay: decoupled weight decay (not on norms and biases).
        seq_len: tokens per example.
        doc_stride: SQuAD window stride over long contexts.
        max_query_length: SQuAD question tokens kept.
        dropout: dropout before the task classifier.
        precision: ``"float32"``, ``"mixed_float16"`` or ``"mixed_bfloat16"``.
        seed: weight initialisation and shuffling seed.
        checkpoint_every: steps between checkpoints in ``OUT/run`` (``--resume`` continues from the last).
    """

    task: str = "classification"
    epochs: int = 3
    batch_size: int = 32
    learning_rate: float = 5e-5
    warmup_proportion: float = 0.1
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    seq_len: int = 128
    doc_stride: int = 128
    max_query_length: int = 64
    dropout: float = 0.1
    precision: str = "float32"
    seed: int = 0
    checkpoint_every: int = 500

    def __post_init__(self):
        from mobilebert_kit.training.distill_config import OPTIMIZERS, PRECISIONS, check_numbers

        check_choice("task", self.task, TASKS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("precision", self.precision, PRECISIONS)
        check_numbers(self, NUMERIC_OPTIONS)
