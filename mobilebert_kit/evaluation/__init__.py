"""Evaluation: task metrics of exported files, without TensorFlow (:mod:`~.artifact_metrics`)."""

