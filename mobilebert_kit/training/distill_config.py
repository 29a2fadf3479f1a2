"""DistillConfig: every option of a distillation run, as one serializable record."""

import dataclasses

from mobilebert_kit.errors import ConfigError, check_choice
from mobilebert_kit.losses import DEFAULT_ALPHA, DEFAULT_WEIGHTS
from mobilebert_kit.training.warmup_decay import DECAYS
from mobilebert_kit.training.finetune_config import check_numbers

SCHEDULES = ("progressive", "end_to_end", "none")
OPTIMIZERS = ("lamb", "adamw")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
JIT_MODES = ("auto", "on", "off")
TEACHER_CACHE_MODES = ("auto", "on", "off")
# XLA compiles a stage's step once (about 10 s for MiniLM-sized models on 2 cores) and then
# runs it ~1.25x faster (benchmarks/distillation_throughput.py): worth it from ~60 steps on.
JIT_MIN_STEPS = 100
# Precisions that ``auto`` leaves eager on a CPU: XLA's CPU backend computes bfloat16 matrix products at float32
# speed, oneDNN's eager kernels use the bf16 instructions (docs/distillation.md; RESULTS.md, "bfloat16 on a CPU").
EAGER_ON_CPU = ("mixed_bfloat16",)


# Options that may differ between a run and its --resume (they do not change the result).
RESUME_INSENSITIVE = ("log_every", "checkpoint_every", "keep_checkpoints", "jit_compile", "teacher_cache")


@dataclasses.dataclass
class DistillConfig:
    """Options of :class:`~mobilebert_kit.training.distiller.Distiller`.

    Defaults follow the MobileBERT paper (Sun et al., 2020) and its official
    trainers where the paper is silent (parity-notes.md).

    Args:
        schedule: ``"progressive"`` (one stage per layer, bottom to top, Sec. 3.3),
            ``"end_to_end"`` (all layers' transfer losses at once, for the same
            number of steps: the ablation) or ``"none"`` (no knowledge transfer,
            only pre-training distillation).
        layer_steps: steps per progressive stage (10k in the paper); the
            end-to-end stage runs ``layer_steps * num_layers``.
        pd_steps: steps of pre-training distillation after the transfer (0: skip).
        batch_size: global batch size (split over replicas).
        learning_rate: peak learning rate of every stage (LAMB 1.5e-3 at batch 4096 in the official runs).
        pd_learning_rate: peak rate of pre-training distillation (default: ``learning_rate``).
        warmup_proportion: share of each stage's steps spent warming up.
        decay: ``"linear"``, ``"cosine"`` or ``"constant"`` after warm-up.
        lower_layer_lr_multiplier: learning-rate multiplier of the layers below the
            current stage (0 freezes them, as in the paper's main scheme; a small
            value is the "softened" variant). Embeddings copied from the teacher
            count as a lower layer.
        optimizer: ``"lamb"`` or ``"adamw"``.
        weight_decay: decoupled weight decay (not on norms and biases).
        clip_norm: global gradient-norm clipping (None: off); 1.0 as BERT/NEZHA.
        weights: loss weights ``attention``, ``feature_map``, ``mean``, ``variance`` (Eq. 7).
        alpha: MLM vs MLM-KD balance (Eq. 5).
        copy_from_teacher: start the embeddings and the MLM/NSP heads from the
            teacher's where names and shapes agree (Sec. 3.3).
        precision: ``"float32"``, ``"mixed_float16"`` (dynamic loss scaling) or ``"mixed_bfloat16"``.
        seed: seed of weight initialisation and data order.
        shuffle_buffer: records in the data shuffle buffer.
        checkpoint_every: steps between checkpoints (stage boundaries always checkpoint).
        keep_checkpoints: checkpoints kept on disk.
        log_every: steps between progress/TensorBoard updates.
        jit_compile: ``"on"``: XLA-compile each replica's forward, losses and gradients; ``"off"``;
            ``"auto"``: :meth:`jit_for` (docs/distillation.md).
        teacher_cache: ``"on"``: read the frozen teacher's layer outputs from a cache built once
            (``teacher_cache.py``); ``"off"``; ``"auto"``: ``teacher_cache.decide`` (docs/distillation.md).

    Example:
        >>> config = DistillConfig(schedule="progressive", layer_steps=10000, pd_steps=500000)
    """

    schedule: str = "progressive"
    layer_steps: int = 1000
    pd_steps: int = 0
    batch_size: int = 32
    learning_rate: float = 1e-3
    pd_learning_rate: float = None
    warmup_proportion: float = 0.1
    decay: str = "linear"
    lower_layer_lr_multiplier: float = 0.0
    optimizer: str = "lamb"
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    weights: dict = dataclasses.field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    alpha: float = DEFAULT_ALPHA
    copy_from_teacher: bool = True
    precision: str = "float32"
    seed: int = 0
    shuffle_buffer: int = 1000
    checkpoint_every: int = 500
    keep_checkpoints: int = 3
    log_every: int = 10
    jit_compile: str = "auto"
    teacher_cache: str = "auto"

    def __post_init__(self):
        check_choice("schedule", self.schedule, SCHEDULES)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("decay", self.decay, DECAYS)
        check_choice("jit_compile", self.jit_compile, JIT_MODES)
        check_choice("teacher_cache", self.teacher_cache, TEACHER_CACHE_MODES)
        if not isinstance(self.weights, (dict, type(None))):
            raise ConfigError(f"weights must be a mapping of loss term to number, got {self.weights!r}")
        self.weights = dict(DEFAULT_WEIGHTS, **(self.weights or {}))
        for key, value in self.weights.items():
            check_choice("loss weight", key, tuple(DEFAULT_WEIGHTS))
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise ConfigError(f"loss weight {key} must be a finite number >= 0, got {value!r}")
        # Every numeric option against its utils/limits.py record: the CLI checks its flags there, and a
        # hand-edited run.json or a recipe must be held to the same bounds (a "x" learning rate reached LAMB).
        check_numbers(self)
        if not isinstance(self.copy_from_teacher, bool):
            raise ConfigError(f"copy_from_teacher must be true or false, got {self.copy_from_teacher!r}")
        if self.schedule == "none" and self.pd_steps == 0:
            raise ConfigError("schedule 'none' trains only pre-training distillation: give pd_steps > 0")

    def jit_for(self, steps, cpu_only=False):
        """Whether a stage of ``steps`` steps runs XLA-compiled (``cpu_only``: the run has no GPU or TPU).

        ``"auto"`` compiles stages of at least :data:`JIT_MIN_STEPS` steps, where the compile time pays off,
        except for a precision in :data:`EAGER_ON_CPU` on a machine with no GPU or TPU.

        Example:
            >>> DistillConfig(precision="mixed_bfloat16").jit_for(1000, cpu_only=True)
            False
        """
        if self.jit_compile != "auto":
            return self.jit_compile == "on"
        return steps >= JIT_MIN_STEPS and not (cpu_only and self.precision in EAGER_ON_CPU)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown distillation option(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
        try:
            return cls(**values)
        except ConfigError:
            raise
        except (TypeError, ValueError) as err:
            # Values from a hand-edited run.json: "x" where a step count belongs.
            raise ConfigError(f"a distillation option has a value of the wrong type ({err})") from err

    def differences(self, other):
        """Names of the options (other than logging/checkpoint cadence) that differ from ``other``."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [k for k in mine if k not in RESUME_INSENSITIVE and mine[k] != theirs.get(k)]
