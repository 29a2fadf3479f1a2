"""Data: tokenization, pre-training example creation and streaming input.

Modules (import them directly):

- ``text_tokenizer``: the one tokenizer (``TextTokenizer``) over ``tokenizers``: vocab.txt or tokenizer.json of
  any kind, the one reading of a checkpoint's tokenizer files, the file packed for the app-side clients.
- ``tokenizer_kinds``: one record per tokenizer kind (WordPiece, Unigram, byte-level BPE).
- ``sentencepiece_model``: the clients' SentencePiece model, written with ``sentencepiece_model_pb2``.
- ``masking``: 80/10/10 masking, whole word masking (``##`` pieces, jieba for Chinese).
- ``pretraining_examples``: NSP pairs + masks into sharded TFRecords, deterministic, bounded memory.
- ``records``: the TFRecord format and its ``dataset.json``.
- ``pretraining_dataset``: streaming, seeded, checkpointable ``tf.data`` input.
- ``stdlib_corpus``: an offline English corpus from the standard library's docstrings.
"""
