"""Conversion: operator substitution, TFLite / ONNX export, quantization, validation.

Depends on ``layers``, ``models`` and the TensorFlow-free ``artifacts`` floor, which
reads, inspects and runs the files it writes (never the other way round). Module map:

- ``rebuild``: rebuild a model with changed encoder options, weights carried by name.
- ``substitution``: NoNorm / ReLU substitution records and the one function applying them.
- ``recovery``: short recovery distillation and the fidelity report.
- ``export_model``: the export graph (named inputs, float32 mask, outputs in order).
- ``tflite_export`` / ``tflite_flatbuffer``: TFLite conversion and quantization; names and metadata.
- ``onnx_export``: tf2onnx and ONNX Runtime quantization.
- ``qat``: quantization-aware training with QuantizeConfigs for our layers.
- ``input_set`` / ``tokenization`` / ``sample_text``: calibration and validation inputs.
- ``validation``: compare an artifact with the Keras source.
- ``quantization_modes``: one record per quantization mode; ``export_options``: the export options schema.
- ``exporter``: the pipeline behind ``mbk export``; ``recipe``: TOML recipes.
"""
