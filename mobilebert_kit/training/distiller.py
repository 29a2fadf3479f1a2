"""Distiller: progressive knowledge transfer and pre-training distillation of a student.

Sun et al., 2020, Sec. 3: a run is a list of stages (see ``stages.py``);
each stage minimises the layer-transfer loss (Eq. 7) of its layers or the
pre-training distillation loss (Eq. 5) with a fresh optimizer and a
warm-up/decay schedule of its own.

The output directory (``run.json``, ``progress.json``, ``checkpoints/``, ``tensorboard/``, ``teacher_cache/``,
``student/``, ``pretrainer/``), resuming, the keyed dropout masks and several workers: docs/distillation.md,
"Checkpoints and resume" and "Several workers". ``run_directory.RunDirectory`` keeps the run's files;
``distill_step`` builds the step.
"""

import contextlib
import json
import re
import shutil
import time
from pathlib import Path

from rich.console import Console

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.checkpoints.checkpoint_files import checkpoint_writes
from mobilebert_kit.data.pretraining_dataset import pretraining_dataset
from mobilebert_kit.data.vocab import copy_tokenizer_files, read_tokenizer_files
from mobilebert_kit.sources.pooling import carry_pooling
from mobilebert_kit.errors import ConfigError, DataError, TrainingError, first_line
from mobilebert_kit.models.api import max_positions, named_weights, save
from mobilebert_kit.training.distill_config import DistillConfig
from mobilebert_kit.training.interrupt import PEER_LOST, peer_lost_error
from mobilebert_kit.training.distill_step import build_step, make_optimizer, split_over_replicas, transfer_model
from mobilebert_kit.training.run_directory import DISTILL_RUN, RUN_FILE, RunDirectory
from mobilebert_kit.training.stage_progress import StageProgress
from mobilebert_kit.training.stages import LAYER_TRANSFER, plan_stages, stage_variables
from mobilebert_kit.training.strategies import check_same_run, is_chief, worker_label
from mobilebert_kit.training.summaries import write_scalars
from mobilebert_kit.training.teacher_cache import TeacherCache, cache_bytes, decide, free_bytes
from mobilebert_kit.training.teacher_student import (
    build_student,
    check_compatible,
    copy_from_teacher,
    load_teacher,
    precision_policy,
    split_teacher,
)
from mobilebert_kit.utils.atomic import EMPTY, NEW, OVERWRITE, foreign_set_aside, relist, remove_path
from mobilebert_kit.utils.interrupt import InterruptFlag
from mobilebert_kit.utils.run_state import data_fingerprint
from mobilebert_kit.utils.scratch import new_scratch
from mobilebert_kit.utils.terminal import escape

__all__ = ["Distiller", "RUN_FILE"]  # RUN_FILE: mbk distill reads a run's record before resuming it


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
        on_setup_end: optional callable ``(distiller)`` called by :meth:`run` once teacher,
            student, stage plan and data are built, before any checkpoint is restored or
            step taken (tests snapshot the initial weights there).

    Example:
        >>> Distiller("teacher/", "mobilebert", "data/", "runs/mb",
        ...           DistillConfig(layer_steps=10000, pd_steps=500000)).run()  # doctest: +SKIP
    """

    def __init__(self, teacher, student, data, out_dir, config=None, strategy=None, student_overrides=None,
                 console=None, on_step_end=None, on_setup_end=None):
        self.teacher_spec = teacher
        self.student_spec = student
        self.data = data
        self.out_dir = Path(out_dir)
        self.run_dir = RunDirectory(self.out_dir)
        self.config = config or DistillConfig()
        self.strategy = strategy
        self.student_overrides = dict(student_overrides or {})
        self.on_step_end = on_step_end
        self.on_setup_end = on_setup_end
        self.teacher_cache = None
        self._cache_dir = None
        self.console = console if console is not None else Console()

    def _say(self, text):
        self.console.print(text, highlight=False, soft_wrap=True)

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
            "data_fingerprint": data_fingerprint(self.data),
            "config": self.config.to_dict(),
        }

    def _sources(self):
        # The student too: --student DIR --out DIR --overwrite read the user's model, then deleted it.
        return [p for p in (self.teacher_spec, self.student_spec, self.data) if isinstance(p, (str, Path))]

    def _place(self):
        """Resolves the strategy and whether this process is the one that writes ``out_dir``."""
        self.strategy = self.strategy or tf.distribute.get_strategy()
        self.chief = is_chief(self.strategy)
        self.worker = worker_label(self.strategy)

    def _setup(self):
        cfg = self.config
        keras.utils.set_random_seed(cfg.seed)
        self._place()
        self.replicas = self.strategy.num_replicas_in_sync
        if cfg.batch_size % self.replicas:
            raise ConfigError(
                f"batch_size {cfg.batch_size} does not split over {self.replicas} replicas; use a multiple of {self.replicas}"
            )
        with self.strategy.scope(), precision_policy(cfg.precision):
            teacher = self.teacher_spec() if callable(self.teacher_spec) else load_teacher(self.teacher_spec, cfg.precision)
            student_spec = self.student_spec() if callable(self.student_spec) else self.student_spec
            self.student = build_student(student_spec, cfg.precision, self.student_overrides, seed=cfg.seed)
        self.teacher = teacher
        self.teacher_encoder, self.teacher_mlm = split_teacher(teacher)
        self.student_encoder = self.student.encoder
        check_compatible(self.teacher_encoder.config, self.student_encoder.config)
        self.copy_report = (copy_from_teacher(teacher, self.student) if cfg.copy_from_teacher
                            else {"copied": [], "skipped": {}, "embeddings_complete": False})
        self.num_layers = self.student_encoder.config["num_layers"]
        self.stages = plan_stages(cfg, self.num_layers, self.copy_report["embeddings_complete"])
        self.dataset, self.data_meta = pretraining_dataset(
            self.data, cfg.batch_size, seed=cfg.seed, shuffle_buffer=cfg.shuffle_buffer
        )
        seq_len = int(self.data_meta["seq_len"])
        for who, enc in (("teacher", self.teacher_encoder), ("student", self.student_encoder)):
            if seq_len > max_positions(enc.config):
                raise ConfigError(
                    f"the data has sequences of {seq_len} tokens but the {who} has only "
                    f"{max_positions(enc.config)} positions; create data with a shorter --seq-len"
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

    def _print_plan(self, resume_point):
        cfg = self.config
        t, s = self.teacher_encoder.config, self.student_encoder.config
        out = self._say
        role = f" ({self.worker}{', the chief: it writes the run' if self.chief else ''})" if self.worker else ""
        out(f"[bold]mbk distill[/bold] -> {escape(self.out_dir, markup=True)}{role}")
        out(f"  teacher {escape(self._describe(self.teacher_spec), markup=True)}: {t['num_layers']} layers, "
            f"hidden {t['hidden_size']}, "
            f"{t['num_heads']} heads, MLM head: {'yes' if self.teacher_mlm is not None else 'no (MLM-KD skipped)'}")
        out(f"  student {escape(self._describe(self.student_spec), markup=True)}: {s['num_layers']} layers, "
            f"hidden {s['hidden_size']}, "
            f"intra {s['intra_bottleneck_size'] or s['hidden_size']}, {s['normalization_type']}/{s['hidden_act']}")
        if cfg.copy_from_teacher:
            out(f"  copied from the teacher: {len(self.copy_report['copied'])} weight(s); skipped "
                f"{len(self.copy_report['skipped'])}; embeddings "
                f"{'frozen as a lower layer' if self.copy_report['embeddings_complete'] else 'trained with layer 0'}")
        out(f"  data {escape(self.data, markup=True)}: {self.data_meta['num_examples']} examples of "
            f"{self.data_meta['seq_len']} tokens; "
            f"batch {cfg.batch_size} over {self.replicas} replica(s); {cfg.precision}; {cfg.optimizer} "
            f"lr {cfg.learning_rate:g}")
        total = sum(st.steps for st in self.stages)
        names = ", ".join(f"{st.name} ({st.steps})" for st in self.stages)
        out(f"  {len(self.stages)} stage(s), {total} steps: {names}")
        if resume_point is not None:
            stage, step = resume_point
            where = self.stages[stage].name if stage < len(self.stages) else "the end"
            out(f"  resuming at {where}, step {step}")

    # ------------------------------------------------------------ checkpoints
    def _checkpoint(self, optimizer=None):
        parts = {"model": self.student, "data": self.iterator, "progress": self.progress}
        if optimizer is not None:
            parts["optimizer"] = optimizer
        return tf.train.Checkpoint(**parts)

    def _progress_state(self):
        stage = int(self.progress.stage.numpy())
        return {
            "stage": stage,
            "stage_name": self.stages[stage].name if stage < len(self.stages) else "complete",
            "stage_step": int(self.progress.step.numpy()),
            "global_step": int(self.progress.global_step.numpy()),
        }

    def _save(self, manager, history):
        state = self._progress_state()
        if self.chief:
            self.run_dir.save(manager, state, history)
        else:  # into the scratch directory: every worker takes part in a save, only the chief's is kept
            with checkpoint_writes(self.scratch):
                manager.save(checkpoint_number=state["global_step"])

    def _checkpoint_manager(self, checkpoint):
        directory = self.run_dir.checkpoint_dir if self.chief else self.scratch
        keep = self.config.keep_checkpoints if self.chief else 1
        return tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=keep)

    # ------------------------------------------------------ benchmark access
    def prepare(self):
        """Builds teacher, student, stage plan and data without training (benchmarks, inspection)."""
        if not hasattr(self, "stages"):
            self._setup()
        return self

    def stage_step(self, stage):
        """``(step, variables)`` of ``stage`` with a fresh optimizer: ``step(batch)`` trains once, returns metrics."""
        self.prepare()
        trained, tuned = stage_variables(stage, named_weights(self.student))
        with self.strategy.scope():
            optimizer, _, variables = make_optimizer(self.config, stage, trained, tuned)
        step = self._make_step(stage, optimizer, variables)
        return (lambda batch: step(self._distribute(batch))), variables

    def _make_step(self, stage, optimizer, variables):
        return build_step(self.config, stage, self.strategy, self.teacher_encoder, self.teacher_mlm, self.student,
                          optimizer, variables, cached_teacher=self._cached(stage))

    def _cached(self, stage):
        return self.teacher_cache is not None and stage.kind == LAYER_TRANSFER

    def _batch(self, stage):
        """The next batch of the data, with the teacher's cached outputs of ``stage``'s layers when it has them."""
        with self._readable_data():
            batch = next(self.iterator)
        return self.teacher_cache.attach(batch, stage.layers) if self._cached(stage) else batch

    @contextlib.contextmanager
    def _readable_data(self):
        """A shard that is not TFRecord, or records without the features, surface when read: say so in one line."""
        try:
            yield
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as err:
            # TensorFlow wraps the reason in the op's name: "{{function_node ...}} corrupted record at 0 [Op:...]".
            why = re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:.*$", "", first_line(err.message))[:200]
            raise DataError(f"the data {self.data} has a record that cannot be read ({why}); re-create it with "
                            "`mbk pretraining-data`") from None

    # ---------------------------------------------------------- teacher cache
    def prepare_teacher_cache(self, start_stage=0, directory=None):
        """Decides whether the run caches its teacher (``config.teacher_cache``) and builds or finishes the cache.

        ``start_stage`` is the first stage still to run; ``directory`` defaults to ``OUT/teacher_cache`` (a worker
        that is not the chief keeps its own in its scratch directory). Returns the cache or None, also kept as
        ``self.teacher_cache``: the steps built after it read it."""
        self.prepare()
        stages = [st for st in self.stages[start_stage:] if st.kind == LAYER_TRANSFER]
        layers = tuple(sorted({l for st in self.stages if st.kind == LAYER_TRANSFER for l in st.layers}))
        if directory is None:
            directory = (self.out_dir if self.chief else self.scratch) / "teacher_cache"
        t = self.teacher_encoder.config
        rows, seq_len = int(self.data_meta["num_examples"]), int(self.data_meta["seq_len"])
        size = cache_bytes(rows, seq_len, t["hidden_size"], t["num_heads"], layers) if layers else 0
        self._cache_dir = Path(directory)
        use, why = decide(self.config.teacher_cache, stages, rows, self.config.batch_size, size, free_bytes(directory))
        self._say(f"  teacher cache: {why}")
        if not use:
            self._drop_teacher_cache()  # an interrupted run's, when it is no longer wanted
            return None
        view = transfer_model(self.teacher_encoder, layers)
        outputs = tf.function(lambda inputs: view(inputs, training=False), autograph=False, reduce_retracing=True)

        def batches(skip):
            dataset, _ = pretraining_dataset(self.data, self.config.batch_size, seed=self.config.seed,
                                             shuffle_buffer=0, repeat=False)
            with self._readable_data():
                for batch in dataset.skip(skip):
                    yield dict(batch)

        identity = {"teacher": self._describe(self.teacher_spec), "data": str(self.data), "seq_len": seq_len,
                    "precision": self.config.precision}
        total = -(-rows // self.config.batch_size)
        with StageProgress(self.console, "teacher cache", total, plain_every=self.config.log_every) as bar:
            def progress(rows_done):  # a resumed build's first report counts the rows of the last one too
                bar.update(-(-rows_done // self.config.batch_size) - bar.done, {})

            self.teacher_cache = TeacherCache.build(directory, outputs, batches, rows, layers, identity, progress)
        return self.teacher_cache

    def _drop_teacher_cache(self):
        """Deletes the cache (ours, and only read by layer-transfer stages) and stops reading it."""
        self.teacher_cache = None
        directory = self._cache_dir
        if directory is not None and (directory.is_dir() or directory.is_symlink()):
            remove_path(directory, ignore_errors=True)

    def _distribute(self, batch):
        return split_over_replicas(batch, self.strategy, self.config.batch_size)

    # -------------------------------------------------------------------- run
    def run(self, resume=False, overwrite=False):
        """Runs (or resumes) every stage; returns a summary dict.

        Args:
            resume: continue the run in ``out_dir``.
            overwrite: start over in an ``out_dir`` that holds another run or anything mbk did not write
                (``utils.atomic``).

        Returns:
            ``{"student": path, "pretrainer": path, "history": [...], "global_step": n}``.

        Raises:
            KeyboardInterrupt: after SIGINT or SIGTERM, once the current step is checkpointed.
            DataError / TrainingError / ConfigError: bad inputs, a mismatched resume.
        """
        self._place()
        if isinstance(self.teacher_spec, (str, Path)) and Path(self.teacher_spec).is_dir():
            # The teacher's tokenizer files are copied beside the student at the end: checked (bounds, casing
            # types, the vocabulary) before the run writes anything, not after hours of training (issue 37).
            read_tokenizer_files(self.teacher_spec)
        self.run_dir.locks = self.chief  # the workers of a cluster share the chief's directory, and its lock
        try:
            return self._run(resume, overwrite)
        finally:
            self.run_dir.release()  # the lock the check or the record took (utils.run_state)

    def _run(self, resume, overwrite):
        """:meth:`run` once the devices are placed; the caller releases the run directory's lock."""
        if self.chief or resume:  # a fresh run's directory is the chief's to check: it may have written it already
            self.run_dir.check(self._run_record(), self.config, resume, overwrite=overwrite, sources=self._sources())
        self._setup()
        check_same_run(self.strategy, {"config": self.config.to_dict(), "overrides": self.student_overrides,
                                       "data": self.data_meta})
        if self.on_setup_end is not None:
            self.on_setup_end(self)
        start_stage, start_step, history = 0, 0, []
        latest = self.run_dir.latest_checkpoint(self._say) if resume else None
        if latest is not None:  # else a fresh run, or a resume with run.json but no checkpoint yet: from the start
            start_stage, start_step, _ = self.run_dir.checkpoint_progress(latest)
            history = self.run_dir.history()
        self._print_plan((start_stage, start_step) if resume else None)
        # --overwrite of a directory mbk did not write: it is set aside, not deleted, until the run completes,
        # and comes back if the run fails or is stopped (that run then keeps no state to resume from).
        fresh = not resume and self.chief
        found = None
        try:
            with (foreign_set_aside(self.out_dir, DISTILL_RUN, overwrite=overwrite, sources=self._sources())
                  if fresh else contextlib.nullcontext()) as found:
                return self._run_in_place(fresh, found, overwrite, latest, start_stage, start_step, history)
        except Exception:
            # A new run that failed before its first checkpoint has nothing to resume, and its run.json would refuse
            # the corrected command ("pass --resume"). In a cluster the workers resume together, so its state stays.
            if fresh and found in (NEW, EMPTY) and not self.worker and self.run_dir.latest_checkpoint() is None:
                self._forget(found)
            raise

    def _forget(self, found):
        """Removes what a new run wrote in ``out_dir`` (the directory itself when it made it)."""
        for entry in [self.out_dir] if found == NEW else list(self.out_dir.iterdir()):
            remove_path(entry, ignore_errors=True)

    def _run_in_place(self, fresh, found, overwrite, latest, start_stage, start_step, history):
        """:meth:`run` once ``out_dir`` is checked (``found``: :func:`~mobilebert_kit.utils.atomic.check_output`'s
        decision for a fresh run)."""
        self.stateless = found == OVERWRITE
        if fresh:
            self.run_dir.write_record(self._run_record(), overwrite=overwrite, sources=self._sources())
        # Created here, once the directory is ours: the writer makes out_dir/tensorboard at once.
        self.summary_writer = (tf.summary.create_file_writer(str(self.out_dir / "tensorboard")) if self.chief
                               else tf.summary.create_noop_writer())
        self.scratch = None if self.chief else new_scratch("worker")
        try:
            self.prepare_teacher_cache(start_stage)
            return self._train(latest, start_stage, start_step, history)
        finally:
            if self.scratch is not None:
                shutil.rmtree(self.scratch, ignore_errors=True)
            if fresh:
                self.summary_writer.close()  # its event file is inside the directory that may be put back

    # A run over a directory mbk did not write (--overwrite) keeps no state: the directory comes back as it was.
    stateless = False

    @property
    def _restored(self):
        return (f"{self.out_dir} is put back as it was and nothing was kept (--overwrite replaces a directory mbk "
                "did not write only once the run completes)")

    def _train(self, latest, start_stage, start_step, history):
        """Runs the stages from ``(start_stage, start_step)``, restoring ``latest`` first when given."""
        if latest is not None and start_step == 0:
            # A stage boundary (or a finished run): the saved optimizer belongs to the previous
            # stage, so restore everything but it; the next stage starts a fresh optimizer.
            self._checkpoint().restore(latest).assert_existing_objects_matched().expect_partial()
        named = named_weights(self.student)
        with InterruptFlag() as interrupt:
            for index in range(start_stage, len(self.stages)):
                stage = self.stages[index]
                trained, tuned = stage_variables(stage, named)
                with self.strategy.scope():
                    optimizer, schedule, variables = make_optimizer(self.config, stage, trained, tuned)
                checkpoint = self._checkpoint(optimizer)
                manager = self._checkpoint_manager(checkpoint)
                first = 0
                if latest is not None and index == start_stage and start_step > 0:
                    # mid-stage: the optimizer too
                    checkpoint.restore(latest).assert_existing_objects_matched().expect_partial()
                    first = start_step
                self.progress.stage.assign(index)
                self.progress.step.assign(first)
                step_fn = self._make_step(stage, optimizer, variables)
                history = self._run_stage(stage, index, first, step_fn, schedule, optimizer, manager, interrupt, history)
                if not any(later.kind == LAYER_TRANSFER for later in self.stages[index + 1:]):
                    self._drop_teacher_cache()  # gigabytes no later stage reads
            self.progress.stage.assign(len(self.stages))
            self.progress.step.assign(0)
        return self._finish(history)

    def _step(self, step_fn, batch, stage, step):
        """One step; in a cluster, a lost peer becomes the one-line instruction to resume."""
        if not self.worker:
            return step_fn(self._distribute(batch))
        try:
            return step_fn(self._distribute(batch))
        except PEER_LOST as err:
            # Only its name, for the message: not the full read of latest_checkpoint(), which raises when
            # nothing reads and would hide the lost peer behind it.
            latest = tf.train.latest_checkpoint(str(self.run_dir.checkpoint_dir))
            where = f"its last checkpoint ({Path(latest).name})" if latest else "the start"
            raise peer_lost_error(self.worker, f"step {step + 1} of {stage.name}", err, where) from err

    def _run_stage(self, stage, index, first, step_fn, schedule, optimizer, manager, interrupt, history):
        cfg = self.config
        last = {}
        started = time.perf_counter()
        with StageProgress(self.console, stage.name, stage.steps, start=first, plain_every=cfg.log_every) as bar:
            for step in range(first, stage.steps):
                batch = self._batch(stage)
                metrics = self._step(step_fn, batch, stage, step)
                self.progress.step.assign(step + 1)
                self.progress.global_step.assign_add(1)
                global_step = int(self.progress.global_step.numpy())
                logging = (step + 1) % cfg.log_every == 0 or step + 1 == stage.steps
                values = None
                if logging:
                    values = {k: float(v.numpy()) for k, v in metrics.items()}
                    if not all(v == v for v in values.values()):
                        raise TrainingError(
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
                    if not self.stateless:
                        self._save(manager, history)
                    self._say(f"interrupted at step {step + 1} of {stage.name}; " + (
                        self._restored if self.stateless else
                        "checkpoint saved. Continue with the same command and --resume"))
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
            self._say(f"interrupted after {stage.name}; "
                      + (self._restored if self.stateless else "checkpoint saved. Continue with --resume"))
            raise KeyboardInterrupt
        return history

    def _barrier(self):
        """Waits for every worker of a cluster (an all-reduce); no-op for one-process strategies."""
        if not self.worker:
            return

        @tf.function(autograph=False)
        def gather():
            return self.strategy.reduce(tf.distribute.ReduceOp.SUM, self.strategy.run(lambda: tf.ones([])), axis=None)

        gather()

    def _copy_vocabulary(self, *targets):
        """Copies the teacher's tokenizer files next to the student: fine-tuning needs the same vocabulary."""
        if not isinstance(self.teacher_spec, (str, Path)) or not Path(self.teacher_spec).is_dir():
            return []
        names = []
        for target in targets:
            names = copy_tokenizer_files(self.teacher_spec, target)
        try:  # the student of a sentence encoder is one: it embeds with the teacher's pooling
            if carry_pooling(self.teacher_spec, targets[0], self.student_encoder.config["hidden_size"]):
                names.append("modules.json (sentence pooling)")
        except ConfigError:
            pass  # a pooling mbk cannot export: the student is written without one, as before
        for target in targets:
            relist(target)  # these files are ours too: a later --resume replaces them
        return names

    def _finish(self, history):
        student_dir = self.out_dir / "student"
        pretrainer_dir = self.out_dir / "pretrainer"
        global_step = int(self.progress.global_step.numpy())
        summary = {"student": str(student_dir), "pretrainer": str(pretrainer_dir), "history": history,
                   "global_step": global_step}
        if not self.chief:
            self._barrier()  # returns once the chief has written the student
            self._say(f"done ({self.worker}): the chief wrote {escape(student_dir, markup=True)}")
            return summary
        save(self.student_encoder, student_dir)
        save(self.student, pretrainer_dir)
        copied = self._copy_vocabulary(student_dir, pretrainer_dir)
        state = {"stage": len(self.stages), "stage_name": "complete", "complete": True,
                 "global_step": global_step, "history": history}
        self.run_dir.write_progress(state)
        self._barrier()
        self._say(f"done: student saved to {escape(student_dir, markup=True)} "
                  f"(with MLM/NSP heads: {escape(pretrainer_dir, markup=True)})"
                  + (f"; teacher's {', '.join(copied)} copied alongside" if copied else ""))
        return summary
