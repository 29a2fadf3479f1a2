"""How close a student's features are to its teacher's, on held-out data.

Reports, averaged over real tokens of held-out examples:

- ``feature_map``: Eq. 1 per layer and averaged over layers;
- ``attention``: Eq. 3 per layer and averaged;
- ``embedding_cosine``: cosine between the teacher's and the student's
  sentence embeddings, mean-pooled over real tokens of the last layer (the
  pooling of sentence encoders such as all-MiniLM-L6-v2), averaged over examples.
"""

import numpy as np

from mobilebert_kit import losses


def _restore_masked(batch):
    """Inputs with masked positions set back to the original tokens (clean text)."""
    from mobilebert_kit.backend import tf

    ids = batch["input_ids"]
    positions = batch["masked_lm_positions"]
    weights = batch["masked_lm_weights"] > 0
    rows = tf.broadcast_to(tf.range(tf.shape(ids)[0])[:, None], tf.shape(positions))
    index = tf.stack([tf.boolean_mask(rows, weights), tf.boolean_mask(positions, weights)], axis=1)
    return tf.tensor_scatter_nd_update(ids, index, tf.boolean_mask(batch["masked_lm_ids"], weights))


def mean_pool(hidden, mask):
    """Mean of ``hidden`` ``[B, S, H]`` over the real tokens of ``mask`` ``[B, S]``."""
    from mobilebert_kit.backend import tf

    mask = tf.cast(mask, tf.float32)[:, :, None]
    return tf.reduce_sum(tf.cast(hidden, tf.float32) * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)


def evaluate_transfer(teacher_encoder, student_encoder, dataset):
    """Feature-map loss, attention KL and sentence-embedding cosine of a student against its teacher.

    The encoders have equal hidden size, layers and heads; ``dataset`` holds batches of pre-training
    examples (``pretraining_dataset(..., repeat=False)``), measured with the original tokens put back at the
    masked positions. Returns ``feature_map`` and ``attention`` (layer means), ``feature_map_per_layer``,
    ``attention_per_layer`` (lists), ``embedding_cosine`` and ``examples``."""
    from mobilebert_kit.backend import tf
    from mobilebert_kit.models.encoder import INPUT_NAMES
    from mobilebert_kit.training.distill_step import transfer_model

    layers = list(range(student_encoder.config["num_layers"]))
    teacher_view = transfer_model(teacher_encoder, layers)
    student_view = transfer_model(student_encoder, layers)

    @tf.function(reduce_retracing=True)  # the last batch is smaller
    def measure(inputs):
        t = teacher_view(inputs, training=False)
        s = student_view(inputs, training=False)
        mask = inputs["attention_mask"]
        tokens = tf.reduce_sum(tf.cast(mask, tf.float32))
        fm = [losses.feature_map_loss(a, b, mask) * tokens for a, b in zip(t["hidden_states"], s["hidden_states"])]
        at = [losses.attention_kl_loss(a, b, mask) * tokens for a, b in zip(t["attention_probs"], s["attention_probs"])]
        e_t = tf.math.l2_normalize(mean_pool(t["hidden_states"][-1], mask), axis=-1)
        e_s = tf.math.l2_normalize(mean_pool(s["hidden_states"][-1], mask), axis=-1)
        return tf.stack(fm), tf.stack(at), tf.reduce_sum(e_t * e_s, axis=-1), tokens

    fm_sum = at_sum = 0.0
    cosines, tokens = [], 0.0
    for batch in dataset:
        inputs = {k: batch[k] for k in INPUT_NAMES}
        inputs["input_ids"] = _restore_masked(batch)
        fm, at, cos, n = measure(inputs)
        fm_sum = fm_sum + fm.numpy()
        at_sum = at_sum + at.numpy()
        cosines.extend(cos.numpy().tolist())
        tokens += float(n)
    fm_layers = (np.asarray(fm_sum) / max(tokens, 1.0)).tolist()
    at_layers = (np.asarray(at_sum) / max(tokens, 1.0)).tolist()
    return {
        "feature_map": float(np.mean(fm_layers)),
        "attention": float(np.mean(at_layers)),
        "feature_map_per_layer": fm_layers,
        "attention_per_layer": at_layers,
        "embedding_cosine": float(np.mean(cosines)) if cosines else float("nan"),
        "examples": len(cosines),
    }
