"""PositionClip: at most a position table's length of tokens, the first ones and the last."""

from mobilebert_kit.backend import keras, tf


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class PositionClip(keras.layers.Layer):
    """Keeps the first ``count - 1`` columns of ``[batch, n]`` tokens and the last one when ``n > count``.

    A dynamic-length export (``[1, -1]`` inputs) is fed the whole text by MediaPipe and the Task Library, which
    cut a text only for static inputs; a text longer than the position table then failed in the position
    embedding's gather, in the app. This cuts it as a truncating tokenizer does (``[CLS] ... [SEP]``): the
    tokens a static file of ``count`` gets from its client. One GATHER per input, no control flow: a row of
    ``n <= count`` tokens gathers itself. Called on a list of inputs of one shape (ids, mask, token types), it
    computes the kept positions once for all of them (the index arithmetic is the open length's cost: 3 times
    as many ops when each input computed its own). A layer, not a ``Lambda``, so the graph serializes
    (quantization-aware training clones it).

    The one GATHER is also what lets the converter calibrate an open-length file: its calibrator resizes the
    inputs one at a time, preparing the graph after each, so between two rows of different lengths the ids
    have the new length and the mask the old one. The GATHER's output shape is known only when it runs, so
    the ops after it (every op joining the ids' path and the mask's) wait for the run; without it the mask
    ADD failed to prepare ("[1,4,35,35] and [1,1,1,128] not broadcastable": ModernBERT in full int8, before
    rotary positions got their trained length as a limit).

    Args:
        count (int): the position table's length.
        **kwargs: standard layer arguments.

    Example:
        >>> PositionClip(4)(tf.constant([[101, 7, 8, 9, 10, 102]])).numpy().tolist()
        [[101, 7, 8, 102]]
        >>> ids, mask = PositionClip(4)([tf.constant([[101, 7, 8, 9, 10, 102]]), tf.ones([1, 6], tf.int32)])
        >>> mask.numpy().tolist()
        [[1, 1, 1, 1]]
    """

    def __init__(self, count, **kwargs):
        super().__init__(**kwargs)
        self.count = int(count)

    def call(self, tokens):
        many = isinstance(tokens, (list, tuple))
        tensors = list(tokens) if many else [tokens]
        n = tf.shape(tensors[0])[1]
        keep = tf.minimum(n, self.count)
        index = tf.concat([tf.range(keep - 1), [n - 1]], 0)
        clipped = [tf.gather(t, index, axis=1) for t in tensors]
        return clipped if many else clipped[0]

    def get_config(self):
        return {**super().get_config(), "count": self.count}
