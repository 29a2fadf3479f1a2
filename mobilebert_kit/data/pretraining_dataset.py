"""Streaming ``tf.data`` input of pre-training examples (never the whole corpus in memory)."""

from mobilebert_kit.data.records import BERT_ALIASES, INT_FEATURES, read_metadata
from mobilebert_kit.errors import DataError, first_line


def _feature_spec(tf, seq_len, max_predictions, names):
    spec = {}
    for name in names:
        length = max_predictions if name.startswith("masked_lm") else seq_len
        if name == "next_sentence_labels":
            length = 1
        dtype = tf.float32 if name == "masked_lm_weights" else tf.int64
        spec[name] = tf.io.FixedLenFeature([length], dtype)
    return spec


def _first_record(tf, path):
    """The features of the first record of ``path`` (our names or BERT's), ``{name: Feature}``."""
    try:
        for raw in tf.data.TFRecordDataset([str(path)]).take(1):
            return dict(tf.train.Example.FromString(raw.numpy()).features.feature)
    except (tf.errors.OpError, ValueError) as err:  # not TFRecord, or not an Example (DecodeError is a ValueError)
        raise DataError(f"{path} is not a shard of pre-training records ({first_line(err)[:160]}); re-create the data "
                        "with `mbk pretraining-data`") from None
    raise DataError(f"{path} holds no records; re-create the data with `mbk pretraining-data`")


def _check_lengths(path, features, spec, meta_path):
    """The first record's feature lengths against ``dataset.json``'s ``seq_len`` / ``max_predictions``.

    A mismatch surfaced at the first step as TensorFlow's parse error, cut mid-word ("Number of int64 values !="),
    after the run directory was written.
    """
    for name, want in spec.items():
        feature = features.get(name)
        if feature is None:
            raise DataError(f"{path} has records without {name!r}; re-create the data with `mbk pretraining-data`")
        have = len(feature.float_list.value) or len(feature.int64_list.value)
        if have != want.shape[0]:
            field = "max_predictions" if name.startswith("masked_lm") else "seq_len"
            raise DataError(f"{path} holds records of {have} {name} values but {meta_path} says {field} "
                            f"{want.shape[0]}; the two were written apart: re-create the data with "
                            "`mbk pretraining-data`")


def pretraining_dataset(data, batch_size, seed=0, shuffle_buffer=1000, repeat=True, cycle_length=4):
    """Batches of pre-training examples from a data directory, deterministic given ``seed``.

    Shards are read in a seeded order that changes each epoch, ``cycle_length``
    of them interleaved, records shuffled in a seeded buffer, batches parsed
    with ``tf.io.parse_example``. The returned dataset's iterator can be saved
    in a ``tf.train.Checkpoint`` (shuffle buffer included): a resumed run sees
    exactly the batches it would have seen.

    Args:
        data: directory written by :func:`~mobilebert_kit.data.pretraining_examples.write_pretraining_data`
            (or its ``dataset.json``).
        batch_size: examples per batch (the global batch; the remainder is dropped).
        seed: shuffling seed.
        shuffle_buffer: records in the shuffle buffer (0: no record shuffling).
        repeat: cycle through the data forever (training) or once (evaluation).
        cycle_length: shards read concurrently.

    Returns:
        ``(dataset, metadata)``; elements are dicts of int32 ``[batch, seq_len]``
        inputs, ``masked_lm_*`` ``[batch, max_predictions]`` and
        ``next_sentence_labels`` ``[batch]``.

    Example:
        >>> dataset, meta = pretraining_dataset("data/wiki", batch_size=32)  # doctest: +SKIP
    """
    from mobilebert_kit.backend import tf

    directory, meta = read_metadata(data)
    files = [str(directory / s) for s in meta["shards"]]  # read_metadata checked there is at least one
    seq_len, max_predictions = int(meta["seq_len"]), int(meta["max_predictions"])
    first = _first_record(tf, files[0])
    aliases = {alias: ours for alias, ours in BERT_ALIASES.items() if alias in first and ours not in first}
    wanted = [*INT_FEATURES, "masked_lm_weights", "next_sentence_labels"]
    stored = [next((a for a, o in aliases.items() if o == n), n) for n in wanted]
    spec = _feature_spec(tf, seq_len, max_predictions, stored)
    _check_lengths(files[0], first, spec, directory / "dataset.json")

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        out = {name: parsed[key] if name == "masked_lm_weights" else tf.cast(parsed[key], tf.int32)
               for name, key in zip(wanted, stored)}
        out["next_sentence_labels"] = tf.reshape(out["next_sentence_labels"], [-1])
        return out

    shards = tf.data.Dataset.from_tensor_slices(files)
    if len(files) > 1:
        shards = shards.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        shards = shards.repeat()
    records = shards.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(cycle_length, len(files)),
        block_length=1,
    )
    if shuffle_buffer and repeat:
        records = records.shuffle(shuffle_buffer, seed=seed + 1, reshuffle_each_iteration=True)
    dataset = records.batch(batch_size, drop_remainder=repeat).map(parse).prefetch(2)
    return dataset, meta
