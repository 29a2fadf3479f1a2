"""Activation lookup table: one keyword (``hidden_act``) with a fixed set of values.

``gelu`` is the exact erf form (Hugging Face's "gelu"); ``gelu_tanh`` is the tanh
approximation used by the original TensorFlow BERT and MobileBERT code
(shared/reference/parity-notes.md). Checkpoints must be run with the one they
were trained with; importers record which.
"""

import math

from mobilebert_kit.backend import tf
from mobilebert_kit.errors import check_choice


def gelu(x):
    """Exact GELU, ``x * Phi(x)`` with the normal CDF via erf."""
    return 0.5 * x * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """GELU with the tanh approximation (TF1 BERT ``modeling.gelu``)."""
    cdf = 0.5 * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))
    return x * cdf


ACTIVATIONS = {
    "gelu": gelu,
    "gelu_tanh": gelu_tanh,
    "relu": tf.nn.relu,
    "relu6": tf.nn.relu6,
}


def get_activation(name):
    """Returns the activation function for ``name`` (one of ``ACTIVATIONS``)."""
    return ACTIVATIONS[check_choice("hidden_act", name, tuple(ACTIVATIONS))]
