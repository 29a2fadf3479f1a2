"""The export options, each declared once: field, default, type, ``mbk export`` flag, recipe key, help, bounds.

:class:`ExportOptions` is the one schema. Each field's ``metadata`` (written
by :func:`option`) names its command-line flag and its recipe key; the
``mbk export`` parser (:func:`add_arguments`), the recipe reader's key table
(:func:`recipe_keys`) and the checks (:meth:`ExportOptions.check`) are
generated from it, and numeric bounds come from
:data:`mobilebert_kit.utils.limits.LIMITS` under the field's ``limit`` key. An
error names the option the way the user wrote it (``named_by``): ``--seq-len``
on the command line, ``[export] seq_len`` in a recipe, ``seq_len`` in Python.

Standard library only (plus the TF-free mode table): ``mbk`` builds its parser
from here without loading TensorFlow.
"""

from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from mobilebert_kit.artifacts.arches import ARCHES
from mobilebert_kit.artifacts.formats import BATCH_SIZE, SEQ_LEN
from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.convert.plan.export_plan import DEFAULT_SEQ_LEN
from mobilebert_kit.convert.plan.export_tasks import AUTO_TASK, FORMATS, POOLINGS, TASKS
from mobilebert_kit.convert.quantization.modes import (
    MODES,
    THRESHOLD_KEYS,
    THRESHOLD_LIMITS,
    modes_allowing,
    needs_calibration_message,
    quantization_mode,
)
from mobilebert_kit.errors import ConfigError, check_choice
from mobilebert_kit.utils.output_check import OVERWRITE_HELP
from mobilebert_kit.utils.input_paths import input_path_option
from mobilebert_kit.utils.limits import SEED, Limit, check_number, number_option

# [source] head: "auto" (the head the checkpoint holds) or a task head, by its architecture name
# (models.heads.HEADS, whose keys AUTO_TASK lists; this module needs no TensorFlow).
HEAD_CHOICES = ("auto",) + tuple(name for name in AUTO_TASK if name != "encoder")

NAMED_BY = ("field", "flag", "recipe")
# attention_mask input types: an integer mask has the format's token-id type (the format's input_dtype: all-int32
# inputs for the TFLite clients, int64 for optimum-style ONNX code); float32 is the pre-issue-14 file.
MASK_DTYPES = ("float32", "int32", "int64")
# --quantize auto's budget when none is given: MLPerf Mobile accepts a quantized model at >= 99% of float.
DEFAULT_MAX_DROP = 0.01

# Rows of calibration / validation data (each row is tokenized and run).
ROWS = Limit(int, 1, 1_000_000)
# `mbk evaluate`'s numbers, also a recipe's [evaluation] keys (max_drop is an export option below): rows scored
# (--limit) and the quantized/float ratio a file must keep (--min-ratio).
EVALUATE_LIMITS = {"limit": Limit(int, 1, 10**9), "min_ratio": Limit(float, 0.0, 10.0)}
_MANY = 10**9  # step counts: far above any run on one machine, far below what overflows int32/int64 maths
# The recovery training of `mbk substitute` and a recipe's [substitute] table (checked again when a run resumes).
SUBSTITUTE_LIMITS = {
    # FFN hidden units kept by --intermediate-size (BERT-large has 4,096; 65,536 is 16x that)
    "intermediate_size": Limit(int, 1, 65536),
    "recover_steps": Limit(int, 0, _MANY),
    "seq_len": SEQ_LEN,
    "learning_rate": Limit(float, 0.0, 10.0, lo_open=True),
    "batch_size": BATCH_SIZE,
    "seed": SEED,
    "checkpoint_every": Limit(int, 1, _MANY),
}


def option(default=None, *, help, flag=None, recipe=None, limit=None, choices=None, kind=None, factory=None,
           none_ok=False):
    """One export option's declaration: a dataclass field whose metadata drives the CLI, the recipe and checks.

    ``flag`` is the ``mbk export`` flag (``"src"`` for the positional; None: a recipe key only), ``recipe`` its
    ``(table, key)`` (None: a flag only); ``choices`` may be a dict (its keys, read when used: the mode table).
    ``kind`` says how the flag parses: ``"value"`` (default), ``"switch"`` (store_true), ``"negated"`` (``--no-x``
    sets False), ``"path"`` / ``"source"`` (checked input paths), ``"csv"`` (comma-separated list),
    ``"csv-or-none"`` (None: the default; ``none``: empty), ``"thresholds"`` (repeated ``KEY=VALUE``).
    ``none_ok``: None is valid (a dynamic shape, the model's own value).
    """
    meta = {"help": help, "flag": flag, "recipe": recipe, "limit": limit, "choices": choices,
            "kind": kind or "value", "none_ok": none_ok}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


_KEEP_FLOAT_OPS_HELP = (
    "comma-separated op types kept in float (e.g. SOFTMAX); 'none' for none. Default: SOFTMAX and the "
    "attention-mask ADD for TFLite full int8 (XNNPACK has no int8 softmax), a LayerNorm model's LayerNorms and "
    "residual ADDs (its feed-forward output projections dynamic-range int8), and an embedding's sentence pooling "
    "(SUM, DIV, MAXIMUM, L2_NORMALIZATION); nothing otherwise")


@dataclass(frozen=True)
class ExportOptions:
    """What the user said about one export; the CLI flags and a recipe's keys are generated from these fields.

    Frozen, and only the user's words: ``None`` / ``"auto"`` where they said nothing. What follows from the
    source (task, pooling, length, axes, input types) is decided once, after the source loads, by
    :func:`~mobilebert_kit.convert.plan.export_plan.plan_export`.

    Each field's ``help`` (the ``mbk export --help`` text) says more; the keyword is the field name.

    Args:
        source (str | ModelSource | keras.Model): a path or preset name (``--help``'s SRC), or a model object.
        format (str): ``"tflite"`` or ``"onnx"``.
        quantize (str): the quantization mode, a key of :data:`~mobilebert_kit.convert.quantization.modes.MODES`.
        out (str): the artifact path.
        task (str): ``"auto"`` or a key of :data:`~mobilebert_kit.convert.plan.export_tasks.TASKS`.
        pooling (str): ``"auto"``, ``"mean"`` or ``"cls"``: the ``embedding`` task's sentence vector.
        seq_len (int): sequence length; None: decided by the plan (``export_plan.sequence_length``).
        batch_size (int): static batch size (ONNX: ignored with dynamic axes).
        calibration (str): ``.txt`` (tokenized) or ``.npz`` file of calibration inputs.
        calibration_count (int): rows of calibration data used at most.
        validation_data (str): ``.txt`` / ``.npz`` validation inputs.
        validation_count (int): rows validated.
        validate (bool): check the artifact against the Keras source before writing it.
        thresholds (dict): overrides of the mode's default thresholds.
        drift_report (bool): also export a per-layer probe and report each layer's drift (quantized only).
        io_type (str): ``"float32"`` or ``"int8"`` inputs/outputs (TFLite int8/qat).
        mask_dtype (str): attention-mask input type; None: decided by the plan (``export_plan.input_layout``).
        attention_mask_value (float): score of padded keys in the exported graph (None keeps the model's).
        keep_float_ops (tuple): op types left in float, in the format's spelling; None: the mode's default.
        keep_float_layers (tuple): layer paths left in float (``transformer_layer_5``, ``norm``, ``ffn_0/output``).
        fold_nonorm (bool): fold each block's NoNorms into its dense layers before converting (docs/export.md
            says what it saves and why it is off by default).
        opset (int): ONNX opset.
        dynamic_axes (bool): dynamic axes (``export_tasks.FORMATS``); None: decided by ``export_plan.input_layout``.
        static_axes (bool): static ``[batch_size, seq_len]`` inputs (GPU and NPU delegates need them).
        tokenizer_in_graph (bool): ONNX: the checkpoint's tokenizer runs inside the file (``onnx/text_graph.py``).
        embed_vocab (bool): store the vocabulary in the artifact's metadata.
        labels (tuple): class names to record (default: from the source).
        substitutions (dict): ``{"norm": ..., "act": ..., "ffn": ...}`` applied before export (substitution.py).
        recover_steps (int): recovery distillation steps after substitution.
        recover_data (str): recovery data file.
        qat_steps (int): quantization-aware fine-tuning steps for ``qat``.
        qat_learning_rate (float): its learning rate.
        eval_data (str): labelled data whose task metric ``quantize="auto"`` holds (``quantization.search``).
        max_drop (float): ``auto``'s budget, a fraction of the float export's metric (None: :data:`DEFAULT_MAX_DROP`).
        head (str): head to load from a Hugging Face directory (``"auto"``).
        normalize (bool): ``embedding``: L2-normalize the sentence vector; None: as the checkpoint declares.
        overwrite (bool): replace a file at ``out`` (or its report) that mbk did not write (``utils.atomic``).
        named_by (str): how errors name an option: ``"field"`` (Python), ``"flag"`` (``mbk export``) or
            ``"recipe"`` (``[table] key``).

    Example:
        >>> ExportOptions("tiny-bert", "tflite", "dynamic", out="tiny.tflite", seq_len=32).check().seq_len
        32
    """

    source: object = option(MISSING, flag="src", kind="source",
                            help="saved-model directory, Hugging Face directory or preset name")
    format: str = option("tflite", flag="--format", choices=tuple(FORMATS), help=None)
    quantize: str = option("none", flag="--quantize", recipe=("export", "quantize"), choices=MODES, help=None)
    task: str = option("auto", flag="--task", recipe=("export", "task"), choices=("auto",) + tuple(TASKS),
                       help="what the file is for: its outputs, named for its clients (default auto: by the "
                       "model's head; a sentence-transformers checkpoint exports as embedding)")
    pooling: str = option("auto", flag="--pooling", recipe=("export", "pooling"), choices=("auto",) + POOLINGS,
                          none_ok=True,
                          help="embedding task: sentence vector pooling (default auto: the checkpoint's declared "
                          "pooling)")
    seq_len: int = option(None, flag="--seq-len", recipe=("export", "seq_len"), limit=SEQ_LEN, none_ok=True,
                          help=f"sequence length: the static input length (with dynamic axes: the validated and "
                          f"calibrated one); "
                          f"default: the task's, 384 for TFLite span_qa, else a fine-tuned model's own (task.json), "
                          f"else {DEFAULT_SEQ_LEN}")
    batch_size: int = option(1, flag="--batch-size", recipe=("export", "batch_size"), limit=BATCH_SIZE,
                             none_ok=True, help="static batch size (default %(default)s)")
    out: str = option(None, flag="--out", help="output file (.tflite or .onnx)")
    calibration: str = option(None, flag="--calibration", recipe=("calibration", "data"), kind="path",
                              help="calibration data: .txt (one sentence per line) or .npz input arrays")
    validation_data: str = option(None, flag="--validation-data", recipe=("validation", "data"), kind="path",
                                  help="validation inputs (.txt or .npz); default: built-in sample sentences for a model "
                                  "with a vocabulary (text the calibration did not see), else calibration rows")
    overwrite: bool = option(False, flag="--overwrite", kind="switch", help=OVERWRITE_HELP)
    io_type: str = option("float32", flag="--io-type", recipe=("export", "io_type"), choices=("float32", "int8"),
                          help="TFLite int8/qat io type")
    mask_dtype: str = option(None, flag="--mask-dtype", recipe=("export", "mask_dtype"), choices=MASK_DTYPES,
                             none_ok=True, help="attention_mask input type (default: the token ids' type, TFLite "
                             "int32 and ONNX int64; float32: the float-mask file for apps that feed one)")
    attention_mask_value: float = option(-120.0, flag="--mask-value", recipe=("export", "mask_value"),
                                         limit=Limit(float, -1e9, 0.0), none_ok=True,
                                         help="score of padded keys in the exported graph (default %(default)g: int8 friendly)")
    keep_float_layers: tuple = option((), flag="--keep-float", recipe=("export", "keep_float_layers"), kind="csv",
                                      help="comma-separated layer paths kept in float (e.g. "
                                      "transformer_layer_5,norm,ffn_0/output)")
    keep_float_ops: tuple = option(None, flag="--keep-float-ops", recipe=("export", "keep_float_ops"),
                                   kind="csv-or-none", none_ok=True, help=_KEEP_FLOAT_OPS_HELP)
    fold_nonorm: bool = option(False, flag="--fold-nonorm", recipe=("export", "fold_nonorm"), kind="switch",
                               help="fold each block's NoNorms into its dense layers (exact in float; fewer "
                               "ops, see docs/export.md); NoNorm models with self-attention only")
    # tf2onnx 1.16 knows opsets up to 18 (tf2onnx.constants.OPSET_TO_IR_VERSION); per-axis Q/DQ needs 13
    opset: int = option(17, flag="--opset", recipe=("export", "opset"), limit=Limit(int, 13, 18),
                        help="ONNX opset (default %(default)s)")
    dynamic_axes: bool = option(None, flag="--dynamic-axes", recipe=("export", "dynamic_axes"), kind="switch",
                                none_ok=True, help="dynamic axes: ONNX batch and sequence (the default); "
                                "TFLite a dynamic sequence, batch 1 (inputs [1, -1]: each text runs at its own "
                                "token count, up to the position table; the default of the embedding, "
                                "classification and regression tasks)")
    static_axes: bool = option(False, flag="--static-axes", recipe=("export", "static_axes"), kind="switch",
                               help="static [--batch-size, --seq-len] inputs instead of dynamic axes (every text padded to "
                               "--seq-len; GPU and NPU delegates need static shapes)")
    qat_steps: int = option(100, flag="--qat-steps", recipe=("export", "qat_steps"), limit=Limit(int, 0, _MANY),
                            help="quantization-aware fine-tuning steps (qat)")
    thresholds: dict = option(factory=dict, flag="--threshold", kind="thresholds",
                              help="override a validation threshold (" + ", ".join(THRESHOLD_KEYS) + ")")
    eval_data: str = option(None, flag="--eval-data", recipe=("evaluation", "data"), kind="path",
                            help="labelled data (the .tsv of mbk finetune / mbk evaluate) whose task metric "
                            "--quantize auto holds; with another mode the report shows the written file's metric")
    max_drop: float = option(None, flag="--max-drop", recipe=("evaluation", "max_drop"), limit=Limit(float, 0.0, 0.5),
                             none_ok=True,
                             help=f"--quantize auto: largest drop of the task metric, as a fraction of the float "
                             f"export's (default {DEFAULT_MAX_DROP}: quantized >= 99%% of float, MLPerf Mobile's rule)")
    drift_report: bool = option(False, flag="--drift-report", recipe=("validation", "drift_report"), kind="switch",
                                help="per-layer drift report (quantized exports)")
    validate: bool = option(True, flag="--no-validate", kind="negated",
                            help="write the artifact without validating it")
    check_arch: str = option(None, flag="--check-arch", recipe=("validation", "check_arch"), choices=ARCHES,
                             none_ok=True,
                             help="also run the file on this CPU architecture's runtime, emulated (QEMU), before "
                             "writing it: a file whose outputs there miss the mode's thresholds against the x86-64 "
                             "run or the Keras model is refused, and a search (the int8 fallback, auto) judges "
                             "each setting there too (numerics only, docs/export.md#arm-numerics-under-emulation)")
    check_cpu: str = option(None, flag="--check-cpu", recipe=("validation", "check_cpu"), none_ok=True,
                            help="the emulated CPU of --check-arch (arm64: " + ", ".join(ARCHES["arm64"].cpus)
                            + f"; default {ARCHES['arm64'].default_cpu})")
    tokenizer_in_graph: bool = option(False, flag="--tokenizer-in-graph", recipe=("export", "tokenizer_in_graph"),
                                      kind="switch",
                                      help="ONNX: put the checkpoint's tokenizer into the file (onnxruntime-extensions' "
                                      "custom ops): its one input is a string tensor 'text' [batch]; apps register "
                                      "onnxruntime_extensions.get_library_path() (docs/clients/text-in-onnx.md)")
    embed_vocab: bool = option(True, flag="--no-vocab", recipe=("export", "embed_vocab"), kind="negated",
                               help="do not embed the vocabulary in the metadata")
    calibration_count: int = option(200, recipe=("calibration", "count"), limit=ROWS,
                                    help="rows of calibration data used at most")
    validation_count: int = option(16, recipe=("validation", "count"), limit=ROWS, help="rows validated")
    labels: tuple = option((), recipe=("export", "labels"), help="class names to record")
    substitutions: dict = option(factory=dict, help="operator substitutions ([substitute] norm / act / intermediate_size)")
    recover_steps: int = option(0, recipe=("substitute", "recover_steps"), limit=SUBSTITUTE_LIMITS["recover_steps"],
                                help="recovery distillation steps after substitution")
    recover_data: str = option(None, recipe=("substitute", "data"), help="recovery data file")
    qat_learning_rate: float = option(1e-5, recipe=("export", "qat_learning_rate"), limit=Limit(float, 0.0, 10.0, lo_open=True),
                                      help="quantization-aware fine-tuning learning rate")
    head: str = option("auto", recipe=("source", "head"), choices=HEAD_CHOICES,
                       help="head to load from a Hugging Face directory")
    normalize: bool = option(None, none_ok=True, help="embedding task: L2-normalize the sentence vector "
                             "(default: the checkpoint's declared Normalize module, else no)")
    named_by: str = field(default="field", repr=False, compare=False)

    def name_of(self, name, value=MISSING):
        """Option ``name`` as the user wrote it (``--seq-len``, ``[export] seq_len``, ``seq_len``), with ``value``.

        ``value`` is appended the way the user wrote it (``--quantize qat``, ``[export] quantize = 'qat'``).

        Example:
            >>> ExportOptions("tiny-bert", named_by="recipe").name_of("attention_mask_value")
            '[export] mask_value'
        """
        meta = self.__dataclass_fields__[name].metadata
        if self.named_by == "flag" and meta["flag"]:
            text = meta["flag"]
            return text if value is MISSING else f"{text} {value}"
        if self.named_by == "recipe" and meta["recipe"]:
            text = "[{}] {}".format(*meta["recipe"])
            return text if value is MISSING else f"{text} = {value!r}"
        return name if value is MISSING else f"{name}={value!r}"

    def check(self):
        """Checks every option against its declaration and the mode's record; returns self.

        Nothing is changed: the options stay the user's words (``export_plan`` decides the rest).

        Raises:
            ConfigError / ExportError: one line naming the option as the user wrote it.
        """
        check_choice("named_by", self.named_by, NAMED_BY)
        for f in fields(self):
            meta = f.metadata
            value = getattr(self, f.name)
            if value is None and meta.get("none_ok"):
                continue
            if meta.get("choices") and value not in meta["choices"]:
                raise ConfigError(self._unknown(f.name, value, meta["choices"]))
            if meta.get("limit"):
                check_number(self.name_of(f.name), value, meta["limit"])
        if not isinstance(self.thresholds, dict):
            raise ConfigError(f"{self.name_of('thresholds')} must map threshold names to numbers")
        for key, value in self.thresholds.items():
            check_choice("validation threshold", key, THRESHOLD_KEYS)
            check_number(f"{self.name_of('thresholds')} {key}", value, THRESHOLD_LIMITS[key])
        mode = quantization_mode(self.quantize)
        if not self.out:
            raise ConfigError(f"no output file; pass {self.name_of('out')} FILE")
        if Path(self.out).suffix != FORMATS[self.format].suffix:
            raise ConfigError(f"{self.name_of('out', self.out)} should end in .{self.format} for "
                              f"{self.name_of('format', self.format)}")
        if not FORMATS[self.format].quantized_io and self.io_type != "float32":
            raise ConfigError(f"{self.name_of('io_type', self.io_type)}: int8 inputs/outputs are a TFLite option; "
                              "ONNX artifacts keep integer inputs and float32 outputs")
        if "batch" not in FORMATS[self.format].dynamic_axes and self.dynamic_axes and self.batch_size != 1:
            # FORMATS' dynamic_axes: a TFLite file leaves only its sequence open; its clients run one text at a time.
            raise ConfigError(f"{self.name_of('batch_size', self.batch_size)} with {self.name_of('dynamic_axes')}: "
                              "a dynamic TFLite file has batch 1 and a dynamic sequence (MediaPipe and the Task "
                              f"Library run one text at a time); drop {self.name_of('batch_size')}")
        if self.tokenizer_in_graph and not FORMATS[self.format].text_input:
            raise ConfigError(f"{self.name_of('tokenizer_in_graph')} writes an .onnx whose onnxruntime-extensions ops "
                              f"tokenize the text; {self.name_of('format', self.format)} files carry their tokenizer "
                              "for the app otherwise (TFLite Metadata): use --format onnx")
        if self.dynamic_axes and self.static_axes:
            raise ConfigError(f"{self.name_of('dynamic_axes')} and {self.name_of('static_axes')} contradict each "
                              "other; pass one")
        ids = FORMATS[self.format].input_dtype
        if self.mask_dtype not in (None, "float32", ids):
            raise ConfigError(f"{self.name_of('mask_dtype', self.mask_dtype)}: {self.format} token inputs are {ids} "
                              f"(what its clients feed); use {ids} (the default) or float32")
        if self.pooling not in ("auto", None) and self.task not in ("auto", "embedding"):
            raise ConfigError(f"{self.name_of('pooling', self.pooling)} applies to {self.name_of('task', 'embedding')}, "
                              f"not {self.task}; drop it or export the embedding task")
        if self.io_type == "int8":
            self._refuse_unless(mode, "int8_io", self.name_of("io_type", "int8"))
        if self.keep_float_ops or self.keep_float_layers:
            which = self.name_of("keep_float_ops" if self.keep_float_ops else "keep_float_layers")
            self._refuse_unless(mode, f"keep_float:{self.format}", f"{which} ({self.format})")
        self._refuse_unless(mode, f"format:{self.format}", self.name_of("format", self.format))
        if mode.search and not self.eval_data:
            raise ConfigError(f"{self.name_of('quantize', self.quantize)} needs labelled data to judge by: "
                              f"{self.name_of('eval_data', 'FILE')} (a .tsv like mbk finetune's, see docs/export.md)")
        if self.max_drop is not None and not mode.search:
            raise ConfigError(f"{self.name_of('max_drop')} is the budget of {self.name_of('quantize', 'auto')}; "
                              f"drop it or pass {self.name_of('quantize', 'auto')}")
        if mode.search and not self.validate:
            raise ConfigError(f"{self.name_of('quantize', self.quantize)} judges each setting on "
                              f"{self.name_of('eval_data')}; drop {self.name_of('validate')}")
        if self.check_cpu is not None and self.check_arch is None:
            raise ConfigError(f"{self.name_of('check_cpu', self.check_cpu)} names an emulated CPU; pass "
                              f"{self.name_of('check_arch', 'arm64')} too")
        if self.check_arch is not None:
            if self.tokenizer_in_graph:
                # The emulation cache holds the runtimes (artifacts.emulated_runner.RUNTIME_PACKAGES), not the
                # extensions' aarch64 build: the emulated run feeds token arrays.
                raise ConfigError(f"{self.name_of('check_arch', self.check_arch)} runs token arrays on the emulated "
                                  "runtimes, which hold no onnxruntime-extensions to tokenize inside a "
                                  f"{self.name_of('tokenizer_in_graph')} file; check the same export without "
                                  f"{self.name_of('tokenizer_in_graph')} (the model after the tokenizer is the same)")
            if not self.validate:
                raise ConfigError(f"{self.name_of('check_arch', self.check_arch)} is part of the validation; drop "
                                  f"{self.name_of('validate')}")
            check_choice(self.name_of("check_cpu"), self.check_cpu or ARCHES[self.check_arch].default_cpu,
                         tuple(ARCHES[self.check_arch].cpus))
        if mode.calibration and not self.calibration and not mode.allows("default_calibration"):
            raise ExportError(self.needs_calibration(mode.refused["default_calibration"]))
        for name, what, kinds in (("calibration", "calibration data", "a .txt or .npz file"),
                                  ("validation_data", "validation data", "a .txt or .npz file"),
                                  ("recover_data", "recovery data", "a .txt or .npz file"),
                                  ("eval_data", "evaluation data", "a labelled .tsv like mbk finetune's")):
            path = getattr(self, name)
            if path and not Path(path).is_file():
                raise ExportError(f"{what} {path} does not exist; pass {kinds} ({self.name_of(name)})")
        return self

    def needs_calibration(self, why):
        """The one-line error for a calibrated mode without data, in the user's spelling, with ``why``."""
        return needs_calibration_message(self.name_of("quantize", self.quantize), self.name_of("calibration", "FILE"),
                                         why)

    def _refuse_unless(self, mode, capability, asked):
        """Raises ConfigError with the record's reason when ``mode`` refuses ``capability``."""
        if not mode.allows(capability):
            allowed = " or ".join(modes_allowing(capability))
            raise ConfigError(f"{asked} needs {self.name_of('quantize')} {allowed}, not {self.quantize}: "
                              f"{mode.refused[capability]}")

    def _unknown(self, name, value, choices):
        """The message for a value outside ``choices``; a recipe keeps its key alone, like an unknown key's
        message (``unknown quantize 'int3' in [export]``)."""
        recipe = self.__dataclass_fields__[name].metadata["recipe"]
        what = f"{recipe[1]} {value!r} in [{recipe[0]}]" if self.named_by == "recipe" and recipe else \
            f"{self.name_of(name)} {value!r}"
        return f"unknown {what}; valid values: {', '.join(repr(c) for c in choices)}"


_RECIPE_TYPES = {"value": None, "switch": bool, "negated": bool, "csv": list, "csv-or-none": list, "path": str,
                 "source": str}
_TYPES = {"str": str, "int": int, "float": float, "bool": bool, "tuple": list, "dict": dict}


@dataclass(frozen=True)
class RecipeKey:
    """What a recipe key sets: the ExportOptions ``field``, the TOML ``type`` it must have, its ``limit``."""

    field: str
    type: type
    limit: Limit = None


def recipe_keys(schema=None):
    """``{table: {key: RecipeKey}}`` for every option a recipe may set, generated from :class:`ExportOptions`.

    ``schema``: the options dataclass (default :class:`ExportOptions`; tests pass an extended one).
    """
    tables = {}
    for f in fields(schema or ExportOptions):
        meta = f.metadata
        if meta.get("recipe"):
            table, key = meta["recipe"]
            expected = _RECIPE_TYPES.get(meta["kind"]) or _TYPES[f.type.__name__]
            tables.setdefault(table, {})[key] = RecipeKey(f.name, expected, meta["limit"])
    return tables


def _split(text):
    return tuple(x.strip() for x in text.split(",") if x.strip())


def parse_thresholds(items):
    """``["min_cosine=0.99"]`` -> ``{"min_cosine": 0.99}``; one-line errors for bad items."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in THRESHOLD_KEYS:
            raise ConfigError(f"bad --threshold {item!r}; use KEY=VALUE with KEY one of {', '.join(THRESHOLD_KEYS)}")
        try:
            number = float(value)
        except ValueError as err:
            raise ConfigError(f"bad --threshold {item!r}: {value!r} is not a number") from err
        # The same bounds as a recipe's [validation] keys: a NaN or a cosine of 5 failed every export
        # with "cosine 1.000000 < nan" instead of naming the option.
        out[key] = check_number(f"--threshold {key}", number, THRESHOLD_LIMITS[key])
    return out


# Command-line text -> field value, per kind (argparse has already applied type= and choices=).
_FROM_CLI = {
    "csv": _split,
    "csv-or-none": lambda text: None if text is None else (() if text.strip().lower() == "none" else _split(text)),
    "thresholds": parse_thresholds,
}


def add_arguments(parser, schema=None):
    """Adds one argument per option with a flag, generated from :class:`ExportOptions` (``mbk export``).

    ``schema``: as :func:`recipe_keys`'s.
    """
    for f in fields(schema or ExportOptions):
        meta = f.metadata
        if not meta.get("flag"):
            continue
        kind, kwargs = meta["kind"], {}
        if meta["help"]:
            kwargs["help"] = meta["help"]
        if kind == "switch":
            kwargs.update(action="store_true", default=f.default)  # None: the format decides (dynamic_axes)
        elif kind == "negated":
            kwargs.update(action="store_false", default=f.default)  # --no-x stores x = False: the field's own value
        elif kind == "thresholds":
            kwargs.update(action="append", default=[], metavar="KEY=VALUE")
        elif kind == "source":
            kwargs.update(nargs="?", type=input_path_option("any", tree=True, or_name=True))
        elif kind == "path":
            kwargs["type"] = input_path_option("file")
        elif kind == "csv":
            kwargs["default"] = ""
        else:
            kwargs["default"] = f.default
            if meta["choices"]:
                kwargs["choices"] = meta["choices"]
            if meta["limit"]:
                kwargs["type"] = number_option(meta["limit"])
        if not meta["flag"].startswith("-"):
            parser.add_argument(f.name, metavar=meta["flag"], **kwargs)  # the positional SRC keeps its name
            continue
        if kind not in ("switch", "negated", "thresholds") and not meta["choices"]:
            # argparse would name the value after the field (--mask-value ATTENTION_MASK_VALUE); keep the flag's
            kwargs["metavar"] = meta["flag"].lstrip("-").replace("-", "_").upper()
        parser.add_argument(meta["flag"], dest=f.name, **kwargs)
    return parser


def from_arguments(args):
    """The :class:`ExportOptions` of parsed ``mbk export`` arguments (errors name the flags)."""
    values = {}
    for f in fields(ExportOptions):
        if f.metadata.get("flag"):
            value = getattr(args, f.name)
            values[f.name] = _FROM_CLI.get(f.metadata["kind"], lambda v: v)(value)
    return ExportOptions(**values, named_by="flag").check()
