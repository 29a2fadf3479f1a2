"""Composite attention (Chang et al., 2021): the math, proven without a checkpoint (none was released).

- zero convolution weights reduce every variant to plain attention without positions;
- the fixed term is an explicit T5-style bias, the dynamic term Shaw et al.'s
  relative-key attention, the key term Huang et al.'s, the depthwise term a
  depthwise convolution of the masked values: each written out by hand in numpy;
- outputs are shift-equivariant, as relative encodings must be (and an absolute
  position model is not, so the check can fail).
"""

import numpy as np
import pytest

import mobilebert_kit as mbk
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.layers import RELATIVE_ATTENTION_VARIANTS, CompositeAttention
from mobilebert_kit.models.api import assign_weights, named_weights
from tests.helpers import random_inputs, run_encoder

RELATIVE_KEYS = ("relative_bias", "relative_query_embeddings", "relative_key_embeddings", "depthwise_conv/")


def randomized(preset, seed=0, **overrides):
    encoder = mbk.build(preset, attention_dropout=0.0, hidden_dropout=0.0, **overrides)
    rng = np.random.default_rng(seed)
    for path, var in sorted(named_weights(encoder).items()):
        scale = 0.5 if any(k in path for k in RELATIVE_KEYS) else 0.3
        var.assign(rng.normal(0, scale, var.shape).astype(np.float32))
    return encoder


@pytest.mark.parametrize("variant", list(RELATIVE_ATTENTION_VARIANTS))
def test_zero_convolution_weights_give_plain_attention_without_positions(variant):
    composite = randomized("tiny-composite", relative_attention_variant=variant)
    weights = {p: v.numpy() for p, v in named_weights(composite).items()}
    relative = [p for p in weights if any(k in p for k in RELATIVE_KEYS)]
    assert relative, "the variant must add relative weights"
    inputs = random_inputs(512, batch_size=2, seq_len=13, pad_last=3)
    before = run_encoder(composite, inputs)["sequence_output"]
    plain = mbk.build("tiny-composite", attention_type="self_attention", attention_dropout=0.0, hidden_dropout=0.0)
    assign_weights(plain, {p: w for p, w in weights.items() if p not in relative})
    assign_weights(composite, {p: (np.zeros_like(w) if p in relative else w) for p, w in weights.items()})
    expected = run_encoder(plain, inputs)["sequence_output"]
    np.testing.assert_allclose(run_encoder(composite, inputs)["sequence_output"], expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(before, expected, atol=1e-3)  # with the weights, the terms matter


def _layer_and_numpy(variant, seq=11, window=3, heads=2, size=4, seed=0):
    layer = CompositeAttention(heads, size, relative_window=window, relative_attention_variant=variant,
                               max_length=32, name="attention")
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, seq, heads * size)).astype(np.float32)
    mask = np.ones((2, seq), np.float32)
    mask[1, -2:] = 0
    layer(x, x, x, attention_mask=mask)  # build
    for var in layer.weights:
        var.assign(rng.normal(0, 0.5, var.shape).astype(np.float32))
    w = {v.name.split("attention/")[-1].split(":")[0]: v.numpy() for v in layer.weights}
    proj = {n: x @ w[f"{n}/kernel"] + w[f"{n}/bias"] for n in ("query", "key", "value")}
    split = {n: t.reshape(2, seq, heads, size).transpose(0, 2, 1, 3) for n, t in proj.items()}  # (B, N, S, D)
    return layer, x, mask, w, proj, split


def _softmax_context(scores, mask, v):
    scores = scores + (1.0 - mask)[:, None, None, :] * -10000.0
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    b, n, s, d = v.shape
    return probs, (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, n * d)


def _clip(distance, k):
    return int(np.clip(distance, -k, k)) + k


def test_fixed_term_is_a_t5_bias_computed_by_hand():
    layer, x, mask, w, _, split = _layer_and_numpy("fixed")
    q, k, v = split["query"], split["key"], split["value"]
    seq, window = x.shape[1], 3
    bias = np.zeros((2, seq, seq))  # T5: one learned scalar per head and (clipped) relative position
    for n in range(2):
        for i in range(seq):
            for j in range(seq):
                bias[n, i, j] = w["relative_bias"][n, _clip(j - i, window)]
    probs, context = _softmax_context(q @ k.transpose(0, 1, 3, 2) / 2.0 + bias[None], mask, v)  # sqrt(4) = 2
    got, got_probs = layer(x, x, x, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(got_probs.numpy(), probs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.numpy(), context, rtol=1e-5, atol=1e-5)


def test_dynamic_term_is_shaw_relative_key_attention_computed_by_hand():
    layer, x, mask, w, _, split = _layer_and_numpy("dynamic")
    q, k, v = split["query"], split["key"], split["value"]
    seq, window = x.shape[1], 3
    scores = np.zeros((2, 2, seq, seq))
    for i in range(seq):  # Shaw et al. (2018) Eq. 5: e_ij = q_i (k_j + a^K_ij)^T / sqrt(d), a^K_ij = w^K[clip(j-i)]
        for j in range(seq):
            a = w["relative_query_embeddings"][_clip(j - i, window)]
            scores[:, :, i, j] = np.einsum("bnd,bnd->bn", q[:, :, i], k[:, :, j] + a) / 2.0
    probs, context = _softmax_context(scores, mask, v)
    got, got_probs = layer(x, x, x, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(got_probs.numpy(), probs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.numpy(), context, rtol=1e-5, atol=1e-5)


def test_composite_with_key_term_and_depthwise_convolution_by_hand():
    layer, x, mask, w, proj, split = _layer_and_numpy("composite_key")
    q, k, v = split["query"], split["key"], split["value"]
    seq, window = x.shape[1], 3
    scores = q @ k.transpose(0, 1, 3, 2)
    for i in range(seq):
        for j in range(seq):
            scores[:, :, i, j] += q[:, :, i] @ w["relative_query_embeddings"][_clip(j - i, window)]
            # Key-based: token j decides how much relative position i - j attends to it.
            scores[:, :, i, j] += k[:, :, j] @ w["relative_key_embeddings"][_clip(i - j, window)]
    scores = scores / 2.0 + np.stack([[[[w["relative_bias"][n, _clip(j - i, window)] for j in range(seq)]
                                        for i in range(seq)] for n in range(2)]])
    _, context = _softmax_context(scores, mask, v)
    np.testing.assert_allclose(layer(x, x, x, attention_mask=mask).numpy(), context, rtol=1e-5, atol=1e-5)

    layer, x, mask, w, proj, split = _layer_and_numpy("fixed_depthwise", seed=1)
    _, context = _softmax_context(split["query"] @ split["key"].transpose(0, 1, 3, 2) / 2.0, mask, split["value"])
    values = proj["value"] * mask[:, :, None]  # padding zeroed (reference code)
    kernel = w["depthwise_conv/depthwise_kernel"][:, :, 0]  # (2k+1, C): tap t reads position i + t - k
    conv = np.zeros_like(values)
    for i in range(seq):
        for t in range(2 * window + 1):
            if 0 <= i + t - window < seq:  # zero padding at the ends, no edge reuse (Eq. 7 is a plain convolution)
                conv[:, i] += kernel[t] * values[:, i + t - window]
    expected = context + conv + w["depthwise_conv/bias"]
    np.testing.assert_allclose(layer(x, x, x, attention_mask=mask).numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "preset,overrides,equivariant",
    [
        ("tiny-composite", {}, True),
        ("tiny-composite", {"relative_attention_variant": "composite_key"}, True),
        ("tiny-composite", {"relative_attention_variant": "composite_depthwise"}, True),
        ("tiny-nezha", {}, True),
        ("tiny-composite", {"position_embedding_type": "absolute"}, False),  # control: absolute positions
    ],
)
def test_outputs_are_shift_equivariant(preset, overrides, equivariant):
    """Shifting a sentence right by 3 masked padding tokens shifts its outputs and nothing else."""
    encoder = randomized(preset, **overrides)
    inputs = random_inputs(512, batch_size=2, seq_len=12, seed=3)
    shifted = {k: np.pad(v, [(0, 0), (3, 2)]) for k, v in inputs.items()}  # 3 pads left, 2 right, mask 0
    shifted["input_ids"][:, :3] = 7  # padding ids are arbitrary: the mask must make them irrelevant
    base = run_encoder(encoder, inputs)["sequence_output"]
    moved = run_encoder(encoder, shifted)["sequence_output"][:, 3:-2]
    assert np.allclose(moved, base, rtol=1e-4, atol=1e-4) == equivariant


def test_composite_options_are_validated():
    with pytest.raises(ConfigError, match="unknown relative_attention_variant 'both'; valid values: 'composite'"):
        mbk.build("tiny-composite", relative_attention_variant="both")
    with pytest.raises(ConfigError, match="relative_window must be between 1 and"):
        mbk.build("tiny-composite", relative_window=0)
