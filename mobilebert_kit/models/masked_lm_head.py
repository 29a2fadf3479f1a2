"""MaskedLMHead: MobileBERT's masked-LM output layer with extra output weights."""

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.layers.token_dense import TokenDense
from mobilebert_kit.layers.activations import get_activation


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class MaskedLMHead(keras.layers.Layer):
    """``logits = LN(act(dense(h))) @ concat(E^T, W_extra^T) + b``.

    The word embedding table ``E`` is only ``embedding_size`` wide while the
    hidden states are ``hidden_size`` wide, so MobileBERT ties the first
    ``embedding_size`` output dimensions to ``E`` and learns
    ``extra_output_weights`` ``[vocab, hidden - embedding]`` for the rest
    (official ``run_pretraining.py``; parity-notes.md). With equal sizes this is
    BERT's tied decoder. The transform always uses a real LayerNorm.

    Args:
        embedding_table: the encoder's word embedding variable ``[vocab, E]``.
        hidden_size: encoder output width.
        hidden_act: activation of the transform.
        layer_norm_epsilon: epsilon of the transform's LayerNorm.
        initializer_range: stddev of the truncated-normal initializer.
        **kwargs: standard layer arguments.

    Example:
        >>> head = MaskedLMHead(encoder.embedding_table, hidden_size=64, name="mlm")  # doctest: +SKIP
    """

    def __init__(self, embedding_table, hidden_size, hidden_act="gelu", layer_norm_epsilon=1e-12,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.embedding_table = embedding_table
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.transform = TokenDense(
            hidden_size,
            activation=get_activation(hidden_act),
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            name="transform",
        )
        self.transform_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="transform_norm")

    def build(self, input_shape):
        vocab, emb = self.embedding_table.shape
        extra = self.hidden_size - int(emb)
        self.extra_output_weights = None
        if extra > 0:
            self.extra_output_weights = self.add_weight(
                "extra_output_weights",
                shape=[int(vocab), extra],
                initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
            )
        self.output_bias = self.add_weight("output_bias", shape=[int(vocab)], initializer="zeros")
        super().build(input_shape)

    def call(self, hidden_states):
        h = self.transform_norm(self.transform(hidden_states))
        weights = self.embedding_table
        if self.extra_output_weights is not None:
            weights = tf.concat([weights, self.extra_output_weights], axis=1)  # (V, H)
        logits = tf.matmul(h, tf.cast(weights, h.dtype), transpose_b=True)
        return logits + tf.cast(self.output_bias, logits.dtype)

    def get_config(self):
        raise NotImplementedError("MaskedLMHead is rebuilt from its pretrainer's config, not serialized alone")
