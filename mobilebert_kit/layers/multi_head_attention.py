"""MultiHeadAttention with separate query/key/value inputs and an explicit mask value."""

import math

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.layers.token_dense import TokenDense
from mobilebert_kit.layers.keyed_dropout import KeyedDropout
from mobilebert_kit.layers.initializers import fresh_initializer
from mobilebert_kit.layers.shapes import leading_dims, reshape_leading
from mobilebert_kit.errors import check_choice

MASK_MODES = ("add", "mul_add")


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class MultiHeadAttention(keras.layers.Layer):
    """Scaled dot-product attention over ``num_heads`` heads (Vaswani et al., 2017).

    Query, key and value come from separate inputs because MobileBERT feeds them
    different tensors: a shared 128-d bottleneck for query and key, the 512-d
    block input for value (Sun et al., 2020, Fig. 1c; parity-notes.md). The
    output is the concatenated context ``[batch, seq, num_heads * head_size]``;
    the output projection belongs to the block.

    The padding mask is applied with an explicit constant because the constant
    matters for deployment: a huge negative number wrecks int8 ranges, while the
    reference implementations use -1e4 (BERT), the dtype minimum (Hugging Face)
    or ``scores * m - 6 * (1 - m)`` (the official MobileBERT TF1 code). Outputs
    at real tokens agree whenever the constant drives padded keys to ~0 weight.

    Args:
        num_heads: number of attention heads.
        head_size: width of each head.
        dropout: dropout rate on the attention probabilities.
        mask_value: score given to padded keys.
        mask_mode: ``"add"``: ``scores + (1 - m) * mask_value``;
            ``"mul_add"``: ``scores * m + (1 - m) * mask_value`` (official TF1).
        kernel_initializer: initializer of the projection kernels.
        use_bias: the projections have biases (default); False: ModernBERT's ``attention_bias: false``.
        fused_qkv: one ``qkv`` projection to ``3 * num_heads * head_size`` (query, key, value in that
            order: ModernBERT's ``Wqkv``) read from the query input, instead of ``query``, ``key``, ``value``.
        **kwargs: standard layer arguments.

    Example:
        >>> mha = MultiHeadAttention(num_heads=4, head_size=32, name="attention")
        >>> x = tf.ones([1, 6, 128])
        >>> mha(x, x, x, attention_mask=tf.ones([1, 6])).shape
        TensorShape([1, 6, 128])
    """

    # The ONNX writer emits this layer as ONNX Runtime's fused MultiHeadAttention kernel
    # (convert/onnx/fused.py). Read from the class's own attributes, not inherited: a subclass adds position
    # terms or convolutions that kernel does not compute, and declares it only if it has a fused form.
    onnx_fused = True

    def __init__(
        self,
        num_heads,
        head_size,
        dropout=0.0,
        mask_value=-10000.0,
        mask_mode="add",
        kernel_initializer="glorot_uniform",
        use_bias=True,
        fused_qkv=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.use_bias = bool(use_bias)
        self.fused_qkv = bool(fused_qkv)
        self.num_heads = num_heads
        self.head_size = head_size
        self.dropout_rate = dropout
        self.mask_value = float(mask_value)
        self.mask_mode = check_choice("attention_mask_mode", mask_mode, MASK_MODES)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        width = num_heads * head_size
        self.qkv = None
        if self.fused_qkv:
            self.query = self.key = self.value = None
            self.qkv = TokenDense(3 * width, use_bias=self.use_bias,
                                  kernel_initializer=fresh_initializer(self.kernel_initializer), name="qkv",
                                  dtype=self.dtype_policy)
        else:
            self.query, self.key, self.value = (
                TokenDense(
                    width, use_bias=self.use_bias, kernel_initializer=fresh_initializer(self.kernel_initializer),
                    name=n, dtype=self.dtype_policy
                )
                for n in ("query", "key", "value")
            )
        self.dropout = KeyedDropout(dropout, name="dropout", dtype=self.dtype_policy)

    def _split_heads(self, x, dims=None):
        # (B, S, N*D) -> (B, N, S, D). The static head count and size, the sequence left to the reshape: no
        # run-time shape arithmetic at an open length (layers/shapes.py). ``dims``: the batch read once per call.
        x = reshape_leading(x, [self.num_heads, self.head_size], dims)
        return tf.transpose(x, [0, 2, 1, 3])

    def _merge_heads(self, context, dims=None):
        # (B, N, S, D) -> (B, S, N*D)
        context = tf.transpose(context, [0, 2, 1, 3])
        return reshape_leading(context, [self.num_heads * self.head_size], dims)

    def attention_scores(self, query, key):
        """Raw scaled scores ``(B, N, S, S)``; variants add position terms here."""
        # Scale the query, not the scores: the converter folds the constant into the query
        # projection, which removes a MUL per layer that XNNPACK leaves to the reference
        # kernels in full-int8 exports (benchmarks/perf/NOTES.md: 24 MULs off the delegate).
        query = query * tf.cast(1.0 / math.sqrt(self.head_size), query.dtype)
        return tf.matmul(query, key, transpose_b=True)

    def attention_context(self, probs, value):
        """Context ``(B, N, Sq, D)`` from probabilities and values; variants add position terms here."""
        return tf.matmul(probs, value)

    def apply_mask(self, scores, attention_mask):
        """Applies a ``[batch, seq]`` 1/0 mask to ``(B, N, S, S)`` scores."""
        if attention_mask is None:
            return scores
        # One RESHAPE to (B, 1, 1, S), the static batch named: indexing with tf.newaxis left a RESHAPE and a
        # STRIDED_SLICE per layer at an open length.
        batch = leading_dims(attention_mask, 1)[0]
        mask = tf.reshape(tf.cast(attention_mask, scores.dtype), [batch, 1, 1, -1])
        # (1 - m) * value: exact 0 for real tokens, so unpadded inputs are untouched.
        masked = (1.0 - mask) * tf.cast(self.mask_value, scores.dtype)
        if self.mask_mode == "mul_add":
            return scores * mask + masked
        return scores + masked

    def project_heads(self, query, key, value, dims=None):
        """``(q, k, v)``, each ``(B, N, S, D)``: the projections split into heads; variants rotate them here."""
        if self.qkv is not None:
            query, key, value = tf.split(self.qkv(query), 3, axis=-1)
        else:
            query, key, value = self.query(query), self.key(key), self.value(value)
        return self._split_heads(query, dims), self._split_heads(key, dims), self._split_heads(value, dims)

    def call(self, query, key, value, attention_mask=None, training=None, return_attention_scores=False):
        dims = leading_dims(query)  # one read of an open batch for every reshape of the layer
        q, k, v = self.project_heads(query, key, value, dims)  # (B, N, S, D) each
        scores = self.apply_mask(self.attention_scores(q, k), attention_mask)
        probs = tf.nn.softmax(scores, axis=-1)
        context = self.attention_context(self.dropout(probs, training=training), v)  # (B, N, Sq, D)
        context = self._merge_heads(context, dims)  # (B, Sq, N*D)
        return (context, probs) if return_attention_scores else context

    def get_config(self):
        config = {
            **super().get_config(),
            "num_heads": self.num_heads,
            "head_size": self.head_size,
            "dropout": self.dropout_rate,
            "mask_value": self.mask_value,
            "mask_mode": self.mask_mode,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
        if not self.use_bias or self.fused_qkv:  # the ModernBERT options; other configs stay as they were
            config.update({"use_bias": self.use_bias, "fused_qkv": self.fused_qkv})
        return config
