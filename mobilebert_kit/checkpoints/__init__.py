"""Checkpoint import: Hugging Face safetensors, original TF1 checkpoints, our own format."""
