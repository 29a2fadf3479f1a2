"""ProjectionNorm: dense projection, dropout, optional residual, then normalization."""

from mobilebert_kit.backend import keras
from mobilebert_kit.layers.token_dense import TokenDense
from mobilebert_kit.layers.keyed_dropout import KeyedDropout
from mobilebert_kit.layers.initializers import fresh_initializer
from mobilebert_kit.layers.normalization import make_norm


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class ProjectionNorm(keras.layers.Layer):
    """``norm(dropout(dense(x)) + residual)``, the recurring linear step of MobileBERT.

    One class serves the four linear steps of a MobileBERT block (Sun et al.,
    2020, Fig. 1c): the input bottleneck and the shared query/key bottleneck
    (no residual), the attention output projection (residual: the bottlenecked
    input) and the output bottleneck (residual: the block input). In a plain
    BERT block only the attention output projection remains.

    Args:
        units: output width.
        normalization_type: ``"layer_norm"`` or ``"no_norm"``.
        layer_norm_epsilon: LayerNorm epsilon.
        dropout: dropout rate applied to the projection before the residual.
        kernel_initializer: initializer of the dense kernel.
        **kwargs: standard layer arguments.

    Example:
        >>> layer = ProjectionNorm(128, "no_norm", 1e-12, name="bottleneck_input")
        >>> layer(tf.ones([1, 4, 512])).shape
        TensorShape([1, 4, 128])
    """

    def __init__(
        self,
        units,
        normalization_type="layer_norm",
        layer_norm_epsilon=1e-12,
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = units
        self.normalization_type = normalization_type
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout_rate = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.dense = TokenDense(
            units, kernel_initializer=fresh_initializer(self.kernel_initializer), name="dense", dtype=self.dtype_policy
        )
        self.norm = make_norm(normalization_type, layer_norm_epsilon, name="norm", dtype=self.dtype_policy)
        self.dropout = KeyedDropout(dropout, name="dropout", dtype=self.dtype_policy)

    def call(self, inputs, residual=None, training=None):
        x = self.dropout(self.dense(inputs), training=training)
        if residual is not None:
            x = x + residual
        return self.norm(x)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "normalization_type": self.normalization_type,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "dropout": self.dropout_rate,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
