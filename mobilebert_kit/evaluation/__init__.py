"""Evaluation: task metrics of exported files, without TensorFlow.

Modules:
    artifact_metrics: :func:`evaluate_artifact` and :data:`TASK_METRICS`, one record per task
        (data reader, scorer on ``training/metrics.py``, headline key), scored by the records of
        ``training.task_scoring`` (shared with ``training.fine_tuner.model_evaluation``).
"""

