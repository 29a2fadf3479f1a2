"""DisentangledAttention: DeBERTa's content-to-position and position-to-content scores (He et al., 2021).

DeBERTa-v2/v3 score a query ``i`` against a key ``j`` with three terms over
one relative-position table ``P`` (``[2A, hidden]``, the encoder's
``rel_embeddings``, layer-normed when ``norm_rel_ebd`` says ``layer_norm``):

- content-to-content ``q_i . k_j``,
- content-to-position (c2p) ``q_i . Pk[idx(i, j)]`` with ``Pk = key(P)``,
- position-to-content (p2c) ``k_j . Pq[A - bucket(j - i)]`` with ``Pq = query(P)``,

where ``idx(i, j) = clamp(A + bucket(i - j), 0, 2A - 1)``, ``bucket`` is the
identity or DeBERTa-v2's log bucketing (:func:`log_bucket_positions`), and the
positions go through the layer's own query and key projections
(``share_att_key``). All three are divided by ``sqrt(head_size * (1 + terms))``
(transformers' ``DisentangledSelfAttention``).

Exportable like the other relative layers (:mod:`relative_positions`): the
table index of every distance a ``max_length`` sequence can have is a numpy
vector computed once; a call slices it to the sequence length, gathers the
``2S - 1`` projected rows it needs and skews ``q @ Pk^T`` ``[S, 2S - 1]`` into
``[S, S]``; p2c is the same skew with the key as the row, transposed. No
``[S, S, d]`` tensor and no Python value of a dynamic shape.

Each attention layer holds a copy of the checkpoint's one table and its norm
(``rel_embeddings``, filled by the importer from every block's copy of
``encoder.rel_embeddings`` / ``encoder.LayerNorm``), so a block stays
self-contained for export, rebuild and quantization, as MPNet's bias does.
"""

import math

import numpy as np

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.errors import ConfigError, check_choice
from mobilebert_kit.layers import relative_positions as rel
from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention
from mobilebert_kit.layers.normalization import make_norm

# Which position terms join content-to-content (transformers' ``pos_att_type``; DeBERTa-v2/v3: both).
DISENTANGLED_TERMS = {"c2p_p2c": ("c2p", "p2c"), "c2p": ("c2p",), "p2c": ("p2c",)}


def log_bucket_positions(relative, bucket_size, max_position):
    """DeBERTa-v2's bucket of each relative position ``q - k``, in float32 like the reference.

    Distances up to ``bucket_size // 2`` keep their own bucket; beyond, the
    bucket grows with the logarithm of the distance, reaching
    ``bucket_size - 1`` at ``max_position - 1`` (``make_log_bucket_position``).
    The ceiling of a float32 quotient decides each bucket, so it is computed in
    float32 as transformers does in PyTorch (checked against it in
    tests/test_families.py). ``bucket_size`` and ``max_position`` are DeBERTa's ``position_buckets`` and
    ``max_relative_positions`` (256 and 512 in v3); the buckets are signed int64, the shape of ``relative``.

    Example:
        >>> log_bucket_positions(np.array([-3, 0, 100, 200, 511]), 256, 512).tolist()
        [-3, 0, 100, 169, 255]
    """
    relative = np.asarray(relative, np.int64)
    mid = bucket_size // 2
    sign = np.sign(relative)
    near = (relative < mid) & (relative > -mid)
    abs_pos = np.where(near, mid - 1, np.abs(relative))
    ratio = abs_pos.astype(np.float32) / np.float32(mid)
    scale = np.log(np.float32((max_position - 1) / mid))
    log_pos = np.ceil(np.log(ratio) / scale * np.float32(mid - 1)) + np.float32(mid)
    return np.where(abs_pos <= mid, relative, (log_pos * sign).astype(np.int64)).astype(np.int64)


def relative_table_index(max_length, span, position_buckets=0, max_relative_positions=None):
    """The c2p and p2c rows of the ``[2 * span]`` table for every distance ``j - i`` of a ``max_length`` sequence.

    Entry ``m`` stands for the distance ``d = m - (max_length - 1)`` (key minus query, the layout of
    :func:`relative_positions.skew`): c2p reads row ``clamp(span + bucket(-d))``, p2c row
    ``clamp(span - bucket(-d))`` of its key-row skew, where that distance is the query's minus the key's.
    Returns two int32 ``[2 * max_length - 1]`` vectors (c2p, p2c).

    Example:
        >>> [v.tolist() for v in relative_table_index(3, 4)]
        [[6, 5, 4, 3, 2], [2, 3, 4, 5, 6]]
    """
    distance = np.arange(2 * max_length - 1) - (max_length - 1)
    relative = -distance  # q - k
    if position_buckets > 0:
        relative = log_bucket_positions(relative, position_buckets, max_relative_positions)
    c2p = np.clip(span + relative, 0, 2 * span - 1).astype(np.int32)
    p2c = np.clip(span - relative, 0, 2 * span - 1).astype(np.int32)
    return c2p, p2c


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class RelativeEmbeddings(keras.layers.Layer):
    """DeBERTa's relative-position table ``[rows, width]`` (``embeddings``), layer-normed with ``norm``.

    Called with any tensor of the compute dtype; returns the (normed) table.

    Args:
        rows (int): ``2 * span`` (``2 * position_buckets`` in DeBERTa-v3).
        width (int): the hidden size.
        normalize (bool): apply ``norm`` (LayerNorm, DeBERTa's ``norm_rel_ebd: layer_norm``).
        layer_norm_epsilon (float): its epsilon.
        initializer_range (float): stddev of the table's initializer.
        **kwargs: standard layer arguments.

    Example:
        >>> RelativeEmbeddings(8, 16, name="rel_embeddings")(tf.ones([1])).shape
        TensorShape([8, 16])
    """

    def __init__(self, rows, width, normalize=True, layer_norm_epsilon=1e-7, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.rows, self.width = int(rows), int(width)
        self.normalize = bool(normalize)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.initializer_range = float(initializer_range)
        self.norm = make_norm("layer_norm", self.layer_norm_epsilon, "norm", dtype=self.dtype_policy) \
            if self.normalize else None

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            "embeddings", shape=[self.rows, self.width],
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
        )
        if self.norm is not None:
            with tf.name_scope(self.norm.name):
                self.norm.build([self.rows, self.width])
        super().build(input_shape)

    def call(self, donor):
        table = tf.cast(self.embeddings, donor.dtype)
        return self.norm(table) if self.norm is not None else table

    def get_config(self):
        return {**super().get_config(), "rows": self.rows, "width": self.width, "normalize": self.normalize,
                "layer_norm_epsilon": self.layer_norm_epsilon, "initializer_range": self.initializer_range}


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class DisentangledAttention(MultiHeadAttention):
    """Self-attention with DeBERTa-v2's disentangled relative-position terms (see the module docstring).

    Args:
        num_heads (int): attention heads.
        head_size (int): width of each head.
        position_buckets (int): log buckets (DeBERTa-v3: 256); 0 uses the plain clamped distance.
        max_relative_positions (int): DeBERTa's ``max_relative_positions`` (the config's -1 resolved to
            ``max_position_embeddings``): the table's half-size without buckets, the log scale with them.
        disentangled_terms (str): ``"c2p_p2c"`` (DeBERTa-v2/v3), ``"c2p"`` or ``"p2c"``.
        relative_embedding_norm (bool): LayerNorm on the table (``norm_rel_ebd: layer_norm``).
        layer_norm_epsilon (float): that norm's epsilon.
        max_length (int): longest sequence; the index vectors are built for it.
        **kwargs: MultiHeadAttention arguments and standard layer arguments.

    Example:
        >>> mha = DisentangledAttention(num_heads=2, head_size=16, position_buckets=8, max_relative_positions=64,
        ...                             max_length=64, name="attention")
        >>> x = tf.ones([1, 9, 32])
        >>> mha(x, x, x).shape
        TensorShape([1, 9, 32])
    """

    def __init__(self, num_heads, head_size, position_buckets=256, max_relative_positions=512,
                 disentangled_terms="c2p_p2c", relative_embedding_norm=True, layer_norm_epsilon=1e-7,
                 max_length=512, **kwargs):
        super().__init__(num_heads, head_size, **kwargs)
        self.position_buckets = int(position_buckets)
        self.max_relative_positions = int(max_relative_positions)
        self.disentangled_terms = check_choice("disentangled_terms", disentangled_terms, tuple(DISENTANGLED_TERMS))
        self.relative_embedding_norm = bool(relative_embedding_norm)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.max_length = int(max_length)
        if self.position_buckets > 0:
            mid = self.position_buckets // 2
            if self.position_buckets < 4 or self.max_relative_positions <= mid + 1:
                raise ConfigError(f"position_buckets={self.position_buckets} needs at least 4 buckets and "
                                  f"max_relative_positions above {mid + 1} (log buckets from distance {mid}); got "
                                  f"max_relative_positions={self.max_relative_positions}: fix the config")
        self.span = self.position_buckets if self.position_buckets > 0 else self.max_relative_positions
        self._terms = DISENTANGLED_TERMS[self.disentangled_terms]
        self._scale = 1.0 / math.sqrt(head_size * (1 + len(self._terms)))
        self._c2p_index, self._p2c_index = relative_table_index(
            self.max_length, self.span, self.position_buckets, self.max_relative_positions)
        self.rel_embeddings = RelativeEmbeddings(
            2 * self.span, num_heads * head_size, normalize=self.relative_embedding_norm,
            layer_norm_epsilon=self.layer_norm_epsilon,
            initializer_range=getattr(self.kernel_initializer, "stddev", 0.02),
            name="rel_embeddings", dtype=self.dtype_policy,
        )

    def _positions(self, projection, table, index, length):
        """``projection(table)`` rows of each distance of this length, as ``[N, D, 2S - 1]``."""
        rows = tf.gather(projection(table), rel.slice_distance_index(index, length, self.max_length))
        rows = tf.reshape(rows, [-1, self.num_heads, self.head_size])  # (2S-1, N, D)
        return tf.transpose(rows, [1, 2, 0])

    def attention_scores(self, query, key):
        length = rel.static_length(query, 2)
        scale = tf.cast(self._scale, query.dtype)
        query = query * scale
        scores = tf.matmul(query, key, transpose_b=True)  # (B, N, S, S)
        table = self.rel_embeddings(query)  # (2A, H), normed
        if "c2p" in self._terms:
            pos_key = self._positions(self.key, table, self._c2p_index, length)
            scores += rel.skew(tf.matmul(query, pos_key), length)  # [i, j] = q_i . Pk[idx(i, j)]
        if "p2c" in self._terms:
            pos_query = self._positions(self.query, table, self._p2c_index, length)
            by_key = rel.skew(tf.matmul(key * scale, pos_query), length)  # [j, i] = k_j . Pq[A - bucket(j - i)]
            scores += tf.transpose(by_key, [0, 1, 3, 2])
        return scores

    def get_config(self):
        return {**super().get_config(), "position_buckets": self.position_buckets,
                "max_relative_positions": self.max_relative_positions, "disentangled_terms": self.disentangled_terms,
                "relative_embedding_norm": self.relative_embedding_norm, "layer_norm_epsilon": self.layer_norm_epsilon,
                "max_length": self.max_length}
