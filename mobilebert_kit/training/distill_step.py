"""One distillation step, built from explicit parts: the stage's optimizer and its training step.

Pure builders: everything a step needs (models, stage, config, strategy) is
an argument, nothing is read from a run, so a benchmark or a test can build
the step of any stage without a run directory (``Distiller.stage_step``).
The losses are Eq. 7 (layer transfer, averaged over the stage's layers) and
Eq. 5 (pre-training distillation) of Sun et al., 2020, from ``losses.py``.
"""

import zlib

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.layers.keyed_dropout import dropout_key
from mobilebert_kit.models.encoder import INPUT_NAMES
from mobilebert_kit import losses
from mobilebert_kit.training.lamb import Lamb
from mobilebert_kit.training.stages import LAYER_TRANSFER
from mobilebert_kit.training.strategies import cpu_only
from mobilebert_kit.training.teacher_cache import attention_key, hidden_key
from mobilebert_kit.training.warmup_decay import WarmupDecay


def transfer_model(encoder, layers):
    """A model sharing a functional ``encoder``'s weights that outputs ``{"hidden_states": [...],
    "attention_probs": [...]}`` of the blocks ``layers``, one entry per layer.

    It computes only the blocks up to ``max(layers)``: a progressive stage at
    layer l does not pay for the layers above it."""
    # Each block's (hidden state, attention probabilities) KerasTensors in the encoder's own graph.
    outputs = [encoder.get_layer(f"transformer_layer_{i}").get_output_at(0) for i in layers]
    return keras.Model(encoder.inputs, {"hidden_states": [out for out, _ in outputs],
                                        "attention_probs": [attn for _, attn in outputs]})


def make_optimizer(config, stage, trained, tuned):
    """A fresh optimizer for ``stage``: LAMB (or AdamW) on its own warm-up/decay schedule.

    ``trained`` and ``tuned`` are ``(path, variable)`` pairs at the full rate and at the stage's
    ``tune_multiplier``. Returns ``(optimizer, schedule, variables)``, the optimizer built on ``variables``
    (wrapped in a ``LossScaleOptimizer`` for mixed_float16)."""
    peak = config.learning_rate
    if stage.kind != LAYER_TRANSFER and config.pd_learning_rate is not None:
        peak = config.pd_learning_rate
    schedule = WarmupDecay(
        peak, total_steps=stage.steps, warmup_steps=int(round(config.warmup_proportion * stage.steps)),
        decay=config.decay,
    )
    multipliers = {}
    if tuned:
        scopes = sorted(set(stage.tune))
        multipliers = {f"(^|/)({'|'.join(scopes)})/": stage.tune_multiplier}
    optimizer = Lamb(
        learning_rate=schedule,
        weight_decay_rate=config.weight_decay,
        use_trust_ratio=config.optimizer == "lamb",
        learning_rate_multipliers=multipliers,
        global_clipnorm=config.clip_norm,
    )
    if config.precision == "mixed_float16":
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    variables = [v for _, v in trained] + [v for _, v in tuned]
    optimizer.build(variables)
    return optimizer, schedule, variables


def build_step(config, stage, strategy, teacher_encoder, teacher_mlm, student, optimizer, variables,
               cached_teacher=False):
    """The training step of ``stage``: ``step(batch)`` updates ``variables`` once and returns the metrics.

    ``teacher_mlm`` None means no MLM-KD term; ``student`` is the pretrainer with its ``mlm`` and ``nsp``
    heads. With ``cached_teacher`` a layer-transfer batch carries the teacher's outputs of the stage's layers
    (``TeacherCache.attach``), read instead of running the teacher. The step returns ``{"loss", <loss
    terms>[, "loss_scale"]}``, each the global value."""
    scaled = isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer)
    student_encoder = student.encoder
    if stage.kind == LAYER_TRANSFER:
        student_view = transfer_model(student_encoder, stage.layers)
        teacher_view = transfer_model(teacher_encoder, stage.layers)
    mlm_layer = student.get_layer("mlm")
    nsp_layer = student.get_layer("nsp")

    def count(ctx, x):
        return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.reduce_sum(tf.cast(x, tf.float32)))

    def normalizers(batch, ctx):
        # Global counts (all-reduced) are taken before the XLA-compiled part: collectives stay outside it.
        if stage.kind == LAYER_TRANSFER:
            return {"tokens": count(ctx, batch["attention_mask"])}
        return {"predictions": count(ctx, batch["masked_lm_weights"]),
                "examples": count(ctx, tf.ones_like(batch["next_sentence_labels"]))}

    def transfer_loss(batch, norms):
        inputs = {k: batch[k] for k in INPUT_NAMES}
        mask = inputs["attention_mask"]
        if cached_teacher:
            target = {"hidden_states": [batch[hidden_key(l)] for l in stage.layers],
                      "attention_probs": [batch[attention_key(l)] for l in stage.layers]}
        else:
            target = teacher_view(inputs, training=False)
        pred = student_view(inputs, training=True)
        totals, sums = [], {}
        for i in range(len(stage.layers)):
            total, terms = losses.layer_transfer_loss(
                target["hidden_states"][i], pred["hidden_states"][i],
                target["attention_probs"][i], pred["attention_probs"][i],
                mask, weights=config.weights, normalizer=norms["tokens"],
            )
            totals.append(total)
            for k, v in terms.items():
                sums[k] = sums.get(k, 0.0) + v
        n = float(len(stage.layers))
        return tf.add_n(totals) / n, {k: v / n for k, v in sums.items()}

    def pd_loss(batch, norms):
        inputs = {k: batch[k] for k in INPUT_NAMES}
        positions = batch["masked_lm_positions"]
        teacher_logits = None
        if teacher_mlm is not None:
            t_seq = teacher_encoder(inputs, training=False)["sequence_output"]
            teacher_logits = teacher_mlm(tf.gather(t_seq, positions, batch_dims=1), training=False)
        out = student_encoder(inputs, training=True)
        s_logits = mlm_layer(tf.gather(out["sequence_output"], positions, batch_dims=1), training=True)
        s_nsp = nsp_layer(out["pooled_output"], training=True)
        return losses.pretraining_distillation_loss(
            batch["masked_lm_ids"], s_logits, batch["masked_lm_weights"], batch["next_sentence_labels"], s_nsp,
            teacher_mlm_logits=teacher_logits, alpha=config.alpha,
            prediction_normalizer=norms["predictions"], example_normalizer=norms["examples"],
        )

    compute = transfer_loss if stage.kind == LAYER_TRANSFER else pd_loss

    # The student's dropout masks are keyed by (seed, stage, step) and the global row
    # (layers/keyed_dropout.py): any split of the batch over replicas or workers, and a
    # resumed run, draw the masks of an uninterrupted one-device run.
    stage_salt = zlib.crc32(f"{config.seed}/{stage.name}".encode()) & 0xFFFFFF  # x 2^32 + step stays in int64

    def gradients(batch, norms, step_key, offset):
        rows = batch["input_ids"].shape[0]  # static: XLA needs the mask's shape at compile time
        if rows is None:
            rows = tf.shape(batch["input_ids"])[0]
        replicas = tf.distribute.get_replica_context().num_replicas_in_sync
        with tf.GradientTape() as tape, dropout_key(step_key, rows * replicas, offset * rows):
            loss, terms = compute(batch, norms)
            objective = optimizer.get_scaled_loss(loss) if scaled else loss
        return loss, terms, tape.gradient(objective, variables)

    if config.jit_for(stage.steps, cpu_only=cpu_only()):
        gradients = tf.function(gradients, jit_compile=True, autograph=False)

    def replica_step(batch):
        ctx = tf.distribute.get_replica_context()
        step_key = tf.cast(optimizer.iterations, tf.int64) + tf.constant(stage_salt << 32, tf.int64)
        replica = tf.cast(ctx.replica_id_in_sync_group, tf.int32)
        loss, terms, grads = gradients(batch, normalizers(batch, ctx), step_key, replica)
        if scaled:
            grads = optimizer.get_unscaled_gradients(grads)
        optimizer.apply_gradients(zip(grads, variables))
        return {"loss": loss, **terms}

    # autograph=False: the step has no tensor-dependent Python control flow, and
    # converting every Keras call made tracing ~2x slower (measured on tiny models).
    @tf.function(autograph=False)
    def step(batch):
        per_replica = strategy.run(replica_step, args=(batch,))
        # Every replica's value is its share of the global mean: the sum is the global value.
        metrics = {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in per_replica.items()}
        if scaled:
            # Dynamic loss scaling skips steps whose gradients overflow and halves the scale;
            # the first steps of a float16 run usually do.
            metrics["loss_scale"] = tf.cast(optimizer.loss_scale, tf.float32)
        return metrics

    return step


def split_over_replicas(batch, strategy, batch_size):
    """``batch`` (the global batch of ``batch_size`` rows, a multiple of the replica count) as one slice per
    replica of ``strategy``: itself with one replica, else a distributed value of ``batch_size / replicas`` rows."""
    n = strategy.num_replicas_in_sync
    if n == 1:
        return batch
    per = batch_size // n

    def value_fn(ctx):
        i = ctx.replica_id_in_sync_group
        return {k: v[i * per : (i + 1) * per] for k, v in batch.items()}

    return strategy.experimental_distribute_values_from_function(value_fn)
