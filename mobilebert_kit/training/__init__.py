"""Training: knowledge-transfer losses, LAMB, schedules, the distillation loop and fine-tuning.

Modules (import them directly; nothing here loads TensorFlow):

- ``losses``: Eq. 1-5 and 7 of the MobileBERT paper as plain functions.
- ``lamb.Lamb``, ``warmup_decay.WarmupDecay``: optimizer and learning-rate schedule.
- ``distill_config.DistillConfig``, ``stages``: the options and the stage plan of a run.
- ``distiller.Distiller``: progressive transfer + pre-training distillation, resumable,
  under any ``tf.distribute`` strategy, float32 / mixed_float16 / mixed_bfloat16.
"""
