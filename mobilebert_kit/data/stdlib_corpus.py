"""A small real English corpus built offline from the docstrings of Python's standard library.

Every installation of Python carries a few MB of hand-written English
documentation in its standard library's docstrings. Each module becomes a
document and its docstrings are split into sentences, one per line, in the
format of :mod:`mobilebert_kit.data.pretraining_examples`. Sources are read
with ``ast`` (nothing is imported, so no module side effects). The result
depends only on the Python version, which is recorded in the output.
"""

import ast
import contextlib
import hashlib
import re
import sys
import sysconfig
from pathlib import Path

from mobilebert_kit.utils.atomic import atomic_file
from mobilebert_kit.utils.output_check import OutputKind

# The output kind of the corpus directory (train.txt, heldout.txt) that `mbk pretraining-data --stdlib-corpus`
# fills; its marker lets a re-run replace it (utils.output_check).
STDLIB_CORPUS = OutputKind("stdlib-corpus", True, "a standard-library corpus directory")

# Test suites, generated tables and GUI demos: little prose, many fixtures.
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__", "turtledemo", "encodings", "lib2to3",
              "pydoc_data", "ensurepip", "venv"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
_CODE_LINE = re.compile(r"^\s*(>>>|\.\.\.|[-=~^*]{3,}|:\w+:|[A-Za-z_][\w.]*\s*=\s|def |class |import |from \w+ import )")


def stdlib_sources(root=None):
    """Sorted ``(module name, path)`` of the standard library's Python sources."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part in _SKIP_DIRS or part.startswith(".") for part in rel.parts[:-1]):
            continue
        name = ".".join(rel.with_suffix("").parts)
        if name.endswith("__main__") or "test" in rel.name.lower():
            continue
        found.append((name.replace(".__init__", ""), path))
    return found


def _docstrings(source):
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return [doc for node in nodes if (doc := ast.get_docstring(node, clean=True))]


def _is_prose(sentence):
    words = sentence.split()
    if len(words) < 4 or len(sentence) > 400:
        return False
    letters = sum(ch.isalpha() or ch.isspace() for ch in sentence)
    return letters / len(sentence) > 0.85 and sentence[0].isupper()


def _heading(line):
    """Section headings such as ``Args:`` or ``Example usage:``."""
    line = line.strip()
    return line.endswith(":") and len(line.split()) <= 3


def docstring_sentences(doc):
    """Prose sentences of one docstring: paragraphs joined, code and tables dropped."""
    sentences = []
    for paragraph in re.split(r"\n\s*\n", doc):
        lines = [ln for ln in paragraph.splitlines() if ln.strip() and not _CODE_LINE.match(ln) and not _heading(ln)]
        if not lines or lines[0].startswith((" ", "\t")):
            continue  # indented blocks are examples and literal text
        text = " ".join(ln.strip() for ln in lines)
        for sentence in _SENTENCE_END.split(text):
            sentence = sentence.strip()
            if _is_prose(sentence):
                sentences.append(sentence)
    return sentences


def build_stdlib_corpus(out_path, heldout_path=None, heldout_fraction=0.05, min_sentences=2, root=None):
    """Writes the standard-library docstring corpus; optionally holds out a share of the modules.

    Args:
        out_path: training text file (one sentence per line, blank line between modules).
        heldout_path: held-out text file, or None to keep everything in ``out_path``.
        heldout_fraction: share of modules (chosen by a hash of the module name) held out.
        min_sentences: modules with fewer prose sentences are left out.
        root: standard library directory (default: this interpreter's).

    Returns:
        A dict of counts and the Python version.

    Example:
        >>> stats = build_stdlib_corpus("corpus/train.txt", "corpus/heldout.txt")  # doctest: +SKIP
    """
    stats = {"python": sys.version.split()[0], "documents": 0, "sentences": 0, "heldout_documents": 0,
             "heldout_sentences": 0, "bytes": 0}
    held_out = atomic_file(heldout_path, "w") if heldout_path is not None else contextlib.nullcontext()
    with atomic_file(out_path, "w") as train, held_out as heldout:
        for name, path in stdlib_sources(root):
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            sentences = [s for doc in _docstrings(source) for s in docstring_sentences(doc)]
            if len(sentences) < min_sentences:
                continue
            bucket = int(hashlib.sha1(name.encode()).hexdigest(), 16) % 10000
            held = heldout is not None and bucket < heldout_fraction * 10000
            text = "\n".join(sentences) + "\n\n"
            (heldout if held else train).write(text)
            prefix = "heldout_" if held else ""
            stats[prefix + "documents"] += 1
            stats[prefix + "sentences"] += len(sentences)
            stats["bytes"] += len(text.encode())
    return stats
