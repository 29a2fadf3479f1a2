"""The one place that imports TensorFlow and tf_keras.

``import mobilebert_kit`` has already set ``TF_USE_LEGACY_KERAS=1``; importing
TensorFlow through this module guarantees that order for every submodule.
"""

import mobilebert_kit  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
import tensorflow as tf
import tf_keras as keras

__all__ = ["tf", "keras"]
