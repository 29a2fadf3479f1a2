"""KeyedDropout: dropout whose mask is a function of the example and the step, not of how a batch was split.

Keras' ``Dropout`` draws a mask of the shape it is given, so one batch split
over two replicas gets other masks than the same batch on one device, and a
resumed run other masks than the run it resumes. Inside :func:`dropout_key`
this layer instead draws the mask of the whole global batch from a stateless
generator keyed by ``(step key, call index)`` and keeps its own replica's rows:
a row's mask depends only on the run's seed, the step and the row's place in
the global batch. Outside the block (inference, export, fine-tuning with
``fit``) it is Keras' ``Dropout``.

Cost: every replica draws the noise of the global batch (uniform numbers, a
small share of a step next to the matmuls at a few replicas).
"""

import threading
from contextlib import contextmanager

from mobilebert_kit.backend import keras, tf

_KEY = threading.local()  # MirroredStrategy traces its replicas in threads: one key per thread


@contextmanager
def dropout_key(step_key, rows, offset):
    """Makes :class:`KeyedDropout` calls in the block deterministic and independent of the batch split.

    Args:
        step_key (tf.Tensor | int): int64 key of the step (run seed, stage, step); distinct per step.
        rows (tf.Tensor | int): rows of the global batch.
        offset (tf.Tensor | int): the first global row of this replica's slice.

    Example:
        >>> with dropout_key(step, rows=32, offset=16):  # doctest: +SKIP
        ...     out = student(inputs, training=True)
    """
    previous = getattr(_KEY, "value", None)
    _KEY.value = {"step": step_key, "rows": rows, "offset": offset, "calls": 0}
    try:
        yield
    finally:
        _KEY.value = previous


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class KeyedDropout(keras.layers.Dropout):
    """Keras ``Dropout``; inside :func:`dropout_key`, a mask keyed by step, call and global row.

    Each call inside the block takes the next call index, so two dropout layers
    of one step never share a mask; the order of calls is the model's, the same
    on every replica and in every run.

    Args:
        rate (float): fraction of the inputs dropped.
        **kwargs: ``keras.layers.Dropout`` arguments (``noise_shape`` falls back to Keras' mask).

    Example:
        >>> drop = KeyedDropout(0.1, name="dropout")
        >>> drop(tf.ones([2, 3]), training=False).shape
        TensorShape([2, 3])

    Reference: Srivastava et al., 2014 (dropout); the split-invariance is what
    ``tf.distribute`` training needs to match one device.
    """

    def call(self, inputs, training=None):
        key = getattr(_KEY, "value", None)
        if key is None or self.noise_shape is not None or not self.rate:
            return super().call(inputs, training=training)
        index = key["calls"]
        key["calls"] += 1
        if training is None:
            training = keras.backend.learning_phase()
        if isinstance(training, (bool, int)):
            return self._dropped(inputs, key, index) if training else tf.identity(inputs)
        return tf.cond(tf.cast(training, tf.bool), lambda: self._dropped(inputs, key, index),
                       lambda: tf.identity(inputs))

    def _dropped(self, inputs, key, index):
        # Static sizes where known: under XLA the noise shape must be a compile-time constant.
        dims = [d if d is not None else tf.shape(inputs)[i] for i, d in enumerate(inputs.shape)]
        full = [key["rows"]] + dims[1:]
        if not all(isinstance(d, int) for d in full):
            full, dims = tf.stack([tf.cast(d, tf.int32) for d in full]), tf.shape(inputs)
        seed = tf.stack([tf.cast(key["step"], tf.int64), tf.constant(index, tf.int64)])
        offset = tf.reshape(tf.cast(key["offset"], tf.int32), [1])
        begin = tf.concat([offset, tf.zeros([inputs.shape.rank - 1], tf.int32)], 0)
        noise = tf.slice(tf.random.stateless_uniform(full, seed=seed), begin, dims)
        scale = tf.cast(1.0 / (1.0 - self.rate), inputs.dtype)
        return tf.where(noise >= self.rate, inputs * scale, tf.zeros_like(inputs))
