"""The TFLite Task Library (tflite-support 0.4.4) loads `mbk export` files unchanged, where it installs.

tflite-support is unmaintained since 2023: it needs libusb-1.0 to import and
protobuf 3.20, so it lives in a venv of its own (docs/clients/task-library.md
says how to make one) and runs through ``task_library_driver.py``; these tests
skip unless ``tflite_support`` imports here or ``MBK_TASK_LIBRARY_PYTHON``
names that venv's interpreter. Its runtime predates FULLY_CONNECTED version
12, so it runs float and full-int8 files, not dynamic-range ones.
"""

import json

import numpy as np
import pytest

from tests.clients.clients import cosines, mediapipe_embed, run_task_library, task_library_python
from tests.clients.conftest import LABELS, TINY_SEQ, TINY_TEXTS, mbk_ok

pytestmark = pytest.mark.skipif(
    task_library_python() is None,
    reason="tflite-support 0.4.4 does not import here: it needs its own venv (protobuf 3.20, libusb-1.0); "
           "set MBK_TASK_LIBRARY_PYTHON to its python (docs/clients/task-library.md)")


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_bert_nl_classifier_shows_labels_and_probabilities(tiny_classifier, exported, quantize):
    path = exported(tiny_classifier / "model", f"classifier-{quantize}.tflite", "--format", "tflite",
                    "--quantize", quantize, "--seq-len", TINY_SEQ)
    answer = run_task_library("bert_nl_classifier", path, *TINY_TEXTS)
    assert answer["ok"], answer["error"]
    for result in answer["result"]:
        assert set(result) == set(LABELS), result
        assert sum(result.values()) == pytest.approx(1.0, abs=0.05), result


def test_dynamic_range_file_is_refused_by_its_old_runtime(tiny_classifier, exported):
    # The documented limit (docs/clients/task-library.md): if this starts passing, the docs are out of date.
    path = exported(tiny_classifier / "model", "classifier-dynamic.tflite", "--format", "tflite", "--quantize",
                    "dynamic", "--seq-len", TINY_SEQ)
    answer = run_task_library("bert_nl_classifier", path, TINY_TEXTS[0])
    assert not answer["ok"] and "FULLY_CONNECTED" in answer["error"], answer
    # and `mbk inspect` says so before anyone ships it (it called the file ready)
    from mobilebert_kit.artifacts.clients import client_readiness

    assert any("FULLY_CONNECTED version 12" in r for r in client_readiness(path)["Task Library BertNLClassifier"])


def test_text_embedder_gives_one_vector_per_sentence(tiny_classifier, exported):
    path = exported(tiny_classifier / "model", "embedder-none.tflite", "--format", "tflite", "--task", "embedding",
                    "--pooling", "mean", "--quantize", "none", "--seq-len", TINY_SEQ)
    answer = run_task_library("text_embedder", path, *TINY_TEXTS)
    assert answer["ok"], answer["error"]
    vectors = np.array(answer["result"])
    # Without a tokenizer in the metadata it once returned one vector for every sentence (issue 14).
    assert len({tuple(np.round(v, 5)) for v in vectors}) == len(TINY_TEXTS)
    assert cosines(vectors, mediapipe_embed(path, TINY_TEXTS)).min() >= 0.9999


def test_bert_question_answerer_at_384(tmp_path):
    import mobilebert_kit as mbk
    from tests.data.conftest import write_vocab

    # tiny-bert's position table (64) is too short for the 384 tokens the client requires.
    model = mbk.save(mbk.build("tiny-bert", max_position_embeddings=512), tmp_path / "base")
    vocab = write_vocab(tmp_path / "vocab.txt", ["john", "lives", "in", "paris", "where", "does", "who", "live",
                                                 "london", "the", "actor", "?", "."])
    context = "john lives in paris . the actor lives in london ."
    qas = [{"id": str(i), "question": q, "is_impossible": False,
            "answers": [{"text": a, "answer_start": context.index(a)}]}
           for i, (q, a) in enumerate([("where does john live ?", "paris"), ("who lives in london ?", "the actor")])]
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps({"version": "v2.0", "data": [{"paragraphs": [{"context": context, "qas": qas}]}]}))
    mbk_ok("finetune", "--model", model, "--task", "span_qa", "--train", squad, "--vocab", vocab, "--out",
           tmp_path / "qa", "--epochs", 1, "--batch-size", 2, "--seq-len", 24, "--doc-stride", 8)
    out = tmp_path / "qa.tflite"
    mbk_ok("export", tmp_path / "qa" / "model", "--format", "tflite", "--out", out)  # 384 tokens by default
    answer = run_task_library("bert_question_answerer", out, context, "where does john live ?")
    assert answer["ok"], answer["error"]
    assert all(a["text"].lower() in context for a in answer["result"]), answer["result"]


@pytest.mark.parametrize("family", ["xlm-roberta", pytest.param("mpnet", marks=pytest.mark.slow)])
def test_bert_nl_classifier_runs_the_checkpoints_own_tokenizer(family, tmp_path):
    # XLM-R: a SentencePiece model with fairseq's shifted ids; MPNet: a vocab.txt with its special tokens renamed
    # (issue 35). The Task Library's BertPreprocessor tokenizes with the packed file, as MediaPipe's does.
    from tests.clients.clients import mediapipe_classify
    from tests.tokenizer_fixtures import LABELS as FAMILY_LABELS
    from tests.tokenizer_fixtures import save_checkpoint

    save_checkpoint(family, tmp_path / "src")
    path = tmp_path / "classifier.tflite"
    mbk_ok("export", tmp_path / "src", "--format", "tflite", "--out", path)
    texts = ["a man is playing a guitar on the street.", "how do i reset the password of my account?"]
    answer = run_task_library("bert_nl_classifier", path, *texts)
    assert answer["ok"], answer["error"]
    for got, expected in zip(answer["result"], mediapipe_classify(path, texts)):
        assert set(got) == set(FAMILY_LABELS)
        np.testing.assert_allclose([got[k] for k in FAMILY_LABELS], [expected[k] for k in FAMILY_LABELS], atol=1e-5)
