"""Fixtures of the converter tests: tiny models built once, calibration arrays, one export helper."""

import numpy as np
import pytest

SEQ = 16


def trained_like(model, seed=0):
    """Gives ``model`` weights of trained scale: every layer changes its input noticeably.

    Fresh initialisation (stddev 0.02) leaves each block close to the identity
    (its residual dominates), so a zeroed kernel would barely move the output
    and a validation test could not tell a broken export from a good one.
    Kernels get stddev 1/sqrt(fan_in), norms gamma in [0.5, 1.5] and beta ~ N(0, 0.2).
    """
    from mobilebert_kit.models.api import named_weights

    rng = np.random.default_rng(seed)
    for path, var in named_weights(model).items():
        shape = tuple(var.shape)
        if path.endswith("gamma"):
            value = rng.uniform(0.5, 1.5, shape)
        elif path.endswith("beta") or path.endswith("bias"):
            value = rng.normal(0.0, 0.2, shape)
        elif len(shape) == 2 and "embeddings" in path.rsplit("/", 1)[-1]:
            value = rng.normal(0.0, 1.0, shape)
        else:
            value = rng.normal(0.0, 1.0 / np.sqrt(shape[0]), shape)
        var.assign(value.astype(np.float32))
    return model


@pytest.fixture(scope="session")
def tiny_mobilebert():
    import mobilebert_kit as mbk

    # Built with the export mask constant, so exports need no rebuild (1.5 s each).
    return trained_like(mbk.build("tiny-mobilebert", attention_mask_value=-120.0))


@pytest.fixture(scope="session")
def tiny_bert():
    import mobilebert_kit as mbk

    return trained_like(mbk.build("tiny-bert", attention_mask_value=-120.0), seed=1)


@pytest.fixture(scope="session")
def broken_mobilebert(tiny_mobilebert):
    """tiny_mobilebert with one zeroed kernel (built once)."""
    return corrupted(tiny_mobilebert)


@pytest.fixture(scope="session")
def float_sizes(tiny_mobilebert, tmp_path_factory):
    """Sizes of the float exports of tiny_mobilebert, per format."""
    directory = tmp_path_factory.mktemp("float")
    return {fmt: export_tiny(tiny_mobilebert, directory / f"m.{fmt}", fmt, validate=False).size_bytes
            for fmt in ("tflite", "onnx")}


@pytest.fixture(scope="session")
def calibration_npz(tmp_path_factory):
    from mobilebert_kit.convert.plan.input_set import InputSet

    path = tmp_path_factory.mktemp("calibration") / "calib.npz"
    InputSet.random(vocab_size=512, count=8, seq_len=SEQ, seed=1).save(path)
    return path


def export_tiny(model, path, fmt="tflite", quantize="none", **options):
    """Exports ``model`` at sequence length 16 and returns the ExportResult."""
    from mobilebert_kit.convert.exporter import ExportOptions, export

    options.setdefault("seq_len", SEQ)
    return export(ExportOptions(model, fmt, quantize, out=str(path), **options), log=None)


def corrupted(model, path="transformer_layer_1/attention/value/kernel"):
    """A copy of ``model`` with one kernel zeroed: what a broken export looks like."""
    from mobilebert_kit.convert.prepare.rebuild import rebuild, weight_arrays

    arrays = weight_arrays(model)
    key = next(k for k in arrays if k.endswith(path))
    arrays[key] = np.zeros_like(arrays[key])
    return rebuild(model, arrays=arrays)


def padded_inputs(model, count=6, seed=3):
    from mobilebert_kit.convert.plan.input_set import InputSet
    from mobilebert_kit.convert.prepare.rebuild import encoder_of

    return InputSet.random(encoder_of(model).config["vocab_size"], count, SEQ, seed=seed)


def with_outliers(model, factor=20.0, channels=2, seed=0, layers=None, weights=("/gamma",)):
    """A copy of a NoNorm ``model`` whose in-block NoNorm scales have ``channels`` channels ``factor`` x larger.

    MiniLM's residual stream carries a few channels far larger than the rest
    (issue 15); this gives a tiny model the same shape of problem for int8.
    ``layers`` (names such as ``transformer_layer_1``) limits it to those blocks: one deliberately
    sensitive layer. ``weights`` are the weight-name endings scaled (output channels, the last axis):
    the norm scales by default; ``("output/kernel", "output/bias")`` puts the outliers in the feed-forward
    output of a LayerNorm model instead, which full int8 keeps integer (its LayerNorms stay float).
    """
    from mobilebert_kit.convert.prepare.rebuild import rebuild, weight_arrays

    rng = np.random.default_rng(seed)
    arrays = weight_arrays(model)
    picked = {}
    for key in arrays:
        if layers is not None and not any(f"{layer}/" in key for layer in layers):
            continue
        if key.endswith(weights) and "transformer_layer" in key and "output_bottleneck" not in key:
            width = arrays[key].shape[-1]
            index = picked.setdefault((key.rsplit("/", 1)[0], width), rng.choice(width, channels, replace=False))
            arrays[key] = arrays[key].copy()
            arrays[key][..., index] *= factor
    return rebuild(model, arrays=arrays)


@pytest.fixture(scope="session")
def tiny_with_vocab(tmp_path_factory):
    """tiny-bert saved next to an uncased WordPiece vocabulary learnt from the built-in English text."""
    import mobilebert_kit as mbk
    from mobilebert_kit.convert.plan.sample_text import CALIBRATION_SENTENCES, SENTENCE_PAIRS, SENTENCES
    from mobilebert_kit.data.text_tokenizer import train_wordpiece_vocab
    from mobilebert_kit.sources.model_source import ModelSource

    tmp = tmp_path_factory.mktemp("vocab")
    text = tmp / "text.txt"
    text.write_text("\n".join(SENTENCES + SENTENCE_PAIRS + CALIBRATION_SENTENCES) + "\n")
    directory = mbk.save(ModelSource.load("tiny-bert").model, tmp / "saved")
    train_wordpiece_vocab([text], directory / "vocab.txt", vocab_size=512)
    return directory


@pytest.fixture
def arm64_disagrees_first(monkeypatch):
    """The emulated arm64 run of the first file a test checks answers the negated outputs (a setting whose phone
    kernels disagree); later files run as they are. Returns the names of the files run, in order."""
    from mobilebert_kit.artifacts.emulated_runner import EmulatedRunner

    run, calls = EmulatedRunner.run, []

    def first_wrong(self, inputs):
        calls.append(self.host.path.name)
        out = run(self, inputs)
        return {k: -v for k, v in out.items()} if len(calls) == 1 else out

    monkeypatch.setattr(EmulatedRunner, "run", first_wrong)
    return calls
