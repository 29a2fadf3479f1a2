"""Conversion: operator substitution, TFLite / ONNX export, quantization, validation, inspection.

Depends on ``layers`` and ``models`` (never the other way round). Module map:

- ``rebuild``: rebuild a model with changed encoder options, weights carried by name.
- ``substitution``: NoNorm / ReLU substitution records and the one function applying them.
- ``recovery``: short recovery distillation and the fidelity report.
- ``export_model``: the export graph (named inputs, float32 mask, outputs in order).
- ``tflite_export`` / ``tflite_flatbuffer``: TFLite conversion and quantization; names and metadata.
- ``onnx_export``: tf2onnx and ONNX Runtime quantization.
- ``qat``: quantization-aware training with QuantizeConfigs for our layers.
- ``input_set`` / ``tokenization`` / ``sample_text``: calibration and validation inputs.
- ``artifact_runner``, ``validation``: run an artifact; compare with the Keras source.
- ``inspection``, ``artifact_metadata``: read an artifact without Keras.
- ``exporter``: the pipeline behind ``mbk export``; ``recipe``: TOML recipes.
"""
