"""The default TFLite file (inputs ``[1, -1]``): the static file's answers at every length, in MediaPipe too.

Issue 36. The dynamic file is compared with the ``--static-axes`` files ``mbk export`` writes at the same
token count (in LiteRT, on the same rows), with the Keras source on each text's own tokens (in MediaPipe,
which feeds a dynamic file exactly the text's tokens, no padding), and its inputs must be tensors 0, 1, 2:
MediaPipe 1.2.2 resizes input ``i`` as tensor ``i`` (``tflite_flatbuffer.inputs_first``). MediaPipe does not
cut a text for a dynamic file, so the file cuts one longer than its position table itself, as the static
file's client does.
"""

import numpy as np
import pytest
from ai_edge_litert.tools import flatbuffer_utils as fb

from mobilebert_kit.artifacts.runner import ArtifactRunner
from mobilebert_kit.convert.plan.export_tasks import GRAPH_INPUTS
from tests.clients.clients import cosines, mean_pooled, mediapipe_classify, mediapipe_embed, softmax
from tests.clients.conftest import TINY_SEQ, TINY_TEXTS

# Token counts the dynamic file runs: shorter than, equal to and longer than the --seq-len it was validated and
# calibrated at (16), all within tiny-mobilebert's 64 positions.
LENGTHS = (5, TINY_SEQ, 40)
# A text of 22 tokens: a static file at 16 truncates it, a dynamic one takes it whole.
LONG_TEXT = "the cat sat on a mat . the dog ran . the film was very good . a cat ran"
# Dynamic vs static file at one length, same rows, as a fraction of the largest value (measured: float 8e-8,
# dynamic int8 1.5e-7, full int8 1.2e-2 to 2.1e-2). Float and dynamic int8 are the same graph and arithmetic since
# the layers name every static dimension (issue 46: dynamic int8 was 1.5e-4 apart while the dynamic graph computed
# its shapes at run time and kept its bias ADDs out of the FULLY_CONNECTEDs). Full int8 files are calibrated on
# other rows (the dynamic one on each row at its own length), so their ranges differ: ~2% apart, each ~1.5-1.9%
# from float, which the test checks too (no further from float than the static file).
RTOL = {"none": 1e-5, "dynamic": 1e-5, "int8": 0.05}


def embedder_flags(quantize, seq_len, *more):
    """The flags of the embedder at ``seq_len`` (test_mediapipe's own at 16 and static: one export serves both)."""
    return ("--format", "tflite", "--task", "embedding", "--pooling", "mean", "--quantize", quantize,
            "--seq-len", seq_len) + more


def rows(model_dir, texts, seq_len):
    """The source tokenizer's rows of ``texts`` at ``seq_len`` tokens (padded or truncated)."""
    from mobilebert_kit.sources.model_source import ModelSource

    return ModelSource.load(model_dir).tokenizer.encode_inputs(list(texts), seq_len)


# The embedder, not the classifier: the 2-step classifier's probabilities hardly move with the text (0.5004 /
# 0.4996), its mean-pooled sentence vector does.
@pytest.mark.parametrize("quantize", ["none", "dynamic", "int8"])
def test_dynamic_file_answers_as_the_static_file_at_each_length(tiny_classifier, exported, quantize):
    model = tiny_classifier / "model"
    dynamic = ArtifactRunner(exported(model, f"embedder-{quantize}-dynamic.tflite",
                                      *embedder_flags(quantize, TINY_SEQ)))  # the default: no flag
    assert [s["shape"] for s in dynamic.input_specs] == [[1, None]] * 3
    assert (dynamic.batch_size, dynamic.seq_len) == (1, None)
    for seq_len in LENGTHS:
        # Static references at other lengths skip validation: the dynamic file's export validated the graph.
        more = ("--static-axes",) + (() if seq_len == TINY_SEQ else ("--no-validate",))
        static = ArtifactRunner(exported(model, f"embedder-{quantize}.tflite", *embedder_flags(quantize, seq_len, *more)))
        arrays = rows(model, TINY_TEXTS + [LONG_TEXT], seq_len)
        ours, theirs = dynamic.run(arrays)["sentence_embedding"], static.run(arrays)["sentence_embedding"]
        scale = np.abs(theirs).max()
        np.testing.assert_allclose(ours, theirs, atol=RTOL[quantize] * scale, err_msg=f"at {seq_len} tokens")
        if quantize == "none":
            # As the app feeds it (run_as_app: each row at its own tokens): MobileBERT's trigram input reads the
            # [PAD] embedding right of [SEP] in a padded row and zeros in an unpadded one, so the two agree
            # closely, not to 1e-5 (test_mediapipe_runs_the_dynamic_file... checks the unpadded rows exactly).
            assert cosines(dynamic.run_as_app(arrays)["sentence_embedding"], ours).min() >= 0.999
        else:
            # No further from float than the static file: the quantized dynamic graph is as faithful.
            float32 = ArtifactRunner(exported(model, "embedder-none.tflite", *embedder_flags("none", seq_len, *more)))
            reference = float32.run(arrays)["sentence_embedding"]
            errors = [np.abs(values - reference).max() for values in (ours, theirs)]
            print(f"{quantize} at {seq_len}: vs static {np.abs(ours - theirs).max() / scale:.2e}, vs float: dynamic "
                  f"file {errors[0] / scale:.2e}, static file {errors[1] / scale:.2e} (of max|value| {scale:.3f})")
            assert errors[0] <= 1.5 * errors[1] + 1e-3 * scale, errors
            # As the app feeds it (run_as_app: each row at its own tokens, no padding), as close to float fed
            # the same way: the quantized rounding differs from the padded rows' (the activation ranges of a
            # dynamic-range product are taken over the positions fed), the fidelity does not.
            float_app = ArtifactRunner(exported(model, "embedder-none-dynamic.tflite", *embedder_flags("none", TINY_SEQ)))
            app_error = np.abs(dynamic.run_as_app(arrays)["sentence_embedding"]
                               - float_app.run_as_app(arrays)["sentence_embedding"]).max()
            assert app_error <= 1.5 * errors[0] + 1e-3 * scale, (app_error, errors)


def test_mediapipe_runs_the_dynamic_file_on_each_texts_own_tokens(tiny_classifier, exported):
    from mobilebert_kit.sources.model_source import ModelSource

    model = tiny_classifier / "model"
    embedder = exported(model, "embedder-none-dynamic.tflite", *embedder_flags("none", TINY_SEQ))
    classifier = exported(model, "classifier-none-dynamic.tflite", "--format", "tflite", "--quantize", "none",
                          "--seq-len", TINY_SEQ, "--dynamic-axes")  # the flag names the default
    texts = TINY_TEXTS + [LONG_TEXT]
    vectors, answers = mediapipe_embed(embedder, texts), mediapipe_classify(classifier, texts)

    source = ModelSource.load(model)
    for text, vector, answer in zip(texts, vectors, answers):
        # The Keras source on the text's own tokens: what MediaPipe feeds a dynamic file (no padding).
        count = int(source.tokenizer.encode_inputs([text], 64)["attention_mask"].sum())
        arrays = source.tokenizer.encode_inputs([text], count)
        sequence = source.encoder(arrays, training=False)["sequence_output"].numpy()
        expected = mean_pooled(sequence, arrays["attention_mask"])[0]
        print(f"{count} tokens: MediaPipe vs Keras max|diff| {np.abs(vector - expected).max():.2e}")
        np.testing.assert_allclose(vector, expected, atol=1e-5, err_msg=f"{text!r} ({count} tokens)")
        probabilities = softmax(source.model(arrays, training=False)["logits"].numpy())[0]
        np.testing.assert_allclose(list(answer.values()), probabilities, atol=1e-5, err_msg=text)
    assert count == 22  # LONG_TEXT, whole: the static file at 16 would have cut it

    # The static file at 16 pads each text to 16. Padding is masked in attention, but MobileBERT's trigram input
    # reads the [PAD] embedding right of [SEP] where an unpadded row reads zeros, so the two files agree closely,
    # not to 1e-5 (the dynamic file is the one that matches the unpadded source, above).
    static = mediapipe_embed(exported(model, "embedder-none.tflite", *embedder_flags("none", TINY_SEQ, "--static-axes")),
                             TINY_TEXTS)
    print("static-16 vs dynamic cosines", cosines(static, vectors[:len(TINY_TEXTS)]))
    assert cosines(static, vectors[:len(TINY_TEXTS)]).min() >= 0.999


def test_mediapipe_text_longer_than_the_position_table_is_cut_as_the_static_client_cuts_it(tiny_classifier, exported):
    """MediaPipe feeds a dynamic file the whole text (it cuts only for static inputs): the file keeps the first
    tokens and the last ([SEP]) within its 64 positions, as MediaPipe cuts the text for a static file of 64."""
    model = tiny_classifier / "model"
    dynamic = exported(model, "embedder-none-dynamic.tflite", *embedder_flags("none", TINY_SEQ))
    static = exported(model, "embedder-none-64.tflite", *embedder_flags("none", 64, "--static-axes", "--no-validate"))
    long_texts = [" ".join(["the cat sat on a mat ."] * 12), "the film was good"]  # 86 tokens, and 6
    ours, theirs = mediapipe_embed(dynamic, long_texts), mediapipe_embed(static, long_texts)
    np.testing.assert_allclose(ours[0], theirs[0], atol=1e-5)
    # The short text is not padded in the dynamic file: MobileBERT's trigram input reads [PAD] right of [SEP]
    # in the static file, so the two agree closely, not exactly (test_mediapipe_runs_the_dynamic_file...).
    assert cosines(ours[1:], theirs[1:]).min() >= 0.999


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_inputs_are_the_first_tensors_in_input_order(tiny_classifier, exported, dynamic):
    flags = ("--format", "tflite", "--quantize", "none", "--seq-len", TINY_SEQ) + (() if dynamic else ("--static-axes",))
    path = exported(tiny_classifier / "model", f"classifier-none{'-dynamic' if dynamic else ''}.tflite", *flags)
    graph = fb.read_model(str(path)).subgraphs[0]
    assert list(graph.inputs) == [0, 1, 2]
    assert [graph.tensors[i].name.decode() for i in graph.inputs] == list(GRAPH_INPUTS)
    # A dynamic file allocates at the validated length until a client resizes it.
    assert [list(graph.tensors[i].shape) for i in graph.inputs] == [[1, TINY_SEQ]] * 3
    expected = [[1, -1]] * 3 if dynamic else [None] * 3
    assert [None if graph.tensors[i].shapeSignature is None else list(graph.tensors[i].shapeSignature)
            for i in graph.inputs] == expected


def test_renumbered_tensors_compute_the_same_and_validate(tiny_classifier, exported, tmp_path):
    from mobilebert_kit.convert.validation.file_validation import validate_file
    from mobilebert_kit.convert.plan.input_set import InputSet
    from mobilebert_kit.convert.tflite.flatbuffer import inputs_first, renumber_tensors
    from mobilebert_kit.sources.model_source import ModelSource

    model_dir = tiny_classifier / "model"
    path = exported(model_dir, "classifier-none-dynamic.tflite", "--format", "tflite", "--quantize", "none",
                    "--seq-len", TINY_SEQ, "--dynamic-axes")
    model = fb.read_model(str(path))
    count = len(model.subgraphs[0].tensors)
    renumber_tensors(model, list(range(count))[::-1])  # the inputs are now the last tensors, in reverse
    assert list(model.subgraphs[0].inputs) == [count - 1, count - 2, count - 3]
    shuffled = tmp_path / "shuffled.tflite"
    fb.write_model(model, str(shuffled))
    inputs_first(model)
    assert list(model.subgraphs[0].inputs) == [0, 1, 2]
    restored = tmp_path / "restored.tflite"
    fb.write_model(model, str(restored))

    arrays = rows(model_dir, TINY_TEXTS, 9)
    expected = ArtifactRunner(path).run(arrays)["probability"]
    source = ModelSource.load(model_dir)
    for file in (shuffled, restored):
        np.testing.assert_array_equal(ArtifactRunner(file).run(arrays)["probability"], expected)
        report = validate_file(file, source.model, InputSet(arrays, "tiny texts"), "none")
        assert report.passed, report.summary_line()
