"""Rebuild a model with changed encoder options and carry its weights over by name.

The one mechanism behind operator substitution (``normalization_type``,
``hidden_act``) and export-time options (``attention_mask_value``): build the
same architecture from ``encoder.config`` with some keys replaced, then assign
every weight by its stable path (``models.api.named_weights``). A weight the
new architecture does not have, or has in another shape, is an error listing
all of them; nothing is copied by position.
"""

import numpy as np

from mobilebert_kit.errors import ConfigError
from mobilebert_kit.models.api import assign_weights, named_weights
from mobilebert_kit.models.encoder import Encoder
from mobilebert_kit.models.heads import HEADS


def architecture_of(model):
    """``"encoder"`` for an Encoder, the head name (``"sequence_classifier"`` ...) for a task model."""
    if isinstance(model, Encoder):
        return "encoder"
    name = getattr(model, "architecture", None)
    if name is None or not isinstance(getattr(model, "encoder", None), Encoder):
        raise ConfigError(f"expected an Encoder or a task model from mobilebert_kit, got {type(model).__name__}")
    return name


def encoder_of(model):
    """The Encoder inside ``model`` (the model itself for an Encoder)."""
    return model if architecture_of(model) == "encoder" else model.encoder


def weight_arrays(model):
    """``{stable path: numpy array}`` of every weight of ``model``."""
    return {path: np.asarray(var.numpy()) for path, var in named_weights(model).items()}


def rebuild(model, arrays=None, **encoder_overrides):
    """Returns a copy of an Encoder or task ``model`` with Encoder options replaced and the same weights, or
    ``arrays`` (``{path: array}``: a substitution's mapped weights) in their place.

    Example:
        >>> probe = rebuild(encoder, output_hidden_states=True)  # doctest: +SKIP
    """
    architecture = architecture_of(model)
    new = Encoder(**dict(encoder_of(model).config, **encoder_overrides))
    if architecture != "encoder":
        new = HEADS[architecture](new, **model.head_config)
    assign_weights(new, weight_arrays(model) if arrays is None else arrays, source=f"weights of {model.name}")
    return new
