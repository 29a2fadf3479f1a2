"""mobilebert-kit: BERT-family encoders from training to a phone.

Importing the package selects Keras 2 (``tf_keras``) for TensorFlow before
TensorFlow itself loads: tensorflow-model-optimization and tf2onnx only work
with Keras 2 models. TensorFlow is imported lazily, on first use of a model
API, so the profiler and the command line start without it.

Example:
    >>> import mobilebert_kit as mbk
    >>> encoder = mbk.build("mobilebert_tiny_test")
    >>> outputs = encoder(encoder.dummy_inputs())  # doctest: +SKIP
"""

import os as _os
import sys as _sys

if "tensorflow" in _sys.modules and _os.environ.get("TF_USE_LEGACY_KERAS") != "1":
    import warnings as _warnings

    _warnings.warn(
        "TensorFlow was imported before mobilebert_kit without TF_USE_LEGACY_KERAS=1; "
        "mobilebert_kit uses tf_keras directly, but tf.keras in your own code is Keras 3.",
        stacklevel=2,
    )
_os.environ["TF_USE_LEGACY_KERAS"] = "1"
# TensorFlow's C++ start-up banner is noise for a command-line tool; users can override.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"

from mobilebert_kit.errors import (  # noqa: E402  (env must be set first)
    CheckpointError,
    ConfigError,
    MbkError,
)

# Public model API, resolved lazily so `import mobilebert_kit` stays cheap.
_LAZY = {
    "build": ("mobilebert_kit.models.api", "build"),
    "save": ("mobilebert_kit.models.api", "save"),
    "load": ("mobilebert_kit.models.api", "load"),
    "import_checkpoint": ("mobilebert_kit.checkpoints.importer", "import_checkpoint"),
    "list_presets": ("mobilebert_kit.models.presets", "list_presets"),
    "count_flops": ("mobilebert_kit.models.flops", "count_flops"),
    "count_params": ("mobilebert_kit.models.api", "count_params"),
    "Encoder": ("mobilebert_kit.models.encoder", "Encoder"),
}

__all__ = ["MbkError", "ConfigError", "CheckpointError", "__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mobilebert_kit' has no attribute {name!r}")
