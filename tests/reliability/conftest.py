"""Fixtures of the reliability tests: the tiny distillation inputs of tests/training are reused."""

from tests.training.conftest import tiny_run_inputs  # noqa: F401  (a session fixture: built once)
