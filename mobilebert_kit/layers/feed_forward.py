"""FeedForward: one position-wise feed-forward network with residual and norm."""

from mobilebert_kit.backend import keras
from mobilebert_kit.layers.token_dense import TokenDense
from mobilebert_kit.layers.keyed_dropout import KeyedDropout
from mobilebert_kit.layers.initializers import fresh_initializer
from mobilebert_kit.layers.activations import get_activation
from mobilebert_kit.layers.grouped_dense import GroupedDense
from mobilebert_kit.layers.normalization import make_norm


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class FeedForward(keras.layers.Layer):
    """``norm(dropout(W2 act(W1 x)) + x)``.

    MobileBERT stacks several of these per block to restore the 1:2 balance of
    attention and feed-forward parameters that the bottleneck breaks (Sun et al.,
    2020, Sec. 4.2); BERT has one. With ``num_groups > 1`` both projections are
    grouped linear layers (:class:`GroupedDense`, ConvBERT Eq. 7).

    Args:
        intermediate_size: width of the hidden (activated) layer.
        hidden_act: one of ``"gelu"``, ``"gelu_tanh"``, ``"relu"``, ``"relu6"``.
        normalization_type: ``"layer_norm"`` or ``"no_norm"``.
        layer_norm_epsilon: LayerNorm epsilon.
        dropout: dropout rate on the output projection.
        kernel_initializer: initializer of both dense kernels.
        num_groups: groups of the grouped linear projections (1: plain dense).
        **kwargs: standard layer arguments.

    Example:
        >>> ffn = FeedForward(512, "relu", "no_norm", name="ffn_0")
        >>> ffn(tf.ones([1, 4, 128])).shape
        TensorShape([1, 4, 128])
    """

    def __init__(
        self,
        intermediate_size,
        hidden_act="gelu",
        normalization_type="layer_norm",
        layer_norm_epsilon=1e-12,
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        num_groups=1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.intermediate_size = intermediate_size
        self.num_groups = num_groups
        self.hidden_act = hidden_act
        self.normalization_type = normalization_type
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout_rate = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.intermediate = self._dense(intermediate_size, "intermediate", hidden_act)
        self.norm = make_norm(normalization_type, layer_norm_epsilon, name="norm", dtype=self.dtype_policy)
        self.dropout = KeyedDropout(dropout, name="dropout", dtype=self.dtype_policy)
        self.output_dense = None  # built lazily: its width is the input width

    def _dense(self, units, name, activation=None):
        """A grouped linear layer (ConvBERT Eq. 7) with ``num_groups`` > 1, else a dense one."""
        if self.num_groups > 1:
            return GroupedDense(units, self.num_groups, activation=activation,
                                kernel_initializer=self.kernel_initializer, name=name, dtype=self.dtype_policy)
        return TokenDense(units, activation=None if activation is None else get_activation(activation), name=name,
                          kernel_initializer=fresh_initializer(self.kernel_initializer), dtype=self.dtype_policy)

    def build(self, input_shape):
        self.output_dense = self._dense(int(input_shape[-1]), "output")
        super().build(input_shape)

    def call(self, inputs, training=None):
        x = self.output_dense(self.intermediate(inputs))
        x = self.dropout(x, training=training)
        return self.norm(x + inputs)

    def get_config(self):
        return {
            **super().get_config(),
            "intermediate_size": self.intermediate_size,
            "hidden_act": self.hidden_act,
            "normalization_type": self.normalization_type,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "dropout": self.dropout_rate,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "num_groups": self.num_groups,
        }
