"""WarmupDecay: linear warm-up, then linear / cosine decay or a constant rate."""

import math

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.errors import ConfigError, check_choice

DECAYS = ("linear", "cosine", "constant")


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Learning rate ``peak * (step + 1) / warmup_steps`` during warm-up, then decayed.

    ``step`` is the optimizer's update count (0 for the first update), so the
    first update already moves the weights (BERT's ``step / warmup`` makes it a
    no-op). After warm-up, with ``p = (step - warmup) / (total - warmup)``:
    ``linear``: ``end + (peak - end) (1 - p)`` (BERT, NEZHA, MobileBERT);
    ``cosine``: ``end + (peak - end) (1 + cos(pi p)) / 2``; ``constant``: ``peak``.
    ``p`` is clipped to [0, 1].

    Args:
        peak_learning_rate: rate at the end of warm-up.
        total_steps: steps of the whole schedule (warm-up included).
        warmup_steps: linear warm-up steps (0: none).
        decay: ``"linear"``, ``"cosine"`` or ``"constant"``.
        end_learning_rate: rate reached at ``total_steps``.

    Example:
        >>> schedule = WarmupDecay(1.5e-3, total_steps=10000, warmup_steps=1000)
        >>> float(schedule(0)), float(schedule(999)), float(schedule(10000))
        (1.5e-06, 0.0015, 0.0)
    """

    def __init__(self, peak_learning_rate, total_steps, warmup_steps=0, decay="linear", end_learning_rate=0.0):
        super().__init__()
        check_choice("decay", decay, DECAYS)
        if total_steps < 1 or warmup_steps < 0 or warmup_steps > total_steps:
            raise ConfigError(
                f"need 0 <= warmup_steps <= total_steps and total_steps >= 1, got warmup_steps={warmup_steps}, "
                f"total_steps={total_steps}"
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.decay = decay
        self.end_learning_rate = float(end_learning_rate)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        peak, end = self.peak_learning_rate, self.end_learning_rate
        warm = float(max(self.warmup_steps, 1))
        warmup_lr = peak * (step + 1.0) / warm
        span = float(max(self.total_steps - self.warmup_steps, 1))
        progress = tf.clip_by_value((step - float(self.warmup_steps)) / span, 0.0, 1.0)
        if self.decay == "linear":
            decayed = end + (peak - end) * (1.0 - progress)
        elif self.decay == "cosine":
            decayed = end + (peak - end) * 0.5 * (1.0 + tf.cos(math.pi * progress))
        else:
            decayed = tf.constant(peak, tf.float32)
        if self.warmup_steps == 0:
            return decayed
        return tf.where(step < float(self.warmup_steps), warmup_lr, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "decay": self.decay,
            "end_learning_rate": self.end_learning_rate,
        }
