"""TokenDense: a Dense layer that maps ``[..., in]`` token tensors with one broadcast matmul."""

from mobilebert_kit.backend import keras, tf


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class TokenDense(keras.layers.Dense):
    """``keras.layers.Dense`` whose product on a ``[batch, seq, in]`` input is one broadcast ``tf.matmul``.

    tf_keras' Dense computes a 3-D input with ``tf.tensordot``, which reshapes
    to 2-D and back with shapes computed at run time: at an open sequence
    length (the default ``.tflite``, inputs ``[1, -1]``) each Dense left SHAPE,
    GATHER, REDUCE_PROD, CONCATENATION and PACK ops in the file and kept its
    bias ADD out of the FULLY_CONNECTED (in full int8 too). A broadcast matmul
    against the ``[in, out]`` kernel needs no shape at all: the converter
    writes one FULLY_CONNECTED with the bias and the activation fused, as for
    a static length. Same weights (``kernel``, ``bias``), names and config as
    Dense, so saved models and imported checkpoints load unchanged; the
    product is the same sums (float outputs agree to float rounding).

    Args:
        units (int): output width.
        **kwargs: ``keras.layers.Dense`` arguments (``activation``,
            ``kernel_initializer``, ``name``, ``dtype`` ...).

    Example:
        >>> layer = TokenDense(8, name="query")
        >>> layer(tf.ones([1, 5, 4])).shape
        TensorShape([1, 5, 8])
    """

    def call(self, inputs):
        if inputs.dtype.base_dtype != self._compute_dtype_object.base_dtype:
            inputs = tf.cast(inputs, dtype=self._compute_dtype_object)
        outputs = tf.matmul(inputs, self.kernel)  # [..., in] x [in, out]: the kernel broadcasts over the tokens
        if self.use_bias:
            outputs = tf.nn.bias_add(outputs, self.bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
