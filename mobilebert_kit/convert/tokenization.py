"""WordPieceTokenizer: text to the three int32 input arrays, for calibration and validation.

Uses the Rust ``tokenizers`` package. A Hugging Face directory's
``tokenizer.json`` is used as is (it is what the checkpoint was trained with);
otherwise a BERT WordPiece tokenizer is built from ``vocab.txt`` with the
recorded lower-casing. Lines holding a tab are sentence pairs (segment A, tab,
segment B); ``token_type_ids`` are 1 on segment B, as in BERT.
"""

from pathlib import Path

import numpy as np

from mobilebert_kit.data.vocab import lower_case_of, read_vocab, vocab_ids
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.structured import load_json


class WordPieceTokenizer:
    """Encodes text lines to fixed-length ``input_ids`` / ``attention_mask`` / ``token_type_ids``.

    Args:
        vocab_path: the ``vocab.txt`` (one word piece per line).
        do_lower_case: lower-case and strip accents before WordPiece (uncased models).
        tokenizer_json: optional ``tokenizer.json`` to use instead of building one.

    Example:
        >>> tok = WordPieceTokenizer.from_directory("all-MiniLM-L6-v2/")  # doctest: +SKIP
        >>> tok.encode(["a short sentence"], seq_len=16)["input_ids"].shape  # doctest: +SKIP
        (1, 16)
    """

    def __init__(self, vocab_path, do_lower_case=True, tokenizer_json=None):
        from tokenizers import Tokenizer
        from tokenizers.implementations import BertWordPieceTokenizer

        self.vocab_path = Path(vocab_path)
        self.do_lower_case = bool(do_lower_case)
        if not self.vocab_path.is_file():
            raise ConfigError(f"vocabulary {self.vocab_path} not found; pass the model's vocab.txt")
        # Read and checked even when tokenizer.json does the tokenizing: it is what the artifact embeds.
        self._vocab = read_vocab(self.vocab_path)
        if tokenizer_json is not None and Path(tokenizer_json).is_file():
            load_json(Path(tokenizer_json), "tokenizer.json", expect=dict)  # bounded, depth-checked, one-line errors
            self._tokenizer = Tokenizer.from_file(str(tokenizer_json))
        else:
            self._tokenizer = BertWordPieceTokenizer(vocab_ids(self._vocab), lowercase=self.do_lower_case)
        self.vocab_size = self._tokenizer.get_vocab_size()

    @classmethod
    def from_directory(cls, directory):
        """Builds the tokenizer of a model directory holding ``vocab.txt`` (and maybe ``tokenizer.json``)."""
        directory = Path(directory)
        return cls(directory / "vocab.txt", lower_case_of(directory), directory / "tokenizer.json")

    def vocab_lines(self):
        """The vocabulary's tokens in id order (BOM-free, checked by data.vocab.read_vocab)."""
        return list(self._vocab)

    def encode(self, lines, seq_len):
        """Returns int32 arrays ``[len(lines), seq_len]``: right padded, truncated longest-first."""
        tok = self._tokenizer
        tok.enable_truncation(max_length=seq_len)
        tok.enable_padding(length=seq_len, pad_id=tok.token_to_id("[PAD]") or 0, pad_token="[PAD]")
        batch = [tuple(line.split("\t", 1)) if "\t" in line else line for line in lines]
        encodings = tok.encode_batch(batch)
        return {
            "input_ids": np.array([e.ids for e in encodings], np.int32),
            "attention_mask": np.array([e.attention_mask for e in encodings], np.int32),
            "token_type_ids": np.array([e.type_ids for e in encodings], np.int32),
        }
