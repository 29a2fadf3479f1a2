"""BucketedRelativeAttention: self-attention plus a learned bias per relative-distance bucket (MPNet)."""

from mobilebert_kit.backend import keras
from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention
from mobilebert_kit.layers.relative_position_bias import MAX_DISTANCE, RelativePositionBias


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class BucketedRelativeAttention(MultiHeadAttention):
    """Scaled dot-product attention with ``bias[h, bucket(j - i)]`` added to the scores (MPNet, T5).

    Scores are ``q_i . k_j / sqrt(d) + b[bucket(j - i)]`` before the mask and the
    softmax, as ``MPNetSelfAttention`` adds its ``position_bias``. transformers
    computes the bias once in the encoder and adds it in every layer; here each
    attention layer holds its own ``relative_attention_bias`` sublayer (the
    importer fills every copy from the one checkpoint tensor), so a block stays
    self-contained: export, rebuild and quantization call blocks one by one.

    Args:
        num_heads (int): attention heads.
        head_size (int): width of each head.
        num_buckets (int): relative-distance buckets (32 in MPNet).
        max_length (int): longest sequence; the bucket vector is built for it.
        max_distance (int): distances at or beyond it share the last bucket (128).
        **kwargs: MultiHeadAttention arguments and standard layer arguments.

    Example:
        >>> mha = BucketedRelativeAttention(num_heads=2, head_size=16, num_buckets=32, max_length=64,
        ...                                 name="attention")
        >>> x = tf.ones([1, 9, 32])
        >>> mha(x, x, x).shape
        TensorShape([1, 9, 32])
    """

    def __init__(self, num_heads, head_size, num_buckets=32, max_length=512, max_distance=MAX_DISTANCE, **kwargs):
        super().__init__(num_heads, head_size, **kwargs)
        self.num_buckets = int(num_buckets)
        self.max_length = int(max_length)
        self.max_distance = int(max_distance)
        stddev = getattr(self.kernel_initializer, "stddev", 0.02)
        self.relative_attention_bias = RelativePositionBias(
            num_heads, num_buckets=num_buckets, max_length=max_length, max_distance=max_distance,
            initializer_range=stddev, name="relative_attention_bias", dtype=self.dtype_policy,
        )

    def attention_scores(self, query, key):
        scores = super().attention_scores(query, key)  # (B, N, S, S), already scaled
        return scores + self.relative_attention_bias(scores)

    def get_config(self):
        return {**super().get_config(), "num_buckets": self.num_buckets, "max_length": self.max_length,
                "max_distance": self.max_distance}
