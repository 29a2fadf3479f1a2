"""Distillation losses against values computed by hand (MobileBERT Eq. 1-5, 7)."""

import math

import numpy as np
import pytest

from mobilebert_kit.backend import tf
from mobilebert_kit import losses

LN_4_3 = 0.5 * math.log(4.0 / 3.0)  # KL([.5, .5] || [.25, .75]) = .5 ln 2 + .5 ln(2/3)


def _hidden():
    # Token 0: teacher [1, 3] -> LN [-1, 1], mean 2, var 1; student [2, 2] -> LN [0, 0], mean 2, var 0.
    # Token 1: teacher [0, 0], student [4, 4]: LN both 0, mean diff 4 (squared 16), var 0 both.
    # Token 2 is padding with garbage that must not count.
    teacher = np.array([[[1.0, 3.0], [0.0, 0.0], [100.0, -50.0]]], np.float32)
    student = np.array([[[2.0, 2.0], [4.0, 4.0], [-7.0, 9.0]]], np.float32)
    mask = np.array([[1, 1, 0]], np.int32)
    return teacher, student, mask


def test_feature_map_loss_is_mse_of_parameter_free_layer_norm():
    teacher, student, mask = _hidden()
    # token 0: ((-1 - 0)^2 + (1 - 0)^2) / 2 = 1 (up to LN epsilon); token 1: 0. Mean over 2 real tokens.
    value = float(losses.feature_map_loss(teacher, student, mask))
    assert value == pytest.approx(0.5, rel=1e-5)


def test_mean_and_variance_losses_per_token():
    teacher, student, mask = _hidden()
    assert float(losses.mean_loss(teacher, student, mask)) == pytest.approx((0.0 + 16.0) / 2)
    assert float(losses.variance_loss(teacher, student, mask)) == pytest.approx((1.0 + 0.0) / 2)


def test_attention_kl_on_probabilities_averaged_over_heads_and_real_queries():
    # [batch 1, heads 2, queries 3, keys 3]; key 2 and query 2 are padding.
    teacher = np.zeros([1, 2, 3, 3], np.float32)
    student = np.zeros([1, 2, 3, 3], np.float32)
    teacher[0, 0, :, :2] = [0.5, 0.5]
    student[0, 0, :, :2] = [0.25, 0.75]  # head 0: KL = 0.5 ln(4/3)
    teacher[0, 1, :, :2] = [0.9, 0.1]
    student[0, 1, :, :2] = [0.9, 0.1]  # head 1: KL = 0
    teacher[0, :, 2, :] = [0.2, 0.2, 0.6]  # padded query row: ignored
    student[0, :, 2, :] = [0.6, 0.2, 0.2]
    mask = np.array([[1, 1, 0]], np.int32)
    value = float(losses.attention_kl_loss(teacher, student, mask))
    assert value == pytest.approx(LN_4_3 / 2, rel=1e-5)
    # A second softmax over probabilities (the TF2 slip) would give a much smaller number.
    twice = float(losses.attention_kl_loss(tf.nn.softmax(teacher), tf.nn.softmax(student), mask))
    assert twice < value / 4


def test_attention_kl_renormalises_low_precision_probabilities():
    p = np.array([[[[0.5, 0.5]]]], np.float32)
    q = p * 0.99  # sums to 0.99, as bfloat16 probabilities can
    assert float(losses.attention_kl_loss(p, q, np.ones([1, 1]))) == pytest.approx(0.0, abs=1e-6)


def test_layer_transfer_loss_weights_eq7_defaults():
    teacher, student, mask = _hidden()
    probs_t = np.full([1, 1, 3, 3], 1 / 3, np.float32)
    total, terms = losses.layer_transfer_loss(teacher, student, probs_t, probs_t, mask)
    assert set(terms) == {"feature_map", "mean", "variance", "attention"}
    expected = 1 * 0.0 + 100 * 0.5 + 5000 * 8.0 + 5 * 0.5
    assert float(total) == pytest.approx(expected, rel=1e-5)
    total, terms = losses.layer_transfer_loss(teacher, student, None, None, mask, weights={"attention": 0.0, "mean": 0.0})
    assert "attention" not in terms
    assert float(total) == pytest.approx(100 * 0.5 + 5 * 0.5, rel=1e-5)


def test_normalizer_makes_replica_shares_add_up_to_the_global_mean():
    teacher, student, mask = _hidden()
    full = float(losses.mean_loss(teacher, student, mask))
    global_tokens = float(mask.sum())
    shares = [
        float(losses.mean_loss(teacher[:, sl], student[:, sl], mask[:, sl], normalizer=global_tokens))
        for sl in (slice(0, 1), slice(1, 3))
    ]
    assert sum(shares) == pytest.approx(full)


def test_pretraining_distillation_eq5():
    labels = np.array([[0, 1]], np.int32)
    weights = np.array([[1.0, 0.0]], np.float32)  # second prediction is padding
    student = np.array([[[math.log(3.0), 0.0], [5.0, -5.0]]], np.float32)  # p = [.75, .25]
    teacher = np.zeros([1, 2, 2], np.float32)  # uniform
    nsp_logits = np.array([[0.0, 0.0]], np.float32)
    nsp_labels = np.array([1], np.int32)
    total, terms = losses.pretraining_distillation_loss(labels, student, weights, nsp_labels, nsp_logits,
                                                        teacher_mlm_logits=teacher, alpha=0.5)
    assert float(terms["mlm"]) == pytest.approx(-math.log(0.75), rel=1e-6)
    assert float(terms["mlm_kd"]) == pytest.approx(LN_4_3, rel=1e-5)
    assert float(terms["nsp"]) == pytest.approx(math.log(2.0), rel=1e-6)
    assert float(total) == pytest.approx(0.5 * -math.log(0.75) + 0.5 * LN_4_3 + math.log(2.0), rel=1e-5)
    # Without a teacher MLM head, KD is skipped and MLM keeps its full weight.
    total, terms = losses.pretraining_distillation_loss(labels, student, weights, nsp_labels, nsp_logits)
    assert "mlm_kd" not in terms
    assert float(total) == pytest.approx(-math.log(0.75) + math.log(2.0), rel=1e-6)
