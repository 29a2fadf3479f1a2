"""The offline English corpus from standard-library docstrings."""

from mobilebert_kit.data.stdlib_corpus import build_stdlib_corpus, docstring_sentences


def test_sentences_keep_prose_and_drop_code():
    doc = """Parse a mail message into a tree. It handles MIME parts.

    >>> parse(text)
    Message(...)

Attributes:
    x = 1
The result is cached for later calls!"""
    assert docstring_sentences(doc) == [
        "Parse a mail message into a tree.",
        "It handles MIME parts.",
        "The result is cached for later calls!",
    ]


def test_corpus_is_deterministic_with_a_heldout_split(tmp_path):
    root = tmp_path / "lib"
    (root / "pkg").mkdir(parents=True)
    for i in range(40):
        (root / "pkg" / f"mod{i}.py").write_text(
            f'"""Module number {i} has a docstring. It explains what the module does."""\n'
            f"def f():\n    '''Return the answer to the question number {i}.'''\n"
        )
    (root / "test").mkdir()
    (root / "test" / "test_x.py").write_text('"""Tests are never part of the corpus at all."""\n')
    stats = build_stdlib_corpus(tmp_path / "a.txt", tmp_path / "h.txt", heldout_fraction=0.25, root=root)
    again = build_stdlib_corpus(tmp_path / "b.txt", tmp_path / "h2.txt", heldout_fraction=0.25, root=root)
    assert stats == again and (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    assert stats["documents"] + stats["heldout_documents"] == 40
    assert 3 <= stats["heldout_documents"] <= 20
    text = (tmp_path / "a.txt").read_text()
    assert "Tests are never" not in text
    documents = [d for d in text.split("\n\n") if d.strip()]
    assert all(len(d.splitlines()) == 3 for d in documents)
