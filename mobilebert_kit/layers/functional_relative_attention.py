"""FunctionalRelativeAttention: NEZHA's fixed sinusoidal relative positions on keys and values."""

import numpy as np

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.layers import relative_positions as rel
from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class FunctionalRelativeAttention(MultiHeadAttention):
    """Multi-head attention with functional relative positional encoding (Wei et al., 2019).

    With ``a_ij = T[clip(j - i, -K, K) + K]`` rows of a fixed sinusoid table
    ``T`` ``[2K + 1, head_size]`` (Eq. 6-7; evaluated at the shifted index as
    the reference code does, see :func:`relative_positions.sinusoid_table`):

    - scores ``e_ij = (q_i . k_j + q_i . a_ij) / sqrt(d)`` (Eq. 5),
    - context ``z_i = sum_j alpha_ij (v_j + a_ij)`` (Eq. 4).

    ``T`` has no trainable parameters, is shared by all heads and layers and is
    not stored in checkpoints. There are no absolute position embeddings. The
    ``q . a`` term is computed as ``q @ T^T`` (``S * (2K + 1) * d`` multiply-adds)
    and spread to ``[S, S]`` by clipped distance; the value term collects each
    query's probability mass per distance and multiplies by the table
    (see ``relative_positions``), so no ``[S, S, d]`` tensor is ever stored.

    Args:
        num_heads: number of attention heads.
        head_size: width of each head (the table's depth).
        max_relative_position: clipping distance ``K`` (64 in the reference code).
        max_length: longest sequence; the index tables are built for it.
        **kwargs: MultiHeadAttention arguments (dropout, mask_value, mask_mode,
            kernel_initializer) and standard layer arguments.

    Example:
        >>> mha = FunctionalRelativeAttention(num_heads=2, head_size=16, max_relative_position=4,
        ...                                   max_length=64, name="attention")
        >>> x = tf.ones([1, 9, 32])
        >>> mha(x, x, x).shape
        TensorShape([1, 9, 32])
    """

    def __init__(self, num_heads, head_size, max_relative_position=64, max_length=512, **kwargs):
        super().__init__(num_heads, head_size, **kwargs)
        if max_relative_position < 1:
            raise ConfigError(f"max_relative_position must be >= 1, got {max_relative_position}")
        self.max_relative_position = int(max_relative_position)
        self.max_length = int(max_length)
        # numpy at build time: the sinusoids and the distance index for the longest sequence.
        self._table = rel.sinusoid_table(self.max_relative_position, head_size)
        self._distance_index = rel.distance_index(self.max_length, self.max_relative_position)

    def _index(self, length):
        return rel.slice_distance_index(self._distance_index, length, self.max_length)

    def attention_scores(self, query, key):
        length = rel.static_length(query, 2)
        scores = tf.matmul(query, key, transpose_b=True)  # (B, N, S, S)
        # q @ T^T as a broadcast matmul against the constant [D, 2K+1]: one FULLY_CONNECTED at any length, where
        # the einsum was a BATCH_MATMUL with run-time reshapes at an open one.
        per_offset = tf.matmul(query, tf.constant(self._table.T, dtype=query.dtype))  # (B, N, S, 2K+1)
        scores = scores + rel.spread_offsets(per_offset, self._index(length), length)
        return scores * rel.inverse_sqrt(self.head_size, scores.dtype)

    def attention_context(self, probs, value):
        length = rel.static_length(probs, 2)
        index = self._index(length)
        context = tf.matmul(probs, value)  # (B, N, S, D)
        if isinstance(index, np.ndarray):
            by_distance = tf.constant(self._table[index], dtype=probs.dtype)  # static: a [2S-1, D] constant
        else:
            by_distance = tf.gather(tf.constant(self._table, dtype=probs.dtype), index)
        # unskew: (B, N, S, 2S-1), the probability mass each query puts on distance m - (S-1).
        return context + tf.einsum("bnim,md->bnid", rel.unskew(probs, length), by_distance)

    def get_config(self):
        return {**super().get_config(), "max_relative_position": self.max_relative_position,
                "max_length": self.max_length}
