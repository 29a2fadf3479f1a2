"""The TensorFlow-free floor for artifacts: reading, describing and running ``.tflite`` / ``.onnx`` files.

Below both ``convert/`` and ``profiler/``: what a file holds and how it runs is decided here once, so
``mbk inspect`` and ``mbk profile`` describe the same file the same way. Nothing here imports TensorFlow, Keras
or the rest of ``mobilebert_kit`` above ``errors.py`` and ``utils/`` (``tests/test_artifact_floor.py`` checks).

Modules:
    reader: :func:`read_artifact`, the one ``.tflite`` / ``.onnx`` reader.
    taxonomy: dtype tables, LayerNorm/GELU/ReLU evidence, the split of ops by how they compute, precision.
    metadata: :func:`parse_mbk_metadata`, the one decoder of ``mbk_metadata``.
    runner: :func:`load_tflite` / :func:`load_onnx` and :class:`ArtifactRunner`.
    inspection: :func:`inspect_artifact`, the report behind ``mbk inspect``.
    metadata_schema: the TFLite Metadata schema facts shared by its writer and reader.
    client_metadata: :func:`read_client_metadata`, the bounded reader of TFLite Metadata and packed files.
    clients: :data:`CLIENTS` and :func:`client_readiness`, the app-side client readiness lint.
    xnnpack_coverage: which ops XNNPACK runs.
    errors: :class:`ArtifactError`.

Example:
    >>> from mobilebert_kit.artifacts.reader import read_artifact
    >>> read_artifact("model.tflite").input_specs()[0]["name"]  # doctest: +SKIP
    'input_ids'
"""
