"""``prepare_source``: a model spec loaded, its operators substituted and the result recovered, once.

``mbk substitute``, ``mbk export --norm/--act``, a recipe's ``[substitute]``
table and ``mbk pipeline`` all come here. The recovery inputs are the user's file when given,
else the built-in sample sentences (a model with a vocabulary) or rows shaped
like tokenized text (``input_set.default_inputs``); they also fit NoNorm's
scale and bias. A prepared source keeps the original's tokenizer and labels,
so what is exported or saved afterwards carries them.
"""

from dataclasses import dataclass

from mobilebert_kit.convert.plan.export_plan import SourceFacts, sequence_length
from mobilebert_kit.convert.plan.input_set import InputSet, default_inputs
from mobilebert_kit.convert.prepare.rebuild import architecture_of, encoder_of
from mobilebert_kit.convert.prepare.recovery import recover
from mobilebert_kit.convert.prepare.scale_migration import migrate_nonorm_scales, unmigratable
from mobilebert_kit.convert.prepare.substitution import substitute
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.models.api import check_positions, max_positions
from mobilebert_kit.models.sequence_classifier import SequenceClassifier, problem_of
from mobilebert_kit.sources.model_source import ModelSource

# Rows of the default recovery inputs: enough for NoNorm's per-channel fit and the fidelity report.
DEFAULT_RECOVERY_ROWS = 64
# The scale migration applied after recovery (convert/prepare/scale_migration.py; exact in float). Evidence for
# the choice: benchmarks/RESULTS.md, "substituted MiniLM full int8" (issue 15).
DEFAULT_SCALE_MIGRATION = "balance"


@dataclass(frozen=True)
class Recovery:
    """How a substituted model is fitted to data and distilled back towards the original.

    Args:
        steps (int): recovery distillation steps (0: fit and report only).
        data (str | None): ``.txt`` (tokenized) or ``.npz`` inputs; None: the default inputs.
        seq_len (int | None): sequence length of text data; None: the export rule's length
            (:func:`~mobilebert_kit.convert.plan.export_plan.sequence_length`) within the model's position table.
        learning_rate (float): recovery learning rate at the first step (it decays linearly to 0).
        batch_size (int): recovery rows per step.
        fit (bool): fit NoNorm's scale and bias to the data (else start from LayerNorm's gamma and beta).
        seed (int): the seed of the rows each recovery step draws (``recovery.step_rows``).
        migrate (str): after recovery, move NoNorm scales into the dense layers with this policy
            (``scale_migration.MIGRATION_POLICIES``; ``"none"`` keeps them). Skipped, with a log line,
            for a model it cannot apply to (LayerNorm kept, grouped FFNs).

    Example:
        >>> Recovery(steps=200, data="corpus.txt", seq_len=64).steps
        200
    """

    steps: int = 0
    data: str = None
    seq_len: int = None
    learning_rate: float = 1e-4
    batch_size: int = 8
    fit: bool = True
    migrate: str = DEFAULT_SCALE_MIGRATION
    seed: int = 0


@dataclass
class PreparedSource:
    """What :func:`prepare_source` made: the ``source`` to use (substituted, when asked, with the original's
    directory, tokenizer and labels), the ``original`` as loaded and, after a substitution, its record, the
    recovery's fidelity report, the ``data`` they used and the scale ``migration`` applied (``{"policy",
    "segments"}``).
    """

    source: ModelSource
    original: ModelSource
    substitution: object = None
    fidelity: object = None
    data: InputSet = None
    migration: dict = None


def prepare_source(spec, substitutions=None, recovery=None, head="auto", log=None, run=None):
    """Loads ``spec`` and applies ``substitutions`` with ``recovery``.

    Args:
        spec (str | os.PathLike | keras.Model | ModelSource): what to load (see
            :mod:`mobilebert_kit.sources.spec`), or an already loaded source.
        substitutions (dict | None): ``{"norm": ..., "act": ...}`` (``substitution.substitute``'s
            keywords); empty or None: the source as loaded.
        recovery (Recovery | None): fit and recovery settings (None: ``Recovery()``).
        head (str | None): the head to load from a checkpoint.
        log (Callable[[str], None] | None): where the substitution summary and recovery lines go.
        run (RecoveryRun | None): keeps the recovery resumable in ``OUT/run`` (``mbk substitute``;
            ``convert/prepare/recovery_run.py``); None: the recovery runs in memory only.

    Returns:
        PreparedSource: the source to use, the original and, after a substitution, its record.

    Example:
        >>> prepared = prepare_source("tiny-bert", {"norm": "no_norm"}, Recovery(steps=0, seq_len=16))  # doctest: +SKIP
        >>> prepared.source.model is not prepared.original.model  # doctest: +SKIP
        True
    """
    original = spec if isinstance(spec, ModelSource) else ModelSource.load(spec, head=head)
    if not substitutions:
        return PreparedSource(original, original)
    recovery = recovery or Recovery()
    say = log or (lambda *_: None)
    config = encoder_of(original.model).config
    seq_len = recovery.seq_len or sequence_length(None, max_positions=max_positions(config),
                                                  trained=original.trained_seq_len)
    check_positions(config, seq_len)  # an .npz's rows must have --seq-len tokens too (InputSet)
    if recovery.data:
        data = InputSet.for_model(recovery.data, seq_len, original.tokenizer, config)
    else:
        data = default_inputs(config, seq_len, original.tokenizer, count=DEFAULT_RECOVERY_ROWS)
    result = substitute(original.model, fit_inputs=data if recovery.fit else None, **substitutions)
    say(result.summary())
    report = recover(original.model, result.model, data, steps=recovery.steps, learning_rate=recovery.learning_rate,
                     batch_size=recovery.batch_size, seed=recovery.seed, log=say, run=run)
    say(report.format_text())
    migration = _migrate(result, recovery.migrate, data, say)
    source = ModelSource(result.model, original.kind, original.name, original.directory, original.labels,
                         original.seed)
    return PreparedSource(source, original, result, report, data, migration)


def source_facts(source, options=None):
    """The :class:`~mobilebert_kit.convert.plan.export_plan.SourceFacts` of a loaded source: what an export plan needs.

    With ``options``, the checkpoint's sentence pooling is read only when the task may use it (``--task
    features`` never reads it; an explicit ``--pooling`` overrides a declaration this tool cannot export).
    """
    model = source.model
    return SourceFacts(
        architecture=architecture_of(model), max_positions=max_positions(encoder_of(model).config),
        num_outputs=getattr(model, "head_config", {}).get("num_labels"),
        declared_pooling=_declared_pooling(source, options), trained_seq_len=source.trained_seq_len,
        labels=tuple(source.labels or ()), tokenizer=source.tokenizer,
        type_vocab_size=encoder_of(model).config["type_vocab_size"],
        problem_type=problem_of(model.head_config) if isinstance(model, SequenceClassifier) else None,
    )


def _declared_pooling(source, options):
    if options is not None and options.task not in ("auto", "embedding"):
        return None
    try:
        return source.pooling
    except ConfigError:
        if options is not None and options.pooling != "auto":
            return None
        raise


def _migrate(result, policy, data, say):
    """Applies the scale migration to ``result.model`` in place of it; returns its record or None."""
    if policy == "none" or not result.changes:
        return None
    reason = unmigratable(encoder_of(result.model).config)
    if reason:
        say(f"scale migration skipped: {reason}")
        return None
    result.model, segments = migrate_nonorm_scales(result.model, scale=policy, inputs=data)
    widest = max((s["max_scale"] for s in segments.values()), default=1.0)
    say(f"scale migration ({policy}): NoNorm scales moved into the dense layers of {len(segments)} segment(s) "
        f"(largest |c| {widest:.3g}); float outputs unchanged")
    return {"policy": policy, "segments": segments}
