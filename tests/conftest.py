"""Shared pytest configuration: quiet TensorFlow, deterministic seeds, temp dirs."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # bit-stable CPU kernels for parity tests
# Before any test module imports TensorFlow (mediapipe does, at import): the Keras 2 that mobilebert_kit,
# tensorflow-model-optimization and tf2onnx need is chosen when TensorFlow loads.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

# The CLI tests run mbk with the repository as their working directory (tests/helpers.py run_mbk), as a user
# runs it in a project of theirs: anything mbk leaves in its working directory lands here. A run that adds a
# file to the repository's top fails, naming it (a profile once left onnxruntime's shape-inference dump,
# sym_shape_infer_temp.onnx and a <uuid>.data, behind, ignored by git and unseen).
_REPO = Path(__file__).resolve().parents[1]
_RUN_LEFTOVERS_OK = {".pytest_cache", ".coverage", ".hypothesis"}


def pytest_sessionstart(session):
    session.config.stash[_TOP_KEY] = set(os.listdir(_REPO))


def pytest_sessionfinish(session, exitstatus):
    before = session.config.stash.get(_TOP_KEY, None)
    if before is None:
        return
    added = sorted(set(os.listdir(_REPO)) - before - _RUN_LEFTOVERS_OK)
    if added:
        print(f"\nthe test run left {', '.join(added)} in {_REPO}: something wrote into its working directory")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_TOP_KEY = pytest.StashKey[set]()


@pytest.fixture(autouse=True)
def _seed():
    import random

    import numpy as np

    random.seed(0)
    np.random.seed(0)
    yield
