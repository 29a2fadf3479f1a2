"""Fixtures of the reliability tests: ``mbk`` in-process, and the tiny distillation inputs of tests/training."""

import os
import types

import pytest

from tests.training.conftest import tiny_run_inputs  # noqa: F401  (a session fixture: built once)


@pytest.fixture
def mbk(capsys):
    """Runs ``mbk ARGS`` in this process; returns an object like subprocess.CompletedProcess."""
    from mobilebert_kit.cli.main import main

    def run(*args):
        # Paths may be bytes (non-UTF-8 names): argv carries them as surrogate-escaped str, as the OS does.
        code = main([os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in args])
        out, err = capsys.readouterr()
        return types.SimpleNamespace(returncode=code, stdout=out, stderr=err)

    return run
