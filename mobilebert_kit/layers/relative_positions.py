"""Relative-position index tables and the shift ("skew") used by relative attention.

Plain functions, not layers: :class:`FunctionalRelativeAttention` (NEZHA) and
:class:`CompositeAttention` (Convolutions and Self-Attention) share them.

Both papers score a query ``i`` against a key ``j`` with a term that depends
only on the clipped distance ``r = clip(j - i, -K, K) + K`` (NEZHA Eq. 4-7;
composite attention Eq. 4-6). A per-offset score ``X[..., i, r]`` (for example
``q_i . a_r``) must be spread into the ``[S, S]`` score matrix as
``out[..., i, j] = X[..., i, r(i, j)]``. Doing that with a one-hot matrix costs
``S * S * (2K + 1)`` constants and multiply-adds; materialising ``a_ij`` as
``[S, S, d]`` costs ``S * S * d`` constants per layer (4 MB at S = 128,
d = 64). Instead we

1. gather the ``2K + 1`` offsets into the ``2S - 1`` possible distances
   (a constant index vector, clamped so distances beyond the window reuse the
   edge offset), and
2. *skew*: pad, flatten, slice and reshape so that row ``i`` is shifted by
   ``S - 1 - i`` (Huang et al., 2018, "Music Transformer", Sec. 3.4.1).

Everything is static-shape data movement (Pad, Reshape, StridedSlice, and the
edge repetition of step 1 as a multiply by ones and a Concatenation; see
:func:`expand_offsets`), which TFLite and ONNX express directly. The index
tables are numpy arrays computed once for the longest sequence
(``max_length``) and sliced to the sequence length, so an export at a fixed
``[1, S]`` carries only ``O(S)`` integer constants.
"""

import math

import numpy as np

from mobilebert_kit.backend import tf
from mobilebert_kit.layers.shapes import leading_dims


def relative_index(max_length, max_distance):
    """``[L, L]`` int32 table ``clip(j - i, -K, K) + K`` (row: query i, column: key j)."""
    positions = np.arange(max_length)
    distance = positions[None, :] - positions[:, None]
    return (np.clip(distance, -max_distance, max_distance) + max_distance).astype(np.int32)


def distance_index(max_length, max_distance):
    """``[2L - 1]`` int32 vector: entry ``m`` is the clipped offset index of distance ``m - (L - 1)``."""
    distance = np.arange(2 * max_length - 1) - (max_length - 1)
    return (np.clip(distance, -max_distance, max_distance) + max_distance).astype(np.int32)


def sinusoid_table(max_distance, depth):
    """NEZHA's fixed ``[2K + 1, depth]`` table: sin on even, cos on odd dimensions.

    The reference implementations (NEZHA-TensorFlow ``modeling.py`` and Hugging
    Face ``NezhaRelativePositionsEncoding``) evaluate the sinusoids at the
    *shifted* index ``clip(j - i) + K`` in ``[0, 2K]``, not at ``j - i`` as the
    paper's Eq. 6-7 write; we follow the code, since checkpoints depend on it.
    Computed in float64 (as the TF reference does with numpy), then cast.
    """
    position = np.arange(2 * max_distance + 1, dtype=np.float64)[:, None]
    inverse = np.power(10000.0, -np.arange(0, depth, 2, dtype=np.float64) / depth)[None, :]
    table = np.zeros([2 * max_distance + 1, depth], np.float64)
    table[:, 0::2] = np.sin(position * inverse)
    table[:, 1::2] = np.cos(position * inverse[:, : depth // 2])
    return table.astype(np.float32)


def static_length(tensor, axis):
    """The static size of ``axis`` if known, else the dynamic scalar."""
    size = tensor.shape[axis]
    return int(size) if size is not None else tf.shape(tensor)[axis]


def slice_distance_index(table, length, max_length):
    """Slices a :func:`distance_index` table for ``max_length`` down to ``length``.

    Returns a numpy array when ``length`` is a Python int (static shapes: the
    slice becomes a small constant), else a tensor sliced at run time.
    """
    if isinstance(length, int):
        _check_length(length, max_length)
        return table[max_length - length : max_length + length - 1]
    return tf.constant(table)[max_length - length : max_length + length - 1]


def slice_relative_index(table, length, max_length):
    """Slices a :func:`relative_index` table to ``[length, length]`` (numpy when ``length`` is static)."""
    if isinstance(length, int):
        _check_length(length, max_length)
        return table[:length, :length]
    return tf.constant(table)[:length, :length]


def _check_length(length, max_length):
    if length > max_length:
        raise ValueError(
            f"sequence length {length} exceeds max_position_embeddings={max_length}, the length the "
            "relative position tables were built for; rebuild with a larger max_position_embeddings"
        )


def skew(x, length=None):
    """``[B, N, S, 2S - 1] -> [B, N, S, S]`` with ``out[..., i, j] = x[..., i, j - i + S - 1]``.

    Column ``m`` of ``x`` holds distance ``m - (S - 1)``. One zero column makes
    every row ``2S`` long; in the flattened array row ``i``'s entry for key
    ``j`` then sits at ``(S - 1) + i * (2S - 1) + j``, so dropping the first
    ``S - 1`` elements and re-reading rows of ``2S - 1`` lines them up.
    Exact (data movement only); works for S = 1. ``length``: ``S`` as the caller
    already read it (an open length read again is another SHAPE op per call).
    """
    batch, heads = leading_dims(x)  # static where known: the open length costs only its own arithmetic
    length = static_length(x, 2) if length is None else length
    x = tf.pad(x, [[0, 0], [0, 0], [0, 0], [0, 1]])  # (B, N, S, 2S)
    flat = tf.reshape(x, [batch, heads, -1])  # (B, N, 2S*S)
    flat = flat[:, :, length - 1 : length - 1 + length * (2 * length - 1)]
    return tf.reshape(flat, [batch, heads, -1, 2 * length - 1])[:, :, :, :length]


def unskew(p, length=None):
    """Inverse layout of :func:`skew`: ``[B, N, S, S] -> [B, N, S, 2S - 1]``, zeros elsewhere.

    ``out[..., i, j - i + S - 1] = p[..., i, j]``: column ``m`` collects the
    weight that query ``i`` puts on distance ``m - (S - 1)``. ``length``: ``S``
    if the caller has it.
    """
    batch, heads = leading_dims(p)
    length = static_length(p, 2) if length is None else length
    p = tf.pad(p, [[0, 0], [0, 0], [0, 0], [0, length - 1]])  # (B, N, S, 2S-1)
    flat = tf.reshape(p, [batch, heads, -1])
    flat = tf.pad(flat, [[0, 0], [0, 0], [length - 1, 1]])  # (B, N, 2S*S)
    return tf.reshape(flat, [batch, heads, -1, 2 * length])[:, :, :, : 2 * length - 1]


def spread_offsets(per_offset, index, length=None):
    """Spreads per-offset scores ``X[..., i, r]`` ``[B, N, S, 2K+1]`` to ``[B, N, S, S]`` by clipped distance:
    ``out[..., i, j] = X[..., i, clip(j - i, -K, K) + K]``, with ``index`` the :func:`distance_index` slice for
    this length and ``length`` ``S`` if the caller has it."""
    return skew(expand_offsets(per_offset, index), length)


def expand_offsets(per_offset, index):
    """``X[..., index]`` along the last axis, without a Gather when ``index`` is a static clipped range.

    A :func:`distance_index` slice is a contiguous run of offsets with the
    first and last one repeated (distances beyond the window). For such a
    numpy ``index`` the result is built as a slice of ``X`` between its edge
    columns multiplied by a vector of ones (a broadcast: exact, ``x * 1 ==
    x``), concatenated. Why: TFLite's XNNPACK delegate does not take GATHER, so
    a gather in every attention layer split the graph into one delegate
    partition per layer (benchmarks/RESULTS.md, issue 17); Slice, Mul and
    Concatenation stay inside it. Any other ``index`` (a tensor, or another
    pattern) is gathered.
    """
    runs = _clipped_range(index)
    if runs is None:
        return tf.gather(per_offset, index, axis=-1)
    low, high, left, right = runs
    parts = []
    if left:
        parts.append(per_offset[..., low : low + 1] * tf.ones([left], per_offset.dtype))
    parts.append(per_offset[..., low : high + 1])
    if right:
        parts.append(per_offset[..., high : high + 1] * tf.ones([right], per_offset.dtype))
    return parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)


def _clipped_range(index):
    """``(low, high, left, right)`` if ``index`` is ``[low] * left + [low .. high] + [high] * right``, else None."""
    if not isinstance(index, np.ndarray) or index.ndim != 1 or index.size == 0:
        return None
    low, high = int(index[0]), int(index[-1])
    if high < low:
        return None
    left = int(np.sum(index == low)) - 1
    right = int(np.sum(index == high)) - 1 if high > low else 0
    expected = np.concatenate([np.full(left, low), np.arange(low, high + 1), np.full(right, high)])
    if expected.shape != index.shape or not np.array_equal(expected, index):
        return None
    return low, high, left, right


def inverse_sqrt(size, dtype):
    return tf.cast(1.0 / math.sqrt(size), dtype)
