"""Pre-training example creation (NSP pairs, masks, shards), determinism, streaming input and resume."""

import json
import re

import numpy as np
import pytest

from mobilebert_kit.data.pretraining_dataset import pretraining_dataset
from mobilebert_kit.data.pretraining_examples import PretrainingDataOptions, write_pretraining_data
from mobilebert_kit.data.text_tokenizer import TextTokenizer
from mobilebert_kit.errors import MbkError

# Long enough that most segments hold several sentences: a lone sentence forces a random next
# sentence (as in Google's code), which would tilt the NSP balance of short examples.
OPTIONS = dict(seq_len=96, max_predictions=12, num_shards=3, chunk_documents=10)


@pytest.fixture(scope="module")
def written(email_corpus, tmp_path_factory):
    tok = TextTokenizer.from_vocab(email_corpus / "vocab.txt")
    out = tmp_path_factory.mktemp("pretraining") / "data"
    meta = write_pretraining_data([email_corpus / "train.txt"], tok, out, PretrainingDataOptions(**OPTIONS))
    return tok, out, meta


def _records(directory):
    dataset, meta = pretraining_dataset(directory, batch_size=1000, repeat=False)
    batches = list(dataset)
    return {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}, meta


def test_examples_are_well_formed(written):
    tok, out, meta = written
    # .mbk-output.json: the marker that lets a re-run replace this directory (utils.atomic)
    assert sorted(p.name for p in out.iterdir()) == sorted(meta["shards"] + ["dataset.json", ".mbk-output.json"])
    data, _ = _records(out)
    n = meta["num_examples"]
    assert data["input_ids"].shape == (n, 96) and data["masked_lm_positions"].shape == (n, 12)
    assert data["input_ids"][:, 0].tolist() == [tok.cls_id] * n
    lengths = data["attention_mask"].sum(1)
    assert lengths.max() <= 96
    for row in range(n):
        ids, length = data["input_ids"][row], lengths[row]
        assert (ids[length:] == tok.pad_id).all() and (data["token_type_ids"][row, length:] == 0).all()
        assert ids[length - 1] == tok.sep_id or data["masked_lm_positions"][row].tolist().count(length - 1) == 0
        k = int(data["masked_lm_weights"][row].sum())
        positions = data["masked_lm_positions"][row, :k]
        assert k >= 1 and (positions > 0).all() and (positions < length).all()
        # segment B (type 1) ends the real tokens
        types = data["token_type_ids"][row, :length]
        assert types[0] == 0 and types[-1] == 1 and (np.diff(types) >= 0).all()
    # NSP: about half the B segments are random; ~15% of the tokens are predicted, 80% of those are [MASK]
    assert 0.35 < data["next_sentence_labels"].mean() < 0.65
    weights = data["masked_lm_weights"] > 0
    assert meta["num_masked_tokens"] == int(weights.sum())
    at_positions = np.take_along_axis(data["input_ids"], data["masked_lm_positions"], axis=1)[weights]
    assert 0.75 < (at_positions == tok.mask_id).mean() < 0.85
    assert 0.12 < weights.sum() / (lengths - 3).sum() < 0.16


def test_creation_is_deterministic_given_the_seed(written, email_corpus, tmp_path):
    tok, out, meta = written
    again = write_pretraining_data([email_corpus / "train.txt"], tok, tmp_path / "again", PretrainingDataOptions(**OPTIONS))
    for shard in meta["shards"]:
        assert (tmp_path / "again" / shard).read_bytes() == (out / shard).read_bytes()
    other = write_pretraining_data([email_corpus / "train.txt"], tok, tmp_path / "other",
                                   PretrainingDataOptions(**dict(OPTIONS, seed=7)))
    assert (tmp_path / "other" / meta["shards"][0]).read_bytes() != (out / meta["shards"][0]).read_bytes()
    assert json.loads((out / "dataset.json").read_text())["vocab_sha256"] == tok.fingerprint()


def test_whole_word_masking_in_written_examples(email_corpus, tmp_path):
    tok = TextTokenizer.from_vocab(email_corpus / "vocab.txt")
    write_pretraining_data([email_corpus / "train.txt"], tok, tmp_path / "wwm",
                           PretrainingDataOptions(**dict(OPTIONS, whole_word="wordpiece", num_shards=1)))
    data, _ = _records(tmp_path / "wwm")
    labels = data["masked_lm_ids"]
    split_words = 0
    for row in range(len(labels)):
        k = int(data["masked_lm_weights"][row].sum())
        picked = set(data["masked_lm_positions"][row, :k].tolist())
        for p in picked:
            # the piece after a predicted one continues the word (##) -> it is predicted too
            nxt = p + 1
            if nxt < 96 and data["attention_mask"][row, nxt]:
                original = data["input_ids"][row, nxt] if nxt not in picked else None
                if original is not None and tok.convert_ids_to_tokens([original])[0].startswith("##"):
                    split_words += 1
    assert split_words == 0


def test_stream_resumes_from_a_checkpointed_iterator(written):
    from mobilebert_kit.backend import tf

    _, out, _ = written
    dataset, _ = pretraining_dataset(out, batch_size=4, seed=3, shuffle_buffer=50)
    iterator = iter(dataset)
    for _ in range(3):
        next(iterator)
    checkpoint = tf.train.Checkpoint(data=iterator)
    path = checkpoint.write(str(out.parent / "ckpt" / "it"))
    expected = [next(iterator)["input_ids"].numpy() for _ in range(4)]
    restored = iter(pretraining_dataset(out, batch_size=4, seed=3, shuffle_buffer=50)[0])
    tf.train.Checkpoint(data=restored).read(path).assert_consumed()
    for want in expected:
        np.testing.assert_array_equal(next(restored)["input_ids"].numpy(), want)
    # Same seed, same order; another seed, another order.
    first = next(iter(pretraining_dataset(out, batch_size=4, seed=3, shuffle_buffer=50)[0]))["input_ids"].numpy()
    other = next(iter(pretraining_dataset(out, batch_size=4, seed=4, shuffle_buffer=50)[0]))["input_ids"].numpy()
    assert not np.array_equal(first, other)


def test_bad_inputs_leave_nothing_behind(email_corpus, tmp_path):
    tok = TextTokenizer.from_vocab(email_corpus / "vocab.txt")
    (tmp_path / "blank.txt").write_text("\n\n   \n")
    with pytest.raises(MbkError, match="no examples"):
        write_pretraining_data([tmp_path / "blank.txt"], tok, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))
    with pytest.raises(MbkError, match="does not exist"):
        write_pretraining_data([tmp_path / "missing.txt"], tok, tmp_path / "out")
    with pytest.raises(MbkError, match="dataset.json is missing"):
        pretraining_dataset(tmp_path, batch_size=2)


@pytest.mark.parametrize("change, fragment", [
    ({"seq_len": "x"}, "seq_len must be a whole number"),
    ({"seq_len": 12.0}, "seq_len must be a whole number"),
    ({"max_predictions": 1e300}, "max_predictions must be a whole number"),
    ({"num_examples": -3}, "num_examples must be a whole number"),
    ({"num_examples": True}, "num_examples must be a whole number"),
    ({"format_version": "9"}, "format_version must be a whole number"),
    ({"shards": "shard-0"}, "shards must be a list"),
    ({"shards": []}, "shards must be a list"),
    ({"shards": [1]}, "shard 1 is not a file name"),
    ({"shards": ["../../etc/passwd"]}, "is not a file name in the data directory"),
    ({"shards": ["a\\b"]}, "is not a file name in the data directory"),
])
def test_a_hostile_dataset_json_is_refused_in_one_line(written, tmp_path, change, fragment):
    """Every value the readers consume is checked before use: these were internal errors (int('x'), path / 1)."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(written[1], data)
    meta = json.loads((data / "dataset.json").read_text())
    (data / "dataset.json").write_text(json.dumps({**meta, **change}))
    with pytest.raises(MbkError, match=fragment) as err:
        pretraining_dataset(data, batch_size=2)
    assert "\n" not in str(err.value) and "mbk pretraining-data" in str(err.value)


def test_a_dataset_json_nested_too_deep_is_refused(tmp_path):
    (tmp_path / "dataset.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(MbkError, match="nests too deeply"):
        pretraining_dataset(tmp_path, batch_size=2)


def test_truncating_a_pair_draws_as_google_s_truncate_seq_pair_and_is_linear():
    # One 200,000-word line took 39 s: deleting from a list's front one token at a time is quadratic.
    import random

    from mobilebert_kit.data.pretraining_examples import _truncate_pair

    def google(a, b, max_tokens, rng):  # create_pretraining_data.truncate_seq_pair
        while len(a) + len(b) > max_tokens:
            longer = a if len(a) > len(b) else b
            if rng.random() < 0.5:
                del longer[0]
            else:
                longer.pop()

    for seed in range(200):
        draw = random.Random(seed)
        a, b, limit = list(range(draw.randint(0, 60))), list(range(100, 100 + draw.randint(0, 60))), draw.randint(1, 80)
        want_a, want_b = a[:], b[:]
        google(want_a, want_b, limit, random.Random(seed))
        _truncate_pair(a, b, limit, random.Random(seed))
        assert (a, b) == (want_a, want_b), seed
    long = list(range(2_000_000))  # quadratic: hours; linear: about a second
    _truncate_pair(long, [7], 29, random.Random(0))
    assert len(long) == 28 and long == sorted(long) and long[-1] - long[0] == 27


def test_more_shards_than_open_files_raises_the_soft_limit_or_refuses(email_corpus, tmp_path, monkeypatch):
    # TensorFlow failed mid-run with "Too many open files" past `ulimit -n` (an internal error).
    import os
    import resource

    from mobilebert_kit.data import pretraining_examples as pe
    from mobilebert_kit.errors import ConfigError

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_now = len(os.listdir("/proc/self/fd"))
    low = open_now + 80
    if hard != resource.RLIM_INFINITY and hard < low + 200:
        pytest.skip(f"the hard open-file limit {hard} leaves no room to raise a lowered soft limit")
    tok = TextTokenizer.from_vocab(email_corpus / "vocab.txt")
    options = pe.PretrainingDataOptions(seq_len=64, max_predictions=8, num_shards=low + 100, chunk_documents=10)
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        meta = pe.write_pretraining_data([email_corpus / "train.txt"], tok, tmp_path / "data", options)
        raised = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(meta["shards"]) == low + 100 and raised > low
    assert len(list((tmp_path / "data").glob("*.tfrecord"))) == low + 100

    monkeypatch.setattr(resource, "getrlimit", lambda _which: (256, 256))
    with pytest.raises(ConfigError, match=re.escape("--shards 400 needs 464 open files and this process may open "
                                                    "at most 256 (ulimit -Hn); use --shards 192 or fewer")):
        pe.write_pretraining_data([email_corpus / "train.txt"], tok, tmp_path / "refused",
                                  pe.PretrainingDataOptions(num_shards=400))
    assert not (tmp_path / "refused").exists()


# ------------------------------------------------------------------ next-sentence pairs come from two documents
def _lettered_corpus(path, documents, sentences=3, words=3):
    """Documents whose words name them (``d2s1w0``): every token of an example tells its document."""
    from tests.data.conftest import write_vocab

    text = "\n\n".join("\n".join(" ".join(f"d{d}s{s}w{w}" for w in range(words)) for s in range(sentences))
                       for d in range(documents))
    path.write_text(text + "\n")
    vocab = [f"d{d}s{s}w{w}" for d in range(documents) for s in range(sentences) for w in range(words)]
    return write_vocab(path.parent / "vocab.txt", vocab)


def test_a_random_next_segment_never_comes_from_its_own_document(tmp_path):
    # 5 documents in chunks of 2: the lone fifth joins the chunk before. It used to make a chunk of its own,
    # and its "random next" segment was its own text, labelled 1 (as was every one-document input).
    vocab = _lettered_corpus(tmp_path / "corpus.txt", documents=5)
    tok = TextTokenizer.from_vocab(vocab)
    meta = write_pretraining_data([tmp_path / "corpus.txt"], tok, tmp_path / "data", PretrainingDataOptions(
        seq_len=16, max_predictions=3, num_shards=1, chunk_documents=2, dupe_factor=30))
    data, _ = _records(tmp_path / "data")
    ids = data["input_ids"].copy()
    for row in range(len(ids)):  # the text before masking
        k = int(data["masked_lm_weights"][row].sum())
        ids[row, data["masked_lm_positions"][row, :k]] = data["masked_lm_ids"][row, :k]
    partners = {d: set() for d in range(5)}
    for row, label in enumerate(data["next_sentence_labels"].ravel().tolist()):
        length = int(data["attention_mask"][row].sum())
        types = data["token_type_ids"][row, 1:length - 1]
        words = tok.convert_ids_to_tokens(ids[row, 1:length - 1])
        a = {int(w[1]) for w, t in zip(words, types) if t == 0 and w != "[SEP]"}
        b = {int(w[1]) for w, t in zip(words, types) if t == 1 and w != "[SEP]"}
        assert len(a) == len(b) == 1, words
        assert (a != b) == bool(label), (words, label)
        if label:
            partners[a.pop()].add(b.pop())
    assert meta["num_documents"] == 5 and 0 < meta["num_random_next"] < meta["num_examples"]
    # random next segments come from the chunk: {0, 1} and {2, 3, 4}
    assert partners == {0: {1}, 1: {0}, 2: {3, 4}, 3: {2, 4}, 4: {2, 3}}


def test_chunks_hold_at_least_two_documents():
    from mobilebert_kit.data.pretraining_examples import _chunks

    for size in (2, 3, 5):
        for count in range(1, 4 * size):
            chunks = list(_chunks(range(count), size))
            assert [d for chunk in chunks for d in chunk] == list(range(count))
            assert all(size <= len(c) <= size + 1 for c in chunks[:-1]) and len(chunks[-1]) <= size + 1
            assert all(len(c) >= 2 for c in chunks) or count == 1, (size, count, chunks)


def test_the_other_document_is_drawn_among_the_others():
    # Google's ten tries of any document all hit A's own one time in 1,024 with two documents.
    import random

    from mobilebert_kit.data.pretraining_examples import _instances

    documents = [[[(10, True)]], [[(20, True)]]]  # one one-token sentence each: B is always random
    options = PretrainingDataOptions(seq_len=8, short_seq_prob=0.0)
    rng = random.Random(0)
    for _ in range(5000):
        for index in (0, 1):
            (a, b, random_next), = _instances(documents, index, options, rng)
            assert random_next and a != b


@pytest.mark.parametrize("text, count", [("the cat sat on the mat\n", "holds 1;"),
                                         ("the cat sat .\nthe dog sat .\n\n\n", "holds 1;"),
                                         ("\n  \n", "holds none;")])
def test_an_input_of_fewer_than_two_documents_is_refused(tmp_path, text, count):
    from tests.data.conftest import write_vocab

    tok = TextTokenizer.from_vocab(write_vocab(tmp_path / "vocab.txt", ["the", "cat", "dog", "sat", "on", "mat", "."]))
    (tmp_path / "one.txt").write_text(text)
    with pytest.raises(MbkError) as err:
        write_pretraining_data([tmp_path / "one.txt"], tok, tmp_path / "out", PretrainingDataOptions(seq_len=16))
    assert str(err.value) == (
        "the input produced no examples: next-sentence prediction needs at least two documents (one sentence per "
        f"line, a blank line between documents) and {tmp_path / 'one.txt'} {count} add documents or separate them "
        "with blank lines")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))


# ------------------------------------------------------------------ option bounds: checked once, at parsing
@pytest.mark.parametrize("args, fragment", [
    (["--seq-len", "4"], "argument --seq-len: must be an integer >= 5 and <= 8192, got 4"),
    (["--chunk-documents", "1"], "argument --chunk-documents: must be an integer >= 2 and <= 10000000, got 1"),
    (["--masked-lm-prob", "0"], "argument --masked-lm-prob: must be a finite number > 0 and <= 1, got 0.0"),
    (["--shards", "0"], "argument --shards: must be an integer >= 1 and <= 100000, got 0"),
])
def test_option_ranges_are_refused_at_parsing_with_the_range(tmp_path, capsys, args, fragment):
    from mobilebert_kit.cli.main import main

    (tmp_path / "in.txt").write_text("a\n\nb\n")
    code = main(["pretraining-data", "--input", str(tmp_path / "in.txt"), "--vocab", str(tmp_path / "in.txt"),
                 "--out", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [f"mbk pretraining-data: error: {fragment}; see mbk pretraining-data --help"]


def test_the_parser_and_the_builder_take_the_same_values():
    # --seq-len 3 passed the parser (>= 2) and failed in the builder (>= 8); --masked-lm-prob 1 the other way.
    import argparse

    from mobilebert_kit.cli.main import build_parser
    from mobilebert_kit.data.pretraining_examples import OPTION_LIMITS
    from mobilebert_kit.errors import ConfigError

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["pretraining-data"]
    types = {a.dest: a.type for a in sub._actions}
    flag_of = {"num_shards": "shards"}
    for field, limit in OPTION_LIMITS.items():
        parse = types[flag_of.get(field, field)]
        edges = [limit.lo, limit.hi] if not limit.lo_open else [limit.hi]
        outside = [limit.hi + 1, limit.lo if limit.lo_open else limit.lo - 1]
        for value in edges:
            value = limit.kind(value)
            assert parse(str(value)) == value
            PretrainingDataOptions(**{field: value})
        for value in outside:
            value = limit.kind(value)
            with pytest.raises(argparse.ArgumentTypeError, match=f"must be {re.escape(limit.describe())}"):
                parse(str(value))
            with pytest.raises(ConfigError, match=f"{field} must be {re.escape(limit.describe())}"):
                PretrainingDataOptions(**{field: value})
    assert PretrainingDataOptions(masked_lm_prob=1.0, seq_len=5, chunk_documents=2).masked_lm_prob == 1.0
