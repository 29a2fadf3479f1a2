"""MixedAttention: ConvBERT's self-attention heads concatenated with span-based dynamic convolution heads."""

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.errors import ConfigError, is_int
from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention
from mobilebert_kit.layers.shapes import leading_dims
from mobilebert_kit.layers.span_dynamic_convolution import SpanDynamicConvolution


def mixed_attention_heads(num_heads, head_ratio, width):
    """Returns ``(heads, head_size)`` of each branch of a mixed-attention layer ``width`` wide.

    Bottleneck attention (Jiang et al., 2020, Sec. 3.3) keeps ``num_heads /
    head_ratio`` self-attention heads (at least one) and as many convolution
    heads; each branch is ``width / 2`` wide, so the concatenation is ``width``
    again. This is the rule of the reference implementations (yitu-opensource
    ConvBert, Hugging Face ``ConvBertSelfAttention``): ``head_ratio`` changes
    the number and size of the heads, not the split of the width.
    """
    if not is_int(head_ratio) or head_ratio < 1:
        raise ConfigError(f"head_ratio must be a positive integer, got {head_ratio!r}")
    heads = max(num_heads // head_ratio, 1)
    if width % (2 * heads):
        raise ConfigError(
            f"mixed attention width {width} must split into 2 x {heads} heads (num_heads={num_heads} // "
            f"head_ratio={head_ratio}); choose sizes so that width is a multiple of {2 * heads}"
        )
    return heads, width // heads // 2


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class MixedAttention(MultiHeadAttention):
    """Mixed attention (Jiang et al., 2020, ConvBERT, Eq. 6).

    ``Mixed-Attn(K, Q, K_s, V) = Cat(Self-Attn(Q, K, V), SDConv(Q, K_s, V))``:
    ``num_heads`` self-attention heads and ``num_heads`` span-based dynamic
    convolution heads (``span_conv``, :class:`SpanDynamicConvolution`) share the
    projected query; the output is the attention heads followed by the
    convolution heads, ``2 * num_heads * head_size`` wide. Use
    :func:`mixed_attention_heads` to derive the head count from a
    ``head_ratio``. Query, key and value inputs may differ (a MobileBERT block
    feeds query/key from a bottleneck and value from the block input): the
    span-aware key convolves the key input and the convolution branch's values
    project the value input; with one input for all three this is exactly the
    reference layer.

    Args:
        num_heads: self-attention heads (= convolution heads).
        head_size: width of every head.
        conv_kernel_size: odd kernel size of the span convolution and of the
            dynamic convolution (9 in the paper).
        **kwargs: MultiHeadAttention arguments (dropout, mask_value, mask_mode,
            kernel_initializer) and standard layer arguments.

    Example:
        >>> heads, size = mixed_attention_heads(num_heads=4, head_ratio=2, width=64)
        >>> mha = MixedAttention(heads, size, conv_kernel_size=9, name="attention")
        >>> x = tf.ones([1, 6, 64])
        >>> mha(x, x, x, attention_mask=tf.ones([1, 6])).shape
        TensorShape([1, 6, 64])
    """

    def __init__(self, num_heads, head_size, conv_kernel_size=9, **kwargs):
        super().__init__(num_heads, head_size, **kwargs)
        self.conv_kernel_size = conv_kernel_size
        self.span_conv = SpanDynamicConvolution(
            num_heads, head_size, conv_kernel_size, kernel_initializer=self.kernel_initializer,
            name="span_conv", dtype=self.dtype_policy,
        )

    def call(self, query, key, value, attention_mask=None, training=None, return_attention_scores=False):
        dims = leading_dims(query)  # one read of an open batch for every reshape of the layer
        mixed_query = self.query(query)  # (B, S, N*D), shared by both branches
        q = self._split_heads(mixed_query, dims)
        k = self._split_heads(self.key(key), dims)
        v = self._split_heads(self.value(value), dims)
        probs = tf.nn.softmax(self.apply_mask(self.attention_scores(q, k), attention_mask), axis=-1)
        context = self.attention_context(self.dropout(probs, training=training), v)  # (B, N, S, D)
        context = self._merge_heads(context, dims)  # (B, S, N*D)
        convolved = self.span_conv(mixed_query, key, value)  # (B, S, N*D)
        context = tf.concat([context, convolved], axis=-1)  # attention heads, then convolution heads
        return (context, probs) if return_attention_scores else context

    def get_config(self):
        return {**super().get_config(), "conv_kernel_size": self.conv_kernel_size}
