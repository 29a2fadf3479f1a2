"""ModelSource: a model spec resolved to the model and what comes with it.

Besides the Keras model, what an app needs to tokenize and name classes is read from the source directory
when present (its tokenizer files, ``labels.txt`` or ``config.json``'s ``id2label``).

A preset (or a config dict) has random weights. They are always drawn after
seeding, so that ``mbk export tiny-bert`` and ``mbk validate ...
--reference tiny-bert`` see the same model (tf_keras initializers are
deterministic after ``keras.utils.set_random_seed``); such artifacts are for
latency, not accuracy. Training passes its own seed, so a run's ``seed``
still chooses the student's initial weights.
"""

import functools
from dataclasses import dataclass, field
from pathlib import Path

from mobilebert_kit.backend import keras
from mobilebert_kit.checkpoints.importer import import_checkpoint
from mobilebert_kit.data.text_tokenizer import check_tokenizer_fits, tokenizer_of
from mobilebert_kit.data.class_names import LABELLED_HEADS, LABELS_MAX_BYTES, check_class_names, names_of_id2label
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.models.api import build
from mobilebert_kit.sources.pooling import read_pooling
from mobilebert_kit.sources.spec import KINDS, classify
from mobilebert_kit.utils.structured import load_json, read_bounded

LABELS_FILE = "labels.txt"  # a classifier's class names in its model directory, one a line

PRESET_SEED = 0


@dataclass
class ModelSource:
    """A loaded model and the deployment facts that travel with it.

    Args:
        model (keras.Model): the Encoder or task model.
        kind (str): one of :data:`mobilebert_kit.sources.spec.KINDS` (``"saved"``, ``"hf"``, ``"tf1"``,
            ``"preset"``, ``"config"``, ``"model"``).
        name (str): what the user passed.
        directory (Path | None): the source directory (None for a preset, a config or a model object).
        labels (list[str]): class names of a classification head, if recorded.
        seed (int | None): the seed of random weights (presets and configs).
        pooling (Pooling | None): the sentence pooling a sentence-transformers checkpoint declares, else None
            (read when first used: :attr:`pooling`).

    Example:
        >>> source = ModelSource.load("tiny-bert")  # doctest: +SKIP
        >>> source.kind, source.tokenizer  # doctest: +SKIP
        ('preset', None)
    """

    model: object
    kind: str
    name: str
    directory: Path = None
    labels: list = field(default_factory=list)
    seed: int = None

    @classmethod
    def load(cls, spec, head="auto", accept=tuple(KINDS), what="model", seed=PRESET_SEED, **overrides):
        """Resolves ``spec`` (see :mod:`mobilebert_kit.sources.spec`) and loads it.

        Args:
            spec (str | os.PathLike | dict | keras.Model): a preset name, a saved-model, Hugging Face or
                TF1 checkpoint path, a dict of Encoder arguments, or a model (returned as it is).
            head (str | None): for checkpoints, the head to load (``"auto"``: the one present; None: encoder only).
            accept (tuple[str, ...]): the kinds the caller takes; others are refused by name.
            what (str): what the spec is for the caller, for messages.
            seed (int): the seed random weights (presets, configs) are drawn with.
            **overrides: Encoder options that do not change weights (``dtype``, ``attention_mask_value`` ...);
                a model object is returned as it was built.

        Returns:
            ModelSource: the model with its directory and labels.

        Example:
            >>> ModelSource.load("runs/mb/student", head=None, accept=("saved",)).kind  # doctest: +SKIP
            'saved'
        """
        found = classify(spec, accept=accept, what=what)
        if found.kind == "model":
            model = found.location  # already built: its caller chose its options
        elif found.kind in ("preset", "config"):
            keras.utils.set_random_seed(seed)
            model = build(found.location, **overrides)
        else:
            model = import_checkpoint(found.location, head=head, **overrides)
        labels = _source_labels(model, found.directory) if found.directory is not None else []
        random_seed = seed if found.kind in ("preset", "config") else None
        return cls(model, found.kind, found.name, found.directory, labels, random_seed)

    @functools.cached_property
    def pooling(self):
        """The checkpoint's declared :class:`~mobilebert_kit.sources.pooling.Pooling`, or None (read once;
        assignable).

        Read when first used, so that an unsupported declaration (a one-line ConfigError) stops only the
        exports that rely on it (``--pooling`` overrides it)."""
        return read_pooling(self.directory) if self.directory is not None else None

    @property
    def encoder(self):
        """The Encoder of the model (the model itself when it is one)."""
        return getattr(self.model, "encoder", self.model)

    @functools.cached_property
    def tokenizer(self):
        """The checkpoint's tokenizer (``data.text_tokenizer.tokenizer_of``: BERT's vocab.txt, else its
        tokenizer.json of any kind), or None without one; refused when its ids run past the model's embedding
        table (``check_tokenizer_fits``), for every command that reads it."""
        if self.directory is None:
            return None
        # Read once: an export asks for it in its plan, its calibration, its validation and its metadata, and
        # each read parses the checkpoint's tokenizer.json (the same object serves every one of them).
        return check_tokenizer_fits(tokenizer_of(self.directory), self.encoder.config["vocab_size"], "the model")

    @property
    def trained_seq_len(self):
        """The sequence length a fine-tuned model was trained at (``task.json`` beside ``DIR/model``), else None."""
        spec = self._task_spec
        value = spec.get("seq_len") if spec else None
        return value if isinstance(value, int) and not isinstance(value, bool) and 1 < value <= 65536 else None

    @functools.cached_property
    def _task_spec(self):
        """The ``task.json`` of an ``mbk finetune`` output whose ``model/`` this source is, else None (read once:
        an export asks for its length and its columns)."""
        task_file = self.directory.parent / "task.json" if self.directory is not None else None
        if task_file is not None and self.directory.name == "model" and task_file.is_file():
            try:
                return load_json(task_file, "task.json", expect=dict)
            except ConfigError:
                pass
        return None

    @property
    def table_columns(self):
        """``{"text_columns": [...], "label_column": str | None}`` a fine-tuned model was trained on (the
        ``task.json`` of ``mbk finetune --out DIR``, beside ``DIR/model``), else None.

        An export records them, so that ``mbk evaluate FILE`` and ``mbk export --eval-data`` read a table
        with the fine-tune's own column names (``--text-columns "tweet text"``) as the fine-tune did.
        """
        spec = self._task_spec
        if spec is None:
            return None
        text, label = spec.get("text_columns"), spec.get("label_column")
        if not (isinstance(text, list) and 0 < len(text) <= 2 and all(isinstance(c, str) and c for c in text)):
            return None
        return {"text_columns": list(text), "label_column": label if isinstance(label, str) and label else None}

    @property
    def squad_windows(self):
        """``{"doc_stride": int, "max_query_length": int}`` a span-QA model was fine-tuned with (its ``task.json``),
        else None: ``mbk evaluate FILE`` cuts contexts and questions into the same windows as ``mbk evaluate DIR``."""
        spec = self._task_spec
        if spec is None or spec.get("task") != "span_qa":
            return None
        windows = {key: spec.get(key) for key in ("doc_stride", "max_query_length")}
        valid = all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 65536 for v in windows.values())
        return windows if valid else None

    def describe(self):
        if self.kind in ("preset", "config"):
            return f"{KINDS[self.kind]} {self.name} (random weights, seed {self.seed})"
        return f"{KINDS[self.kind]} {self.name}"


def write_labels(directory, names):
    """Writes ``directory/labels.txt``: the class names, one a line, in output order (what :func:`read_labels` reads
    back and ``mbk export`` embeds for the clients)."""
    (Path(directory) / LABELS_FILE).write_text("".join(f"{name}\n" for name in names), encoding="utf-8")


def read_labels(directory, classes=None):
    """Class names from a ``labels.txt`` or a Hugging Face config's ``id2label``, in id order ([] when none).

    Both are checked by ``data/class_names.py`` (strings, ``id2label`` ids ``0 .. n-1``, no look-alikes) and,
    with ``classes`` (the head's output columns), counted against the head (ConfigError); ``labels.txt`` is
    read with a bound (``LABELS_MAX_BYTES``)."""
    directory = Path(directory)
    labels_file = directory / LABELS_FILE
    if labels_file.is_file():
        data = read_bounded(labels_file, "the class names", LABELS_MAX_BYTES)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise ConfigError(f"{labels_file} is not UTF-8 text (byte {err.start}); save it as UTF-8") from err
        # "\n" only, as the clients split the packed copy; a blank line holds no class.
        names = [line.rstrip("\r") for line in text.split("\n")]
        return check_class_names([n for n in names if n], str(labels_file), classes)
    if not (directory / "config.json").is_file():
        return []
    try:
        config = load_json(directory / "config.json", "config.json", expect=dict)
    except ConfigError:
        return []  # its own reader (the importer) says what is wrong with it
    if not config.get("id2label"):
        return []  # absent, null or empty: no names recorded
    return check_class_names(names_of_id2label(config["id2label"], str(directory / "config.json")),
                             f"{directory / 'config.json'} id2label", classes)


def _source_labels(model, directory):
    """The class names beside ``model``: a classifier's are checked and counted against its head here, before any
    command writes a thing; another model's are only carried along (no client reads them), [] when unreadable."""
    if getattr(model, "architecture", None) in LABELLED_HEADS:
        return read_labels(directory, getattr(model, "head_config", {}).get("num_labels"))
    try:
        return read_labels(directory)
    except ConfigError:
        return []
