"""WordPieceTokenizer: text to the three int32 input arrays, for calibration and validation.

Uses the Rust ``tokenizers`` package. A Hugging Face directory's
``tokenizer.json`` is used as is (it is what the checkpoint was trained with);
otherwise a BERT WordPiece tokenizer is built from ``vocab.txt`` with the
recorded lower-casing. Lines holding a tab are sentence pairs (segment A, tab,
segment B); ``token_type_ids`` are 1 on segment B, as in BERT.
"""

import json
from pathlib import Path

import numpy as np

from mobilebert_kit.errors import ConfigError


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
        if tokenizer_json is not None and Path(tokenizer_json).is_file():
            self._tokenizer = Tokenizer.from_file(str(tokenizer_json))
        else:
            if not self.vocab_path.is_file():
                raise ConfigError(f"vocabulary {self.vocab_path} not found; pass the model's vocab.txt")
            self._tokenizer = BertWordPieceTokenizer(str(self.vocab_path), lowercase=self.do_lower_case)
        self.vocab_size = self._tokenizer.get_vocab_size()

    @classmethod
    def from_directory(cls, directory):
        """Builds the tokenizer of a model directory holding ``vocab.txt`` (and maybe ``tokenizer.json``)."""
        directory = Path(directory)
        return cls(directory / "vocab.txt", lower_case_of(directory), directory / "tokenizer.json")

    def vocab_lines(self):
        return self.vocab_path.read_text(encoding="utf-8").splitlines()

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


def lower_case_of(directory):
    """``do_lower_case`` recorded in a model directory (tokenizer_config.json / tokenizer.json); True if absent."""
    directory = Path(directory)
    config = directory / "tokenizer_config.json"
    if config.is_file():
        try:
            value = json.loads(config.read_text()).get("do_lower_case")
            if value is not None:
                return bool(value)
        except ValueError:
            pass
    tokenizer = directory / "tokenizer.json"
    if tokenizer.is_file():
        try:
            normalizer = json.loads(tokenizer.read_text()).get("normalizer") or {}
            if "lowercase" in normalizer:
                return bool(normalizer["lowercase"])
        except ValueError:
            pass
    return True
