"""Building blocks of the encoder family. Each public layer lives in its own file.

Dependencies run one way: ``layers`` <- ``models`` <- ``training`` / ``convert``.
"""

from mobilebert_kit.layers.activations import ACTIVATIONS, get_activation
from mobilebert_kit.layers.composite_attention import RELATIVE_ATTENTION_VARIANTS, CompositeAttention
from mobilebert_kit.layers.disentangled_attention import DisentangledAttention
from mobilebert_kit.layers.feed_forward import FeedForward
from mobilebert_kit.layers.functional_relative_attention import FunctionalRelativeAttention
from mobilebert_kit.layers.grouped_dense import GroupedDense
from mobilebert_kit.layers.keyed_dropout import KeyedDropout, dropout_key
from mobilebert_kit.layers.mixed_attention import MixedAttention, mixed_attention_heads
from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention
from mobilebert_kit.layers.no_norm import NoNorm
from mobilebert_kit.layers.normalization import NORMALIZATIONS, make_norm
from mobilebert_kit.layers.projection_norm import ProjectionNorm
from mobilebert_kit.layers.span_dynamic_convolution import SpanDynamicConvolution
from mobilebert_kit.layers.token_embedding import EMBEDDING_PROJECTIONS, TokenEmbedding
from mobilebert_kit.layers.transformer_block import ATTENTION_TYPES, TransformerBlock

__all__ = [
    "ACTIVATIONS",
    "ATTENTION_TYPES",
    "EMBEDDING_PROJECTIONS",
    "NORMALIZATIONS",
    "RELATIVE_ATTENTION_VARIANTS",
    "CompositeAttention",
    "DisentangledAttention",
    "FeedForward",
    "FunctionalRelativeAttention",
    "GroupedDense",
    "KeyedDropout",
    "MixedAttention",
    "MultiHeadAttention",
    "NoNorm",
    "ProjectionNorm",
    "SpanDynamicConvolution",
    "TokenEmbedding",
    "TransformerBlock",
    "dropout_key",
    "get_activation",
    "make_norm",
    "mixed_attention_heads",
]
