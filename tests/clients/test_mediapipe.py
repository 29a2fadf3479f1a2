"""MediaPipe Tasks loads `mbk export` files unchanged (issue 14's Contract): TextEmbedder and TextClassifier.

The client tokenizes the text itself, with the vocabulary packed in the
file, so these tests check the whole path an Android app takes: metadata,
packed files, int32 inputs, output layout and values. Values are compared
with the Keras source on the same sentences (tiny models) and with the
PyTorch sentence-transformers reference (the real all-MiniLM-L6-v2).
"""

import numpy as np
import pytest

from tests.clients.clients import (
    REAL_SENTENCES,
    BREAKS,
    break_metadata,
    cosines,
    mean_pooled,
    mediapipe_classify,
    mediapipe_embed,
    softmax,
)
from tests.clients.conftest import LABELS, TINY_SEQ, TINY_TEXTS

pytest.importorskip("mediapipe", reason="mediapipe is a dev dependency: see the README's test command")

# Quantization costs fidelity; the Contract asks cosine >= 0.99 for dynamic int8 on real sentences. Full int8
# of the tiny models here keeps 0.95; of MiniLM, see test_minilm_text_embedder_matches_sentence_transformers.
# int4 weights (issue 38) are held to full int8's bounds here, and pass them; the real classifier's
# accuracy is benchmarks/int4_weights.py's.
MIN_COSINE = {"none": 0.9999, "dynamic": 0.99, "int8": 0.95, "int4": 0.95}


def keras_reference(model_dir, texts):
    """The source's mean-pooled sequence output and its classifier probabilities (if any) on ``texts``."""
    from mobilebert_kit.sources.model_source import ModelSource

    source = ModelSource.load(model_dir)
    arrays = source.tokenizer.encode_inputs(list(texts), TINY_SEQ)
    sequence = source.encoder(arrays, training=False)["sequence_output"].numpy()
    outputs = source.model(arrays, training=False)
    probabilities = softmax(outputs["logits"].numpy()) if "logits" in outputs else None
    return mean_pooled(sequence, arrays["attention_mask"]), probabilities


# Float and full int8 in the default tier (the issue asks both); dynamic int8 runs with -m slow (the real
# MiniLM test below covers dynamic int8 in MediaPipe by default).
# int4 (issue 38) loads in MediaPipe in the default tier through the classifier test below; the embedder with -m slow.
@pytest.mark.parametrize("quantize", ["none", pytest.param("dynamic", marks=pytest.mark.slow), "int8",
                                      pytest.param("int4", marks=pytest.mark.slow)])
def test_text_embedder_returns_the_sentence_embedding(tiny_classifier, exported, quantize):
    path = exported(tiny_classifier / "model", f"embedder-{quantize}.tflite", "--format", "tflite", "--task",
                    "embedding", "--pooling", "mean", "--quantize", quantize, "--seq-len", TINY_SEQ)
    vectors = mediapipe_embed(path, TINY_TEXTS)
    reference, _ = keras_reference(tiny_classifier / "model", TINY_TEXTS)
    assert vectors.shape == reference.shape  # [1, hidden] per sentence, not [seq * hidden]
    found = cosines(vectors, reference)
    assert found.min() >= MIN_COSINE[quantize], f"cosines to the Keras embedding: {np.round(found, 5)}"


# Float and full int8 in the default tier (the issue asks both); dynamic int8 runs with -m slow (the real
# MiniLM test below covers dynamic int8 in MediaPipe by default).
@pytest.mark.parametrize("quantize", ["none", pytest.param("dynamic", marks=pytest.mark.slow), "int8", "int4"])
def test_text_classifier_shows_labels_and_probabilities(tiny_classifier, exported, quantize):
    path = exported(tiny_classifier / "model", f"classifier-{quantize}.tflite", "--format", "tflite",
                    "--quantize", quantize, "--seq-len", TINY_SEQ)
    results = mediapipe_classify(path, TINY_TEXTS)
    _, reference = keras_reference(tiny_classifier / "model", TINY_TEXTS)
    tolerance = 1e-4 if quantize == "none" else 0.05  # int8 outputs are quantized probabilities
    for result, expected in zip(results, reference):
        assert tuple(result) == LABELS, f"categories by output index {list(result)} are not the labels {LABELS}"
        assert all(0.0 <= score <= 1.0 for score in result.values()), result
        assert sum(result.values()) == pytest.approx(1.0, abs=tolerance), result
        np.testing.assert_allclose([result[label] for label in LABELS], expected, atol=tolerance)


@pytest.mark.parametrize("how", BREAKS)
def test_broken_metadata_is_refused(tiny_classifier, exported, tmp_path, how):
    good = exported(tiny_classifier / "model", "classifier-none.tflite", "--format", "tflite", "--quantize", "none",
                    "--seq-len", TINY_SEQ)
    assert len(mediapipe_classify(good, TINY_TEXTS[:1])) == 1  # the intact file loads: the break is the cause
    broken = break_metadata(good, how, tmp_path / "broken.tflite")
    with pytest.raises((ValueError, RuntimeError, FileNotFoundError), match=BREAKS[how]):
        mediapipe_classify(broken, TINY_TEXTS[:1])


@pytest.fixture(scope="module")
def sentence_transformers_embeddings(minilm_dir):
    """The PyTorch reference: sentence-transformers' own embedding of REAL_SENTENCES (torch: test-only)."""
    st = pytest.importorskip("sentence_transformers")
    return st.SentenceTransformer(str(minilm_dir), device="cpu").encode(REAL_SENTENCES)


# Real MiniLM exports take 20-60 s each on the 2-core machine: dynamic int8 (the Contract's case) stays in the
# default tier, float and full int8 run with -m slow.
@pytest.mark.parametrize("quantize", [pytest.param("none", marks=pytest.mark.slow), "dynamic",
                                      pytest.param("int8", marks=pytest.mark.slow)])
def test_minilm_text_embedder_matches_sentence_transformers(minilm_dir, sentence_transformers_embeddings,
                                                            exported, quantize):
    # The Contract's command: no --task, the sentence-transformers checkpoint exports as an embedder.
    path = exported(minilm_dir, f"minilm-{quantize}.tflite", "--format", "tflite", "--quantize", quantize,
                    "--seq-len", 128)
    vectors = mediapipe_embed(path, REAL_SENTENCES)
    assert vectors.shape == sentence_transformers_embeddings.shape == (len(REAL_SENTENCES), 384)
    found = cosines(vectors, sentence_transformers_embeddings)
    print(f"MediaPipe vs sentence-transformers cosine ({quantize}): min {found.min():.6f} mean {found.mean():.6f}")
    if quantize == "int8":
        # Full int8 keeps the most sensitive blocks float until the mean embedding cosine holds the embedding task's
        # bar (0.95, export_tasks.py); it measured mean 0.953 / min 0.938 here (the fallback before LayerNorms were
        # float by default wrote a file 6x slower than dynamic int8 at 0.984). Dynamic int8 is the better embedder.
        assert found.mean() >= 0.95 and found.min() >= 0.9, np.round(found, 5)
    else:
        assert found.min() >= MIN_COSINE[quantize], np.round(found, 5)
    # all-MiniLM-L6-v2 declares Normalize: the embedding is unit length, as the app gets it.
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0, atol=0.02)
