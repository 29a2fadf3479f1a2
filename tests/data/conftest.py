"""Fixtures of the data tests: a small real corpus (the email package's docstrings) and a 512-token vocabulary."""

import sysconfig
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def email_corpus(tmp_path_factory):
    from mobilebert_kit.data.stdlib_corpus import build_stdlib_corpus
    from mobilebert_kit.data.text_tokenizer import train_wordpiece_vocab

    root = tmp_path_factory.mktemp("corpus")
    build_stdlib_corpus(root / "train.txt", root=Path(sysconfig.get_paths()["stdlib"]) / "email")
    train_wordpiece_vocab([root / "train.txt"], root / "vocab.txt", vocab_size=512)
    return root


def write_vocab(path, tokens):
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    path.write_text("\n".join(specials + list(tokens)) + "\n", encoding="utf-8")
    return path
