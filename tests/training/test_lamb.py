"""LAMB against its update equations (You et al., 2019, Alg. 2; NEZHA's [0, 10] trust-ratio clip)."""

import numpy as np
import pytest

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.training.lamb import Lamb
from mobilebert_kit.training.warmup_decay import WarmupDecay


def reference_lamb(weights, grads_per_step, names, lr, beta_1=0.9, beta_2=0.999, eps=1e-6, wd=0.01,
                   exclude=("bias",), clip=(0.0, 10.0), trust=True, multipliers=None):
    """The equations, written out in numpy."""
    w = {n: np.array(weights[n], np.float64) for n in names}
    m = {n: np.zeros_like(w[n]) for n in names}
    v = {n: np.zeros_like(w[n]) for n in names}
    for t, grads in enumerate(grads_per_step, start=1):
        rate = lr(t - 1) if callable(lr) else lr
        for n in names:
            g = grads[n]
            m[n] = beta_1 * m[n] + (1 - beta_1) * g
            v[n] = beta_2 * v[n] + (1 - beta_2) * g * g
            m_hat = m[n] / (1 - beta_1**t)
            v_hat = v[n] / (1 - beta_2**t)
            r = m_hat / (np.sqrt(v_hat) + eps)
            if not any(p in n for p in exclude):
                r = r + wd * w[n]
            ratio = 1.0
            if trust:
                wn, rn = np.linalg.norm(w[n]), np.linalg.norm(r)
                ratio = wn / rn if wn > 0 and rn > 0 else 1.0
                ratio = min(max(ratio, clip[0]), clip[1])
            mult = (multipliers or {}).get(n, 1.0)
            w[n] = w[n] - rate * mult * ratio * r
    return w


def _problem(seed=0, steps=3):
    rng = np.random.default_rng(seed)
    weights = {
        "dense/kernel": rng.normal(size=(3, 4)).astype(np.float32),
        "dense/bias": rng.normal(size=(4,)).astype(np.float32) * 0.1,
        "big/kernel": (rng.normal(size=(2, 2)) * 1e3).astype(np.float32),  # trust ratio far above 10
        "zero/kernel": np.zeros((2, 3), np.float32),  # ||w|| = 0: ratio 1
        "lower/kernel": rng.normal(size=(2, 2)).astype(np.float32),
    }
    grads = [{n: rng.normal(size=w.shape).astype(np.float32) for n, w in weights.items()} for _ in range(steps)]
    return weights, grads


def _run(optimizer, weights, grads):
    variables = {n: tf.Variable(w, name=n) for n, w in weights.items()}
    for step in grads:
        optimizer.apply_gradients([(tf.constant(step[n]), variables[n]) for n in weights])
    return {n: v.numpy() for n, v in variables.items()}


@pytest.mark.parametrize("trust", [True, False], ids=["lamb", "adamw"])
def test_lamb_matches_equations(trust):
    weights, grads = _problem()
    schedule = WarmupDecay(0.01, total_steps=10, warmup_steps=2)
    optimizer = Lamb(learning_rate=schedule, weight_decay_rate=0.01, use_trust_ratio=trust,
                     learning_rate_multipliers={"^lower/": 0.1})
    ours = _run(optimizer, weights, grads)
    expected = reference_lamb(weights, grads, list(weights), lr=lambda s: float(schedule(s)), trust=trust,
                              multipliers={"lower/kernel": 0.1})
    for name in weights:
        np.testing.assert_allclose(ours[name], expected[name], rtol=2e-5, atol=1e-6, err_msg=name)
    assert int(optimizer.iterations.numpy()) == len(grads)


def test_trust_ratio_is_clipped_to_ten():
    w = np.full((2, 2), 1e3, np.float32)
    g = np.full((2, 2), 1.0, np.float32)
    var = tf.Variable(w, name="big/kernel")
    Lamb(learning_rate=0.01, weight_decay_rate=0.0).apply_gradients([(tf.constant(g), var)])
    # First step: m_hat/sqrt(v_hat) = 1 per element, ||r|| = 2, ||w|| = 2000 -> ratio 1000, clipped to 10.
    np.testing.assert_allclose(var.numpy(), w - 0.01 * 10 * 1.0, rtol=1e-6)


def test_weight_decay_skips_norms_and_biases():
    optimizer = Lamb(weight_decay_rate=0.01)
    names = ["encoder/transformer_layer_0/attention_output/norm/gamma", "embeddings/norm/beta", "mlm/transform_norm/gamma",
             "dense/bias", "dense/kernel", "embeddings/word_embeddings"]
    decays = {n: optimizer._decays(tf.Variable(1.0, name=n)) for n in names}
    assert decays == {n: n in ("dense/kernel", "embeddings/word_embeddings") for n in names}


def test_config_round_trip_and_loss_scale_wrapping():
    optimizer = Lamb(learning_rate=WarmupDecay(1e-3, 100, 10), learning_rate_multipliers={"a": 0.5})
    clone = Lamb.from_config(optimizer.get_config())
    assert clone.learning_rate_multipliers == {"a": 0.5}
    assert clone.trust_ratio_clip == (0.0, 10.0)
    scaled = keras.mixed_precision.LossScaleOptimizer(Lamb(learning_rate=0.01))
    var = tf.Variable(np.ones((2, 2), np.float32), name="k/kernel")
    initial = float(scaled.loss_scale)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(var) * np.float32(1e38)  # overflows once scaled
        scaled_loss = scaled.get_scaled_loss(loss)
    grads = scaled.get_unscaled_gradients(tape.gradient(scaled_loss, [var]))
    scaled.apply_gradients(zip(grads, [var]))
    np.testing.assert_array_equal(var.numpy(), np.ones((2, 2)))  # non-finite step skipped...
    assert float(scaled.loss_scale) == initial / 2  # ...and the dynamic loss scale halved


def test_warmup_decay_shape():
    schedule = WarmupDecay(1.0, total_steps=10, warmup_steps=4)
    values = [float(schedule(s)) for s in range(11)]
    np.testing.assert_allclose(values[:4], [0.25, 0.5, 0.75, 1.0], rtol=1e-6)
    np.testing.assert_allclose(values[4:], [1 - k / 6 for k in range(7)], atol=1e-6)
    cosine = WarmupDecay(1.0, total_steps=4, decay="cosine")
    np.testing.assert_allclose([float(cosine(s)) for s in (0, 2, 4)], [1.0, 0.5, 0.0], atol=1e-6)
    with pytest.raises(ValueError, match="valid values"):
        WarmupDecay(1.0, 10, decay="exponential")
