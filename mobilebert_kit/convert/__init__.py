"""Conversion: operator substitution, TFLite / ONNX export, quantization, validation.

Depends on ``layers``, ``models`` and the TensorFlow-free ``artifacts`` floor, which reads, inspects and runs
the files it writes (never the other way round). docs/architecture.md has the module map; ``exporter``'s
docstring tells one export's steps.
"""
