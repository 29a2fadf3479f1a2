"""RelativePositionBias: a learned per-head score for each bucket of relative distance (T5, MPNet).

The bucket of distance ``d = j - i`` (query ``i``, key ``j``) is T5's
bidirectional bucketing (Raffel et al., 2020, Sec. 2.1), as transformers'
``MPNetEncoder.relative_position_bucket`` computes it: half the buckets for
each sign, exact buckets below ``num_buckets // 4``, logarithmic ones up to
``max_distance``, the last bucket beyond it.

Exportable: the bucket of every distance a ``max_length`` sequence can have
is a numpy vector computed once; a call slices it to the sequence length,
gathers the table's rows (``[2S - 1, heads]``) and spreads them to
``[S, S]`` with the skew of :mod:`relative_positions` (Pad, Reshape and
StridedSlice), so an export carries ``O(S)`` integer constants and no Python
value of a dynamic shape.
"""

import math

import numpy as np

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.layers import relative_positions as rel

# T5's and MPNet's: transformers hard-codes it in relative_position_bucket.
MAX_DISTANCE = 128


def relative_buckets(distance, num_buckets=32, max_distance=MAX_DISTANCE):
    """T5's bidirectional bucket of each relative ``distance`` (``key - query``), in float32 like the reference.

    The logarithmic buckets truncate ``log(n / e) / log(D / e) * (B/2 - e)`` (``e = B // 4``); at n = 16, 32
    and 64 (with B = 32, D = 128) that value is an integer in exact arithmetic, so the bucket depends on
    float32 rounding: computing it in float32 as transformers does in PyTorch gives the same buckets (checked
    over every distance up to 600 in tests/test_families.py). ``num_buckets`` counts both signs together;
    distances at or beyond ``max_distance`` share the last bucket. Returns int32 buckets in
    ``[0, num_buckets)``, the shape of ``distance``.

    Example:
        >>> relative_buckets(np.array([-1, 0, 1, 200])).tolist()
        [1, 0, 17, 31]
    """
    n = -np.asarray(distance, np.int64)
    half = num_buckets // 2
    bucket = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    with np.errstate(divide="ignore", invalid="ignore"):  # n = 0 takes the exact branch
        scaled = (np.log(n.astype(np.float32) / np.float32(exact)) / np.float32(math.log(max_distance / exact))
                  * np.float32(half - exact))
    large = exact + np.nan_to_num(scaled, neginf=0.0).astype(np.int64)
    bucket += np.where(n < exact, n, np.minimum(large, half - 1))
    return bucket.astype(np.int32)


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class RelativePositionBias(keras.layers.Layer):
    """The ``[1, heads, S, S]`` score bias of bucketed relative positions, for the sequence length of its input.

    Weight ``embeddings`` ``[num_buckets, num_heads]`` (transformers' ``relative_attention_bias``).

    Args:
        num_heads (int): attention heads (the table's width).
        num_buckets (int): rows of the table (at least 4: T5's exact buckets are ``num_buckets // 4``).
        max_length (int): longest sequence; the bucket vector is built for it.
        max_distance (int): distances at or beyond it share the last bucket.
        initializer_range (float): stddev of the table's initializer.
        **kwargs: standard layer arguments.

    Example:
        >>> bias = RelativePositionBias(num_heads=2, num_buckets=32, max_length=64, name="relative_attention_bias")
        >>> bias(tf.ones([1, 2, 9, 16])).shape  # any tensor whose axis 2 is the sequence
        TensorShape([1, 2, 9, 9])
    """

    def __init__(self, num_heads, num_buckets=32, max_length=512, max_distance=MAX_DISTANCE,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if num_buckets < 4:
            raise ConfigError(f"relative_attention_num_buckets must be >= 4 (T5 bucketing), got {num_buckets}")
        self.num_heads = int(num_heads)
        self.num_buckets = int(num_buckets)
        self.max_length = int(max_length)
        self.max_distance = int(max_distance)
        self.initializer_range = float(initializer_range)
        # Entry m: the bucket of distance m - (max_length - 1).
        self._buckets = relative_buckets(np.arange(2 * self.max_length - 1) - (self.max_length - 1),
                                         self.num_buckets, self.max_distance)

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            "embeddings", shape=[self.num_buckets, self.num_heads],
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
        )
        super().build(input_shape)

    def call(self, scores):
        length = rel.static_length(scores, 2)
        index = rel.slice_distance_index(self._buckets, length, self.max_length)  # (2S-1,)
        per_distance = tf.gather(tf.cast(self.embeddings, scores.dtype), index)  # (2S-1, N)
        # One constant-shape RESHAPE (tf.newaxis indexing added a STRIDED_SLICE at an open length).
        per_distance = tf.reshape(tf.transpose(per_distance), [1, self.num_heads, 1, -1])  # (1, N, 1, 2S-1)
        # x * 1 is exact: every query row reads the same per-distance vector before the skew shifts it.
        rows = per_distance * tf.ones(tf.stack([1, 1, length, 1]), scores.dtype)  # (1, N, S, 2S-1)
        return rel.skew(rows, length)  # (1, N, S, S): [i, j] = bias of bucket(j - i)

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "num_buckets": self.num_buckets,
                "max_length": self.max_length, "max_distance": self.max_distance,
                "initializer_range": self.initializer_range}
