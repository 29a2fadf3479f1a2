"""Pre-training example creation (NSP pairs, masks, shards), determinism, streaming input and resume."""

import json
import re

import numpy as np
import pytest

from mobilebert_kit.data.pretraining_dataset import pretraining_dataset
from mobilebert_kit.data.pretraining_examples import PretrainingDataOptions, write_pretraining_data
from mobilebert_kit.data.word_piece_tokenizer import WordPieceTokenizer
from mobilebert_kit.errors import MbkError

# Long enough that most segments hold several sentences: a lone sentence forces a random next
# sentence (as in Google's code), which would tilt the NSP balance of short examples.
OPTIONS = dict(seq_len=96, max_predictions=12, num_shards=3, chunk_documents=10)


@pytest.fixture(scope="module")
def written(email_corpus, tmp_path_factory):
    tok = WordPieceTokenizer(email_corpus / "vocab.txt")
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
    tok = WordPieceTokenizer(email_corpus / "vocab.txt")
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
    tok = WordPieceTokenizer(email_corpus / "vocab.txt")
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
    tok = WordPieceTokenizer(email_corpus / "vocab.txt")
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
