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

from pathlib import Path

from mobilebert_kit.errors import DataError
from mobilebert_kit.utils.limits import Limit, within
from mobilebert_kit.utils.output_check import OutputKind
from mobilebert_kit.utils.structured import load_json

FORMAT = "mobilebert-kit-pretraining"
FORMAT_VERSION = 1
METADATA_FILE = "dataset.json"
# The output kind of a pre-training data directory (its marker lets a re-run replace it; utils.output_check).
PRETRAINING_DATA = OutputKind("pretraining-data", True, "a pretraining-data directory")
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


_REMAKE = "re-create the data with `mbk pretraining-data`"
# What the readers do with each field: seq_len and max_predictions size every parsed tensor, num_examples sizes
# the teacher cache, shards are joined to the directory. Bounds as the Encoder's positions (models/encoder.py).
_COUNTS = {"seq_len": Limit(int, 1, 131_072), "max_predictions": Limit(int, 0, 131_072),
           "num_examples": Limit(int, 1, 1 << 40)}
_VERSION = Limit(int, 0, 1 << 31)
MAX_SHARDS = 100_000


def _short(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_fields(meta_path, meta):
    """Refuses, in one line, a dataset.json field the readers could not use (a string, a float, a path)."""
    for key, limit in _COUNTS.items():
        if not within(limit, meta[key]):
            raise DataError(f"{meta_path}: {key} must be a whole number from {limit.lo} to {limit.hi}, got "
                            f"{_short(meta[key])}; {_REMAKE}")
    shards = meta["shards"]
    if not isinstance(shards, list) or not 1 <= len(shards) <= MAX_SHARDS:
        raise DataError(f"{meta_path}: shards must be a list of 1 to {MAX_SHARDS} file names; {_REMAKE}")
    for name in shards:
        # Names only: a path would read files outside the data directory.
        if not isinstance(name, str) or not name or name in (".", "..") or any(c in name for c in "/\\\0"):
            raise DataError(f"{meta_path}: shard {_short(name)} is not a file name in the data directory; {_REMAKE}")


def read_metadata(data):
    """Returns ``(directory, metadata dict)`` for a data directory or its ``dataset.json`` (checked)."""
    path = Path(data)
    meta_path = path / METADATA_FILE if path.is_dir() else path
    if not meta_path.is_file():
        raise DataError(
            f"{data} is not a pre-training data directory ({METADATA_FILE} is missing); "
            "create one with `mbk pretraining-data`"
        )
    meta = load_json(meta_path, METADATA_FILE, expect=dict, error=DataError, fix=_REMAKE)
    if meta.get("format") != FORMAT:
        raise DataError(f"{meta_path} is not a mobilebert-kit pre-training metadata file; re-create the data")
    version = meta.get("format_version", 0)
    if not within(_VERSION, version):
        raise DataError(f"{meta_path}: format_version must be a whole number, got {_short(version)}; {_REMAKE}")
    if version > FORMAT_VERSION:
        raise DataError(f"{meta_path} was written by a newer mobilebert-kit (format {version}); upgrade")
    for key in ("seq_len", "max_predictions", "shards", "num_examples"):
        if key not in meta:
            raise DataError(f"{meta_path} has no {key!r}; {_REMAKE}")
    _check_fields(meta_path, meta)
    directory = meta_path.parent
    missing = [s for s in meta["shards"] if not (directory / s).is_file()]
    if missing:
        raise DataError(f"{directory} is missing {len(missing)} shard(s), first {missing[0]}; re-create the data")
    return directory, meta
