"""Model sources: the one resolver from what the user names (a preset, a saved model, a Hugging Face or TF1
checkpoint, a model object) to a model with its tokenizer and labels.

It sits above ``models/``, ``checkpoints/`` and ``data/`` and below ``training/``, ``convert/`` and
``pipeline/``, which all load models through it.
``sources/spec.py`` decides what a spec is without loading TensorFlow; ``sources/model_source.py`` loads it.
"""
