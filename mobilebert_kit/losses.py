"""Knowledge-transfer and pre-training losses of MobileBERT, as plain functions.

Equation numbers refer to Sun et al., 2020, "MobileBERT: Task-Agnostic
Compression of BERT by Progressive Knowledge Transfer" (Sec. 3, Appendix D).
They sit below both ``training/`` (distillation) and ``convert/`` (recovery
after substitution), as losses are their own layer in Model Garden, so
conversion never imports training.

Shapes: hidden states ``[batch, seq, hidden]``, attention probabilities ``[batch, heads, seq, seq]``
(after softmax and masking, as the encoder returns them), ``attention_mask`` ``[batch, seq]``, MLM
logits ``[batch, predictions, vocab]`` with ``label_weights`` ``[batch, predictions]``.

Every per-token loss is a *masked mean* over real tokens (``attention_mask``
1). ``normalizer`` overrides the denominator: under a ``tf.distribute``
strategy the trainer passes the global count of real tokens (summed over
replicas), so that the per-replica losses add up to the global mean and the
summed replica gradients equal the single-device gradient.

All arithmetic is float32 whatever the compute dtype of the models (mixed
precision): inputs are cast first.

Two slips of the official trainers are avoided (parity-notes.md):

- attention transfer is a KL divergence between the attention *probabilities*
  the encoder produced; softmax is applied once (by the attention layer), not
  a second time on probabilities (the TF2 Model Garden slip);
- mean and variance discrepancies compare layer l of the student with layer l
  of the teacher, not with all teacher layers at once (the TF1 slip).
"""

from mobilebert_kit.backend import tf

# Parameter-free LayerNorm epsilon. Hidden states have variance O(1); 1e-6
# keeps d LN / d x bounded (<= 1e3) should a token's features ever be constant.
FEATURE_NORM_EPSILON = 1e-6
# Smallest probability used inside log(): float32 softmax underflows to 0 only
# far below this; masked keys have probability 0 in both distributions and
# contribute 0 through xlogy(0, .) = 0.
_PROB_FLOOR = 1e-30

# Appendix D: (lambda, mu, beta, gamma) = (1, 100, 5000, 5); Sec. 3.4: alpha = 0.5.
DEFAULT_WEIGHTS = {"attention": 1.0, "feature_map": 100.0, "mean": 5000.0, "variance": 5.0}
DEFAULT_ALPHA = 0.5


def _f32(x):
    return tf.cast(x, tf.float32)


def masked_mean(values, mask, normalizer=None):
    """``sum(values * mask) / normalizer`` (default ``sum(mask)``, at least 1); ``mask`` broadcasts to ``values``."""
    values, mask = _f32(values), _f32(mask)
    total = tf.reduce_sum(values * mask)
    if normalizer is None:
        normalizer = tf.reduce_sum(mask * tf.ones_like(values))
    return total / tf.maximum(_f32(normalizer), 1.0)


def parameter_free_layer_norm(x, epsilon=FEATURE_NORM_EPSILON):
    """LayerNorm over the last axis without gamma and beta: ``(x - mean) / sqrt(var + eps)``."""
    x = _f32(x)
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + epsilon)


def feature_map_loss(teacher_hidden, student_hidden, attention_mask, normalizer=None):
    """Eq. 1: MSE between parameter-free LayerNorm'd feature maps.

    ``1/(T N) sum_t sum_n (LN(H_tr)_tn - LN(H_st)_tn)^2``, averaged over the
    real tokens of the batch (teacher and student of the same hidden size)."""
    diff = parameter_free_layer_norm(teacher_hidden) - parameter_free_layer_norm(student_hidden)
    per_token = tf.reduce_mean(tf.square(diff), axis=-1)  # (B, S)
    return masked_mean(per_token, attention_mask, normalizer)


def mean_loss(teacher_hidden, student_hidden, attention_mask, normalizer=None):
    """Eq. 2 (left): ``1/T sum_t (mu(H_tr,t) - mu(H_st,t))^2``, mu over the features of token t."""
    per_token = tf.square(
        tf.reduce_mean(_f32(teacher_hidden), axis=-1) - tf.reduce_mean(_f32(student_hidden), axis=-1)
    )  # (B, S)
    return masked_mean(per_token, attention_mask, normalizer)


def variance_loss(teacher_hidden, student_hidden, attention_mask, normalizer=None):
    """Eq. 2 (right): ``1/T sum_t |var(H_tr,t) - var(H_st,t)|``, variance over the features of token t."""
    _, var_t = tf.nn.moments(_f32(teacher_hidden), axes=[-1])
    _, var_s = tf.nn.moments(_f32(student_hidden), axes=[-1])
    return masked_mean(tf.abs(var_t - var_s), attention_mask, normalizer)


def attention_kl_loss(teacher_probs, student_probs, attention_mask, normalizer=None):
    """Eq. 3: ``1/(T A) sum_t sum_a KL(a_tr || a_st)`` over per-head attention distributions.

    Padded query rows are excluded; padded keys carry probability 0 in both and add nothing."""
    # Renormalised in float32: probabilities computed in bfloat16/float16 sum to
    # 1 only within ~1e-2, enough to make an unnormalised KL negative.
    p_t = _f32(teacher_probs)
    p_t = p_t / tf.maximum(tf.reduce_sum(p_t, axis=-1, keepdims=True), _PROB_FLOOR)
    p_s = _f32(student_probs)
    p_s = p_s / tf.maximum(tf.reduce_sum(p_s, axis=-1, keepdims=True), _PROB_FLOOR)
    kl = tf.math.xlogy(p_t, p_t) - tf.math.xlogy(p_t, tf.maximum(p_s, _PROB_FLOOR))
    per_row = tf.reduce_sum(kl, axis=-1)  # (B, A, Sq)
    per_token = tf.reduce_mean(per_row, axis=1)  # (B, Sq): mean over heads
    return masked_mean(per_token, attention_mask, normalizer)


def layer_transfer_loss(teacher_hidden, student_hidden, teacher_probs, student_probs, attention_mask,
                        weights=None, normalizer=None):
    """Eq. 7: ``L_PKT = lambda L_AT + mu L_FMT + beta L_mu + gamma L_sigma`` for one layer.

    ``weights`` overrides :data:`DEFAULT_WEIGHTS` (Appendix D) by key; the attention probabilities may be
    None when ``weights["attention"]`` is 0. Returns ``(total, terms)``: the weighted sum and the unweighted
    terms by name."""
    weights = dict(DEFAULT_WEIGHTS, **(weights or {}))
    terms = {
        "feature_map": feature_map_loss(teacher_hidden, student_hidden, attention_mask, normalizer),
        "mean": mean_loss(teacher_hidden, student_hidden, attention_mask, normalizer),
        "variance": variance_loss(teacher_hidden, student_hidden, attention_mask, normalizer),
    }
    if weights["attention"] and teacher_probs is not None and student_probs is not None:
        terms["attention"] = attention_kl_loss(teacher_probs, student_probs, attention_mask, normalizer)
    total = tf.add_n([weights[name] * value for name, value in terms.items()])
    return total, terms


def masked_lm_loss(labels, logits, label_weights, normalizer=None):
    """Cross-entropy of the masked tokens (BERT's MLM loss, ``labels`` the original ids), averaged over real
    predictions."""
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels, tf.int32), logits=_f32(logits))
    return masked_mean(ce, label_weights, normalizer)


def mlm_distillation_loss(teacher_logits, student_logits, label_weights, normalizer=None):
    """Eq. 4: ``KL(P_tr || P_st)`` of the masked-token distributions.

    Eq. 4 writes a sum over masked tokens; we average over them, like the MLM
    cross-entropy it is balanced against in Eq. 5 (an ``alpha`` between a sum
    and a mean would depend on the number of masks). The gradient equals that
    of the official soft-target cross-entropy with target
    ``alpha * one_hot + (1 - alpha) * P_tr`` (the two differ by the teacher's
    entropy, a constant)."""
    log_p_t = tf.nn.log_softmax(_f32(teacher_logits), axis=-1)
    log_p_s = tf.nn.log_softmax(_f32(student_logits), axis=-1)
    kl = tf.reduce_sum(tf.exp(log_p_t) * (log_p_t - log_p_s), axis=-1)  # (B, P)
    return masked_mean(kl, label_weights, normalizer)


def next_sentence_loss(labels, logits, normalizer=None):
    """Cross-entropy of next-sentence prediction, averaged over examples.

    ``labels`` ``[batch]`` (or ``[batch, 1]``): 0 = B follows A, 1 = random B (BERT's convention)."""
    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=_f32(logits))
    return masked_mean(ce, tf.ones_like(ce), normalizer)


def pretraining_distillation_loss(mlm_labels, student_mlm_logits, label_weights, nsp_labels, student_nsp_logits,
                                  teacher_mlm_logits=None, alpha=DEFAULT_ALPHA, prediction_normalizer=None,
                                  example_normalizer=None):
    """Eq. 5: ``alpha L_MLM + (1 - alpha) L_MLM-KD + L_NSP``.

    With ``teacher_mlm_logits=None`` (a teacher without an MLM head, e.g. a
    sentence encoder) the KD term does not exist and the loss is
    ``L_MLM + L_NSP``: alpha only balances the two MLM targets. Returns ``(total, terms)``, the terms
    ``mlm``, ``nsp`` and, with a teacher, ``mlm_kd``."""
    terms = {
        "mlm": masked_lm_loss(mlm_labels, student_mlm_logits, label_weights, prediction_normalizer),
        "nsp": next_sentence_loss(nsp_labels, student_nsp_logits, example_normalizer),
    }
    if teacher_mlm_logits is None:
        return terms["mlm"] + terms["nsp"], terms
    terms["mlm_kd"] = mlm_distillation_loss(teacher_mlm_logits, student_mlm_logits, label_weights, prediction_normalizer)
    total = alpha * terms["mlm"] + (1.0 - alpha) * terms["mlm_kd"] + terms["nsp"]
    return total, terms
