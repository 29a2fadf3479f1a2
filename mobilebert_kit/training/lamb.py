"""Lamb: layer-wise adaptive moments (You et al., 2019) for tf_keras."""

import re

from mobilebert_kit.backend import keras, tf

# Variables without weight decay, matched with re.search against variable names:
# norm parameters (our ".../norm/gamma", "transform_norm/beta"; BERT's
# "LayerNorm"/"layer_norm") and biases. NEZHA and BERT use
# ["LayerNorm", "layer_norm", "bias"] on their own variable names.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "norm/", "bias")


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class Lamb(keras.optimizers.Optimizer):
    """LAMB: Adam moments, decoupled weight decay and a per-variable trust ratio.

    For each variable ``w`` with gradient ``g`` at step ``t`` (1-based):

    - ``m = beta_1 m + (1 - beta_1) g``;  ``v = beta_2 v + (1 - beta_2) g^2``
    - ``m_hat = m / (1 - beta_1^t)``;  ``v_hat = v / (1 - beta_2^t)`` (with ``bias_correction``)
    - ``r = m_hat / (sqrt(v_hat) + epsilon) + weight_decay_rate * w`` (no decay
      for names matching ``exclude_from_weight_decay``)
    - ``trust = clip(||w|| / ||r||, *trust_ratio_clip)``, 1 where either norm is 0
    - ``w = w - lr * multiplier(w) * trust * r``

    That is Algorithm 2 of You et al. (2019), with the trust ratio clipped to
    [0, 10] as in the NEZHA reference code (which uses LAMB with weight decay
    0.01 excluding LayerNorm and bias; NEZHA paper Sec. 2.5). Unlike that
    reference, the norm in the trust ratio is the norm of the update actually
    applied (the reference puts epsilon inside the square root there and adds
    weight decay to excluded variables too, for the ratio only).
    ``use_trust_ratio=False`` gives BERT's AdamWeightDecay (AdamW).

    ``learning_rate_multipliers`` scales the step of matching variables: the
    "softened" progressive transfer tunes lower layers at a small rate
    (MobileBERT paper Sec. 3.3). Scaling the gradient instead would do nothing:
    Adam-type updates are invariant to gradient scale.

    Args:
        learning_rate: float or ``LearningRateSchedule``.
        beta_1: first-moment decay.
        beta_2: second-moment decay.
        epsilon: added to ``sqrt(v_hat)``.
        weight_decay_rate: decoupled weight decay (0.01 in NEZHA and BERT).
        exclude_from_weight_decay: regular expressions of variable names without decay.
        trust_ratio_clip: ``(low, high)`` bounds of the trust ratio.
        use_trust_ratio: False gives AdamW.
        bias_correction: divide the moments by ``1 - beta^t``.
        learning_rate_multipliers: dict ``{regex: multiplier}``; the first
            pattern found (``re.search``) in a variable's name sets its multiplier (default 1).
        jit_compile: XLA-compile the update (off by default: XLA is not everywhere).
        name: optimizer name.

    Example:
        >>> optimizer = Lamb(learning_rate=1.5e-3, weight_decay_rate=0.01)
        >>> optimizer.apply_gradients(zip(grads, model.trainable_variables))  # doctest: +SKIP
    """

    def __init__(
        self,
        learning_rate=1e-3,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        weight_decay_rate=0.01,
        exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
        trust_ratio_clip=(0.0, 10.0),
        use_trust_ratio=True,
        bias_correction=True,
        learning_rate_multipliers=None,
        jit_compile=False,
        name="Lamb",
        **kwargs,
    ):
        # weight_decay=None: the base class must not apply its own (pre-update) decay.
        super().__init__(name=name, weight_decay=None, jit_compile=jit_compile, **kwargs)
        self._learning_rate = self._build_learning_rate(learning_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.weight_decay_rate = float(weight_decay_rate)
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
        self.trust_ratio_clip = tuple(float(x) for x in trust_ratio_clip) if trust_ratio_clip else None
        self.use_trust_ratio = bool(use_trust_ratio)
        self.bias_correction = bool(bias_correction)
        self.learning_rate_multipliers = dict(learning_rate_multipliers or {})

    # --- per-variable options, fixed at build time ---
    def _decays(self, variable):
        return bool(self.weight_decay_rate) and not any(re.search(p, variable.name)
                                                        for p in self.exclude_from_weight_decay)

    def _multiplier(self, variable):
        return next((float(value) for pattern, value in self.learning_rate_multipliers.items()
                     if re.search(pattern, variable.name)), 1.0)

    def build(self, var_list):
        super().build(var_list)
        if getattr(self, "_built", False):
            return
        self._built = True
        self._momentums, self._velocities = [], []
        self._options = {}
        for var in var_list:
            self._momentums.append(self.add_variable_from_reference(model_variable=var, variable_name="m"))
            self._velocities.append(self.add_variable_from_reference(model_variable=var, variable_name="v"))
            self._options[self._var_key(var)] = (self._decays(var), self._multiplier(var))

    def _distributed_apply_gradients_fn(self, distribution, grads_and_vars, **kwargs):
        # Scalars shared by every variable of this step, built once rather than
        # per variable: graph tracing costs ~1 ms per op, and a model has
        # hundreds of variables.
        step = tf.cast(self.iterations + 1, tf.float32)
        constants = {"lr": tf.cast(self.learning_rate, tf.float32), "m_scale": 1.0, "v_scale": 1.0}
        if self.bias_correction:
            constants["m_scale"] = 1.0 / (1.0 - tf.pow(self.beta_1, step))
            constants["v_scale"] = 1.0 / (1.0 - tf.pow(self.beta_2, step))
        self._step_constants = constants
        try:
            return super()._distributed_apply_gradients_fn(distribution, grads_and_vars, **kwargs)
        finally:
            self._step_constants = None

    def update_step(self, gradient, variable):
        if isinstance(gradient, tf.IndexedSlices):
            # Embedding gradients: the trust ratio needs the whole update's norm anyway.
            gradient = tf.convert_to_tensor(gradient)
        dtype = variable.dtype
        key = self._var_key(variable)
        index = self._index_dict[key]
        m, v = self._momentums[index], self._velocities[index]
        decays, multiplier = self._options[key]
        constants = getattr(self, "_step_constants", None) or {}
        gradient = tf.cast(gradient, dtype)

        m_t = m.assign_add((gradient - m) * (1.0 - self.beta_1))  # beta_1 m + (1 - beta_1) g
        v_t = v.assign_add((tf.square(gradient) - v) * (1.0 - self.beta_2))
        m_scale = tf.cast(constants.get("m_scale", 1.0), dtype)
        v_scale = tf.cast(constants.get("v_scale", 1.0), dtype)
        update = (m_t * m_scale) / (tf.sqrt(v_t * v_scale) + self.epsilon)
        if decays:
            update += self.weight_decay_rate * variable
        step_size = tf.cast(constants.get("lr", self.learning_rate), dtype) * multiplier
        if self.use_trust_ratio:
            w_norm = tf.norm(variable)
            u_norm = tf.norm(update)
            ratio = tf.where((w_norm > 0.0) & (u_norm > 0.0), w_norm / tf.maximum(u_norm, 1e-30), 1.0)
            if self.trust_ratio_clip:
                ratio = tf.clip_by_value(ratio, *self.trust_ratio_clip)
            step_size = step_size * ratio
        variable.assign_sub(step_size * update)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "learning_rate": self._serialize_hyperparameter(self._learning_rate),
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
                "weight_decay_rate": self.weight_decay_rate,
                "exclude_from_weight_decay": list(self.exclude_from_weight_decay),
                "trust_ratio_clip": list(self.trust_ratio_clip) if self.trust_ratio_clip else None,
                "use_trust_ratio": self.use_trust_ratio,
                "bias_correction": self.bias_correction,
                "learning_rate_multipliers": dict(self.learning_rate_multipliers),
            }
        )
        config.pop("weight_decay", None)
        return config
