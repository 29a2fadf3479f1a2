"""Training: knowledge-transfer losses, LAMB, schedules, the distillation loop and fine-tuning.

Modules (import them directly; nothing here loads TensorFlow):

- ``losses``: Eq. 1-5 and 7 of the MobileBERT paper as plain functions.
- ``lamb.Lamb``, ``warmup_decay.WarmupDecay``: optimizer and learning-rate schedule.
- ``distill_config.DistillConfig``, ``stages``: the options and the stage plan of a run.
- ``teacher_student``: loading, compatibility check, copying embeddings/heads from the teacher.
- ``distiller.Distiller``: progressive transfer + pre-training distillation, resumable,
  under any ``tf.distribute`` strategy, float32 / mixed_float16 / mixed_bfloat16.
- ``transfer_metrics``: held-out feature-map loss, attention KL, sentence-embedding cosine.
- ``fine_tuner.FineTuner``, ``finetune_config``, ``task_data``, ``metrics``: GLUE / SQuAD / tagging.
- ``stage_progress``, ``summaries``: rich progress bars and TensorBoard scalars.
"""
