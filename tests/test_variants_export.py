"""Every variant preset converts to TFLite float32 with builtin ops only and runs like Keras.

Conversion at a fixed ``[1, seq]`` from a concrete function (static shapes,
relative index tables folded to constants); outputs from ai-edge-litert's
Interpreter must match Keras to max |tflite - keras| <= 1e-4 * max |keras|.
ONNX (tf2onnx + onnxruntime) is checked the same way, since the converter
issue exports both formats.
"""

import numpy as np
import pytest

import mobilebert_kit as mbk
from mobilebert_kit.backend import tf
from mobilebert_kit.models.encoder import INPUT_NAMES
from tests.helpers import assert_close_relative, random_inputs, run_encoder

SEQ = 24  # longer than every tiny preset's relative window / clipping distance

CASES = {
    "tiny-convbert": {},
    "tiny-nezha": {},
    "tiny-composite": {},
    "tiny-composite-key": dict(relative_attention_variant="composite_key"),
    "tiny-mobilebert-composite": dict(attention_type="composite", position_embedding_type="none",
                                      relative_attention_variant="composite_depthwise"),
}


def _build(case):
    preset = case if case in mbk.list_presets() else ("tiny-mobilebert" if "mobilebert" in case else "tiny-composite")
    encoder = mbk.build(preset, **CASES[case])
    rng = np.random.default_rng(0)
    for var in encoder.weights:  # beyond-init weights so every term shows in the outputs
        var.assign(rng.normal(0, 0.2, var.shape).astype(np.float32) + (1.0 if "gamma" in var.name else 0.0))
    return encoder


def _concrete(encoder):
    spec = {name: tf.TensorSpec([1, SEQ], tf.int32, name=name) for name in INPUT_NAMES}
    fn = tf.function(lambda inputs: encoder(inputs, training=False))
    return fn, fn.get_concrete_function(spec)


# A conversion takes ~20 s on the 2-core CI machine: the three tiny presets run by default, the
# other combinations in the slow tier.
@pytest.mark.parametrize(
    "case", [c if c in mbk.list_presets() else pytest.param(c, marks=pytest.mark.slow) for c in CASES]
)
def test_variant_converts_to_tflite_and_matches_keras(case):
    from ai_edge_litert.interpreter import Interpreter

    encoder = _build(case)
    _, concrete = _concrete(encoder)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], encoder)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]  # no Flex (select TF) ops
    flatbuffer = converter.convert()
    interpreter = Interpreter(model_content=flatbuffer)
    ops = {op["op_name"] for op in interpreter._get_ops_details()}  # noqa: SLF001  (no public op listing)
    assert "GATHER_ND" not in ops and not any(op.startswith("Flex") for op in ops), ops
    # XNNPACK takes neither PACK nor GATHER: the span convolution must not stack its taps and the
    # relative spread must not gather, or every layer splits the delegated graph (issue 17). The
    # embedding lookups (at most word, position, type) are the only gathers left.
    op_list = [op["op_name"] for op in interpreter._get_ops_details()]  # noqa: SLF001
    assert "PACK" not in ops and op_list.count("GATHER") <= 3, sorted(op_list)
    runner = interpreter.get_signature_runner()
    inputs = random_inputs(encoder.config["vocab_size"], batch_size=1, seq_len=SEQ, pad_last=5)
    expected = run_encoder(encoder, inputs)
    got = runner(**inputs)
    for key in ("sequence_output", "pooled_output"):
        assert_close_relative(got[key], expected[key])
    # Relative tables must be O(S) constants, not [S, S, d] blocks: the file stays near the weights' size.
    weight_bytes = 4 * mbk.count_params(encoder)
    assert len(flatbuffer) < weight_bytes + 200_000, (len(flatbuffer), weight_bytes)


@pytest.mark.parametrize(
    "case",
    ["tiny-nezha", pytest.param("tiny-convbert", marks=pytest.mark.slow),
     pytest.param("tiny-mobilebert-composite", marks=pytest.mark.slow)],
)
def test_variant_converts_to_onnx_and_matches_keras(case, tmp_path):
    tf2onnx = pytest.importorskip("tf2onnx")
    ort = pytest.importorskip("onnxruntime")

    encoder = _build(case)
    fn, _ = _concrete(encoder)
    spec = [{name: tf.TensorSpec([1, SEQ], tf.int32, name=name) for name in INPUT_NAMES}]
    model_proto, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=17)
    ops = {node.op_type for node in model_proto.graph.node}
    assert "GatherND" not in ops, ops
    session = ort.InferenceSession(model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = random_inputs(encoder.config["vocab_size"], batch_size=1, seq_len=SEQ, pad_last=5)
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(None, {i.name: inputs[i.name] for i in session.get_inputs()})))
    expected = run_encoder(encoder, inputs)
    sequence = next(v for k, v in got.items() if "sequence_output" in k)
    assert_close_relative(sequence, expected["sequence_output"])


@pytest.mark.parametrize("preset", ["tiny-nezha", "tiny-composite"])
def test_relative_position_presets_export_at_their_positions_by_default(preset, tmp_path):
    """Their relative index tables are built for max_position_embeddings (64) tokens: the default length is 64
    and a longer --seq-len is one line (an internal error from inside the attention layer before)."""
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata
    from tests.helpers import assert_one_line_error, run_mbk

    out = tmp_path / "m.tflite"
    proc = run_mbk("export", preset, "--format", "tflite", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert read_artifact_metadata(out)["planned_seq_len"] == 64
    assert_one_line_error(run_mbk("export", preset, "--format", "onnx", "--seq-len", "128", "--out", tmp_path / "l.onnx"),
                          "--seq-len 128", "64 positions")
