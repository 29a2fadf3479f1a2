"""onnxruntime driven as code written for a Hugging Face / optimum export drives it (issue 14's Contract).

Such code feeds the tokenizer's arrays straight in: int64 ``input_ids``,
``attention_mask``, ``token_type_ids`` at their natural length (the batch's
longest sentence) and any batch size, and reads outputs by name
(``last_hidden_state``, ``logits``). The file must take that unchanged, in
float and quantized, and give the Keras source's values.
"""

import numpy as np
import pytest

from tests.clients.clients import optimum_feeds, ort_run, wordpiece_tokenizer
from tests.clients.conftest import TINY_VOCAB
from tests.helpers import assert_close_relative

MAX_POSITIONS = 64  # tiny-bert's position table
OPTIMUM_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@pytest.fixture(scope="module")
def tiny_encoder_dir(tmp_path_factory):
    """A saved tiny BERT encoder (weights of trained scale) with a vocabulary: a plain encoder source."""
    import mobilebert_kit as mbk
    from tests.convert.conftest import trained_like
    from tests.data.conftest import write_vocab

    directory = mbk.save(trained_like(mbk.build("tiny-bert"), seed=3), tmp_path_factory.mktemp("clients_enc") / "m")
    write_vocab(directory / "vocab.txt", TINY_VOCAB)
    return directory


def batches():
    """Batches of 1 and 3 sentences, short and up to the full position table (natural lengths all differ)."""
    long = " ".join(["the cat sat on a mat ."] * 20)
    return [["the film was good"], ["a dog ran", "the film was very bad .", long]]


def keras_outputs(directory, feeds):
    from mobilebert_kit.sources.model_source import ModelSource

    source = ModelSource.load(directory)
    return {k: v.numpy() for k, v in source.model({k: v.astype(np.int32) for k, v in feeds.items()},
                                                    training=False).items()}


def assert_optimum_signature(path):
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in session.get_inputs()}
    assert tuple(inputs) == OPTIMUM_INPUTS
    for i in inputs.values():
        assert i.type == "tensor(int64)", f"{i.name}: {i.type}"
        assert all(not isinstance(d, int) for d in i.shape), f"{i.name} has fixed axes {i.shape}"


@pytest.mark.parametrize("quantize", ["none", "dynamic"])
def test_feature_extraction_takes_tokenizer_arrays(tiny_encoder_dir, exported, quantize):
    # The Contract's command: no --seq-len, --dynamic-axes or dtype flag.
    path = exported(tiny_encoder_dir, f"encoder-{quantize}.onnx", "--format", "onnx", "--quantize", quantize)
    assert_optimum_signature(path)
    tokenizer = wordpiece_tokenizer(tiny_encoder_dir / "vocab.txt")
    tokenizer.enable_truncation(MAX_POSITIONS)
    for texts in batches():
        feeds = optimum_feeds(tokenizer, texts)
        assert feeds["input_ids"].dtype == np.int64
        hidden = ort_run(path, feeds, ["last_hidden_state"])["last_hidden_state"]
        reference = keras_outputs(tiny_encoder_dir, feeds)["sequence_output"]
        assert hidden.shape == reference.shape == (*feeds["input_ids"].shape, 32)
        assert_close_relative(hidden, reference, rtol=1e-4 if quantize == "none" else 0.1,
                              mask=feeds["attention_mask"])


def test_classifier_logits_by_name(tiny_classifier, exported):
    path = exported(tiny_classifier / "model", "classifier.onnx", "--format", "onnx")
    assert_optimum_signature(path)
    tokenizer = wordpiece_tokenizer(tiny_classifier / "model" / "vocab.txt")
    for texts in batches()[:1] + [["the film was good", "the dog was bad"]]:
        feeds = optimum_feeds(tokenizer, texts)
        logits = ort_run(path, feeds, ["logits"])["logits"]
        assert_close_relative(logits, keras_outputs(tiny_classifier / "model", feeds)["logits"], rtol=1e-4)
