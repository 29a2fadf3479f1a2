"""The one place that imports TensorFlow and tf_keras.

``import mobilebert_kit`` has already set ``TF_USE_LEGACY_KERAS=1``; importing
TensorFlow through this module guarantees that order for every submodule.

TensorFlow's C++ runtime prints start-up banners (oneDNN, CUDA stubs) straight
to file descriptor 2 before its logging is configured, so no environment
variable silences them; they bury the one-line errors of the CLI. The import
runs with fd 2 pointed at /dev/null unless ``MBK_VERBOSE_TF=1``.
"""

import mobilebert_kit  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from mobilebert_kit.utils.quiet import quiet_fd2 as _quiet_fd2


with _quiet_fd2():
    import tensorflow as tf
    import tf_keras as keras

    # Device discovery logs "failed call to cuInit" on machines without a GPU; do it here, quietly.
    tf.config.list_physical_devices("GPU")

__all__ = ["tf", "keras"]
