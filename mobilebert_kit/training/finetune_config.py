"""FinetuneConfig: the options of a fine-tuning run."""

import dataclasses

from mobilebert_kit.artifacts.formats import BATCH_SIZE, SEQ_LEN
from mobilebert_kit.errors import check_choice
from mobilebert_kit.training.task_data import TASKS
from mobilebert_kit.utils.limits import SEED, check_number, Limit

_MANY = 10**9  # step counts: far above any run on one machine, far below what overflows int32/int64 maths
# The numeric options of the training commands (`mbk finetune`, `mbk distill`, and the recovery training of
# `mbk substitute`): the command line, a resumed run's record and a Python caller are held to the same bounds.
TRAINING_LIMITS = {
    "seq_len": SEQ_LEN,
    "batch_size": BATCH_SIZE,
    "seed": SEED,
    "learning_rate": Limit(float, 0.0, 10.0, lo_open=True),
    "pd_learning_rate": Limit(float, 0.0, 10.0, lo_open=True),
    "epochs": Limit(int, 1, 100_000),
    "warmup_proportion": Limit(float, 0.0, 1.0),
    "weight_decay": Limit(float, 0.0, 1.0),
    "doc_stride": Limit(int, 1, 8192),
    "max_query_length": Limit(int, 1, 8192),
    "dropout": Limit(float, 0.0, 0.99),
    "layer_steps": Limit(int, 1, _MANY),
    "pd_steps": Limit(int, 0, _MANY),
    "lower_layer_lr_multiplier": Limit(float, 0.0, 100.0),
    "clip_norm": Limit(float, 0.0, 1e6, lo_open=True),
    "alpha": Limit(float, 0.0, 1.0),
    "shuffle_buffer": Limit(int, 1, 10_000_000),
    "checkpoint_every": Limit(int, 1, _MANY),
    "keep_checkpoints": Limit(int, 1, 1000),
    "log_every": Limit(int, 1, _MANY),
}
OPTIONAL_NUMBERS = ("pd_learning_rate", "clip_norm")


def check_numbers(config):
    """Checks each field of a config dataclass that :data:`TRAINING_LIMITS` bounds (ints stay ints)."""
    for name in (field.name for field in dataclasses.fields(config) if field.name in TRAINING_LIMITS):
        value = getattr(config, name)
        if value is None and name in OPTIONAL_NUMBERS:
            continue
        setattr(config, name, check_number(name, value, TRAINING_LIMITS[name]))


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
        from mobilebert_kit.training.distill_config import OPTIMIZERS, PRECISIONS

        check_choice("task", self.task, TASKS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("precision", self.precision, PRECISIONS)
        check_numbers(self)
