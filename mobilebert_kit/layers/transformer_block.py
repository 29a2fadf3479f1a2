"""TransformerBlock: one encoder layer of BERT, IB-BERT or MobileBERT."""

import dataclasses

from mobilebert_kit.backend import keras
from mobilebert_kit.errors import ConfigError, check_choice
from mobilebert_kit.layers.bucketed_relative_attention import BucketedRelativeAttention
from mobilebert_kit.layers.composite_attention import CompositeAttention
from mobilebert_kit.layers.disentangled_attention import DisentangledAttention
from mobilebert_kit.layers.feed_forward import FeedForward
from mobilebert_kit.layers.functional_relative_attention import FunctionalRelativeAttention
from mobilebert_kit.layers.gated_feed_forward import GatedFeedForward
from mobilebert_kit.layers.keyed_dropout import KeyedDropout
from mobilebert_kit.layers.mixed_attention import MixedAttention, mixed_attention_heads
from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention
from mobilebert_kit.layers.normalization import make_norm
from mobilebert_kit.layers.projection_norm import ProjectionNorm
from mobilebert_kit.layers.rotary_attention import RotaryAttention
from mobilebert_kit.layers.token_dense import TokenDense

# The attention mechanism of a block (one keyword, fixed values):
#   self_attention: scaled dot-product attention (BERT, MobileBERT; NEZHA with relative positions)
#   convbert_mixed: self-attention heads + span-based dynamic convolution heads (ConvBERT Eq. 6)
#   composite: self-attention + lightweight convolutions (Chang et al. 2021 Eq. 6 and variants)
ATTENTION_TYPES = ("self_attention", "convbert_mixed", "composite")
# Position encodings applied inside attention rather than in the embeddings: NEZHA's functional relative
# positions, ModernBERT's rotary ones.
RELATIVE_POSITION_EMBEDDING_TYPES = ("relative_functional", "rotary")
# A score bias added to self-attention, next to whatever positions the embeddings add:
#   none: BERT; relative_buckets: a learned bias per bucket of relative distance (MPNet, T5);
#   disentangled: DeBERTa-v2's content-to-position and position-to-content scores over a relative table.
ATTENTION_BIASES = ("none", "relative_buckets", "disentangled")
# Where the norms sit:
#   post_norm: x = norm(x + attn(x)); x = norm(x + ffn(x)) (BERT and every family before ModernBERT)
#   pre_norm: x = x + attn(attention_norm(x)); x = x + ffn(ffn_norm(x)) (ModernBERT; the encoder adds a final norm)
BLOCK_LAYOUTS = ("post_norm", "pre_norm")
# The feed-forward network of a pre-norm block: dense (W2 act(W1 x)) or gated (GeGLU: W2 (act(a) * g)).
FEED_FORWARD_TYPES = ("dense", "gated")


@dataclasses.dataclass(frozen=True)
class BlockOptions:
    """The architecture options of a :class:`TransformerBlock`, one record (each is described in its Args): the
    block is built from it and saves it as its config, an Encoder passes its options of these names through."""

    hidden_size: int
    num_heads: int
    intermediate_size: int
    intra_bottleneck_size: int | None = None
    use_bottleneck: bool = False
    use_bottleneck_attention: bool = False
    key_query_shared_bottleneck: bool = False
    num_feedforward_networks: int = 1
    normalization_type: str = "layer_norm"
    hidden_act: str = "gelu"
    layer_norm_epsilon: float = 1e-12
    final_ffn_layer_norm_epsilon: float | None = None
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0
    attention_mask_value: float = -10000.0
    attention_mask_mode: str = "add"
    initializer_range: float = 0.02
    attention_type: str = "self_attention"
    position_embedding_type: str = "absolute"
    head_ratio: int = 2
    conv_kernel_size: int = 9
    num_groups: int = 1
    max_relative_position: int = 64
    relative_window: int = 8
    relative_attention_variant: str = "composite"
    attention_bias: str = "none"
    relative_attention_num_buckets: int = 32
    position_buckets: int = 256
    max_relative_positions: int = 512
    disentangled_terms: str = "c2p_p2c"
    relative_embedding_norm: bool = True
    block_layout: str = "post_norm"
    feed_forward_type: str = "dense"
    attention_use_bias: bool = True
    feed_forward_use_bias: bool = True
    norm_use_bias: bool = True
    fused_qkv: bool = False
    rotary_theta: float = 10000.0
    attention_window: int = 0
    input_norm: bool = True
    max_length: int = 512


# The block's options, in order: a TransformerBlock takes them as keywords, an Encoder passes its own of these names.
BLOCK_OPTIONS = tuple(field.name for field in dataclasses.fields(BlockOptions))


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class TransformerBlock(keras.layers.Layer):
    """One encoder layer; a plain BERT layer is the configuration without bottleneck.

    Data flow (Sun et al., 2020, Fig. 1; block order as in the official code,
    parity-notes.md), with ``x`` the ``hidden_size``-wide block input and
    ``I = intra_bottleneck_size`` when ``use_bottleneck``:

    - ``layer_input = bottleneck_input(x)`` (dense to I + norm), else ``x``.
    - query/key/value inputs: all ``layer_input`` with ``use_bottleneck_attention``;
      query = key = ``bottleneck_attention(x)`` and value = ``x`` with
      ``key_query_shared_bottleneck``; otherwise all ``x`` (the IB-BERT teacher).
    - ``h = attention_output(attention(q, k, v), residual=layer_input)``.
    - ``num_feedforward_networks`` FeedForwards ``ffn_0 ... ffn_{F-1}``.
    - ``output_bottleneck(h, residual=x)`` (dense back to ``hidden_size`` + norm).

    Sublayer names are stable (``bottleneck_input``, ``bottleneck_attention``,
    ``attention``, ``attention_output``, ``ffn_i``, ``output_bottleneck``):
    weight import, distillation and substitution find them by name.

    The ``attention`` sublayer is chosen by ``attention_type`` (and, for
    ``"self_attention"``, by ``position_embedding_type``):
    :class:`MultiHeadAttention`, :class:`FunctionalRelativeAttention` (NEZHA),
    :class:`MixedAttention` (ConvBERT) or :class:`CompositeAttention`. Each takes
    the same query/key/value inputs, so every attention type combines with the
    bottlenecks above.

    Args:
        hidden_size: inter-block width (the feature-map size).
        num_heads: attention heads.
        intermediate_size: FFN hidden width.
        intra_bottleneck_size: intra-block width when ``use_bottleneck``.
        use_bottleneck: add the (inverted) bottleneck projections.
        use_bottleneck_attention: attention reads the bottlenecked input for q, k
            and v (MobileBERT-tiny). Takes precedence over the shared bottleneck,
            as in the official code.
        key_query_shared_bottleneck: a second bottleneck feeds query and key;
            value reads the block input (MobileBERT).
        num_feedforward_networks: stacked FFNs per block.
        normalization_type: ``"layer_norm"`` or ``"no_norm"``.
        hidden_act: FFN activation: ``"gelu"`` (exact), ``"gelu_tanh"``, ``"relu"``, ``"relu6"``.
        layer_norm_epsilon: LayerNorm epsilon.
        final_ffn_layer_norm_epsilon: epsilon of the last FFN's norm when it
            differs (Hugging Face MobileBERT builds that one with 1e-5).
        hidden_dropout: dropout on projections.
        attention_dropout: dropout on attention probabilities.
        attention_mask_value: score of padded keys (see MultiHeadAttention).
        attention_mask_mode: ``"add"`` or ``"mul_add"`` (official TF1 masking).
        initializer_range: stddev of the truncated-normal kernel initializer.
        attention_type: ``"self_attention"``, ``"convbert_mixed"`` or ``"composite"``.
        position_embedding_type: ``"relative_functional"`` adds NEZHA's relative encodings (fixed sinusoids
            of the clipped relative distance on keys and values) to self-attention, ``"rotary"`` rotates queries
            and keys (:class:`RotaryAttention`); other values leave attention alone.
        head_ratio: ConvBERT: self-attention heads are ``num_heads // head_ratio``.
        conv_kernel_size: ConvBERT: odd kernel of the span and dynamic convolutions.
        num_groups: groups of the grouped linear FFN (ConvBERT Eq. 7; 1: dense).
        max_relative_position: NEZHA clipping distance ``K``.
        relative_window: composite attention window ``k`` (kernel ``2k + 1``).
        relative_attention_variant: composite-attention terms: ``"composite"`` (Eq. 6), ``"fixed"`` (T5),
            ``"dynamic"`` (Shaw), ``"composite_key"``, ``"fixed_depthwise"`` (Eq. 7), ``"composite_depthwise"``.
        attention_bias: ``"none"``, ``"relative_buckets"`` (MPNet: :class:`BucketedRelativeAttention`) or
            ``"disentangled"`` (DeBERTa-v2/v3: :class:`DisentangledAttention`, with the four options below);
            only with ``attention_type="self_attention"`` and no ``relative_functional`` positions.
        relative_attention_num_buckets: buckets of ``"relative_buckets"`` (32 in MPNet).
        position_buckets: ``"disentangled"``: log buckets of the relative distance (256 in DeBERTa-v3; 0: none).
        max_relative_positions: ``"disentangled"``: DeBERTa's ``max_relative_positions`` (the table's half-size
            without buckets, the log scale with them); not NEZHA's ``max_relative_position``.
        disentangled_terms: ``"disentangled"``: ``"c2p_p2c"``, ``"c2p"`` or ``"p2c"`` (``pos_att_type``).
        relative_embedding_norm: ``"disentangled"``: LayerNorm on the relative table (``norm_rel_ebd``).
        block_layout: ``"post_norm"`` (default, the layout above) or ``"pre_norm"`` (ModernBERT:
            ``x + attention_output(attention(attention_norm(x)))`` then ``x + ffn_0(ffn_norm(x))``, one
            :class:`GatedFeedForward`, no bottleneck).
        feed_forward_type: ``"dense"`` or ``"gated"`` (GeGLU: ``hidden_act`` on the first half of a
            ``2 * intermediate_size`` projection times its second half); ``"gated"`` only with ``"pre_norm"``.
        attention_use_bias, feed_forward_use_bias, norm_use_bias: the attention projections, the
            feed-forward projections and the LayerNorms (beta) have biases (default); False only with
            ``"pre_norm"`` (ModernBERT's ``attention_bias``, ``mlp_bias``, ``norm_bias``).
        fused_qkv: one ``attention/qkv`` projection instead of ``query``/``key``/``value`` (ModernBERT's ``Wqkv``).
        rotary_theta: the RoPE base with ``position_embedding_type="rotary"`` (:class:`RotaryAttention`).
        attention_window: 0 (global attention) or the sliding window of a local layer (rotary attention only).
        input_norm: the pre-norm block normalizes its attention input (False: ModernBERT's layer 0, whose
            ``attn_norm`` is the identity after the embedding norm).
        max_length: longest sequence; relative index tables are built for it.
        **kwargs: standard layer arguments.

    Example:
        >>> block = TransformerBlock(512, 4, 512, intra_bottleneck_size=128, use_bottleneck=True,
        ...                          key_query_shared_bottleneck=True, num_feedforward_networks=4,
        ...                          normalization_type="no_norm", hidden_act="relu", name="transformer_layer_0")
        >>> block(tf.ones([1, 8, 512]), attention_mask=tf.ones([1, 8])).shape
        TensorShape([1, 8, 512])
    """

    def __init__(self, hidden_size, num_heads, intermediate_size, **kwargs):
        options = BlockOptions(hidden_size, num_heads, intermediate_size,
                               **{key: kwargs.pop(key) for key in BLOCK_OPTIONS if key in kwargs})
        super().__init__(**kwargs)
        self.options = options
        # Every option is also an attribute of the same name (substitution and distillation read them).
        for key in BLOCK_OPTIONS:
            setattr(self, key, getattr(options, key))
        check_choice("attention_type", self.attention_type, ATTENTION_TYPES)
        check_choice("attention_bias", self.attention_bias, ATTENTION_BIASES)
        check_choice("block_layout", self.block_layout, BLOCK_LAYOUTS)
        check_choice("feed_forward_type", self.feed_forward_type, FEED_FORWARD_TYPES)

        width = self.intra_bottleneck_size if self.use_bottleneck else hidden_size
        if self.use_bottleneck and not self.intra_bottleneck_size:
            raise ConfigError("use_bottleneck=True needs intra_bottleneck_size")
        if width % num_heads and self.attention_type != "convbert_mixed":
            raise ConfigError(f"attention width {width} is not a multiple of num_heads={num_heads}: every head "
                              f"takes an equal share; set num_heads (num_attention_heads in a Hugging Face config.json) "
                              f"to a divisor of {width}")
        if self.num_feedforward_networks < 1:
            raise ConfigError(f"num_feedforward_networks must be >= 1, got {self.num_feedforward_networks}")
        init = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        if self.block_layout == "pre_norm":
            self._build_pre_norm(width, init)
        else:
            self._build_post_norm(width, init)

    def _build_post_norm(self, width, init):
        """The layout of the class docstring: bottlenecks, ``attention``, ``attention_output``, ``ffn_i``."""
        bottleneck, eps, dropout = self.use_bottleneck, self.layer_norm_epsilon, self.hidden_dropout
        norm = dict(normalization_type=self.normalization_type, dtype=self.dtype_policy, kernel_initializer=init)
        self.bottleneck_input = self.bottleneck_attention = self.output_bottleneck = None
        if bottleneck:
            self.bottleneck_input = ProjectionNorm(width, layer_norm_epsilon=eps, name="bottleneck_input", **norm)
            if self.key_query_shared_bottleneck and not self.use_bottleneck_attention:
                self.bottleneck_attention = ProjectionNorm(
                    width, layer_norm_epsilon=eps, name="bottleneck_attention", **norm
                )
        self.attention = self._make_attention(width, init)
        self.attention_output = ProjectionNorm(
            width,
            layer_norm_epsilon=eps,
            # The official code drops out here only without bottleneck; keep that.
            dropout=0.0 if bottleneck else dropout,
            name="attention_output",
            **norm,
        )
        self.ffns = []
        count, final_eps = self.num_feedforward_networks, self.final_ffn_layer_norm_epsilon
        for i in range(count):
            last = i == count - 1
            self.ffns.append(
                FeedForward(
                    self.intermediate_size,
                    hidden_act=self.hidden_act,
                    layer_norm_epsilon=final_eps if (last and final_eps) else eps,
                    dropout=dropout if (last and not bottleneck) else 0.0,
                    num_groups=self.num_groups,
                    name=f"ffn_{i}",
                    **norm,
                )
            )
        if bottleneck:
            self.output_bottleneck = ProjectionNorm(
                self.hidden_size, layer_norm_epsilon=eps, dropout=dropout, name="output_bottleneck", **norm
            )

    def _build_pre_norm(self, width, init):
        """ModernBERT's layer: ``attention_norm`` (unless ``input_norm`` is False), ``attention``,
        ``attention_output`` (a dense, no norm), ``ffn_norm``, ``ffn_0`` (:class:`GatedFeedForward`)."""
        if self.use_bottleneck or self.num_feedforward_networks != 1 or self.num_groups != 1:
            raise ConfigError("block_layout='pre_norm' builds one feed-forward network without bottleneck or groups; "
                              "set use_bottleneck=False, num_feedforward_networks=1, num_groups=1")

        def norm(name):
            return make_norm(self.normalization_type, self.layer_norm_epsilon, name=name, dtype=self.dtype_policy,
                             center=self.norm_use_bias)

        self.bottleneck_input = self.bottleneck_attention = self.output_bottleneck = None
        self.attention_norm = norm("attention_norm") if self.input_norm else None
        self.attention = self._make_attention(width, init)
        self.attention_output = TokenDense(width, use_bias=self.attention_use_bias, kernel_initializer=init,
                                           name="attention_output", dtype=self.dtype_policy)
        self.attention_output_dropout = KeyedDropout(self.hidden_dropout, name="attention_output_dropout",
                                                     dtype=self.dtype_policy)
        self.ffn_norm = norm("ffn_norm")
        self.ffns = [GatedFeedForward(self.intermediate_size, self.hidden_act,
                                      gated=self.feed_forward_type == "gated", use_bias=self.feed_forward_use_bias,
                                      dropout=self.hidden_dropout, kernel_initializer=init, name="ffn_0",
                                      dtype=self.dtype_policy)]

    def _make_attention(self, width, initializer):
        common = dict(
            dropout=self.attention_dropout,
            mask_value=self.attention_mask_value,
            mask_mode=self.attention_mask_mode,
            kernel_initializer=initializer,
            name="attention",
            dtype=self.dtype_policy,
        )
        if not self.attention_use_bias or self.fused_qkv:  # ModernBERT's projections; the others keep their config
            common.update(use_bias=self.attention_use_bias, fused_qkv=self.fused_qkv)
        if self.attention_type == "convbert_mixed":
            heads, head_size = mixed_attention_heads(self.num_heads, self.head_ratio, width)
            return MixedAttention(heads, head_size, conv_kernel_size=self.conv_kernel_size, **common)
        head_size = width // self.num_heads
        if self.attention_type == "composite":
            return CompositeAttention(
                self.num_heads, head_size, relative_window=self.relative_window,
                relative_attention_variant=self.relative_attention_variant, max_length=self.max_length, **common,
            )
        if self.attention_bias == "disentangled":
            return DisentangledAttention(
                self.num_heads, head_size, position_buckets=self.position_buckets,
                max_relative_positions=self.max_relative_positions, disentangled_terms=self.disentangled_terms,
                relative_embedding_norm=self.relative_embedding_norm, layer_norm_epsilon=self.layer_norm_epsilon,
                max_length=self.max_length, **common,
            )
        if self.attention_bias == "relative_buckets":
            return BucketedRelativeAttention(
                self.num_heads, head_size, num_buckets=self.relative_attention_num_buckets,
                max_length=self.max_length, **common,
            )
        if self.position_embedding_type == "rotary":
            return RotaryAttention(
                self.num_heads, head_size, rotary_theta=self.rotary_theta, attention_window=self.attention_window,
                **common,
            )
        if self.position_embedding_type == "relative_functional":
            return FunctionalRelativeAttention(
                self.num_heads, head_size, max_relative_position=self.max_relative_position,
                max_length=self.max_length, **common,
            )
        return MultiHeadAttention(num_heads=self.num_heads, head_size=head_size, **common)

    def _call_pre_norm(self, x, attention_mask, training):
        h = self.attention_norm(x) if self.attention_norm is not None else x
        context, probs = self.attention(h, h, h, attention_mask=attention_mask, training=training,
                                        return_attention_scores=True)
        x = x + self.attention_output_dropout(self.attention_output(context), training=training)
        x = x + self.ffns[0](self.ffn_norm(x), training=training)
        return x, probs

    def call(self, inputs, attention_mask=None, training=None, return_attention_scores=False):
        if self.block_layout == "pre_norm":
            h, probs = self._call_pre_norm(inputs, attention_mask, training)
            return (h, probs) if return_attention_scores else h
        x = inputs
        layer_input = x
        query = key = value = x
        if self.use_bottleneck:
            layer_input = self.bottleneck_input(x, training=training)
            if self.use_bottleneck_attention:
                query = key = value = layer_input
            elif self.bottleneck_attention is not None:
                query = key = self.bottleneck_attention(x, training=training)
        context, probs = self.attention(
            query, key, value, attention_mask=attention_mask, training=training, return_attention_scores=True
        )
        h = self.attention_output(context, residual=layer_input, training=training)
        for ffn in self.ffns:
            h = ffn(h, training=training)
        if self.output_bottleneck is not None:
            h = self.output_bottleneck(h, residual=x, training=training)
        return (h, probs) if return_attention_scores else h

    def compute_output_shape(self, input_shape):
        # A block keeps its input's shape; tfmot's quantize wrappers ask for it.
        return input_shape

    def get_config(self):
        return {**super().get_config(), **dataclasses.asdict(self.options)}
