"""Static dimensions where they are known: reshapes of token tensors without run-time shape arithmetic.

A dynamic-length export (inputs ``[1, -1]``) knows every dimension but the
sequence at trace time: the batch (1), the widths, the head count and size.
Reading a dimension with ``tf.shape`` puts SHAPE, STRIDED_SLICE and PACK ops
into the graph, run on every inference; tf_keras' Dense on a 3-D input adds
SHAPE, GATHER, REDUCE_PROD and CONCATENATION (``tf.tensordot``) besides. A
reshape that names every known dimension and leaves the one open axis as
``-1`` is one RESHAPE with a constant shape, as in the static file (issue 46:
all-MiniLM-L6-v2's dynamic int8 file carried ~250 such ops, 1.13x the time
of its static twin at 128 tokens).

Plain functions, not layers: every layer of the package that reshapes token
tensors calls them.
"""

from mobilebert_kit.backend import tf


def leading_dims(x, count=2):
    """The first ``count`` dimensions of ``x``: Python ints where static, else scalar tensors.

    Args:
        x (tf.Tensor): a tensor of rank ``>= count``.
        count (int): how many leading dimensions.

    Returns:
        list: ``count`` entries, an ``int`` for each static dimension and a
        ``tf.shape`` entry for each open one (one SHAPE op for all of them).

    Example:
        >>> leading_dims(tf.ones([1, 7, 32]))
        [1, 7]
    """
    static = tf.TensorShape(x.shape)[:count].as_list()  # a numpy array (eager callers) has a tuple shape
    if all(d is not None for d in static):
        return static
    dynamic = tf.shape(x)
    return [d if d is not None else dynamic[i] for i, d in enumerate(static)]


def reshape_leading(x, tail, dims=None, count=2):
    """Reshapes ``x`` to its first ``count`` dimensions + ``tail``, the last open one of them as ``-1``.

    The reshape keeps the element count, so one open dimension can always be
    left to it: with a static batch (every TFLite export) the new shape is a
    constant and the converter writes one RESHAPE and nothing else. Other
    open dimensions (the batch of an ONNX file or of training) are taken from
    ``dims``, the :func:`leading_dims` a layer reads once for all its
    reshapes (else from ``tf.shape(x)``).

    Args:
        x (tf.Tensor): the tensor to reshape.
        tail (list[int]): static trailing sizes replacing the dimensions after the first ``count``.
        dims (list | None): leading dimensions read once by the caller (the batch is all that is used).
        count (int): leading dimensions kept.

    Returns:
        tf.Tensor: ``x`` reshaped to ``x.shape[:count] + tail``.

    Example:
        >>> reshape_leading(tf.ones([1, 5, 8]), [2, 4]).shape
        TensorShape([1, 5, 2, 4])
    """
    static = tf.TensorShape(x.shape)[:count].as_list()
    open_axes = [i for i, d in enumerate(static) if d is None]
    shape = list(static)
    if open_axes:
        shape[open_axes[-1]] = -1
        if len(open_axes) > 1:
            source = dims if dims is not None else tf.shape(x)
            for i in open_axes[:-1]:
                shape[i] = source[i]
    shape += [int(t) for t in tail]
    if all(isinstance(d, int) for d in shape):
        return tf.reshape(x, shape)
    return tf.reshape(x, tf.stack([tf.cast(d, tf.int32) for d in shape]))
