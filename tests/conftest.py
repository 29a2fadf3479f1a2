"""Shared pytest configuration: quiet TensorFlow, deterministic seeds, temp dirs."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # bit-stable CPU kernels for parity tests
# Before any test module imports TensorFlow (mediapipe does, at import): the Keras 2 that mobilebert_kit,
# tensorflow-model-optimization and tf2onnx need is chosen when TensorFlow loads.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    import random

    import numpy as np

    random.seed(0)
    np.random.seed(0)
    yield
