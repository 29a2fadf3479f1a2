"""Recovery after substitution: short feature-map distillation and the fidelity report.

NoNorm initialised from LayerNorm's affine part is not LayerNorm (it skips
the per-token centring and scaling), so a substituted model drifts from the
original. A few hundred steps of layer-wise distillation against the original
bring it back (MobileBERT Sec. 3: feature-map transfer, Eq. 1, plus the mean
and variance terms, Eq. 2, weights 100 / 5000 / 5 from Appendix D; the losses
are :mod:`mobilebert_kit.losses`). Every hidden state of the
substituted model (embedding output and each block) is pulled towards the
original's; heads are not trained.

The fidelity report compares the substituted model with the original on the
same held-out inputs (every 4th row, not trained on): per-layer hidden-state cosine at real tokens and, for the model's
outputs, cosine and (for logits) argmax agreement.
"""

import contextlib
from dataclasses import dataclass, field

import numpy as np

from mobilebert_kit import losses
from mobilebert_kit.backend import keras, tf
from mobilebert_kit.convert.export_model import LOGIT_OUTPUTS, output_names, token_outputs
from mobilebert_kit.convert.plan.input_set import InputSet
from mobilebert_kit.convert.prepare.rebuild import encoder_of, rebuild, weight_arrays
from mobilebert_kit.convert.prepare.recovery_run import fingerprint
from mobilebert_kit.convert.validation.compare import compare
from mobilebert_kit.models.api import assign_weights
from mobilebert_kit.utils.interrupt import InterruptFlag

LOSS_WEIGHTS = {"feature_map": 100.0, "mean": 5000.0, "variance": 5.0}


@dataclass
class FidelityReport:
    """How close a substituted model is to its original, before and after recovery."""

    before: dict
    after: dict = None
    steps: int = 0
    losses: list = field(default_factory=list)
    batch_size: int = None
    learning_rate: float = None

    def format_text(self):
        lines = ["fidelity to the original (cosine at real tokens; argmax agreement for logits):"]
        for title, stats in (("before recovery", self.before), (f"after {self.steps} recovery step(s)", self.after)):
            if stats is None:
                continue
            layers = " ".join(f"{c:.4f}" for c in stats["hidden_cosine"])
            outputs = ", ".join(
                f"{k} cos {v['cosine']:.4f}" + (f" argmax {v['argmax_agreement']:.3f}" if v["argmax_agreement"] is not None else "")
                for k, v in stats["outputs"].items()
            )
            lines.append(f"  {title}: hidden states [{layers}]; {outputs}")
        if self.losses:
            lines.append(f"  recovery loss {self.losses[0]:.4f} -> {self.losses[-1]:.4f}")
        return "\n".join(lines)

    def to_dict(self):
        return {"before": self.before, "after": self.after, "steps": self.steps, "batch_size": self.batch_size,
                "learning_rate": self.learning_rate, "losses": self.losses}


# Rows per forward pass of the fidelity report: the held-out quarter of 1,800 lines in one call held every
# layer's attention scores for all of them at once (issue 15's 10 GB recovery).
FIDELITY_ROWS = 32


def fidelity(original, substituted, inputs, rows=FIDELITY_ROWS):
    """``{"hidden_cosine": [per layer], "outputs": {name: {cosine, argmax_agreement}}}``.

    Runs both models ``rows`` at a time; hidden states are kept at real tokens only.
    """
    arrays = {k: np.asarray(v) for k, v in inputs.arrays.items()}
    mask = arrays["attention_mask"]
    views = [rebuild(encoder_of(m), output_hidden_states=True) for m in (original, substituted)]
    names = output_names(original)
    hidden = [[], []]
    outputs = [{name: [] for name in names}, {name: [] for name in names}]
    for start in range(0, len(mask), rows):
        batch = {k: v[start:start + rows] for k, v in arrays.items()}
        keep = batch["attention_mask"].astype(bool)
        for i, (view, model) in enumerate(zip(views, (original, substituted))):
            hidden[i].append([np.asarray(h)[keep] for h in view(batch, training=False)["hidden_states"]])
            result = model(batch, training=False)
            for name in names:
                outputs[i][name].append(np.asarray(result[name]))
    per_layer = [[np.concatenate(layer) for layer in zip(*model_hidden)] for model_hidden in hidden]
    cosines = [compare("h", s, o).cosine for o, s in zip(*per_layer)]
    report = {}
    for name in names:
        ref, ours = (np.concatenate(o[name]) for o in outputs)
        m = compare(name, ours, ref, mask if name in token_outputs(original) else None, logits=name in LOGIT_OUTPUTS)
        report[name] = {"cosine": m.cosine, "argmax_agreement": m.argmax_agreement}
    return {"hidden_cosine": cosines, "outputs": report}


def recover(original, substituted, inputs, steps=200, learning_rate=1e-4, batch_size=8, seed=0, log=None, run=None):
    """Distils ``substituted``'s encoder towards ``original``'s layer by layer, in place.

    Args:
        original (keras.Model): the source model (teacher; not modified).
        substituted (keras.Model): the substituted model (its encoder weights are updated).
        inputs (InputSet): training inputs (real text when possible).
        steps (int): optimisation steps (0: report only).
        learning_rate (float): Adam's learning rate at the first step; it decays linearly to 0 at the last
            (on all-MiniLM-L6-v2, 600 steps at batch 8: mean sentence-embedding cosine to the
            original 0.960 against 0.955 at a constant rate; benchmarks/RESULTS.md).
        batch_size (int): rows per step.
        seed (int): row sampling seed (each step's rows are keyed by ``(seed, step)``: :func:`step_rows`).
        log (callable | None): takes progress lines.
        run (RecoveryRun | None): keeps the recovery resumable in ``OUT/run`` (``mbk substitute``); None:
            nothing is written, and Ctrl-C stops at once.

    Returns:
        FidelityReport: fidelity before and after.

    Raises:
        KeyboardInterrupt: with ``run``, after SIGINT or SIGTERM, once the current step is checkpointed (its
            message says how to continue).

    Example:
        >>> report = recover(model, substitute(model, norm="no_norm").model, inputs, steps=100)  # doctest: +SKIP
    """
    train, held_out = _split(inputs)
    report = FidelityReport(before=fidelity(original, substituted, held_out), steps=int(steps))
    if not steps:
        return report
    teacher = rebuild(encoder_of(original), output_hidden_states=True)
    student = rebuild(encoder_of(substituted), output_hidden_states=True)
    # The loss reads the hidden states only: train the sub-model that computes them (the same layers,
    # so the student's weights move), not the pooler, which has no gradient and made TensorFlow warn
    # "Gradients do not exist for variables ['pooler/kernel:0', ...]" at every trace (issue 12).
    states = keras.Model(student.input, student.output["hidden_states"])
    report.batch_size, report.learning_rate = min(int(batch_size), train.count), float(learning_rate)  # rows per step
    optimizer = keras.optimizers.Adam(
        keras.optimizers.schedules.PolynomialDecay(float(learning_rate), int(steps), end_learning_rate=0.0))
    arrays = {k: np.asarray(v) for k, v in train.arrays.items()}
    first = 0
    if run is not None:
        checkpoint = tf.train.Checkpoint(student=student, optimizer=optimizer)
        first, report.losses = run.begin(checkpoint, optimizer, states.trainable_variables, int(steps),
                                         fingerprint(original, inputs), log)

    @tf.function
    def step(batch):
        target = teacher(batch, training=False)["hidden_states"]
        with tf.GradientTape() as tape:
            hidden = states(batch, training=False)
            mask = batch["attention_mask"]
            loss = 0.0
            for t, s in zip(target, hidden):
                loss += LOSS_WEIGHTS["feature_map"] * losses.feature_map_loss(t, s, mask)
                loss += LOSS_WEIGHTS["mean"] * losses.mean_loss(t, s, mask)
                loss += LOSS_WEIGHTS["variance"] * losses.variance_loss(t, s, mask)
            loss /= len(target)
        grads = tape.gradient(loss, states.trainable_variables)
        optimizer.apply_gradients(zip(grads, states.trainable_variables))
        return loss

    # Only a run that can checkpoint defers Ctrl-C to the end of the step: without one there is nothing to keep.
    with InterruptFlag() if run is not None else contextlib.nullcontext() as interrupt:
        for i in range(first, int(steps)):
            rows = step_rows(seed, i, train.count, report.batch_size)
            loss = float(step({k: tf.constant(v[rows]) for k, v in arrays.items()}))
            report.losses.append(loss)
            if log and (i == 0 or (i + 1) % max(1, steps // 5) == 0):
                log(f"recovery step {i + 1}/{steps}: loss {loss:.4f}")
            if run is not None and (stopped := run.after_step(i + 1, report.losses, interrupt)):
                raise KeyboardInterrupt(stopped)
    assign_weights(encoder_of(substituted), weight_arrays(student), source="recovered encoder")
    report.after = fidelity(original, substituted, held_out)
    return report


def step_rows(seed, step, count, batch_size):
    """The training rows of recovery step ``step``: ``batch_size`` distinct rows of ``count``, drawn by a
    generator keyed by ``(seed, step)``.

    A function of the seed and the step alone, not of the draws before it (as one generator for the whole
    run would be), so a recovery resumed at step ``k`` sees exactly the rows an uninterrupted one sees.
    """
    return np.random.default_rng([int(seed), int(step)]).choice(int(count), size=int(batch_size), replace=False)


def _split(inputs):
    """(training rows, held-out rows): every 4th row is held out for the fidelity report."""
    if inputs.count < 4:
        return inputs, inputs
    index = np.arange(inputs.count)
    held = index % 4 == 3
    pick = lambda rows: {k: v[rows] for k, v in inputs.arrays.items()}  # noqa: E731
    return (InputSet(pick(~held), inputs.description),
            InputSet(pick(held), f"{int(held.sum())} held-out row(s) of {inputs.description}"))
