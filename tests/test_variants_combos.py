"""The variants as options of one encoder family: combinations with the MobileBERT
bottleneck / NoNorm / ReLU options, save/load, training, distillation outputs and FLOP counting."""

import numpy as np
import pytest

import mobilebert_kit as mbk
from mobilebert_kit.backend import tf
from mobilebert_kit.models.api import named_weights
from tests.helpers import random_inputs, run_encoder, run_model_saving_test

# A tiny MobileBERT student (bottleneck, shared q/k bottleneck, 2 stacked FFNs, NoNorm, ReLU,
# trigram embeddings) with each attention / position variant.
STUDENT_VARIANTS = {
    "composite": dict(attention_type="composite", position_embedding_type="none", relative_window=4),
    "composite_depthwise": dict(attention_type="composite", position_embedding_type="none",
                                relative_attention_variant="composite_depthwise"),
    "convbert": dict(attention_type="convbert_mixed", conv_kernel_size=5, num_groups=2),
    "nezha": dict(position_embedding_type="relative_functional", max_relative_position=3),
}


@pytest.mark.parametrize("variant", list(STUDENT_VARIANTS))
def test_mobilebert_student_with_variant_builds_saves_and_trains(variant, tmp_path):
    encoder = mbk.build("tiny-mobilebert", output_attentions=True, **STUDENT_VARIANTS[variant])
    cfg = encoder.config
    assert cfg["normalization_type"] == "no_norm" and cfg["hidden_act"] == "relu" and cfg["use_bottleneck"]
    inputs = random_inputs(512, batch_size=2, seq_len=10, pad_last=3)
    out = run_encoder(encoder, inputs)
    assert out["sequence_output"].shape == (2, 10, 64) and np.isfinite(out["sequence_output"]).all()
    heads = 1 if variant == "convbert" else 2  # 2 heads // head_ratio 2
    assert out["attention_probs"][0].shape == (2, heads, 10, 10)
    weights = named_weights(encoder)
    assert weights["transformer_layer_0/attention/value/kernel"].shape[0] == 64  # value reads the block input
    assert weights["transformer_layer_0/attention/query/kernel"].shape[0] == 32  # query reads the bottleneck
    run_model_saving_test(encoder, tmp_path, inputs)

    # One training step: every weight (relative tables and convolutions included) gets a finite gradient.
    batch = {k: tf.constant(v) for k, v in inputs.items()}
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(encoder(batch, training=True)["sequence_output"]))
    grads = tape.gradient(loss, encoder.trainable_variables)
    missing = [v.name for v, g in zip(encoder.trainable_variables, grads) if g is None]
    assert not missing, missing
    assert all(np.isfinite(g.numpy()).all() for g in grads if not isinstance(g, tf.IndexedSlices))


def _flops(preset, seq, **overrides):
    return mbk.count_flops(mbk.build(preset, **overrides), seq_len=seq)


def test_flop_counter_sees_convbert_ops():
    s, h, e, a, heads, k, i, layers = 16, 64, 32, 32, 2, 9, 128, 2  # tiny-convbert: branch width a = h / 2
    per_layer = (
        3 * s * h * a  # query, key, value
        + s * h * k + s * h * a  # span-aware key: depthwise then pointwise convolution
        + s * a * heads * k  # kernel generator W_f
        + s * h * a  # convolution-branch values
        + 2 * s * s * a  # attention scores and context
        # not counted: the dynamic lightweight convolution (s * a * k multiply-adds) is k broadcast
        # Mul/Add taps since issue 17, element-wise work like the norms (it was a batched matmul)
        + s * h * h  # attention output
        + 2 * s * h * i  # feed-forward
    )
    assert _flops("tiny-convbert", s) == 2 * (s * e * h + layers * per_layer)
    grouped = _flops("tiny-convbert", s, num_groups=2)
    assert _flops("tiny-convbert", s) - grouped == 2 * layers * s * h * i  # Eq. 7 halves the FFN


def test_flop_counter_sees_relative_terms():
    s, layers = 16, 2
    # tiny-composite: 2 heads of 32, window 4 (9 offsets); the query term is q @ W_C^T per head.
    plain = _flops("tiny-composite", s, attention_type="self_attention")
    assert _flops("tiny-composite", s) - plain == 2 * layers * 2 * s * 9 * 32
    with_key = _flops("tiny-composite", s, relative_attention_variant="composite_key")
    assert with_key - plain == 2 * 2 * layers * 2 * s * 9 * 32  # query and key terms
    depthwise = _flops("tiny-composite", s, relative_attention_variant="fixed_depthwise") - plain
    assert depthwise == 2 * layers * s * 64 * 9  # depthwise convolution of the 64 value channels
    # tiny-nezha: 2 heads of 16, K=4: q @ T^T (9 offsets) and the value term over 2S-1 distances.
    plain = _flops("tiny-nezha", s, position_embedding_type="none")
    assert _flops("tiny-nezha", s) - plain == 2 * layers * 2 * (s * 9 * 16 + s * (2 * s - 1) * 16)


def test_distillation_view_copies_weights_by_name():
    """A variant teacher and its distillation view (extra outputs) share every weight path."""
    teacher = mbk.build("tiny-convbert")
    view = mbk.build(dict(teacher.config, output_hidden_states=True, output_attentions=True))
    source = named_weights(teacher)
    mbk.models.api.assign_weights(view, {p: v.numpy() for p, v in source.items()})
    inputs = random_inputs(512, batch_size=1, seq_len=6)
    out = run_encoder(view, inputs)
    np.testing.assert_array_equal(out["sequence_output"], run_encoder(teacher, inputs)["sequence_output"])
    assert len(out["hidden_states"]) == 3 and out["attention_probs"][1].shape == (1, 2, 6, 6)


MIXED_CASES = [("tiny-convbert", {"num_groups": 2}), ("tiny-nezha", {}),
               ("tiny-composite", {"relative_attention_variant": "composite_depthwise"})]


@pytest.mark.parametrize("preset,overrides", MIXED_CASES)
def test_variants_run_under_mixed_precision(preset, overrides):
    """NEZHA was pre-trained in fp16; every variant keeps its tables and kernels in the compute dtype."""
    reference = mbk.build(preset, **overrides)
    mixed = mbk.build(preset, dtype="mixed_float16", **overrides)
    mbk.models.api.assign_weights(mixed, {p: v.numpy() for p, v in named_weights(reference).items()})
    inputs = random_inputs(512, batch_size=2, seq_len=12, pad_last=2)
    out = run_encoder(mixed, inputs)["sequence_output"]
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float32), run_encoder(reference, inputs)["sequence_output"],
                               rtol=0.05, atol=0.05)
