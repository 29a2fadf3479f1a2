"""NoNorm: the element-wise affine map that replaces LayerNorm in MobileBERT."""

from mobilebert_kit.backend import keras


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class NoNorm(keras.layers.Layer):
    """``NoNorm(h) = gamma * h + beta`` over the last axis.

    MobileBERT (Sun et al., 2020, Sec. 4.3, Eq. 6) replaces LayerNorm with this
    linear map because the mean/variance reduction dominates latency on phones.
    It is linear, so a converter can fold it into a neighbouring dense layer.
    The variables are named ``gamma`` and ``beta`` like LayerNorm's, so a
    substitution can carry LayerNorm's affine parameters over by name.

    Args:
        epsilon: accepted and ignored, so that NoNorm and LayerNorm share a
            constructor signature.
        **kwargs: standard layer arguments (``name``, ``dtype``).

    Example:
        >>> norm = NoNorm(name="norm")
        >>> norm(tf.ones([2, 3, 8])).shape
        TensorShape([2, 3, 8])
    """

    def __init__(self, epsilon=None, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        width = int(input_shape[-1])
        self.gamma = self.add_weight("gamma", shape=[width], initializer="ones")
        self.beta = self.add_weight("beta", shape=[width], initializer="zeros")
        super().build(input_shape)

    def call(self, inputs):
        return inputs * self.gamma + self.beta

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}
