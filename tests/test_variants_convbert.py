"""ConvBERT (Jiang et al., 2020): mixed attention, grouped linear FFN, import and parity.

Parity is against Hugging Face ``ConvBertModel`` (transformers 4.57, test-only):
random weights saved with ``save_pretrained(safe_serialization=True)`` and
imported with ``mbk.import_checkpoint``. Criterion: max |ours - ref| <=
1e-4 * max |ref| on unpadded inputs; padded batches agree on real tokens.
"""

import numpy as np
import pytest

import mobilebert_kit as mbk
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.models.api import named_weights
from tests.parity_helpers import assert_parity, save_reference

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TINY_CONVBERT = dict(
    vocab_size=99, hidden_size=32, embedding_size=16, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=48, max_position_embeddings=64, type_vocab_size=2, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def save_convbert(tmp_path, seed=0, **overrides):
    model = transformers.ConvBertModel(transformers.ConvBertConfig(**{**TINY_CONVBERT, **overrides}))
    return save_reference(model, tmp_path, seed)


@pytest.mark.parity
@pytest.mark.parametrize(
    "head_ratio,num_groups,kernel",
    [(2, 1, 9), (4, 1, 9), (2, 2, 5), (4, 2, 3)],
)
def test_convbert_parity(tmp_path, head_ratio, num_groups, kernel):
    ref = save_convbert(tmp_path, head_ratio=head_ratio, num_groups=num_groups, conv_kernel_size=kernel)
    ours = mbk.import_checkpoint(tmp_path)
    cfg = ours.config
    assert (cfg["attention_type"], cfg["head_ratio"], cfg["num_groups"], cfg["conv_kernel_size"]) == (
        "convbert_mixed", head_ratio, num_groups, kernel)
    # 3 < kernel: the convolution sees mostly padding. The reference's convolution branch ignores
    # the padding mask, and so do we, so even tokens next to the padding agree (padding ids are
    # real embeddings there).
    for _, out in assert_parity(ours, ref, [(1, 3), (2, 11), (2, 20)]):
        # No pooler in ConvBertModel: the pooled output is the first token.
        np.testing.assert_array_equal(out["pooled_output"], out["sequence_output"][:, 0])


@pytest.mark.parity
def test_convbert_heads_follow_the_reference_rule(tmp_path):
    ref = save_convbert(tmp_path, head_ratio=4)
    reference_attention = ref.encoder.layer[0].attention.self
    attention = mbk.import_checkpoint(tmp_path).get_layer("transformer_layer_0").attention
    assert (attention.num_heads, attention.head_size) == (
        reference_attention.num_attention_heads, reference_attention.attention_head_size) == (1, 16)
    assert attention.span_conv.num_heads == 1


def test_mixed_attention_matches_explicit_equations():
    """Eq. 4-6 written out in numpy with the layer's own weights (independent of any reference)."""
    encoder = mbk.build("tiny-convbert", num_layers=1, attention_dropout=0.0, hidden_dropout=0.0)
    rng = np.random.default_rng(0)
    for path, var in named_weights(encoder).items():
        var.assign(rng.normal(0, 0.3, var.shape).astype(np.float32))
    attention = encoder.get_layer("transformer_layer_0").attention
    x = rng.normal(size=(2, 7, encoder.config["hidden_size"])).astype(np.float32)
    mask = np.ones((2, 7), np.float32)
    got = attention(x, x, x, attention_mask=mask).numpy()

    w = {p.split("attention/")[1]: v.numpy() for p, v in named_weights(encoder).items()
         if p.startswith("transformer_layer_0/attention/")}
    heads, size, k = attention.num_heads, attention.head_size, attention.conv_kernel_size
    q = x @ w["query/kernel"] + w["query/bias"]
    key = x @ w["key/kernel"] + w["key/bias"]
    v = x @ w["value/kernel"] + w["value/bias"]
    split = lambda t: t.reshape(2, 7, heads, size).transpose(0, 2, 1, 3)  # noqa: E731
    scores = split(q) @ split(key).transpose(0, 1, 3, 2) / np.sqrt(size)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    attn = (probs @ split(v)).transpose(0, 2, 1, 3).reshape(2, 7, -1)
    pad = (k - 1) // 2
    xp = np.pad(x, [(0, 0), (pad, pad), (0, 0)])
    depth = w["span_conv/key_conv/depthwise_kernel"][:, :, 0]  # (k, H)
    span = np.stack([sum(xp[:, t + o] * depth[o] for o in range(k)) for t in range(7)], 1)
    key_span = span @ w["span_conv/key_conv/pointwise_kernel"][0] + w["span_conv/key_conv/bias"]
    logits = (q * key_span) @ w["span_conv/conv_kernel/kernel"] + w["span_conv/conv_kernel/bias"]
    kernels = np.exp(logits.reshape(2, 7, heads, k))
    kernels /= kernels.sum(-1, keepdims=True)  # Eq. 4
    conv_v = np.pad(x @ w["span_conv/conv_value/kernel"] + w["span_conv/conv_value/bias"], [(0, 0), (pad, pad), (0, 0)])
    conv = np.zeros((2, 7, heads, size))
    for t in range(7):
        for o in range(k):  # tap o reads position t + o - pad (Eq. 5, lightweight: one weight per head)
            conv[:, t] += kernels[:, t, :, o, None] * conv_v[:, t + o].reshape(2, heads, size)
    expected = np.concatenate([attn, conv.reshape(2, 7, -1)], -1)  # Eq. 6
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_grouped_feed_forward_is_block_diagonal():
    from mobilebert_kit.layers import GroupedDense

    layer = GroupedDense(6, num_groups=2)
    x = np.random.default_rng(0).normal(size=(1, 3, 4)).astype(np.float32)
    layer.build(x.shape)
    kernel = np.random.default_rng(1).normal(size=(2, 2, 3)).astype(np.float32)
    layer.kernel.assign(kernel)
    layer.bias.assign(np.arange(6, dtype=np.float32))
    dense = np.zeros((4, 6), np.float32)
    dense[:2, :3], dense[2:, 3:] = kernel[0], kernel[1]  # Eq. 7: concat of per-group maps
    np.testing.assert_allclose(layer(x).numpy(), x @ dense + np.arange(6), rtol=1e-5, atol=1e-6)
    assert mbk.count_params(mbk.build("tiny-convbert", num_groups=2)) < mbk.count_params(mbk.build("tiny-convbert"))


def test_convbert_options_are_validated():
    valid = "'self_attention', 'convbert_mixed', 'composite'"
    with pytest.raises(ConfigError, match=f"unknown attention_type 'conv'; valid values: {valid}"):
        mbk.build("tiny-convbert", attention_type="conv")
    with pytest.raises(ConfigError, match="conv_kernel_size must be odd"):
        mbk.build("tiny-convbert", conv_kernel_size=4)
    with pytest.raises(ConfigError, match="num_groups=3 must divide"):
        mbk.build("tiny-convbert", num_groups=3)
    with pytest.raises(ConfigError, match="must split into 2 x"):
        mbk.build("tiny-bert", attention_type="convbert_mixed", hidden_size=36, num_heads=4, head_ratio=1)
    with pytest.raises(ConfigError, match="unknown embedding_projection"):
        mbk.build("tiny-convbert", embedding_projection="late")
