"""Data: tokenization, pre-training example creation and streaming input.

Import the modules directly; docs/architecture.md's module map says what each one is for.
"""
