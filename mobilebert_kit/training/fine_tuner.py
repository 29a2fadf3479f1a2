"""FineTuner: fine-tune an encoder with a task head (the last step after distillation).

The tasks (one keyword, ``task``), their data, heads (:mod:`mobilebert_kit.models.heads`) and metrics, and the
output directory: docs/distillation.md, "Fine-tuning". The output holds the task model, ``task.json`` and the
vocabulary, so ``mbk evaluate`` needs nothing else.
"""

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
from rich.console import Console

from mobilebert_kit.artifacts.formats import SEQ_LEN
from mobilebert_kit.backend import keras, tf
from mobilebert_kit.checkpoints.checkpoint_files import checkpoint_writes
from mobilebert_kit.checkpoints.resumable_run import array_digest
from mobilebert_kit.data.vocab import copy_tokenizer_files
from mobilebert_kit.data.text_tokenizer import TextTokenizer
from mobilebert_kit.data.tokenizer_kinds import VOCAB_FILE
from mobilebert_kit.data.class_names import check_class_names
from mobilebert_kit.errors import DataError, MbkError, TrainingError, first_line
from mobilebert_kit.models.api import assign_weights, build, check_positions, default_seq_len, load, named_weights
from mobilebert_kit.models.api import save as save_model
from mobilebert_kit.models.heads import HEADS
from mobilebert_kit.sources.model_source import PRESET_SEED, ModelSource, write_labels
from mobilebert_kit.training import task_data
from mobilebert_kit.training.finetune_config import TRAINING_LIMITS, FinetuneConfig
from mobilebert_kit.training.finetune_run import FINETUNE_OUTPUT, FinetuneRun
from mobilebert_kit.training.interrupt import PEER_LOST, peer_lost_error
from mobilebert_kit.training.lamb import Lamb
from mobilebert_kit.training.stage_progress import StageProgress
from mobilebert_kit.training.strategies import check_same_run, is_chief, worker_label
from mobilebert_kit.training.summaries import write_scalars
from mobilebert_kit.training.task_scoring import prepare as prepare_scoring
from mobilebert_kit.training.task_scoring import score
from mobilebert_kit.training.teacher_student import precision_policy
from mobilebert_kit.training.warmup_decay import WarmupDecay
from mobilebert_kit.utils.atomic import OVERWRITE, atomic_dir, relist
from mobilebert_kit.utils.interrupt import InterruptFlag
from mobilebert_kit.utils.limits import within
from mobilebert_kit.utils.run_state import describe_path, interrupted_run, resume_hint
from mobilebert_kit.utils.scratch import new_scratch
from mobilebert_kit.utils.structured import load_json
from mobilebert_kit.utils.terminal import escape

TASK_FILE = "task.json"
HEAD_OF_TASK = {"classification": "sequence_classifier", "regression": "sequence_classifier",
                "span_qa": "span_question_answerer", "token_classification": "token_classifier"}


def load_encoder(spec, precision="float32", seed=PRESET_SEED):
    """The encoder of ``spec`` (a task model's encoder when it holds one), resolved by
    :class:`~mobilebert_kit.sources.model_source.ModelSource` and built with the dtype policy ``precision``;
    ``seed`` draws a preset's random weights."""
    with precision_policy(precision):
        return ModelSource.load(spec, head=None, seed=seed, dtype=precision).encoder


class _StepCallback(keras.callbacks.Callback):
    """A Keras callback run after every training step: the progress bar, the scalars, checkpoints and Ctrl-C.

    ``scalars`` collects ``(step, {tag: value})`` for TensorBoard every ``every`` steps: the epoch's running
    loss as Keras reports it and the learning rate. Every ``checkpoint_every`` steps, and at the step a first
    SIGINT or SIGTERM arrived, ``save(step)`` checkpoints; after the signal, training stops (``stopped``).
    """

    def __init__(self, bar, step, every, checkpoint_every, scalars, save, interrupt, total, on_step_end=None):
        super().__init__()
        self.bar, self.step, self.total, self.every = bar, step, total, every
        self.checkpoint_every, self.save, self.interrupt = checkpoint_every, save, interrupt
        self.scalars, self.on_step_end = scalars, on_step_end
        self.stopped = False

    def on_train_batch_end(self, batch, logs=None):
        logs = logs or {}
        self.step += 1
        due = "loss" in logs and (self.step % self.every == 0 or self.step == self.total)
        if due:
            learning_rate = self.model.optimizer.learning_rate
            if callable(learning_rate):  # a schedule: its value at this step
                learning_rate = learning_rate(self.step)
            # get_value, not float(): under a tf.distribute strategy it is a MirroredVariable.
            self.scalars.append((self.step, {
                "finetune/loss": float(logs["loss"]),
                "finetune/learning_rate": float(keras.backend.get_value(learning_rate))}))
        self.bar.update(1, {"loss": float(logs["loss"])} if due else None)
        if self.on_step_end is not None:
            self.on_step_end(self.step)
        if self.step < self.total and (self.interrupt.raised or self.step % self.checkpoint_every == 0):
            self.save(self.step)
            if self.interrupt.raised:
                self.stopped = True
                self.model.stop_training = True


class FineTuner:
    """Fine-tunes an encoder on a task and saves a self-contained model directory.

    Args:
        model: preset name, saved model directory or checkpoint (e.g. a distilled ``student/``).
        tokenizer: a :class:`~mobilebert_kit.data.text_tokenizer.TextTokenizer`.
        config: a :class:`FinetuneConfig`.
        text_columns, label_column: table columns (auto-detected for GLUE names).
        strategy: any ``tf.distribute.Strategy`` (default: the current one).
        console: ``rich`` console for the plan and the progress bar.
        on_step_end: ``callable(step)`` after every optimizer step (tests interrupt runs with it).

    Example:
        >>> FineTuner("runs/mb/student", tokenizer, FinetuneConfig(task="classification")).train(
        ...     "SST-2/train.tsv", "runs/sst2", eval_path="SST-2/dev.tsv")  # doctest: +SKIP
    """

    def __init__(self, model, tokenizer, config=None, text_columns=None, label_column=None, strategy=None, console=None,
                 on_step_end=None):
        self.model_spec = model
        self.on_step_end = on_step_end
        self.tokenizer = tokenizer
        self.config = config or FinetuneConfig()
        self.text_columns = text_columns
        self.label_column = label_column
        self.strategy = strategy
        self.console = console if console is not None else Console()

    def _say(self, text):
        self.console.print(text, highlight=False, soft_wrap=True)

    def _data(self, path, spec):
        """The training examples of ``path`` (evaluation data is read by ``task_scoring.prepare``)."""
        cfg = self.config
        if cfg.task in ("classification", "regression"):
            features, labels, names, columns = task_data.load_sequence_task(
                path, self.tokenizer, cfg.seq_len, cfg.task, spec.get("text_columns") or self.text_columns,
                spec.get("label_column") or self.label_column, spec.get("label_names"), need_label=True,
            )
            spec.update(label_names=names, **columns)
            return features, {"logits": labels.reshape(-1, 1) if cfg.task == "regression" else labels}, None
        if cfg.task == "span_qa":
            examples = task_data.read_squad(path)
            features, _ = task_data.squad_features(self.tokenizer, examples, cfg.seq_len, cfg.doc_stride,
                                                   cfg.max_query_length, training=True)
            targets = {"start_logits": features.pop("start_positions"), "end_logits": features.pop("end_positions")}
            return features, targets, None
        sentences = task_data.read_tagged(path)
        if spec.get("label_names") is None:
            # The tags are class names as a sequence head's labels are: look-alikes would be two classes.
            spec["label_names"] = check_class_names(sorted({t for _, tags in sentences for t in tags}),
                                                    f"the tags of {path}", error=DataError)
        features, labels, _ = task_data.tagging_features(self.tokenizer, sentences, cfg.seq_len, spec["label_names"],
                                                             path)
        weights = (labels != task_data.IGNORE).astype(np.float32)
        return features, {"logits": np.maximum(labels, 0)}, {"logits": weights}

    def _build(self, num_labels):
        cfg = self.config
        encoder = load_encoder(self.model_spec, cfg.precision, seed=cfg.seed)
        size = getattr(self.tokenizer, "vocab_size", 0)
        if size > encoder.config["vocab_size"]:
            # Ids past the embedding table fail inside the first training step with a graph error.
            raise DataError(
                f"the vocabulary {getattr(self.tokenizer, 'source', '')} has {size} tokens but {self.model_spec} "
                f"embeds only {encoder.config['vocab_size']}; pass --vocab with the vocab.txt the model was trained with"
            )
        # Longer rows than the learned positions fail inside the first training step with a graph error.
        check_positions(encoder.config, cfg.seq_len)
        kwargs = {} if cfg.task == "span_qa" else {"num_labels": num_labels, "dropout": cfg.dropout}
        if cfg.task in ("token_classification", "span_qa") and encoder.config.get("pooler_input") != "every_token":
            # Their heads read every token's state, never the pooler's: it has no gradient, and TensorFlow warned
            # "Gradients do not exist for variables ['pooler/kernel:0', ...] ... did you forget to provide a loss".
            for layer in encoder.layers:
                layer.trainable = layer.trainable and layer.name not in ("pooler", "pooler_norm")
        with precision_policy(cfg.precision):
            model = HEADS[HEAD_OF_TASK[cfg.task]](encoder, **kwargs)
        model.dropout_seed = cfg.seed
        schedule = WarmupDecay(cfg.learning_rate, total_steps=max(self._steps, 1),
                               warmup_steps=int(round(cfg.warmup_proportion * self._steps)))
        optimizer = Lamb(learning_rate=schedule, weight_decay_rate=cfg.weight_decay,
                         use_trust_ratio=cfg.optimizer == "lamb", global_clipnorm=1.0)
        ce = keras.losses.SparseCategoricalCrossentropy
        if cfg.task == "span_qa":
            loss = {"start_logits": ce(from_logits=True), "end_logits": ce(from_logits=True)}
        else:
            loss = {"logits": keras.losses.MeanSquaredError() if cfg.task == "regression" else ce(from_logits=True)}
        weights = {"start_logits": 0.5, "end_logits": 0.5} if cfg.task == "span_qa" else None
        model.compile(optimizer=optimizer, loss=loss, loss_weights=weights)
        # The logged loss is a metric every replica already holds globally aggregated; Keras' "auto"
        # sums it over the workers of a MultiWorkerMirroredStrategy (shown 2x with two workers).
        model.distribute_reduction_method = "first"
        return model

    def record(self, train_path, eval_path=None):
        """The run record ``OUT/run/run.json`` keeps: what a resume must match, and what it may omit."""
        return {"model": describe_path(self.model_spec), "train": describe_path(train_path),
                "eval": describe_path(eval_path), "vocab": describe_path(self.tokenizer.source),
                "cased": not self.tokenizer.lowercase, "text_columns": self.text_columns,
                "label_column": self.label_column, "config": dataclasses.asdict(self.config)}

    def _epoch_dataset(self, parts, epoch, skip):
        """Epoch ``epoch``'s batches from batch ``skip`` on, in an order keyed by ``(seed, epoch)``.

        The order depends on nothing else (not on the steps run before, as a ``shuffle`` op's does), so a
        resumed run, which starts again at ``(epoch, skip)``, sees exactly the uninterrupted run's batches.
        """
        cfg = self.config
        n = len(parts[0]["input_ids"])
        order = np.random.default_rng([cfg.seed, epoch]).permutation(n)
        rows = order[skip * cfg.batch_size:(n // cfg.batch_size) * cfg.batch_size]
        chosen = tf.nest.map_structure(lambda column: column[rows], parts)
        return tf.data.Dataset.from_tensor_slices(chosen).batch(cfg.batch_size, drop_remainder=True).prefetch(2)

    def train(self, train_path, out_dir, eval_path=None, overwrite=False, resume=False):
        """Fine-tunes, evaluates on ``eval_path`` if given, and saves everything to ``out_dir``.

        ``out_dir`` may replace only an earlier fine-tuning output (or an empty directory) unless ``overwrite``
        (``utils.atomic``), checked before training starts. How the run checkpoints in ``OUT/run`` and resumes:
        docs/distillation.md, "Resuming a fine-tuning run".

        Args:
            train_path, eval_path: the labelled data.
            out_dir: the output directory.
            overwrite (bool): replace what mbk did not write, or start an interrupted run over.
            resume (bool): continue the interrupted run in ``out_dir`` from its last checkpoint.

        Returns:
            The evaluation metrics (empty without ``eval_path``).

        Raises:
            KeyboardInterrupt: after SIGINT or SIGTERM, once the current step is checkpointed.
            TrainingError: among others, a live run holds ``out_dir`` (its kernel lock, ``utils.run_state``).
        """
        run = FinetuneRun(out_dir)
        try:
            return self._train(run, train_path, out_dir, eval_path, overwrite, resume)
        finally:
            run.release()  # the lock of OUT that check() or start() took

    def _train(self, run, train_path, out_dir, eval_path, overwrite, resume):
        """:meth:`train` with ``run`` (its :class:`FinetuneRun`), whose lock the caller releases."""
        cfg = self.config
        sources = [p for p in (train_path, eval_path, self.model_spec, self.tokenizer.source)
                   if isinstance(p, (str, Path))]
        self.strategy = self.strategy or tf.distribute.get_strategy()
        chief = is_chief(self.strategy)
        record = self.record(train_path, eval_path)
        decision = None
        run.locks = chief  # the workers of a cluster share the chief's OUT, and its lock
        if chief or resume:  # a fresh run's directory is the chief's to check: it may have written it already
            decision = run.check(record, resume, overwrite=overwrite, sources=sources)
        # Over what mbk did not write, --overwrite replaces OUT only with the finished output: no state is kept.
        stateless = chief and not resume and decision == OVERWRITE
        if stateless:
            self._say(
                f"{out_dir} was not written by mbk finetune: --overwrite replaces it once the output is complete, "
                "so this run keeps no state to resume from (remove it or choose a new --out for that)")
        keras.utils.set_random_seed(cfg.seed)
        spec = {"task": cfg.task, "seq_len": cfg.seq_len, "doc_stride": cfg.doc_stride,
                "max_query_length": cfg.max_query_length, "label_names": None}
        features, targets, weights = self._data(train_path, spec)
        # What the run trains on, as tokenized: a resume refuses a training file changed under the same path.
        rows = [features, targets, weights or {}]
        fingerprints = {"train": array_digest([np.asarray(json.dumps(spec.get("label_names")))]
                                              + [part[k] for part in rows for k in sorted(part)])}
        if resume:
            run.check_fingerprint(fingerprints, {"train": train_path})
        check_same_run(self.strategy, {"config": dataclasses.asdict(cfg), **fingerprints})
        eval_data = None
        if eval_path is not None:
            # Read now, with the training labels: a bad evaluation file was found only after the whole run.
            eval_data = prepare_scoring(cfg.task, eval_path, self.tokenizer, _scoring_spec(spec))
        n = len(features["input_ids"])
        if n < cfg.batch_size:
            raise DataError(f"{train_path} yields {n} examples, fewer than --batch-size {cfg.batch_size}")
        per_epoch = n // cfg.batch_size
        self._steps = per_epoch * cfg.epochs
        num_labels = {"classification": len(spec["label_names"] or []), "regression": 1,
                      "token_classification": len(spec["label_names"] or []), "span_qa": 0}[cfg.task]
        if cfg.task == "classification" and num_labels < 2:
            raise DataError(f"{train_path} has a single label {spec['label_names']}; classification needs two or more")
        with self.strategy.scope():
            model = self._build(num_labels)
        checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
        latest = run.latest_checkpoint(self._say) if resume else None
        first, scalars = 0, []
        if latest is not None:
            with self.strategy.scope():  # the optimizer's slots exist before their values are restored
                model.optimizer.build(model.trainable_variables)
            try:
                checkpoint.restore(latest).assert_existing_objects_matched()
            except (ValueError, AssertionError) as err:
                # A head of another size: the labels of the data changed (a class added or gone).
                raise TrainingError(
                    f"the run in {out_dir} does not fit the model {train_path} now makes ({num_labels} output(s); "
                    f"{first_line(err)[:160]}): the training data changed; restore it, or start over with "
                    "--overwrite") from None
            first = int(keras.backend.get_value(model.optimizer.iterations))
            scalars = run.scalars(first)
            stored_total = run.progress().get("total")
            if not isinstance(stored_total, int):  # progress.json unreadable: the checkpoint alone decides
                stored_total = self._steps
            if stored_total != self._steps or first > self._steps:
                # Same path, other content: the data position and the schedule would mean other rows and rates.
                raise TrainingError(
                    f"{train_path} now makes {self._steps} steps but the run in {out_dir} was started on "
                    f"{stored_total}: the training data changed; restore it, or start over with --overwrite")
        self._say(f"[bold]mbk finetune[/bold] {cfg.task} on {escape(train_path, markup=True)}: {n} examples of "
                  f"{cfg.seq_len} tokens, "
                  f"{cfg.epochs} epoch(s) x {per_epoch} steps, batch {cfg.batch_size}, {cfg.optimizer} lr "
                  f"{cfg.learning_rate:g}, {cfg.precision}; model {escape(self.model_spec, markup=True)} -> "
                  f"{escape(out_dir, markup=True)}"
                  + ((f"; resuming at step {first + 1} of {self._steps}" if first < self._steps else
                      "; training is complete, writing the output") if resume else ""))
        parts = (features, targets) if weights is None else (features, targets, weights)
        # Every worker takes part in a save (reading a distributed variable may be collective); only the
        # chief's is kept, in OUT/run, the others go to a scratch directory removed at the end. A chief that
        # keeps no state saves nothing, or, in a cluster, to scratch like the others.
        keeps = chief and not stateless
        in_cluster = bool(worker_label(self.strategy))
        scratch = None if keeps or not in_cluster else new_scratch("worker")
        managers = []

        if keeps and not resume:
            # Written once the data is read and the model built (a run failing there leaves nothing), and
            # before the first step: a run killed before its first checkpoint is resumed from step 0.
            run.start({**record, "fingerprint": fingerprints}, sources=sources)

        def save(step):
            if not keeps and scratch is None:  # one process keeping no state
                return
            if not managers:  # the first checkpoint of this process
                managers.append(tf.train.CheckpointManager(
                    checkpoint, str(run.checkpoint_dir if keeps else scratch), max_to_keep=2 if keeps else 1))
            if keeps:
                run.save(managers[0], step, self._steps, scalars)
            else:
                with checkpoint_writes(scratch):
                    managers[0].save(checkpoint_number=step)

        stopped = (f"nothing was kept and {out_dir} is as it was; run the command again to start over" if stateless
                   else "checkpoint saved. Continue with the same command and --resume")
        try:
            self._fit(model, parts, first, scalars, save, stopped)
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
        results = {}
        if eval_path is not None:
            try:
                # Scored as saved (float32), and in a cluster on this worker alone: a distributed predict is
                # collective, and the chief given --eval without the others crashed waiting for them.
                scored = model if cfg.precision == "float32" and not in_cluster else _float32_twin(model)
                results = model_evaluation(scored, spec, self.tokenizer, eval_path, cfg.batch_size,
                                           prepared=eval_data).metrics
            except MbkError as err:
                # The file was read before training; what fails now is its metric for the trained model (a model
                # that answers one value has no correlation). --resume would score the same model: say so.
                raise TrainingError(f"scoring the trained model on {eval_path} failed: {err}; the model was not saved "
                                    "(a model that answers one value diverged or learned nothing: a lower "
                                    "--learning-rate may help); run again with --overwrite") from err
            self.console.print("eval " + " ".join(f"{k}={v:.4f}" for k, v in results.items()), highlight=False)
        if not chief:  # in a cluster only the chief writes out_dir
            self._say(f"done ({worker_label(self.strategy)}): the chief writes {escape(out_dir, markup=True)}")
            return results
        # A run that kept its state in OUT finishes inside it: files the user put there meanwhile stay.
        with atomic_dir(out_dir, FINETUNE_OUTPUT, overwrite=overwrite, sources=sources, keep_foreign=keeps) as tmp:
            save_model(model, tmp / "model")
            vocab = Path(self.tokenizer.source)
            shutil.copyfile(vocab, tmp / vocab.name)
            if vocab.name == "tokenizer.json":  # its special tokens are named in the files beside it
                for name in ("special_tokens_map.json", "tokenizer_config.json"):
                    if (vocab.parent / name).is_file():
                        shutil.copyfile(vocab.parent / name, tmp / name)
            _deployment_files(tmp / "model", self.tokenizer, spec.get("label_names"))
            relist(tmp / "model")  # the vocabulary and labels beside the saved model are ours too
            spec.update(vocab=vocab.name, lowercase=self.tokenizer.lowercase, metrics=results)
            (tmp / TASK_FILE).write_text(json.dumps(spec, indent=2) + "\n")
            _write_tensorboard(tmp / "tensorboard", scalars, results, self._steps)
        return results

    def _fit(self, model, parts, first, scalars, save, stopped):
        """Keras' ``fit``, one call per epoch from step ``first``; a checkpoint at every epoch's end (where a
        SIGKILL loses at most an epoch, whatever ``checkpoint_every``) and after the last step; SIGINT/SIGTERM
        checkpoint and raise KeyboardInterrupt, after printing ``stopped`` (what became of the run)."""
        cfg = self.config
        per_epoch = self._steps // cfg.epochs
        every = max(1, self._steps // 50)
        worker = worker_label(self.strategy)
        with InterruptFlag() as interrupt, StageProgress(self.console, "fine-tuning", self._steps, start=first,
                                                         plain_every=every) as bar:
            callback = _StepCallback(bar, first, every, cfg.checkpoint_every, scalars, save, interrupt, self._steps,
                                     self.on_step_end)
            for epoch in range(first // per_epoch, cfg.epochs):
                skip = first - epoch * per_epoch if epoch == first // per_epoch else 0
                try:
                    model.fit(self._epoch_dataset(parts, epoch, skip), epochs=1, verbose=0, callbacks=[callback])
                except PEER_LOST as err:
                    raise peer_lost_error(worker, f"step {callback.step + 1}", err) from err
                if callback.stopped:
                    break
                if callback.step < self._steps and callback.step % cfg.checkpoint_every:  # not saved at this step
                    save(callback.step)
            if not callback.stopped and callback.step > first:
                # The trained model, before the output is written: if that write fails (a full disk),
                # --resume writes it without training again.
                save(callback.step)
        if callback.stopped:
            self._say(f"interrupted at step {callback.step} of {self._steps}; {stopped}")
            raise KeyboardInterrupt


def _float32_twin(model):
    """Task ``model`` rebuilt in float32 with its weights, outside any distribution strategy: the model it is
    saved as, which ``mbk evaluate`` and ``mbk export`` load (scoring the float16/bfloat16 one reported other
    metrics), and one whose ``predict`` runs on this process alone."""
    encoder = build({**model.encoder.config, "dtype": "float32"})
    twin = HEADS[model.architecture](encoder, **model.config["head"])
    assign_weights(twin, {path: var.numpy() for path, var in named_weights(model).items()}, source="the trained model")
    return twin


def _write_tensorboard(directory, scalars, results, last_step):
    """``OUT/tensorboard``: the collected training scalars and the evaluation metrics (``eval/NAME``) at the last step."""
    writer = tf.summary.create_file_writer(str(directory))
    for step, values in scalars:
        write_scalars(writer, values, step)
    if results:
        write_scalars(writer, {f"eval/{name}": value for name, value in results.items()}, last_step)
    writer.close()


def _deployment_files(model_dir, tokenizer, label_names):
    """Vocabulary, casing and labels next to the saved task model.

    `mbk export OUT/model` embeds what it finds in the model directory
    (vocab.txt, tokenizer_config.json, labels.txt); without these an exported
    classifier would carry neither its vocabulary nor its class names.
    """
    copy_tokenizer_files(Path(tokenizer.source).parent, model_dir)
    if not (model_dir / VOCAB_FILE).is_file() and VOCAB_FILE in tokenizer.kind.model_files:
        tokens = [tokenizer.inverse_vocab.get(i, "[UNK]") for i in range(tokenizer.vocab_size)]
        (model_dir / VOCAB_FILE).write_text("\n".join(tokens) + "\n", encoding="utf-8")
    config_path = model_dir / "tokenizer_config.json"
    try:  # the source's own tokenizer_config.json, updated; an unreadable one is replaced
        config = load_json(config_path, config_path.name, expect=dict, error=MbkError) if config_path.is_file() else {}
    except MbkError:
        config = {}
    config["do_lower_case"] = tokenizer.lowercase  # what fine-tuning used (--cased may override the source)
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    if label_names:
        write_labels(model_dir, label_names)


def _scoring_spec(spec):
    """``spec`` (``task.json``'s content) with the SQuAD windowing defaults of files that predate them."""
    return {"doc_stride": FinetuneConfig.doc_stride, "max_query_length": FinetuneConfig.max_query_length, **spec}


def model_evaluation(model, spec, tokenizer, path, batch_size=32, limit=None, prepared=None):
    """The :class:`~mobilebert_kit.training.task_scoring.ArtifactEvaluation` of a task model on a labelled file,
    following ``spec`` (the content of ``task.json``; ``prepared``: ``path`` already read by
    :func:`~mobilebert_kit.training.task_scoring.prepare`).

    Scored by the task's record in :data:`mobilebert_kit.training.task_scoring.TASK_METRICS`,
    the same code that scores an exported file, so the two differ only by what the model computes."""
    def predict(features):
        outputs = model.predict(tf.data.Dataset.from_tensor_slices(features).batch(batch_size), verbose=0)
        return {k: np.asarray(v, np.float32) for k, v in outputs.items()}

    spec = _scoring_spec(spec)
    return score(spec["task"], path, predict, tokenizer, spec, limit, prepared)


def evaluate_directory(model_dir, path, batch_size=32, limit=None):
    """Loads a directory written by :meth:`FineTuner.train` and evaluates it on ``path`` (its metrics dict)."""
    return directory_evaluation(model_dir, path, batch_size, limit).metrics


def _saved_model_evaluation(model_dir, path, batch_size, limit, columns, seq_len=None):
    """A saved task model without ``task.json`` (``mbk substitute`` of a fine-tuned classifier, the ``model/``
    of a finetune output): the task follows from its head, the labels from its ``labels.txt``, the vocabulary
    from its ``vocab.txt``, the length is the fine-tuning default within its positions."""
    try:
        source = ModelSource.load(model_dir, accept=("saved",))
    except MbkError as err:
        raise TrainingError(f"{model_dir} is neither a fine-tuned model ({TASK_FILE}) nor a saved task model "
                            f"({first_line(err)}); evaluate an `mbk finetune` output or a file from `mbk export`") from err
    model = source.model
    head = getattr(model, "architecture", None)
    tasks = [task for task, of in HEAD_OF_TASK.items() if of == head]
    if not tasks:
        raise TrainingError(f"{model_dir} holds {head or 'an encoder'} without a task head to score; evaluate a model "
                            "from `mbk finetune` (or `mbk substitute` of one)")
    head_config = getattr(model, "head_config", {})
    num_labels = head_config.get("num_labels")
    # A sequence head with one output column is a regressor (mbk finetune --task regression writes no labels); one
    # declared multi-label (an imported checkpoint's problem_type) gives a sigmoid per label.
    task = ("regression" if "regression" in tasks and num_labels == 1
            else "multi_label_classification" if head_config.get("problem_type") == "multi_label_classification"
            else tasks[0])
    if task in ("classification", "multi_label_classification", "token_classification") and \
            len(source.labels) != num_labels:
        raise TrainingError(f"{model_dir} names {len(source.labels)} class(es) in labels.txt for a head of {num_labels}; "
                            "write one class name per line, in the head's order")
    tokenizer = source.tokenizer
    if tokenizer is None:
        raise DataError(f"{model_dir} has no vocab.txt; copy the vocabulary the model was fine-tuned with beside it")
    config = source.encoder.config
    seq_len = seq_len or default_seq_len(config, FinetuneConfig.seq_len)
    check_positions(config, seq_len)
    spec = {"task": task, "seq_len": seq_len, "label_names": source.labels or None, "model": str(model_dir),
            **{k: v for k, v in (columns or {}).items() if v}}
    return model_evaluation(model, spec, tokenizer, path, batch_size, limit)


def _check_task_spec(spec, task_file, need_length):
    """Refuses a hand-edited ``task.json`` whose length, casing or class names the evaluation would crash on or
    misread (a seq_len of "24", 0 or 1.5)."""
    if need_length and not within(SEQ_LEN, spec.get("seq_len")):
        raise TrainingError(f"{task_file}: seq_len is {repr(spec.get('seq_len'))[:40]}, not "
                            f"{SEQ_LEN.describe()}; restore the length the model was fine-tuned at "
                            "(or pass --seq-len N)")
    if spec.get("lowercase") is not None and not isinstance(spec["lowercase"], bool):
        raise TrainingError(f"{task_file}: lowercase is {repr(spec['lowercase'])[:40]}, not true or false; "
                            "restore the casing the model was fine-tuned with")
    if spec.get("label_names") is not None:
        if not isinstance(spec["label_names"], list):
            raise TrainingError(f"{task_file}: label_names must be a list of class names; fine-tune again")
        check_class_names(spec["label_names"], f"{task_file} label_names", error=TrainingError)
    # The task picks the scorer by name: a list or object was an internal error (unhashable type).
    if not isinstance(spec.get("task"), str) or spec["task"] not in task_data.TASKS:
        raise TrainingError(f"{task_file}: task is {json.dumps(spec.get('task'))[:40]}, not one of "
                            f"{', '.join(task_data.TASKS)}; restore the task the model was fine-tuned for")
    columns = spec.get("text_columns")
    if columns is not None and not (isinstance(columns, list) and 0 < len(columns) <= 2
                                    and all(isinstance(c, str) and c for c in columns)):
        raise TrainingError(f"{task_file}: text_columns is {json.dumps(columns)[:40]}, not a list of one or two "
                            "column names; restore them, or pass --text-columns")
    if spec.get("label_column") is not None and not isinstance(spec["label_column"], str):
        raise TrainingError(f"{task_file}: label_column is {json.dumps(spec['label_column'])[:40]}, not a column "
                            "name; restore it, or pass --label-column")
    for key in ("doc_stride", "max_query_length"):
        if spec.get("task") == "span_qa" and key in spec and not within(TRAINING_LIMITS[key], spec[key]):
            raise TrainingError(f"{task_file}: {key} is {json.dumps(spec[key])[:40]}, not "
                                f"{TRAINING_LIMITS[key].describe()}; restore the value the model was fine-tuned with")


def directory_evaluation(model_dir, path, batch_size=32, limit=None, columns=None, seq_len=None):
    """:func:`evaluate_directory` as an :class:`~mobilebert_kit.training.task_scoring.ArtifactEvaluation`.

    ``columns`` (``{"text_columns", "label_column"}``) overrides the table columns ``task.json`` records
    where a value is given, and ``seq_len`` its length.
    """
    model_dir = Path(model_dir)
    task_file = model_dir / TASK_FILE
    if not task_file.is_file():
        if interrupted_run(model_dir):
            raise TrainingError(resume_hint(model_dir))
        return _saved_model_evaluation(model_dir, path, batch_size, limit, columns, seq_len)
    spec = load_json(task_file, TASK_FILE, expect=dict, error=TrainingError, fix="fine-tune again")
    vocab = spec.get("vocab")
    if not isinstance(vocab, str) or not vocab or Path(vocab).name != vocab:
        raise TrainingError(f"{task_file} names no vocabulary file in {model_dir} (vocab {vocab!r}); fine-tune again")
    _check_task_spec(spec, task_file, seq_len is None)
    tokenizer = TextTokenizer.from_file(model_dir / vocab, lowercase=spec.get("lowercase"))
    model = load(model_dir / "model")
    given = {k: v for k, v in (columns or {}).items() if v}
    if seq_len is not None:
        check_positions(getattr(model, "encoder", model).config, seq_len)
        given["seq_len"] = seq_len
    else:
        check_positions(getattr(model, "encoder", model).config, spec["seq_len"], option=f"{task_file}: seq_len")
    return model_evaluation(model, {**spec, **given, "model": str(model_dir)}, tokenizer, path, batch_size, limit)
