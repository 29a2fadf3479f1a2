"""Training: knowledge-transfer losses, LAMB, schedules, the distillation loop and fine-tuning.

Import the modules directly (nothing here loads TensorFlow); docs/architecture.md's module map says
what each one is for.
"""
