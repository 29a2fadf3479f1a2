"""The TensorFlow-free floor for artifacts: reading, describing and running ``.tflite`` / ``.onnx`` files.

Below both ``convert/`` and ``profiler/``: what a file holds and how it runs is decided here once, so
``mbk inspect`` and ``mbk profile`` describe the same file the same way. Nothing here imports TensorFlow, Keras
or the rest of ``mobilebert_kit`` above ``errors.py`` and ``utils/`` (``tests/test_artifact_floor.py`` checks).
docs/architecture.md maps its modules.
"""
