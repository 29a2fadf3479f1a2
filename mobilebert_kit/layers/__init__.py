"""Building blocks of the encoder family. Each public layer lives in its own file.

Dependencies run one way: ``layers`` <- ``models`` <- ``training`` / ``convert``.
"""

from mobilebert_kit.layers.activations import ACTIVATIONS, get_activation
from mobilebert_kit.layers.feed_forward import FeedForward
from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention
from mobilebert_kit.layers.no_norm import NoNorm
from mobilebert_kit.layers.normalization import NORMALIZATIONS, make_norm
from mobilebert_kit.layers.projection_norm import ProjectionNorm
from mobilebert_kit.layers.token_embedding import TokenEmbedding
from mobilebert_kit.layers.transformer_block import TransformerBlock

__all__ = [
    "ACTIVATIONS",
    "NORMALIZATIONS",
    "FeedForward",
    "MultiHeadAttention",
    "NoNorm",
    "ProjectionNorm",
    "TokenEmbedding",
    "TransformerBlock",
    "get_activation",
    "make_norm",
]
