"""TransformerBlock: one encoder layer of BERT, IB-BERT or MobileBERT."""

from mobilebert_kit.backend import keras
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.layers.feed_forward import FeedForward
from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention
from mobilebert_kit.layers.projection_norm import ProjectionNorm


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class TransformerBlock(keras.layers.Layer):
    """One encoder layer; a plain BERT layer is the configuration without bottleneck.

    Data flow (Sun et al., 2020, Fig. 1; block order as in the official code,
    parity-notes.md), with ``x`` the ``hidden_size``-wide block input and
    ``I = intra_bottleneck_size`` when ``use_bottleneck``:

    - ``layer_input = bottleneck_input(x)`` (dense to I + norm), else ``x``.
    - query/key/value inputs: all ``layer_input`` with ``use_bottleneck_attention``;
      query = key = ``bottleneck_attention(x)`` and value = ``x`` with
      ``key_query_shared_bottleneck``; otherwise all ``x`` (the IB-BERT teacher).
    - ``h = attention_output(attention(q, k, v), residual=layer_input)``.
    - ``num_feedforward_networks`` FeedForwards ``ffn_0 ... ffn_{F-1}``.
    - ``output_bottleneck(h, residual=x)`` (dense back to ``hidden_size`` + norm).

    Sublayer names are stable (``bottleneck_input``, ``bottleneck_attention``,
    ``attention``, ``attention_output``, ``ffn_i``, ``output_bottleneck``):
    weight import, distillation and substitution find them by name.

    Args:
        hidden_size: inter-block width (the feature-map size).
        num_heads: attention heads.
        intermediate_size: FFN hidden width.
        intra_bottleneck_size: intra-block width when ``use_bottleneck``.
        use_bottleneck: add the (inverted) bottleneck projections.
        use_bottleneck_attention: attention reads the bottlenecked input for q, k
            and v (MobileBERT-tiny). Takes precedence over the shared bottleneck,
            as in the official code.
        key_query_shared_bottleneck: a second bottleneck feeds query and key;
            value reads the block input (MobileBERT).
        num_feedforward_networks: stacked FFNs per block.
        normalization_type: ``"layer_norm"`` or ``"no_norm"``.
        hidden_act: FFN activation: ``"gelu"``, ``"gelu_tanh"``, ``"relu"``, ``"relu6"``.
        layer_norm_epsilon: LayerNorm epsilon.
        final_ffn_layer_norm_epsilon: epsilon of the last FFN's norm when it
            differs (Hugging Face MobileBERT builds that one with 1e-5).
        hidden_dropout: dropout on projections.
        attention_dropout: dropout on attention probabilities.
        attention_mask_value: score of padded keys (see MultiHeadAttention).
        attention_mask_mode: ``"add"`` or ``"mul_add"``.
        initializer_range: stddev of the truncated-normal kernel initializer.
        **kwargs: standard layer arguments.

    Example:
        >>> block = TransformerBlock(512, 4, 512, intra_bottleneck_size=128, use_bottleneck=True,
        ...                          key_query_shared_bottleneck=True, num_feedforward_networks=4,
        ...                          normalization_type="no_norm", hidden_act="relu", name="transformer_layer_0")
        >>> block(tf.ones([1, 8, 512]), attention_mask=tf.ones([1, 8])).shape
        TensorShape([1, 8, 512])
    """

    def __init__(
        self,
        hidden_size,
        num_heads,
        intermediate_size,
        intra_bottleneck_size=None,
        use_bottleneck=False,
        use_bottleneck_attention=False,
        key_query_shared_bottleneck=False,
        num_feedforward_networks=1,
        normalization_type="layer_norm",
        hidden_act="gelu",
        layer_norm_epsilon=1e-12,
        final_ffn_layer_norm_epsilon=None,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        attention_mask_value=-10000.0,
        attention_mask_mode="add",
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.intra_bottleneck_size = intra_bottleneck_size
        self.use_bottleneck = use_bottleneck
        self.use_bottleneck_attention = use_bottleneck_attention
        self.key_query_shared_bottleneck = key_query_shared_bottleneck
        self.num_feedforward_networks = num_feedforward_networks
        self.normalization_type = normalization_type
        self.hidden_act = hidden_act
        self.layer_norm_epsilon = layer_norm_epsilon
        self.final_ffn_layer_norm_epsilon = final_ffn_layer_norm_epsilon
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.attention_mask_value = attention_mask_value
        self.attention_mask_mode = attention_mask_mode
        self.initializer_range = initializer_range

        true_hidden = intra_bottleneck_size if use_bottleneck else hidden_size
        if use_bottleneck and not intra_bottleneck_size:
            raise ConfigError("use_bottleneck=True needs intra_bottleneck_size")
        if true_hidden % num_heads:
            raise ConfigError(f"attention width {true_hidden} is not a multiple of num_heads={num_heads}")
        if num_feedforward_networks < 1:
            raise ConfigError(f"num_feedforward_networks must be >= 1, got {num_feedforward_networks}")
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        norm = dict(normalization_type=normalization_type, dtype=self.dtype_policy, kernel_initializer=init)

        self.bottleneck_input = None
        self.bottleneck_attention = None
        self.output_bottleneck = None
        if use_bottleneck:
            self.bottleneck_input = ProjectionNorm(
                true_hidden, layer_norm_epsilon=layer_norm_epsilon, name="bottleneck_input", **norm
            )
            if key_query_shared_bottleneck and not use_bottleneck_attention:
                self.bottleneck_attention = ProjectionNorm(
                    true_hidden, layer_norm_epsilon=layer_norm_epsilon, name="bottleneck_attention", **norm
                )
        self.attention = MultiHeadAttention(
            num_heads=num_heads,
            head_size=true_hidden // num_heads,
            dropout=attention_dropout,
            mask_value=attention_mask_value,
            mask_mode=attention_mask_mode,
            kernel_initializer=init,
            name="attention",
            dtype=self.dtype_policy,
        )
        self.attention_output = ProjectionNorm(
            true_hidden,
            layer_norm_epsilon=layer_norm_epsilon,
            # The official code drops out here only without bottleneck; keep that.
            dropout=0.0 if use_bottleneck else hidden_dropout,
            name="attention_output",
            **norm,
        )
        self.ffns = []
        for i in range(num_feedforward_networks):
            last = i == num_feedforward_networks - 1
            eps = final_ffn_layer_norm_epsilon if (last and final_ffn_layer_norm_epsilon) else layer_norm_epsilon
            self.ffns.append(
                FeedForward(
                    intermediate_size,
                    hidden_act=hidden_act,
                    layer_norm_epsilon=eps,
                    dropout=hidden_dropout if (last and not use_bottleneck) else 0.0,
                    name=f"ffn_{i}",
                    **norm,
                )
            )
        if use_bottleneck:
            self.output_bottleneck = ProjectionNorm(
                hidden_size, layer_norm_epsilon=layer_norm_epsilon, dropout=hidden_dropout,
                name="output_bottleneck", **norm,
            )

    def call(self, inputs, attention_mask=None, training=None, return_attention_scores=False):
        x = inputs
        layer_input = x
        query = key = value = x
        if self.use_bottleneck:
            layer_input = self.bottleneck_input(x, training=training)
            if self.use_bottleneck_attention:
                query = key = value = layer_input
            elif self.bottleneck_attention is not None:
                query = key = self.bottleneck_attention(x, training=training)
        context, probs = self.attention(
            query, key, value, attention_mask=attention_mask, training=training, return_attention_scores=True
        )
        h = self.attention_output(context, residual=layer_input, training=training)
        for ffn in self.ffns:
            h = ffn(h, training=training)
        if self.output_bottleneck is not None:
            h = self.output_bottleneck(h, residual=x, training=training)
        if return_attention_scores:
            return h, probs
        return h

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                key: getattr(self, key)
                for key in (
                    "hidden_size", "num_heads", "intermediate_size", "intra_bottleneck_size", "use_bottleneck",
                    "use_bottleneck_attention", "key_query_shared_bottleneck", "num_feedforward_networks",
                    "normalization_type", "hidden_act", "layer_norm_epsilon", "final_ffn_layer_norm_epsilon",
                    "hidden_dropout", "attention_dropout", "attention_mask_value", "attention_mask_mode",
                    "initializer_range",
                )
            }
        )
        return config
