"""Encoders, presets and task heads."""
