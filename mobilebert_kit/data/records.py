"""The on-disk format of pre-training examples: sharded TFRecords plus ``dataset.json``.

A pre-training data directory holds ``shard-00000-of-00008.tfrecord`` ... and
``dataset.json``::

    {"format": "mobilebert-kit-pretraining", "format_version": 1,
     "seq_len": 128, "max_predictions": 20, "num_examples": 123456,
     "shards": ["shard-00000-of-00008.tfrecord", ...],
     "vocab_size": 30522, "vocab_sha256": "...", ...creation options...}

Each record is a ``tf.train.Example`` with fixed-length int64 features named
like the encoder inputs (``input_ids``, ``attention_mask``,
``token_type_ids``) plus ``masked_lm_positions``, ``masked_lm_ids``,
``masked_lm_weights`` (float) and ``next_sentence_labels`` (0: B follows A,
1: B is random, BERT's convention). Files written by Google's
``create_pretraining_data.py`` (``input_mask``, ``segment_ids``) are read too.
"""

import json
from pathlib import Path

from mobilebert_kit.errors import MbkError

FORMAT = "mobilebert-kit-pretraining"
FORMAT_VERSION = 1
METADATA_FILE = "dataset.json"
INT_FEATURES = ("input_ids", "attention_mask", "token_type_ids", "masked_lm_positions", "masked_lm_ids")
# Names used by google-research/bert create_pretraining_data.py.
BERT_ALIASES = {"input_mask": "attention_mask", "segment_ids": "token_type_ids"}


def shard_name(index, count):
    return f"shard-{index:05d}-of-{count:05d}.tfrecord"


def serialize_example(example):
    """Serializes one example dict (lists of ints; ``masked_lm_weights`` floats) to bytes."""
    from mobilebert_kit.backend import tf

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    feature = {name: ints(example[name]) for name in INT_FEATURES}
    feature["masked_lm_weights"] = tf.train.Feature(
        float_list=tf.train.FloatList(value=[float(v) for v in example["masked_lm_weights"]])
    )
    feature["next_sentence_labels"] = ints([example["next_sentence_labels"]])
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def read_metadata(data):
    """Returns ``(directory, metadata dict)`` for a data directory or its ``dataset.json``.

    Raises:
        MbkError: naming the missing or malformed file and what to do.
    """
    path = Path(data)
    meta_path = path / METADATA_FILE if path.is_dir() else path
    if not meta_path.is_file():
        raise MbkError(
            f"{data} is not a pre-training data directory ({METADATA_FILE} is missing); "
            "create one with `mbk pretraining-data`"
        )
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise MbkError(f"cannot read {meta_path} ({err}); re-create the data with `mbk pretraining-data`") from err
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise MbkError(f"{meta_path} is not a mobilebert-kit pre-training metadata file; re-create the data")
    if meta.get("format_version", 0) > FORMAT_VERSION:
        raise MbkError(f"{meta_path} was written by a newer mobilebert-kit (format {meta['format_version']}); upgrade")
    for key in ("seq_len", "max_predictions", "shards", "num_examples"):
        if key not in meta:
            raise MbkError(f"{meta_path} has no {key!r}; re-create the data with `mbk pretraining-data`")
    directory = meta_path.parent
    missing = [s for s in meta["shards"] if not (directory / s).is_file()]
    if missing:
        raise MbkError(f"{directory} is missing {len(missing)} shard(s), first {missing[0]}; re-create the data")
    return directory, meta
