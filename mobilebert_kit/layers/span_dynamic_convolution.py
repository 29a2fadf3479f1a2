"""SpanDynamicConvolution: ConvBERT's span-based dynamic convolution heads."""

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.layers.token_dense import TokenDense
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.layers.initializers import fresh_initializer
from mobilebert_kit.layers.shapes import leading_dims, reshape_leading


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class SpanDynamicConvolution(keras.layers.Layer):
    """Span-based dynamic convolution (Jiang et al., 2020, ConvBERT, Eq. 4-5).

    ``SDConv(Q, K_s, V) = LConv(V, softmax(W_f (Q * K_s)))``:

    - ``key_conv``: the span-aware key ``K_s``, a depthwise-separable 1-D
      convolution of the key input (depthwise kernel ``k``, then pointwise to
      the branch width, one bias after the pointwise step, "same" padding).
    - ``conv_kernel``: ``W_f``, a dense layer from ``Q * K_s`` to ``heads * k``
      kernel logits; softmax over the ``k`` taps, per position and head.
    - ``conv_value``: the values of the convolution branch, a dense layer of
      the value input (reference name ``conv_out_layer`` / ``conv_attn_point``).
    - the lightweight convolution: each head's ``head_size`` channels share
      one ``k``-tap kernel per position; taps are offsets ``t - (k-1)/2 ... t +
      (k-1)/2``, zero beyond the sequence.

    The convolution is never unfolded: the values are padded once and each of
    the ``k`` taps is a shifted static slice multiplied by that tap's kernel
    weight (broadcast over the head's channels) and summed, so TFLite/ONNX see
    Pad, StridedSlice, Reshape, Mul and Add only, all inside one XNNPACK
    partition. Why: stacking the ``k`` shifted slices on a new last axis (a
    Pack, or a ``k``-input Concatenation) for one batched matmul of ``S * heads``
    tiny ``[head_size, k] x [k, 1]`` products is the same arithmetic, but
    TFLite's XNNPACK delegate takes neither, so every layer left the delegate
    for a builtin kernel (issue 17; ``benchmarks/perf/variants.py`` times the
    Pack form as "(before)"). As in the reference implementations, this branch
    does not look at the padding mask: real tokens within ``(k-1)/2`` of
    padding see the padded positions' values.

    Args:
        num_heads: convolution heads.
        head_size: channels per head (the branch width is ``num_heads * head_size``).
        kernel_size: odd kernel size ``k`` (9 in the paper).
        kernel_initializer: initializer of the dense and convolution kernels.
        **kwargs: standard layer arguments.

    Example:
        >>> conv = SpanDynamicConvolution(num_heads=2, head_size=8, kernel_size=9, name="span_conv")
        >>> q = tf.ones([1, 5, 16]); x = tf.ones([1, 5, 32])
        >>> conv(q, x, x).shape
        TensorShape([1, 5, 16])
    """

    def __init__(self, num_heads, head_size, kernel_size=9, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ConfigError(f"conv_kernel_size must be a positive odd number, got {kernel_size}")
        self.num_heads = num_heads
        self.head_size = head_size
        self.kernel_size = kernel_size
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        width = num_heads * head_size
        self.key_conv = keras.layers.SeparableConv1D(
            width,
            kernel_size,
            padding="same",
            depthwise_initializer=fresh_initializer(self.kernel_initializer),
            pointwise_initializer=fresh_initializer(self.kernel_initializer),
            name="key_conv",
            dtype=self.dtype_policy,
        )
        self.conv_kernel = TokenDense(
            num_heads * kernel_size, kernel_initializer=fresh_initializer(self.kernel_initializer),
            name="conv_kernel", dtype=self.dtype_policy,
        )
        self.conv_value = TokenDense(
            width, kernel_initializer=fresh_initializer(self.kernel_initializer), name="conv_value",
            dtype=self.dtype_policy,
        )

    def call(self, query, key, value):
        """``query``: the projected query ``[B, S, width]`` shared with self-attention;
        ``key``/``value``: the key and value inputs ``[B, S, *]``. Returns ``[B, S, width]``."""
        dims = leading_dims(value)  # static where known (layers/shapes.py): no shape ops at an open length
        k, pad = self.kernel_size, (self.kernel_size - 1) // 2
        kernels = self.conv_kernel(query * self.key_conv(key))  # (B, S, N*k), Eq. 4 before softmax
        kernels = tf.nn.softmax(reshape_leading(kernels, [self.num_heads, k], dims), axis=-1)
        values = self.conv_value(value)  # (B, S, N*D)
        padded = tf.pad(values, [[0, 0], [pad, pad], [0, 0]])  # (B, S + k - 1, N*D)
        padded = reshape_leading(padded, [self.num_heads, self.head_size], dims)  # (B, S + k - 1, N, D)
        out = None
        for t in range(k):  # Eq. 5: tap t reads position s + t - pad, one weight per head and position
            # Positions t .. t + S of the padded values, the end counted from the back (k - 1 - t before it): a
            # constant slice at any length, where t + S needed the length at run time.
            stop = t - (k - 1) if t < k - 1 else None
            term = padded[:, t:stop] * kernels[:, :, :, t : t + 1]  # (B, S, N, D) * (B, S, N, 1)
            out = term if out is None else out + term
        return reshape_leading(out, [self.num_heads * self.head_size], dims)

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "head_size": self.head_size,
            "kernel_size": self.kernel_size,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
