"""Distiller: progressive knowledge transfer and pre-training distillation of a student.

Sun et al., 2020, Sec. 3: a run is a list of stages (see ``stages.py``);
each stage minimises the layer-transfer loss (Eq. 7) of its layers or the
pre-training distillation loss (Eq. 5) with a fresh optimizer and a
warm-up/decay schedule of its own.

Output directory::

    run.json          teacher, student, data and DistillConfig of the run
    progress.json     stage, step and loss history (rewritten at every checkpoint)
    checkpoints/      tf.train checkpoints: student, optimizer, data iterator, progress
    tensorboard/      scalars per stage
    student/          the distilled encoder (mbk.save) and the teacher's vocabulary files, when the run completes
    pretrainer/       the student with its MLM/NSP heads, likewise

Resuming: a checkpoint holds the student, the optimizer (moments, step,
loss scale) and the data iterator (its position and shuffle buffer), so a
resumed run continues with exactly the batches and updates an uninterrupted
run would have made. SIGINT (Ctrl-C) finishes the current step, checkpoints
it and stops: no completed step is lost. After SIGKILL or a crash the run
restarts from the last checkpoint (every ``checkpoint_every`` steps and at
every stage boundary) and replays the steps after it on the same batches.
Dropout masks are drawn afresh after a resume, so runs with dropout agree in
data order and schedule but not bit for bit; with dropout 0 they agree to
float rounding.
"""

import json
import signal
import time
from pathlib import Path

from mobilebert_kit.data.vocab import copy_tokenizer_files
from mobilebert_kit.errors import ConfigError, MbkError
from mobilebert_kit.training.distill_config import DistillConfig
from mobilebert_kit.training.stages import LAYER_TRANSFER, plan_stages, stage_variables
from mobilebert_kit.training.teacher_student import (
    build_student,
    check_compatible,
    copy_from_teacher,
    load_teacher,
    precision_policy,
    split_teacher,
)
from mobilebert_kit.utils.atomic import atomic_file
from mobilebert_kit.utils.structured import load_json

RUN_FILE = "run.json"
PROGRESS_FILE = "progress.json"
CHECKPOINT_DIR = "checkpoints"


def _block_outputs(encoder, layers):
    """KerasTensors ``(hidden_states, attention_probs)`` of the given blocks of ``encoder``'s own graph."""
    hidden, probs = [], []
    for i in layers:
        out, attn = encoder.get_layer(f"transformer_layer_{i}").get_output_at(0)
        hidden.append(out)
        probs.append(attn)
    return hidden, probs


def transfer_model(encoder, layers):
    """A model sharing ``encoder``'s weights that outputs the hidden states and attention of ``layers``.

    It computes only the blocks up to ``max(layers)``: a progressive stage at
    layer l does not pay for the layers above it.
    """
    from mobilebert_kit.backend import keras

    hidden, probs = _block_outputs(encoder, layers)
    return keras.Model(encoder.inputs, {"hidden_states": hidden, "attention_probs": probs})


class _InterruptFlag:
    """Turns the first SIGINT into a flag checked between steps; a second one interrupts at once."""

    def __init__(self):
        self.raised = False
        self._previous = None

    def __enter__(self):
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: leave SIGINT alone
            self._previous = None
        return self

    def _handle(self, signum, frame):
        if self.raised:
            raise KeyboardInterrupt
        self.raised = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


class Distiller:
    """Distils a teacher into a student: progressive transfer, then pre-training distillation.

    Args:
        teacher: checkpoint path (Hugging Face directory, TF1 checkpoint or
            ``mbk.save`` directory; an MLM head is used when present) or a callable
            returning a model (called inside the strategy scope).
        student: preset name, dict of Encoder arguments, saved-model directory,
            or a callable returning an encoder or pretrainer.
        data: pre-training data directory (``mbk pretraining-data``).
        out_dir: run directory (see the module docstring).
        config: a :class:`DistillConfig` (default options if None).
        strategy: any ``tf.distribute.Strategy`` (default: the current one).
        student_overrides: Encoder arguments replacing the student preset's.
        console: ``rich`` console for the plan and the progress bars.
        on_step_end: optional callable ``(stage_name, stage_step, global_step, metrics)``
            called after every step (metrics only on logging steps, else None).

    Example:
        >>> Distiller("teacher/", "mobilebert", "data/", "runs/mb",
        ...           DistillConfig(layer_steps=10000, pd_steps=500000)).run()  # doctest: +SKIP
    """

    def __init__(self, teacher, student, data, out_dir, config=None, strategy=None, student_overrides=None,
                 console=None, on_step_end=None):
        self.teacher_spec = teacher
        self.student_spec = student
        self.data = data
        self.out_dir = Path(out_dir)
        self.config = config or DistillConfig()
        self.strategy = strategy
        self.student_overrides = dict(student_overrides or {})
        self.on_step_end = on_step_end
        if console is None:
            from rich.console import Console

            console = Console()
        self.console = console

    # ------------------------------------------------------------------ setup
    def _describe(self, spec):
        if isinstance(spec, (str, Path)):
            return str(spec)
        if isinstance(spec, dict):
            return json.dumps(spec, sort_keys=True)
        return getattr(spec, "__name__", type(spec).__name__)

    def _run_record(self):
        return {
            "teacher": self._describe(self.teacher_spec),
            "student": self._describe(self.student_spec),
            "student_overrides": self.student_overrides,
            "data": str(self.data),
            "config": self.config.to_dict(),
        }

    def _check_out_dir(self, resume):
        run_file = self.out_dir / RUN_FILE
        if resume:
            if not run_file.is_file():
                raise MbkError(f"nothing to resume in {self.out_dir}: {RUN_FILE} is missing; start without --resume")
            stored = load_json(run_file, "the run record", expect=dict, error=MbkError,
                               fix="start a new run in another directory")
            if not isinstance(stored.get("config"), dict):
                raise MbkError(f"{run_file} has no config object; start a new run in another directory")
            differences = DistillConfig.from_dict(stored["config"]).differences(self.config)
            current = self._run_record()
            differences += [k for k in ("teacher", "student", "student_overrides", "data") if stored.get(k) != current[k]]
            if differences:
                raise MbkError(
                    f"{self.out_dir} was started with different {', '.join(differences)}; "
                    "resume with the same options (see run.json) or use a new --out"
                )
        elif run_file.is_file():
            raise MbkError(
                f"{self.out_dir} already holds a distillation run; pass --resume to continue it or choose a new --out"
            )

    def _setup(self):
        from mobilebert_kit.backend import keras, tf
        from mobilebert_kit.data.pretraining_dataset import pretraining_dataset

        cfg = self.config
        keras.utils.set_random_seed(cfg.seed)
        self.strategy = self.strategy or tf.distribute.get_strategy()
        self.replicas = self.strategy.num_replicas_in_sync
        if cfg.batch_size % self.replicas:
            raise ConfigError(
                f"batch_size {cfg.batch_size} does not split over {self.replicas} replicas; use a multiple of {self.replicas}"
            )
        with self.strategy.scope(), precision_policy(cfg.precision):
            teacher = self.teacher_spec() if callable(self.teacher_spec) else load_teacher(self.teacher_spec, cfg.precision)
            student_spec = self.student_spec() if callable(self.student_spec) else self.student_spec
            self.student = build_student(student_spec, cfg.precision, self.student_overrides)
        self.teacher = teacher
        self.teacher_encoder, self.teacher_mlm = split_teacher(teacher)
        self.student_encoder = self.student.encoder
        check_compatible(self.teacher_encoder.config, self.student_encoder.config)
        self.copy_report = {"copied": [], "skipped": {}, "embeddings_complete": False}
        if cfg.copy_from_teacher:
            self.copy_report = copy_from_teacher(teacher, self.student)
        self.num_layers = self.student_encoder.config["num_layers"]
        self.stages = plan_stages(cfg, self.num_layers, self.copy_report["embeddings_complete"])
        self.dataset, self.data_meta = pretraining_dataset(
            self.data, cfg.batch_size, seed=cfg.seed, shuffle_buffer=cfg.shuffle_buffer
        )
        seq_len = int(self.data_meta["seq_len"])
        for who, enc in (("teacher", self.teacher_encoder), ("student", self.student_encoder)):
            if seq_len > enc.config["max_position_embeddings"]:
                raise ConfigError(
                    f"the data has sequences of {seq_len} tokens but the {who} has only "
                    f"{enc.config['max_position_embeddings']} positions; create data with a shorter --seq-len"
                )
        if self.data_meta.get("vocab_size") not in (None, self.student_encoder.config["vocab_size"]):
            raise ConfigError(
                f"the data was tokenized with a vocabulary of {self.data_meta['vocab_size']} tokens but the models have "
                f"{self.student_encoder.config['vocab_size']}; tokenize with the teacher's vocab.txt"
            )
        self.iterator = iter(self.dataset)
        self.progress = tf.Module()
        self.progress.stage = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.progress.step = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.progress.global_step = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.summary_writer = tf.summary.create_file_writer(str(self.out_dir / "tensorboard"))

    def _print_plan(self, resume_point):
        cfg = self.config
        t, s = self.teacher_encoder.config, self.student_encoder.config
        out = self.console.print
        out(f"[bold]mbk distill[/bold] -> {self.out_dir}", highlight=False, soft_wrap=True)
        out(
            f"  teacher {self._describe(self.teacher_spec)}: {t['num_layers']} layers, hidden {t['hidden_size']}, "
            f"{t['num_heads']} heads, MLM head: {'yes' if self.teacher_mlm is not None else 'no (MLM-KD skipped)'}",
            highlight=False, soft_wrap=True,
        )
        out(
            f"  student {self._describe(self.student_spec)}: {s['num_layers']} layers, hidden {s['hidden_size']}, "
            f"intra {s['intra_bottleneck_size'] or s['hidden_size']}, {s['normalization_type']}/{s['hidden_act']}",
            highlight=False, soft_wrap=True,
        )
        if cfg.copy_from_teacher:
            out(
                f"  copied from the teacher: {len(self.copy_report['copied'])} weight(s); skipped "
                f"{len(self.copy_report['skipped'])}; embeddings "
                f"{'frozen as a lower layer' if self.copy_report['embeddings_complete'] else 'trained with layer 0'}",
                highlight=False, soft_wrap=True,
            )
        out(
            f"  data {self.data}: {self.data_meta['num_examples']} examples of {self.data_meta['seq_len']} tokens; "
            f"batch {cfg.batch_size} over {self.replicas} replica(s); {cfg.precision}; {cfg.optimizer} "
            f"lr {cfg.learning_rate:g}",
            highlight=False, soft_wrap=True,
        )
        total = sum(st.steps for st in self.stages)
        names = ", ".join(f"{st.name} ({st.steps})" for st in self.stages)
        out(f"  {len(self.stages)} stage(s), {total} steps: {names}", highlight=False, soft_wrap=True)
        if resume_point is not None:
            stage, step = resume_point
            where = self.stages[stage].name if stage < len(self.stages) else "the end"
            out(f"  resuming at {where}, step {step}", highlight=False, soft_wrap=True)

    # -------------------------------------------------------------- optimizer
    def _make_optimizer(self, stage, trained, tuned):
        from mobilebert_kit.backend import keras
        from mobilebert_kit.training.lamb import Lamb
        from mobilebert_kit.training.warmup_decay import WarmupDecay

        cfg = self.config
        peak = cfg.learning_rate
        if stage.kind != LAYER_TRANSFER and cfg.pd_learning_rate is not None:
            peak = cfg.pd_learning_rate
        schedule = WarmupDecay(
            peak, total_steps=stage.steps, warmup_steps=int(round(cfg.warmup_proportion * stage.steps)), decay=cfg.decay
        )
        multipliers = {}
        if tuned:
            scopes = sorted(set(stage.tune))
            multipliers = {f"(^|/)({'|'.join(scopes)})/": stage.tune_multiplier}
        optimizer = Lamb(
            learning_rate=schedule,
            weight_decay_rate=cfg.weight_decay,
            use_trust_ratio=cfg.optimizer == "lamb",
            learning_rate_multipliers=multipliers,
            global_clipnorm=cfg.clip_norm,
        )
        if cfg.precision == "mixed_float16":
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
        variables = [v for _, v in trained] + [v for _, v in tuned]
        optimizer.build(variables)
        return optimizer, schedule, variables

    # ------------------------------------------------------------- step maker
    def _make_step(self, stage, optimizer, variables):
        from mobilebert_kit.backend import keras, tf
        from mobilebert_kit.models.encoder import INPUT_NAMES
        from mobilebert_kit.training import losses

        cfg = self.config
        strategy = self.strategy
        scaled = isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer)
        if stage.kind == LAYER_TRANSFER:
            student_view = transfer_model(self.student_encoder, stage.layers)
            teacher_view = transfer_model(self.teacher_encoder, stage.layers)
        mlm_layer = self.student.get_layer("mlm")
        nsp_layer = self.student.get_layer("nsp")

        def count(ctx, x):
            return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.reduce_sum(tf.cast(x, tf.float32)))

        def transfer_loss(batch, ctx):
            inputs = {k: batch[k] for k in INPUT_NAMES}
            mask = inputs["attention_mask"]
            tokens = count(ctx, mask)
            target = teacher_view(inputs, training=False)
            pred = student_view(inputs, training=True)
            totals, sums = [], {}
            for i in range(len(stage.layers)):
                total, terms = losses.layer_transfer_loss(
                    target["hidden_states"][i], pred["hidden_states"][i],
                    target["attention_probs"][i], pred["attention_probs"][i],
                    mask, weights=cfg.weights, normalizer=tokens,
                )
                totals.append(total)
                for k, v in terms.items():
                    sums[k] = sums.get(k, 0.0) + v
            n = float(len(stage.layers))
            return tf.add_n(totals) / n, {k: v / n for k, v in sums.items()}

        def pd_loss(batch, ctx):
            inputs = {k: batch[k] for k in INPUT_NAMES}
            positions = batch["masked_lm_positions"]
            weights = batch["masked_lm_weights"]
            predictions = count(ctx, weights)
            examples = count(ctx, tf.ones_like(batch["next_sentence_labels"]))
            teacher_logits = None
            if self.teacher_mlm is not None:
                t_seq = self.teacher_encoder(inputs, training=False)["sequence_output"]
                teacher_logits = self.teacher_mlm(tf.gather(t_seq, positions, batch_dims=1), training=False)
            out = self.student_encoder(inputs, training=True)
            s_logits = mlm_layer(tf.gather(out["sequence_output"], positions, batch_dims=1), training=True)
            s_nsp = nsp_layer(out["pooled_output"], training=True)
            return losses.pretraining_distillation_loss(
                batch["masked_lm_ids"], s_logits, weights, batch["next_sentence_labels"], s_nsp,
                teacher_mlm_logits=teacher_logits, alpha=cfg.alpha,
                prediction_normalizer=predictions, example_normalizer=examples,
            )

        compute = transfer_loss if stage.kind == LAYER_TRANSFER else pd_loss

        def replica_step(batch):
            ctx = tf.distribute.get_replica_context()
            with tf.GradientTape() as tape:
                loss, terms = compute(batch, ctx)
                objective = optimizer.get_scaled_loss(loss) if scaled else loss
            grads = tape.gradient(objective, variables)
            if scaled:
                grads = optimizer.get_unscaled_gradients(grads)
            optimizer.apply_gradients(zip(grads, variables))
            return {"loss": loss, **terms}

        # autograph=False: the step has no tensor-dependent Python control flow, and
        # converting every Keras call made tracing ~2x slower (measured on tiny models).
        # autograph=False: the step has no tensor-dependent Python control flow to convert.
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

    def _distribute(self, batch):
        n = self.replicas
        if n == 1:
            return batch
        per = self.config.batch_size // n

        def value_fn(ctx):
            i = ctx.replica_id_in_sync_group
            return {k: v[i * per : (i + 1) * per] for k, v in batch.items()}

        return self.strategy.experimental_distribute_values_from_function(value_fn)

    # ------------------------------------------------------------ checkpoints
    def _checkpoint(self, optimizer=None):
        from mobilebert_kit.backend import tf

        parts = {"model": self.student, "data": self.iterator, "progress": self.progress}
        if optimizer is not None:
            parts["optimizer"] = optimizer
        return tf.train.Checkpoint(**parts)

    def _latest(self):
        from mobilebert_kit.backend import tf

        return tf.train.latest_checkpoint(str(self.out_dir / CHECKPOINT_DIR))

    def _read_progress(self, path):
        from mobilebert_kit.backend import tf

        reader = tf.train.load_checkpoint(path)
        names = {n for n in reader.get_variable_to_shape_map()}

        def value(field):
            key = f"progress/{field}/.ATTRIBUTES/VARIABLE_VALUE"
            if key not in names:
                raise MbkError(f"checkpoint {path} has no progress record; it was not written by mbk distill")
            return int(reader.get_tensor(key))

        return value("stage"), value("step"), value("global_step")

    def _save(self, manager, history):
        manager.save(checkpoint_number=int(self.progress.global_step.numpy()))
        state = {
            "stage": int(self.progress.stage.numpy()),
            "stage_name": self.stages[int(self.progress.stage.numpy())].name
            if int(self.progress.stage.numpy()) < len(self.stages) else "complete",
            "stage_step": int(self.progress.step.numpy()),
            "global_step": int(self.progress.global_step.numpy()),
            "checkpoint": manager.latest_checkpoint,
            "history": history,
        }
        with atomic_file(self.out_dir / PROGRESS_FILE, "w") as f:
            f.write(json.dumps(state, indent=2) + "\n")

    # ------------------------------------------------------ benchmark access
    def prepare(self):
        """Builds teacher, student, stage plan and data without training (benchmarks, inspection)."""
        if not hasattr(self, "stages"):
            self._setup()
        return self

    def stage_step(self, stage):
        """``(step, variables)`` of ``stage`` with a fresh optimizer: ``step(batch)`` trains once, returns metrics."""
        from mobilebert_kit.models.api import named_weights

        self.prepare()
        trained, tuned = stage_variables(stage, named_weights(self.student))
        with self.strategy.scope():
            optimizer, _, variables = self._make_optimizer(stage, trained, tuned)
        step = self._make_step(stage, optimizer, variables)
        return (lambda batch: step(self._distribute(batch))), variables

    # -------------------------------------------------------------------- run
    def run(self, resume=False):
        """Runs (or resumes) every stage; returns a summary dict.

        Returns:
            ``{"student": path, "pretrainer": path, "history": [...], "global_step": n}``.

        Raises:
            KeyboardInterrupt: after SIGINT, once the current step is checkpointed.
            MbkError / ConfigError: bad inputs, a mismatched resume.
        """
        from mobilebert_kit.backend import tf

        self._check_out_dir(resume)
        self._setup()
        start_stage, start_step, history = 0, 0, []
        latest = self._latest() if resume else None
        if resume and latest is None:
            start_stage = 0  # run.json but no checkpoint yet: start over
        elif latest is not None:
            start_stage, start_step, _ = self._read_progress(latest)
            try:
                history = json.loads((self.out_dir / PROGRESS_FILE).read_text()).get("history", [])
            except (OSError, ValueError):
                history = []
        self._print_plan((start_stage, start_step) if resume else None)
        if not resume:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            with atomic_file(self.out_dir / RUN_FILE, "w") as f:
                f.write(json.dumps(self._run_record(), indent=2) + "\n")

        from mobilebert_kit.models.api import named_weights

        if latest is not None and start_step == 0:
            # A stage boundary (or a finished run): the saved optimizer belongs to the previous
            # stage, so restore everything but it; the next stage starts a fresh optimizer.
            status = self._checkpoint().restore(latest)
            status.assert_existing_objects_matched()
            status.expect_partial()
        named = named_weights(self.student)
        with _InterruptFlag() as interrupt:
            for index in range(start_stage, len(self.stages)):
                stage = self.stages[index]
                trained, tuned = stage_variables(stage, named)
                with self.strategy.scope():
                    optimizer, schedule, variables = self._make_optimizer(stage, trained, tuned)
                checkpoint = self._checkpoint(optimizer)
                manager = tf.train.CheckpointManager(
                    checkpoint, str(self.out_dir / CHECKPOINT_DIR), max_to_keep=self.config.keep_checkpoints
                )
                first = 0
                if latest is not None and index == start_stage and start_step > 0:
                    status = checkpoint.restore(latest)  # mid-stage: the optimizer too
                    status.assert_existing_objects_matched()
                    status.expect_partial()
                    first = start_step
                self.progress.stage.assign(index)
                self.progress.step.assign(first)
                step_fn = self._make_step(stage, optimizer, variables)
                history = self._run_stage(stage, index, first, step_fn, schedule, optimizer, manager, interrupt, history)
            self.progress.stage.assign(len(self.stages))
            self.progress.step.assign(0)
        return self._finish(history)

    def _run_stage(self, stage, index, first, step_fn, schedule, optimizer, manager, interrupt, history):
        from mobilebert_kit.training.stage_progress import StageProgress
        from mobilebert_kit.training.summaries import write_scalars

        cfg = self.config
        last = {}
        started = time.perf_counter()
        with StageProgress(self.console, stage.name, stage.steps, start=first, plain_every=cfg.log_every) as bar:
            for step in range(first, stage.steps):
                batch = next(self.iterator)
                metrics = step_fn(self._distribute(batch))
                self.progress.step.assign(step + 1)
                self.progress.global_step.assign_add(1)
                global_step = int(self.progress.global_step.numpy())
                logging = (step + 1) % cfg.log_every == 0 or step + 1 == stage.steps
                values = None
                if logging:
                    values = {k: float(v.numpy()) for k, v in metrics.items()}
                    if not all(v == v for v in values.values()):
                        raise MbkError(
                            f"the loss became NaN at step {step + 1} of {stage.name}; lower --learning-rate "
                            "or use float32/mixed_bfloat16 (resume from the last checkpoint with --resume)"
                        )
                    last = values
                    scalars = {f"{stage.name}/{k}": v for k, v in values.items()}
                    scalars["learning_rate"] = float(schedule(step))
                    write_scalars(self.summary_writer, scalars, global_step)
                    bar.update(1, values)
                else:
                    bar.update(1)
                if self.on_step_end is not None:
                    self.on_step_end(stage.name, step + 1, global_step, values)
                done = step + 1 == stage.steps
                if interrupt.raised and not done:
                    self._save(manager, history)
                    self.console.print(
                        f"interrupted at step {step + 1} of {stage.name}; checkpoint saved. "
                        f"Continue with the same command and --resume",
                        highlight=False, soft_wrap=True,
                    )
                    raise KeyboardInterrupt
                if not done and global_step % cfg.checkpoint_every == 0:
                    self._save(manager, history)
            rate = bar.steps_per_second()
        history = history + [
            {"stage": stage.name, "steps": stage.steps, "final": last, "steps_per_second": rate,
             "seconds": time.perf_counter() - started}
        ]
        # Stage boundary: the next stage starts from this checkpoint with a fresh optimizer.
        self.progress.stage.assign(index + 1)
        self.progress.step.assign(0)
        self._save(manager, history)
        self.summary_writer.flush()
        if interrupt.raised:
            self.console.print(f"interrupted after {stage.name}; checkpoint saved. Continue with --resume", highlight=False, soft_wrap=True)
            raise KeyboardInterrupt
        return history

    def _copy_vocabulary(self, *targets):
        """Copies the teacher's tokenizer files next to the student: fine-tuning needs the same vocabulary."""
        if not isinstance(self.teacher_spec, (str, Path)) or not Path(self.teacher_spec).is_dir():
            return []
        names = []
        for target in targets:
            names = copy_tokenizer_files(self.teacher_spec, target)
        return names

    def _finish(self, history):
        import mobilebert_kit as mbk

        student_dir = self.out_dir / "student"
        pretrainer_dir = self.out_dir / "pretrainer"
        mbk.save(self.student_encoder, student_dir)
        mbk.save(self.student, pretrainer_dir)
        copied = self._copy_vocabulary(student_dir, pretrainer_dir)
        state = {"stage": len(self.stages), "stage_name": "complete", "complete": True,
                 "global_step": int(self.progress.global_step.numpy()), "history": history}
        with atomic_file(self.out_dir / PROGRESS_FILE, "w") as f:
            f.write(json.dumps(state, indent=2) + "\n")
        self.console.print(
            f"done: student saved to {student_dir} (with MLM/NSP heads: {pretrainer_dir})"
            + (f"; teacher's {', '.join(copied)} copied alongside" if copied else ""),
            highlight=False, soft_wrap=True,
        )
        return {"student": str(student_dir), "pretrainer": str(pretrainer_dir), "history": history,
                "global_step": state["global_step"]}
