"""The ``.onnx`` format: tf2onnx, graph clean-up, ONNX Runtime quantization, the writer."""
