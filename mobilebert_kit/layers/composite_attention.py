"""CompositeAttention: self-attention plus lightweight convolutions as relative-position terms."""

import math

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.errors import ConfigError, check_choice
from mobilebert_kit.layers import relative_positions as rel
from mobilebert_kit.layers.initializers import fresh_initializer
from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention
from mobilebert_kit.layers.shapes import leading_dims

# The variants compared by Chang et al. (2021), as the terms each adds to self-attention:
#   query: dynamic lightweight convolution from the query (Shaw et al. relative keys, Eq. 5)
#   key: dynamic lightweight convolution from the key (Huang et al. 2020; Sec. 3.3)
#   fixed: fixed lightweight convolution, a per-head bias (T5, Eq. 4)
#   depthwise: fixed depthwise convolution of the values added to the context (Eq. 7)
RELATIVE_ATTENTION_VARIANTS = {
    "composite": ("query", "fixed"),  # Eq. 6, the paper's proposal
    "fixed": ("fixed",),
    "dynamic": ("query",),
    "composite_key": ("query", "key", "fixed"),  # Sec. 3.3: GLUE 74.0 vs 75.2 without the key term
    "fixed_depthwise": ("depthwise",),  # Table 2
    "composite_depthwise": ("query", "fixed", "depthwise"),  # Table 2
}


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class CompositeAttention(MultiHeadAttention):
    """Composite attention (Chang et al., 2021, "Convolutions and Self-Attention", Eq. 6).

    With ``r = clip(j - i, -k, k) + k`` (window ``k``, kernel ``2k + 1``;
    distances beyond the window reuse the edge weights):

    ``alpha_ij = q_i . k_j / sqrt(d_h) + q_i . W_C[r] / sqrt(d_h) + beta[r]``

    - ``W_C`` ``[2k + 1, d_h]`` (``relative_query_embeddings``): the dynamic
      lightweight convolution generated from the query, i.e. Shaw et al.'s
      relative key embeddings; one per layer, shared across heads.
    - ``beta`` ``[heads, 2k + 1]`` (``relative_bias``): the fixed lightweight
      convolution, i.e. a T5-style per-head bias, added unscaled.

    ``relative_attention_variant`` selects the terms (see
    ``RELATIVE_ATTENTION_VARIANTS``): ``"composite"`` (Eq. 6), ``"fixed"``
    (Eq. 4, T5), ``"dynamic"`` (Eq. 5, Shaw), ``"composite_key"`` (adds
    ``k_j . W_K[clip(i - j) + k] / sqrt(d_h)``, Sec. 3.3),
    ``"fixed_depthwise"`` (Eq. 7: a depthwise convolution of the values with
    bias, padding masked to zero, added to the context after the softmax, as
    the paper's footnote 3 and reference code do) and ``"composite_depthwise"``.

    Initialisation follows the reference code (mlpc-ucsd/BERT_Convolutions):
    ``beta`` zeros, ``W_C``/``W_K`` uniform in ``+-1/sqrt(2k + 1)``.

    Args:
        num_heads: number of attention heads.
        head_size: width of each head.
        relative_window: ``k``, positions each way (8 in the paper: kernel 17).
        relative_attention_variant: one of ``RELATIVE_ATTENTION_VARIANTS``.
        max_length: longest sequence; the index tables are built for it.
        **kwargs: MultiHeadAttention arguments and standard layer arguments.

    Example:
        >>> mha = CompositeAttention(num_heads=2, head_size=16, relative_window=8, max_length=64,
        ...                          name="attention")
        >>> x = tf.ones([1, 9, 32])
        >>> mha(x, x, x).shape
        TensorShape([1, 9, 32])
    """

    def __init__(self, num_heads, head_size, relative_window=8, relative_attention_variant="composite",
                 max_length=512, **kwargs):
        super().__init__(num_heads, head_size, **kwargs)
        if relative_window < 1:
            raise ConfigError(f"relative_window must be >= 1, got {relative_window}")
        self.relative_window = int(relative_window)
        self.relative_attention_variant = check_choice(
            "relative_attention_variant", relative_attention_variant, tuple(RELATIVE_ATTENTION_VARIANTS)
        )
        self.max_length = int(max_length)
        self.terms = RELATIVE_ATTENTION_VARIANTS[relative_attention_variant]
        self._relative_index = rel.relative_index(self.max_length, self.relative_window)
        self._distance_index = rel.distance_index(self.max_length, self.relative_window)
        self.depthwise_conv = None
        if "depthwise" in self.terms:
            self.depthwise_conv = keras.layers.DepthwiseConv1D(
                kernel_size=2 * self.relative_window + 1,
                padding="same",
                depthwise_initializer=fresh_initializer(self.kernel_initializer),
                name="depthwise_conv",
                dtype=self.dtype_policy,
            )

    def build(self, input_shape=None):
        width = 2 * self.relative_window + 1
        bound = 1.0 / math.sqrt(width)
        self.relative_bias = self.relative_query_embeddings = self.relative_key_embeddings = None
        if "fixed" in self.terms:
            self.relative_bias = self.add_weight("relative_bias", shape=[self.num_heads, width], initializer="zeros")
        if "query" in self.terms:
            self.relative_query_embeddings = self.add_weight(
                "relative_query_embeddings", shape=[width, self.head_size],
                initializer=keras.initializers.RandomUniform(-bound, bound),
            )
        if "key" in self.terms:
            self.relative_key_embeddings = self.add_weight(
                "relative_key_embeddings", shape=[width, self.head_size],
                initializer=keras.initializers.RandomUniform(-bound, bound),
            )
        super().build(input_shape)

    def attention_scores(self, query, key):
        length = rel.static_length(query, 2)
        index = rel.slice_distance_index(self._distance_index, length, self.max_length)
        scores = tf.matmul(query, key, transpose_b=True)  # (B, N, S, S)
        if self.relative_query_embeddings is not None:
            table = tf.cast(self.relative_query_embeddings, query.dtype)
            # A broadcast matmul, not an einsum: one FULLY_CONNECTED at an open length too (layers/token_dense.py).
            per_offset = tf.matmul(query, table, transpose_b=True)  # (B, N, S, 2k+1)
            scores = scores + rel.spread_offsets(per_offset, index, length)
        if self.relative_key_embeddings is not None:
            table = tf.cast(self.relative_key_embeddings, key.dtype)
            per_offset = tf.matmul(key, table, transpose_b=True)  # (B, N, S_key, 2k+1)
            # spread gives [j, i] = k_j . W_K[clip(i - j) + k]; transpose to (query, key).
            scores = scores + tf.transpose(rel.spread_offsets(per_offset, index, length), [0, 1, 3, 2])
        scores = scores * rel.inverse_sqrt(self.head_size, scores.dtype)
        if self.relative_bias is not None:
            positions = rel.slice_relative_index(self._relative_index, length, self.max_length)  # (S, S)
            bias = tf.gather(tf.cast(self.relative_bias, scores.dtype), positions, axis=1)  # (N, S, S)
            scores = scores + bias[tf.newaxis]
        return scores

    def call(self, query, key, value, attention_mask=None, training=None, return_attention_scores=False):
        if self.depthwise_conv is None:
            return super().call(query, key, value, attention_mask=attention_mask, training=training,
                                return_attention_scores=return_attention_scores)
        dims = leading_dims(query)  # one read of an open batch for every reshape of the layer
        values = self.value(value)  # (B, S, N*D)
        q = self._split_heads(self.query(query), dims)
        k = self._split_heads(self.key(key), dims)
        v = self._split_heads(values, dims)
        probs = tf.nn.softmax(self.apply_mask(self.attention_scores(q, k), attention_mask), axis=-1)
        context = tf.matmul(self.dropout(probs, training=training), v)
        context = self._merge_heads(context, dims)  # (B, S, N*D)
        if attention_mask is not None:
            # Padding values are zeroed before the convolution (reference code), so outputs at
            # real tokens do not depend on what the padded positions hold.
            values = values * tf.cast(attention_mask, values.dtype)[:, :, tf.newaxis]
        context = context + self.depthwise_conv(values)
        return (context, probs) if return_attention_scores else context

    def get_config(self):
        return {
            **super().get_config(),
            "relative_window": self.relative_window,
            "relative_attention_variant": self.relative_attention_variant,
            "max_length": self.max_length,
        }
