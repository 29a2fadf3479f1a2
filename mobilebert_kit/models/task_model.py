"""TaskModel: the shared base of the task models (an encoder plus a head)."""

from mobilebert_kit.backend import keras
from mobilebert_kit.models.encoder import INPUT_NAMES


def task_inputs():
    """The standard int32 ``[batch, seq]`` input dict of every task model."""
    return {n: keras.Input(shape=(None,), dtype="int32", name=n) for n in INPUT_NAMES}


def head_initializer(encoder):
    """A fresh truncated-normal initializer with the encoder's range."""
    return keras.initializers.TruncatedNormal(stddev=encoder.config["initializer_range"])


class TaskModel(keras.Model):
    """Base of the task models: keeps ``encoder`` and ``head_config`` for saving.

    Subclasses build a functional model over the encoder and call ``_finish``.

    Args:
        (set by subclasses) encoder and the head's keyword arguments.

    Example:
        >>> isinstance(SequenceClassifier(mbk.build("tiny-bert")), TaskModel)  # doctest: +SKIP
        True
    """

    architecture = None

    def _finish(self, encoder, head_config):
        self.encoder = encoder
        self.head_config = dict(head_config)

    @property
    def config(self):
        return {"encoder": self.encoder.config, "head": dict(self.head_config)}

    def dummy_inputs(self, batch_size=1, seq_len=8, seed=0):
        return self.encoder.dummy_inputs(batch_size, seq_len, seed)

