"""PositionClip: at most a position table's length of tokens, the first ones and the last."""

from mobilebert_kit.backend import keras, tf


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class PositionClip(keras.layers.Layer):
    """Keeps the first ``count - 1`` columns of ``[batch, n]`` tokens and the last one when ``n > count``.

    A dynamic-length export (``[1, -1]`` inputs) is fed the whole text by MediaPipe and the Task Library, which
    cut a text only for static inputs; a text longer than the position table then failed in the position
    embedding's gather, in the app. This cuts it as a truncating tokenizer does (``[CLS] ... [SEP]``): the
    tokens a static file of ``count`` gets from its client. One GATHER, no control flow: a row of ``n <= count``
    tokens gathers itself. A layer, not a ``Lambda``, so the graph serializes (quantization-aware training
    clones it).

    Args:
        count (int): the position table's length.
        **kwargs: standard layer arguments.

    Example:
        >>> PositionClip(4)(tf.constant([[101, 7, 8, 9, 10, 102]])).numpy().tolist()
        [[101, 7, 8, 102]]
    """

    def __init__(self, count, **kwargs):
        super().__init__(**kwargs)
        self.count = int(count)

    def call(self, tokens):
        n = tf.shape(tokens)[1]
        keep = tf.minimum(n, self.count)
        return tf.gather(tokens, tf.concat([tf.range(keep - 1), [n - 1]], 0), axis=1)

    def get_config(self):
        return {**super().get_config(), "count": self.count}
