"""GroupedDense: ConvBERT's grouped linear operator."""

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.layers.activations import get_activation
from mobilebert_kit.layers.initializers import fresh_initializer
from mobilebert_kit.layers.shapes import leading_dims, reshape_leading


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class GroupedDense(keras.layers.Layer):
    """Grouped linear layer (Jiang et al., 2020, ConvBERT, Eq. 7).

    The input features are split into ``num_groups`` equal groups, each
    transformed by its own dense map ``d/g -> m/g``, and the results
    concatenated: ``num_groups`` times fewer weights and multiply-adds than a
    dense layer. Kernel ``[g, in/g, units/g]`` (the Hugging Face
    ``GroupedLinearLayer`` layout, imported without transposition), bias
    ``[units]`` added after the concatenation. The product is one Einsum, which
    the FLOP counter and the TFLite/ONNX converters handle.

    Args:
        units: output width (a multiple of ``num_groups``).
        num_groups: number of groups ``g``.
        activation: optional activation name (one of ``ACTIVATIONS``).
        kernel_initializer: kernel initializer.
        **kwargs: standard layer arguments.

    Example:
        >>> layer = GroupedDense(64, num_groups=2, name="intermediate")
        >>> layer(tf.ones([1, 5, 32])).shape
        TensorShape([1, 5, 64])
    """

    def __init__(self, units, num_groups, activation=None, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if units % num_groups:
            raise ConfigError(f"grouped layer width {units} is not a multiple of num_groups={num_groups}")
        self.units = units
        self.num_groups = num_groups
        self.activation_name = activation
        self.activation = get_activation(activation) if activation else None
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, input_shape):
        width = int(input_shape[-1])
        if width % self.num_groups:
            raise ConfigError(f"grouped layer input width {width} is not a multiple of num_groups={self.num_groups}")
        g = self.num_groups
        self.kernel = self.add_weight(
            "kernel", shape=[g, width // g, self.units // g], initializer=fresh_initializer(self.kernel_initializer)
        )
        self.bias = self.add_weight("bias", shape=[self.units], initializer="zeros")
        super().build(input_shape)

    def call(self, inputs):
        g = self.num_groups
        dims = leading_dims(inputs)  # static where known (layers/shapes.py): no shape ops at an open length
        x = reshape_leading(inputs, [g, inputs.shape[-1] // g], dims)  # (B, S, g, in/g)
        x = tf.einsum("bsgi,gio->bsgo", x, tf.cast(self.kernel, x.dtype))  # (B, S, g, out/g)
        x = reshape_leading(x, [self.units], dims) + tf.cast(self.bias, x.dtype)
        return self.activation(x) if self.activation is not None else x

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "num_groups": self.num_groups,
            "activation": self.activation_name,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
