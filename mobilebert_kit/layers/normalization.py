"""Normalization lookup table: one keyword (``normalization_type``) with fixed values."""

from mobilebert_kit.backend import keras
from mobilebert_kit.errors import check_choice
from mobilebert_kit.layers.no_norm import NoNorm

NORMALIZATIONS = {
    "layer_norm": keras.layers.LayerNormalization,
    "no_norm": NoNorm,
}


def make_norm(normalization_type, epsilon, name, dtype=None, center=True):
    """Creates a normalization layer over the last axis.

    Args:
        normalization_type: ``"layer_norm"`` or ``"no_norm"``.
        epsilon: LayerNorm variance epsilon (ignored by NoNorm).
        name: the layer's stable name.
        dtype: layer dtype or mixed-precision policy.
        center: a LayerNorm with ``beta`` (default); False: scale only (ModernBERT's ``norm_bias: false``).
            NoNorm always has both.
    """
    cls = NORMALIZATIONS[check_choice("normalization_type", normalization_type, tuple(NORMALIZATIONS))]
    if cls is NoNorm:
        return NoNorm(epsilon=epsilon, name=name, dtype=dtype)
    # LayerNorm statistics stay in float32 under mixed precision (Keras does this for the policy).
    return cls(axis=-1, epsilon=epsilon, center=center, name=name, dtype=dtype)
