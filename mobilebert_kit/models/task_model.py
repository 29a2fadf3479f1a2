"""TaskModel: the shared base of the task models (an encoder plus a head)."""

import zlib

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.layers.keyed_dropout import dropout_key
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

    Example:
        >>> isinstance(SequenceClassifier(mbk.build("tiny-bert")), TaskModel)  # doctest: +SKIP
        True
    """

    architecture = None
    dropout_seed = 0  # the fine-tuning run's seed: part of every dropout mask's key (see train_step)

    def _finish(self, encoder, head_config):
        self.encoder = encoder
        self.head_config = dict(head_config)

    @property
    def config(self):
        return {"encoder": self.encoder.config, "head": dict(self.head_config)}

    def dummy_inputs(self, batch_size=1, seq_len=8, seed=0):
        return self.encoder.dummy_inputs(batch_size, seq_len, seed)

    def train_step(self, data):
        """Keras' training step, with every :class:`KeyedDropout` mask keyed by (seed, step, global row).

        ``fit`` under a ``tf.distribute`` strategy gives each replica a slice of the global
        batch; with Keras' own masks a split run drops other units than one device does.
        Keyed masks make a run on several replicas or workers train the model one device
        trains (``layers/keyed_dropout.py``). ``data``: this replica's rows, as ``fit`` passes them.
        """
        ctx = tf.distribute.get_replica_context()
        features = data[0] if isinstance(data, (tuple, list)) else data
        rows = features["input_ids"].shape[0] or tf.shape(features["input_ids"])[0]
        salt = zlib.crc32(f"{self.dropout_seed}/finetune".encode()) & 0xFFFFFF  # x 2^32 + step stays in int64
        step_key = tf.cast(self.optimizer.iterations, tf.int64) + tf.constant(salt << 32, tf.int64)
        # Replica i holds rows [i * rows, (i + 1) * rows) of the global batch, on one host or across workers.
        with dropout_key(step_key, rows * ctx.num_replicas_in_sync, ctx.replica_id_in_sync_group * rows):
            return super().train_step(data)
