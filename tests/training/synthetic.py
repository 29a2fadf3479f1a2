"""Small synthetic pre-training data and tiny teacher/student pairs for the training tests."""

import json

import numpy as np

from mobilebert_kit.data.records import FORMAT, FORMAT_VERSION, METADATA_FILE, serialize_example, shard_name


def write_synthetic_data(directory, num_examples=64, seq_len=16, max_predictions=3, vocab_size=512, shards=2, seed=0):
    """Writes random but well-formed pre-training examples (with padding) and dataset.json."""
    from mobilebert_kit.backend import tf

    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    names = [shard_name(i, shards) for i in range(shards)]
    writers = [tf.io.TFRecordWriter(str(directory / n)) for n in names]
    for i in range(num_examples):
        length = int(rng.integers(seq_len // 2, seq_len + 1))
        ids = np.zeros(seq_len, np.int64)
        ids[:length] = rng.integers(5, vocab_size, size=length)
        mask = (np.arange(seq_len) < length).astype(np.int64)
        types = ((np.arange(seq_len) >= length // 2) & (mask == 1)).astype(np.int64)
        n_pred = int(rng.integers(1, max_predictions + 1))
        positions = np.zeros(max_predictions, np.int64)
        positions[:n_pred] = np.sort(rng.choice(np.arange(1, length), size=n_pred, replace=False))
        labels = np.zeros(max_predictions, np.int64)
        labels[:n_pred] = ids[positions[:n_pred]]
        ids[positions[:n_pred]] = 4  # a [MASK]-like id
        weights = (np.arange(max_predictions) < n_pred).astype(np.float32)
        example = {
            "input_ids": ids, "attention_mask": mask, "token_type_ids": types,
            "masked_lm_positions": positions, "masked_lm_ids": labels, "masked_lm_weights": weights,
            "next_sentence_labels": int(rng.integers(0, 2)),
        }
        writers[i % shards].write(serialize_example(example))
    for w in writers:
        w.close()
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "seq_len": seq_len, "max_predictions": max_predictions,
            "num_examples": num_examples, "shards": names, "vocab_size": vocab_size}
    (directory / METADATA_FILE).write_text(json.dumps(meta))
    return directory
