"""Fine-tuning a checkpoint whose tokenizer is not BERT's (issue 35): XLM-R's SentencePiece through tokenizer.json.

The training rows are what transformers' tokenizer gives for the same sentence pairs (XLM-R's pair layout
``<s> a </s></s> b </s>``, segment ids all 0, padding with its pad id), the run keeps the tokenizer files
beside its model, ``mbk evaluate`` reads them back, and the exported ``.tflite`` packs the SentencePiece model.
"""

import numpy as np
import pytest

from tests.clients.conftest import mbk_ok
from tests.tokenizer_fixtures import save_checkpoint

transformers = pytest.importorskip("transformers")

PAIRS = [("A man is playing a guitar.", "A person plays an instrument.", "yes"),
         ("The cat sleeps on the sofa.", "A dog is barking loudly outside.", "no"),
         ("The meeting was moved to Thursday.", "The meeting now takes place on Thursday.", "yes"),
         ("Stock markets fell sharply.", "Two dogs run through the snow.", "no")]


def test_training_rows_are_the_checkpoint_tokenizers_pairs(tmp_path):
    from mobilebert_kit.data.text_tokenizer import tokenizer_of
    from mobilebert_kit.training.task_data import sequence_features

    save_checkpoint("xlm-roberta", tmp_path, head=None)
    a, b, _ = zip(*PAIRS)
    ours = sequence_features(tokenizer_of(tmp_path), a, b, 20)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path))(
        list(a), list(b), padding="max_length", truncation=True, max_length=20, return_tensors="np")
    np.testing.assert_array_equal(ours["input_ids"], theirs["input_ids"])
    np.testing.assert_array_equal(ours["attention_mask"], theirs["attention_mask"])
    assert not ours["token_type_ids"].any()  # XLM-R's one token type


def test_finetune_evaluate_and_export_with_a_sentencepiece_tokenizer(tmp_path):
    from mobilebert_kit.artifacts.client_metadata import read_client_metadata

    save_checkpoint("xlm-roberta", tmp_path / "base", head=None)
    rows = "".join(f"{x}\t{y}\t{label}\n" for x, y, label in PAIRS * 2)
    (tmp_path / "train.tsv").write_text("sentence1\tsentence2\tlabel\n" + rows)
    mbk_ok("finetune", "--model", tmp_path / "base", "--task", "classification", "--train", tmp_path / "train.tsv",
           "--out", tmp_path / "run", "--epochs", 1, "--batch-size", 4, "--seq-len", 24)
    assert (tmp_path / "run" / "tokenizer.json").is_file() and (tmp_path / "run" / "special_tokens_map.json").is_file()
    mbk_ok("evaluate", "--model", tmp_path / "run", "--data", tmp_path / "train.tsv")
    mbk_ok("export", tmp_path / "run" / "model", "--format", "tflite", "--out", tmp_path / "c.tflite")
    meta = read_client_metadata(tmp_path / "c.tflite")
    assert meta.tokenizer == "sentencepiece" and meta.vocab_file in meta.packed_files
