"""Data: WordPiece tokenization, pre-training example creation and streaming input.

Modules (import them directly):

- ``records``: the sharded TFRecord format and its ``dataset.json``.
- ``pretraining_dataset``: streaming, seeded ``tf.data`` input of pre-training examples.
"""
