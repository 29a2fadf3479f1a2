"""Quantization modes (one record each), the searches over them, quantization-aware training."""
