"""RotaryAttention: self-attention with rotary positions and an optional sliding window (ModernBERT)."""

import numpy as np

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention


def inverse_frequencies(head_size, theta):
    """The ``head_size / 2`` rotation frequencies ``theta ** (-2i / head_size)``, float32 as transformers'.

    Example:
        >>> inverse_frequencies(4, 10000.0)
        array([1.  , 0.01], dtype=float32)
    """
    exponents = np.arange(0, head_size, 2, dtype=np.int64).astype(np.float32) / np.float32(head_size)
    return (1.0 / (np.float64(theta) ** exponents.astype(np.float64))).astype(np.float32)


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class RotaryAttention(MultiHeadAttention):
    """Scaled dot-product attention whose queries and keys are rotated by their positions (RoPE, Su et al. 2021).

    Position ``p`` rotates each pair ``(x_i, x_{i + D/2})`` of a head by ``p * theta ** (-2i / D)``
    (transformers' ``rotate_half`` layout): ``x * cos + rotate_half(x) * sin``. The angles are computed in
    the graph from the positions ``0 .. S-1`` of the input, so a dynamic-length export needs no table and
    no position limit. With ``attention_window`` > 0 (ModernBERT's local layers) a query at ``i`` sees the
    keys at ``|i - j| <= attention_window // 2`` only: the window is a mask computed from the positions
    (``mask_value`` outside it, added to the padding mask), so every token of a padded or unpadded batch is
    computed as transformers' padded path computes it, with no data-dependent gathering.

    Args:
        num_heads (int): attention heads.
        head_size (int): width of each head (even).
        rotary_theta (float): RoPE base (ModernBERT: ``global_rope_theta`` 160000 on global layers,
            ``local_rope_theta`` 10000 on local ones).
        attention_window (int): 0 (every key) or the sliding window's width (ModernBERT's ``local_attention``).
        **kwargs: MultiHeadAttention arguments (``fused_qkv``, ``use_bias`` ...) and standard layer arguments.

    Example:
        >>> mha = RotaryAttention(num_heads=2, head_size=8, rotary_theta=10000.0, attention_window=4,
        ...                       fused_qkv=True, name="attention")
        >>> x = tf.ones([1, 9, 16])
        >>> mha(x, x, x).shape
        TensorShape([1, 9, 16])
    """

    def __init__(self, num_heads, head_size, rotary_theta=10000.0, attention_window=0, **kwargs):
        super().__init__(num_heads, head_size, **kwargs)
        if head_size % 2:
            raise ValueError(f"rotary positions rotate pairs of a head's features: head_size {head_size} must be even")
        self.rotary_theta = float(rotary_theta)
        self.attention_window = int(attention_window)
        self._inverse_frequencies = inverse_frequencies(head_size, self.rotary_theta)

    def _rotate(self, x, cos, sin):
        half = self.head_size // 2
        first, second = x[..., :half], x[..., half:]
        return x * cos + tf.concat([-second, first], axis=-1) * sin

    def project_heads(self, query, key, value, dims=None):
        q, k, v = super().project_heads(query, key, value, dims)  # (B, N, S, D)
        positions = tf.cast(tf.range(tf.shape(q)[2]), tf.float32)  # (S,)
        angles = tf.expand_dims(positions, -1) * tf.constant(self._inverse_frequencies)[tf.newaxis]  # (S, D/2)
        angles = tf.concat([angles, angles], axis=-1)  # (S, D)
        cos, sin = tf.cast(tf.cos(angles), q.dtype), tf.cast(tf.sin(angles), q.dtype)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin), v

    def apply_mask(self, scores, attention_mask):
        scores = super().apply_mask(scores, attention_mask)
        if not self.attention_window:
            return scores
        positions = tf.range(tf.shape(scores)[-1])
        distance = tf.abs(tf.expand_dims(positions, -1) - tf.expand_dims(positions, 0))  # (S, S)
        outside = tf.cast(distance > self.attention_window // 2, scores.dtype)
        return scores + outside * tf.cast(self.mask_value, scores.dtype)

    def get_config(self):
        return {**super().get_config(), "rotary_theta": self.rotary_theta, "attention_window": self.attention_window}
