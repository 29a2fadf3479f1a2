"""GatedFeedForward: the pre-norm block's feed-forward network, GLU-gated or plain, without residual or norm."""

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.layers.activations import get_activation
from mobilebert_kit.layers.initializers import fresh_initializer
from mobilebert_kit.layers.keyed_dropout import KeyedDropout
from mobilebert_kit.layers.token_dense import TokenDense


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class GatedFeedForward(keras.layers.Layer):
    """``W2 (act(a) * g)`` with ``[a, g] = W1 x`` (gated: GeGLU with GELU, Shazeer 2020), else ``W2 act(W1 x)``.

    ModernBERT's ``ModernBertMLP``: ``Wi`` projects to ``2 * intermediate_size``, whose first half is the
    input and second half the gate. The pre-norm block adds the residual and owns the norm before it, so
    this layer has neither. Sublayers ``intermediate`` (``Wi``) and ``output`` (``Wo``).

    Args:
        intermediate_size (int): width of the activated layer (``Wi`` is twice as wide when gated).
        hidden_act (str): one of ``layers/activations.py``'s names.
        gated (bool): the GLU gate (default) or a plain two-layer network.
        use_bias (bool): the projections have biases (ModernBERT's ``mlp_bias``, false by default there).
        dropout (float): dropout on the gated activation, as ``ModernBertMLP.drop``.
        kernel_initializer: initializer of both kernels.
        **kwargs: standard layer arguments.

    Example:
        >>> ffn = GatedFeedForward(16, "gelu", name="ffn_0")
        >>> ffn(tf.ones([1, 4, 8])).shape
        TensorShape([1, 4, 8])
    """

    def __init__(self, intermediate_size, hidden_act="gelu", gated=True, use_bias=True, dropout=0.0,
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.gated = bool(gated)
        self.use_bias = bool(use_bias)
        self.dropout_rate = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self._activation = get_activation(hidden_act)
        self.intermediate = TokenDense(
            intermediate_size * (2 if self.gated else 1), use_bias=self.use_bias,
            kernel_initializer=fresh_initializer(self.kernel_initializer), name="intermediate", dtype=self.dtype_policy,
        )
        self.dropout = KeyedDropout(dropout, name="dropout", dtype=self.dtype_policy)
        self.output_dense = None  # built lazily: its width is the input width

    def build(self, input_shape):
        self.output_dense = TokenDense(
            int(input_shape[-1]), use_bias=self.use_bias, kernel_initializer=fresh_initializer(self.kernel_initializer),
            name="output", dtype=self.dtype_policy,
        )
        super().build(input_shape)

    def call(self, inputs, training=None):
        h = self.intermediate(inputs)
        if self.gated:
            value, gate = tf.split(h, 2, axis=-1)
            h = self._activation(value) * gate
        else:
            h = self._activation(h)
        return self.output_dense(self.dropout(h, training=training))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "intermediate_size": self.intermediate_size, "hidden_act": self.hidden_act,
                "gated": self.gated, "use_bias": self.use_bias, "dropout": self.dropout_rate,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer)}
