"""Evaluation: task metrics of exported files, without TensorFlow.

Modules:
    artifact_metrics: :func:`evaluate_artifact` and :data:`TASK_METRICS`, one record per task
        (data reader, scorer on ``training/metrics.py``, headline key), shared with
        ``training.fine_tuner.evaluate_model``.
"""

# MLPerf Mobile's accuracy rule: a quantized submission keeps >= 99% of the float model's metric. Here (standard
# library only) so that `mbk evaluate`'s flag is registered without loading the runtimes.
DEFAULT_MIN_RATIO = 0.99
