"""Data: WordPiece tokenization, pre-training example creation and streaming input.

Modules (import them directly):

- ``word_piece_tokenizer``: BERT WordPiece via ``tokenizers`` (vocab.txt or tokenizer.json).
- ``masking``: 80/10/10 masking, whole word masking (``##`` pieces, jieba for Chinese).
- ``pretraining_examples``: NSP pairs + masks into sharded TFRecords, deterministic, bounded memory.
- ``records``: the TFRecord format and its ``dataset.json``.
- ``pretraining_dataset``: streaming, seeded, checkpointable ``tf.data`` input.
- ``stdlib_corpus``: an offline English corpus from the standard library's docstrings.
"""
