"""The export plan: every setting of one export, decided once, after the source loads.

:class:`~mobilebert_kit.convert.plan.export_options.ExportOptions` holds only what the user said (a flag, a
recipe key, a Python keyword; ``None`` or ``"auto"`` where they said nothing). :class:`SourceFacts` holds
what the loaded source declares (its head, position table, classes, sentence pooling, fine-tuned length,
labels, tokenizer). :func:`plan_export` combines the two into a frozen :class:`ExportPlan`; everything
after it (substitution and recovery, the calibration and validation inputs, the graph, the writers, the
search, the metadata) reads the plan and decides nothing again. A searched setting is the same plan with
another mode and float layers (:meth:`ExportPlan.setting`).

An export's sequence length has one rule, :func:`sequence_length`. A written file records its plan's length
in its ``mbk_metadata`` (``planned_seq_len``); every reader of a written file (``mbk profile``, ``validate``,
``evaluate``, the pipeline) runs it at the length one TF-free function reads back,
:func:`mobilebert_kit.artifacts.metadata.planned_length`.

Standard library and the TF-free task and mode tables only: ``mbk`` and the profiler import it without
TensorFlow.

Example:
    >>> sequence_length(None, "features", "tflite", max_positions=64)
    64
"""

from dataclasses import dataclass, field, replace
from typing import NamedTuple

from mobilebert_kit.convert.plan.export_tasks import (
    AUTO_TASK, AUTO_TASK_BY_PROBLEM, FORMATS, GRAPH_INPUTS, TASKS, export_task, graph_inputs,
)
from mobilebert_kit.convert.quantization.modes import quantization_mode
from mobilebert_kit.data.class_names import LABELLED_HEADS, check_class_names
from mobilebert_kit.errors import ConfigError

# The sequence length of an export whose task record names none for its format (ExportTask.default_seq_len)
# and whose source was not fine-tuned at a length of its own.
DEFAULT_SEQ_LEN = 128


def sequence_length(asked, task=None, fmt=None, max_positions=None, trained=None, option="--seq-len"):
    """The one rule for an export's sequence length.

    The length the user asked for, refused past the position table; else the task's own length for the
    format (the Task Library's question answerer runs 384 tokens), else the length a fine-tuned model was
    trained at (its ``task.json``), else :data:`DEFAULT_SEQ_LEN`; a default never exceeds the position table.

    Args:
        asked (int | None): the user's length (``--seq-len``, named as ``option`` in the refusal), or None.
        task (str | None): the export task (None: unknown, a file that records none); ``fmt`` its format.
        max_positions (int | None): the longest input the model takes (models.api.max_positions; None: unknown).
        trained (int | None): the length a fine-tuned model was trained at.

    Raises:
        ConfigError: ``asked`` exceeds the position table.

    Example:
        >>> sequence_length(None, "span_qa", "tflite", max_positions=512, trained=256)
        384
        >>> sequence_length(None, "classification", "tflite", max_positions=512, trained=32)
        32
    """
    if asked is not None:
        if max_positions and asked > max_positions:
            raise ConfigError(f"{option} {asked} exceeds the model's {max_positions} positions; use at most "
                              f"{max_positions}")
        return int(asked)
    # A model fine-tuned at 32 tokens exported at 128 ran 4x the work for inputs it was never trained on.
    fallback = trained if isinstance(trained, int) and not isinstance(trained, bool) and trained > 1 \
        else DEFAULT_SEQ_LEN
    default = export_task(task).default_seq_len.get(fmt, fallback) if task else fallback
    return min(default, max_positions) if max_positions else default


def input_layout(options, task=None):
    """``(dynamic_axes, mask_dtype)`` of an export of ``task``: what the user's words decide about its inputs.

    Both formats have dynamic axes unless ``--static-axes`` is asked: ONNX its batch and sequence (optimum's
    signature), TFLite its sequence only, at batch 1 (the clients run one text at a time and resize the
    sequence to its token count, so short text costs what it is long, not ``--seq-len``). A TFLite file is
    static with ``--batch-size`` above 1, and for a task whose outputs follow the text's length
    (``ExportTask.per_text_outputs`` says why). The attention mask has the token ids' type, except in an
    int8-io file, whose float mask becomes an int8 input on integer-only accelerators (an integer mask would
    need a float CAST in front of the first layer there).
    """
    dynamic = options.dynamic_axes
    if dynamic is None:
        # A TFLite file's open axis is its sequence only, at batch 1 (its format's dynamic_axes): a --batch-size file is static.
        per_text = task is None or export_task(task).per_text_outputs
        dynamic = not options.static_axes and (FORMATS[options.format].open_by_default or (options.batch_size == 1 and per_text))
    mask = options.mask_dtype
    if mask is None:
        mask = "float32" if options.io_type == "int8" else FORMATS[options.format].input_dtype
    return bool(dynamic), mask


def pooling_notes(options, declared_pooling):
    """The notes of an export whose ``--pooling`` / ``--normalize`` contradict the checkpoint's declaration: it
    is honoured, and the export says what the checkpoint declares (it said nothing).
    """
    if declared_pooling is None:
        return []
    notes = []
    if options.pooling not in ("auto", declared_pooling.mode):
        notes.append(f"{options.name_of('pooling')} {options.pooling} replaces the {declared_pooling.mode} pooling the "
                     "checkpoint declares (modules.json): its vectors will differ from the checkpoint's")
    if options.normalize is not None and bool(options.normalize) != bool(declared_pooling.normalize):
        declared = "a Normalize module" if declared_pooling.normalize else "no Normalize module"
        notes.append(f"{options.name_of('normalize')} {str(options.normalize).lower()} overrides the checkpoint, "
                     f"which declares {declared} (modules.json)")
    return notes


def decide_task(options, architecture, declared_pooling=None, num_outputs=None, problem_type=None):
    """``(task, pooling, normalize)`` of an export of a source with ``architecture``.

    ``task="auto"`` is the architecture's :data:`~mobilebert_kit.convert.plan.export_tasks.AUTO_TASK`, except that an
    encoder with a declared sentence pooling (or an explicit ``pooling``) exports as ``embedding``, and a
    sequence head as the task of its problem type (:data:`~mobilebert_kit.convert.plan.export_tasks.AUTO_TASK_BY_PROBLEM`:
    a regressor's raw scores, a multi-label classifier's sigmoids). ``pooling="auto"`` is the declared pooling,
    refused for ``embedding`` when there is none. The arguments are :class:`SourceFacts` fields; a task the
    source cannot export is a ConfigError naming the tasks it can.
    """
    task = options.task
    if task == "auto":
        wants_embedding = declared_pooling is not None or options.pooling != "auto"
        task = "embedding" if architecture == "encoder" and wants_embedding else AUTO_TASK[architecture]
        task = AUTO_TASK_BY_PROBLEM.get(problem_type, task)
    record = export_task(task)
    if architecture not in record.architectures:
        can = [name for name, t in TASKS.items() if architecture in t.architectures]
        raise ConfigError(f"{options.name_of('task', task)} exports {' or '.join(record.architectures)} models; "
                          f"this source is {architecture}: use {options.name_of('task')} {' or '.join(can)}")
    if record.one_output is not None and num_outputs is not None and (num_outputs == 1) != record.one_output:
        # A declared problem_type must fit too: a one-output single-label head was told "use --task classification".
        fits = [name for name, t in TASKS.items() if architecture in t.architectures and (
            t.one_output in (None, num_outputs == 1) and problem_type in (t.problem_types or ()) if problem_type
            else t.one_output == (num_outputs == 1))]
        needs = (f"{options.name_of('task', task)} needs a head with "
                 f"{'one output' if record.one_output else 'several outputs'}; this one has {num_outputs}")
        if not fits:
            raise ConfigError(f"{needs} and config.json's problem_type {problem_type}, which no task exports (a "
                              "softmax over one label is always 1): set problem_type to regression (its raw score) "
                              "or multi_label_classification (a sigmoid), as the head was trained")
        raise ConfigError(f"{needs}: use {options.name_of('task')} {' or '.join(fits)}")
    if record.problem_types is not None and problem_type is not None and problem_type not in record.problem_types:
        raise ConfigError(f"{options.name_of('task', task)} answers {' or '.join(record.problem_types)}, and this "
                          f"head's problem_type is {problem_type} (its users read "
                          f"{export_task(AUTO_TASK_BY_PROBLEM[problem_type]).description.split(' (')[0]}): use "
                          f"{options.name_of('task')} {AUTO_TASK_BY_PROBLEM[problem_type]}")
    if task != "embedding":
        return task, None, None
    if options.pooling == "auto" and declared_pooling is None:
        raise ConfigError(f"{options.name_of('task', 'embedding')}: the checkpoint declares no sentence pooling "
                          f"(no sentence-transformers modules.json); pass {options.name_of('pooling')} mean|cls")
    pooling = declared_pooling.mode if options.pooling == "auto" else options.pooling
    normalize = options.normalize
    if normalize is None:
        # A declared Normalize module decides; without one the pooled vector is left as pooled.
        normalize = bool(declared_pooling.normalize) if declared_pooling is not None else False
    return task, pooling, bool(normalize)


def check_labels(options, architecture, num_outputs, found=()):
    """Given class names must name the head's classes one to one: MediaPipe's classifier maps output
    column i to line i of ``labels.txt``, so a short or long list labels answers wrongly in the app. The source's
    own names (``found``: its ``labels.txt`` or ``id2label``) are held to the same rules (``data/class_names.py``):
    3 names for a 2-class head were packed and validation said PASSED.
    """
    if not options.labels:
        if architecture in LABELLED_HEADS and found:
            check_class_names(found, "the source's class names (labels.txt or config.json id2label)", num_outputs)
        return
    if architecture not in LABELLED_HEADS:
        raise ConfigError(f"{options.name_of('labels')} names classes, and this source is {architecture}, not a "
                          "classifier; remove it")
    if num_outputs is not None and len(options.labels) != num_outputs:
        raise ConfigError(f"{options.name_of('labels')} lists {len(options.labels)} names and the model's head has "
                          f"{num_outputs} classes; list one name per class, in the head's order")
    check_class_names(options.labels, options.name_of("labels"))


class FileMetadata(NamedTuple):
    """What an export writes beside the weights, for every setting the search tries: our ``mbk_metadata``
    (``{}`` for a drift probe, no client's file), the ``mbk_vocab`` lines and the tokenizer the TFLite clients
    run (``data.tokenizer_kinds``; None: none in the source, byte-level BPE, ``--no-vocab``).
    """

    meta: dict
    vocab: list = None
    client_unit: object = None

    @property
    def layer_norm(self):
        """Whether the model normalizes with LayerNorm (not NoNorm): both writers then give full int8 the mode's
        ``layer_norm_*`` defaults (``quantization.modes.TfliteSettings``)."""
        return self.meta.get("normalization_type") == "layer_norm"


@dataclass(frozen=True)
class SourceFacts:
    """What a loaded source declares that an export plan depends on (``prepare.source.source_facts`` reads it).

    ``declared_pooling`` is the checkpoint's sentence-transformers pooling (``mode``, ``normalize``);
    ``type_vocab_size`` 0 or 1 means no token types to feed; ``problem_type`` is a sequence classifier's
    (``sequence_classifier.problem_of``: transformers' ``problem_type``, declared or inferred).
    """

    architecture: str
    max_positions: int = None
    num_outputs: int = None
    declared_pooling: object = None
    trained_seq_len: int = None
    labels: tuple = ()
    tokenizer: object = field(default=None, compare=False)
    type_vocab_size: int = 2
    problem_type: str = None


@dataclass(frozen=True)
class ExportPlan:
    """Every setting of one export, decided once by :func:`plan_export`; read, never changed, downstream.

    Args:
        options (ExportOptions): what the user said (the user's own words, for messages and reports).
        architecture (str): the source's head.
        task (str): the export task (never ``"auto"``).
        pooling (str | None): the embedding's sentence pooling.
        normalize (bool | None): the embedding's L2 normalization.
        seq_len (int): the static input length, or for dynamic axes the length validated and calibrated at.
        max_seq_len (int | None): the position table: the longest input the file takes.
        dynamic_axes (bool): the format's dynamic axes are open (:attr:`open_axes`).
        mask_dtype (str): the attention mask's input type.
        quantize (str): the quantization mode written (a searched setting's own mode).
        keep_float_layers (tuple): layer paths kept float.
        keep_float_ops (tuple | None): op types kept float (None: the mode's default).
        labels (tuple): the class names the file carries.
        num_outputs (int | None): the head's output columns.
        tokenizer: the checkpoint's tokenizer (None: no vocabulary).
        input_names (tuple): the graph's inputs, in order (``export_tasks.graph_inputs``).

    Example:
        >>> from mobilebert_kit.convert.plan.export_options import ExportOptions
        >>> plan = plan_export(ExportOptions("tiny-bert", out="m.tflite"), SourceFacts("encoder", 64))
        >>> (plan.task, plan.seq_len, plan.dynamic_axes, plan.mask_dtype)
        ('features', 64, False, 'int32')
    """

    options: object
    architecture: str
    task: str
    pooling: str
    normalize: bool
    seq_len: int
    max_seq_len: int
    dynamic_axes: bool
    mask_dtype: str
    quantize: str
    keep_float_layers: tuple = ()
    keep_float_ops: tuple = None
    labels: tuple = ()
    num_outputs: int = None
    tokenizer: object = field(default=None, compare=False, repr=False)
    input_names: tuple = GRAPH_INPUTS

    @property
    def mode(self):
        """The :class:`~mobilebert_kit.convert.quantization.modes.QuantizationMode` record written."""
        return quantization_mode(self.quantize)

    @property
    def asked(self):
        """The mode record the user asked for (``auto`` for a search, whatever the setting written)."""
        return quantization_mode(self.options.quantize)

    @property
    def format(self):
        return self.options.format

    @property
    def ids_dtype(self):
        """The token inputs' type of this format (``export_tasks.FORMATS``)."""
        return FORMATS[self.options.format].input_dtype

    @property
    def open_axes(self):
        """The input axes left dynamic: ``()``, or the format's ``dynamic_axes`` with dynamic axes."""
        return FORMATS[self.format].dynamic_axes if self.dynamic_axes else ()

    @property
    def clips_in_graph(self):
        """Whether the graph cuts a text longer than the position table (an open sequence, the format's ``clips_in_graph``)."""
        return "sequence" in self.open_axes and FORMATS[self.format].clips_in_graph

    @property
    def batch_size(self):
        """The static batch size (None when the batch axis is dynamic: ONNX with dynamic axes)."""
        return None if "batch" in self.open_axes else self.options.batch_size

    @property
    def static_seq_len(self):
        """The inputs' sequence dimension: the planned length, or None when the sequence axis is dynamic."""
        return None if "sequence" in self.open_axes else self.seq_len

    def name_of(self, name, *value):
        """An option as the user wrote it (:meth:`ExportOptions.name_of`)."""
        return self.options.name_of(name, *value)

    def setting(self, quantize, keep_float_layers=()):
        """The plan of one searched setting: ``quantize``'s mode with ``keep_float_layers`` float."""
        return replace(self, quantize=quantize, keep_float_layers=tuple(keep_float_layers))

    def as_float(self):
        """The float32 plan of the same export (the reference a search's budget is taken from)."""
        return replace(self, quantize="none", keep_float_layers=(), keep_float_ops=None)

    def describe(self):
        """The plan in one line, for the log."""
        seq = f"seq {self.seq_len}" + (" (dynamic axes)" if self.dynamic_axes else "")
        return f"{self.format}, {self.options.quantize}, task {self.task}, {seq}"


def plan_export(options, facts):
    """The :class:`ExportPlan` of ``options`` for a source declaring ``facts``: every decision, once.

    Args:
        options (ExportOptions): the user's words (checked: ``options.check()``).
        facts (SourceFacts): what the loaded source declares.

    Returns:
        ExportPlan: frozen.

    Raises:
        ConfigError: the task, pooling, length or labels do not fit the source (one line naming the option).

    Example:
        >>> from mobilebert_kit.convert.plan.export_options import ExportOptions
        >>> plan_export(ExportOptions("tiny-bert", out="m.tflite", task="features"), SourceFacts("encoder", 64)).seq_len
        64
    """
    task, pooling, normalize = decide_task(options, facts.architecture, facts.declared_pooling, facts.num_outputs,
                                           facts.problem_type)
    if getattr(options, "tokenizer_in_graph", False):
        # Refused here, before anything converts: onnxruntime-extensions must run the checkpoint's tokenizer as it is.
        from mobilebert_kit.convert.onnx.text_graph import extensions_version, refusal

        why = refusal(facts.tokenizer)
        if why is not None:
            raise ConfigError(f"{options.name_of('tokenizer_in_graph')}: onnxruntime-extensions cannot tokenize for "
                              f"this checkpoint: {why}; export without it and tokenize in the app")
        extensions_version()
    seq_len = sequence_length(options.seq_len, task, options.format, facts.max_positions, facts.trained_seq_len,
                              option=options.name_of("seq_len"))
    check_labels(options, facts.architecture, facts.num_outputs, facts.labels)
    labels = tuple(options.labels) or (tuple(facts.labels) if facts.architecture in LABELLED_HEADS else ())
    dynamic, mask = input_layout(options, task)
    return ExportPlan(
        options=options, architecture=facts.architecture, task=task, pooling=pooling, normalize=normalize,
        seq_len=seq_len, max_seq_len=facts.max_positions, dynamic_axes=dynamic, mask_dtype=mask,
        quantize=options.quantize, keep_float_layers=tuple(options.keep_float_layers),
        keep_float_ops=options.keep_float_ops, labels=labels, num_outputs=facts.num_outputs,
        tokenizer=facts.tokenizer,
        input_names=graph_inputs(options.format, facts.type_vocab_size,
                                 getattr(facts.tokenizer, "token_types", None)),
    )
