"""Each building block: output shape, get_config round trip, identical outputs from the clone."""

import numpy as np
import pytest

from mobilebert_kit.layers import (
    FeedForward,
    MultiHeadAttention,
    NoNorm,
    ProjectionNorm,
    TokenEmbedding,
    TransformerBlock,
)
from tests.helpers import run_layer_test

X = np.random.default_rng(0).normal(size=(2, 5, 16)).astype(np.float32)
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32)


def test_no_norm_layer():
    run_layer_test(NoNorm, {"name": "norm"}, X, expected_shape=(2, 5, 16))


@pytest.mark.parametrize("norm", ["layer_norm", "no_norm"])
def test_projection_norm_layer(norm):
    run_layer_test(ProjectionNorm, {"units": 8, "normalization_type": norm, "name": "bottleneck_input"}, X,
                   expected_shape=(2, 5, 8))


def test_feed_forward_layer():
    run_layer_test(FeedForward, {"intermediate_size": 24, "hidden_act": "relu", "normalization_type": "no_norm",
                                 "name": "ffn_0"}, X, expected_shape=(2, 5, 16))


def test_attention_layer_with_mask_value():
    run_layer_test(MultiHeadAttention, {"num_heads": 2, "head_size": 4, "mask_value": -120.0, "name": "attention"},
                   (X, X, X), call_kwargs={"attention_mask": MASK}, expected_shape=(2, 5, 8))


def test_token_embedding_layer():
    ids = np.array([[3, 4, 5, 6, 7], [8, 9, 1, 0, 0]], np.int32)
    run_layer_test(TokenEmbedding, {"vocab_size": 10, "embedding_size": 4, "hidden_size": 16,
                                    "max_position_embeddings": 8, "trigram_input": True, "name": "embeddings"},
                   (ids, np.zeros_like(ids)), expected_shape=(2, 5, 16))


@pytest.mark.parametrize("kq_shared", [True, False])
def test_transformer_block_layer(kq_shared):
    run_layer_test(
        TransformerBlock,
        {"hidden_size": 16, "num_heads": 2, "intermediate_size": 12, "intra_bottleneck_size": 8,
         "use_bottleneck": True, "key_query_shared_bottleneck": kq_shared, "num_feedforward_networks": 3,
         "normalization_type": "no_norm", "hidden_act": "relu", "name": "transformer_layer_0"},
        X,
        call_kwargs={"attention_mask": MASK},
        expected_shape=(2, 5, 16),
    )


def test_keyed_dropout_masks_depend_on_the_global_row_not_on_the_split():
    from mobilebert_kit.backend import tf
    from mobilebert_kit.layers import KeyedDropout, dropout_key

    drop = KeyedDropout(0.3, name="dropout")
    x = tf.ones([4, 64, 8])
    with dropout_key(tf.constant(7, tf.int64), 4, 0):
        whole = drop(x, training=True).numpy()
        second_call = drop(x, training=True).numpy()  # the next call of the step: another mask
    halves = []
    for offset in (0, 2):
        with dropout_key(tf.constant(7, tf.int64), 4, offset):
            halves.append(drop(x[offset : offset + 2], training=True).numpy())
    np.testing.assert_array_equal(np.concatenate(halves), whole)
    assert abs((whole == 0).mean() - 0.3) < 0.03 and np.allclose(whole[whole != 0], 1 / 0.7)
    assert (second_call != whole).any()
    with dropout_key(tf.constant(8, tf.int64), 4, 0):  # the next step: another mask
        assert (drop(x, training=True).numpy() != whole).any()
    with dropout_key(tf.constant(7, tf.int64), 4, 0):
        np.testing.assert_array_equal(drop(x, training=False).numpy(), x.numpy())
    # Outside a key it is Keras' Dropout.
    outside = drop(x, training=True).numpy()
    assert abs((outside == 0).mean() - 0.3) < 0.03
