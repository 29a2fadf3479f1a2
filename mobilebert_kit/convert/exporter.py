"""Exporter: source model in, validated ``.tflite`` / ``.onnx`` artifact out.

Steps: load the source, apply operator substitutions (if any), decide the
export task (``ExportOptions.resolve``), build the export graph (the task's
outputs; TFLite static ``[batch, seq]`` int32 inputs, ONNX dynamic int64
inputs; int8-friendly mask constant), convert and quantize, embed metadata,
validate the file
against the Keras source, and only then move it into place. A failed
validation or an interrupted run leaves no file at ``out`` (artifacts are
written to a temporary sibling and renamed; ``utils.atomic``). The report
(sizes, float ops left in quantized models, validation metrics, per-layer
drift) is written next to the artifact as ``<out>.report.json``.
"""

import contextlib
import json
import os
import shutil
import time
import warnings
import weakref
from dataclasses import MISSING, asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.convert.export_options import FORMATS, ExportOptions  # noqa: F401  (the public home of both)
from mobilebert_kit.convert.export_options import DEFAULT_MAX_DROP
from mobilebert_kit.convert.export_tasks import export_task
from mobilebert_kit.convert.quantization_modes import MODES, quantization_mode
from mobilebert_kit.convert.quantization_search import (
    Budget,
    Frontier,
    Tried,
    as_attempt,
    candidate_metadata,
    host_latency_ms,
    refusal,
    sensitivity,
    settings,
)
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.atomic import atomic_file, atomic_path, check_output, remove_path
from mobilebert_kit.utils.scratch import scratch_directory

FORMAT_VERSION = 1
REPORT_SCHEMA = "mobilebert_kit.export"  # the "schema" of OUT.report.json
# A searched setting after the first that passed is written only when it ran faster by more than this share.
FASTER_BY = 0.05
# Heads whose outputs are classes: the architectures that carry labels into the file.
_LABELLED = ("sequence_classifier", "token_classifier")


@dataclass
class ExportResult:
    """What an export produced and measured."""

    path: str
    format: str
    quantize: str
    size_bytes: int
    seconds: float
    source: str
    task: str = None
    seq_len: int = None
    notes: list = field(default_factory=list)
    float_ops: dict = field(default_factory=dict)
    op_counts: dict = field(default_factory=dict)
    validation: object = None
    search: dict = None

    def to_dict(self):
        out = {k: v for k, v in asdict(self).items() if k != "validation"}
        out["validation"] = self.validation.to_dict() if self.validation is not None else None
        return out

    def format_text(self):
        lines = [f"wrote {self.path}: {self.format} {self.quantize}, {self.size_bytes / 1e6:.2f} MB "
                 f"({self.seconds:.1f} s) from {self.source}"
                 + (f"; task {self.task}, seq {self.seq_len}" if self.task else "")]
        lines += [f"  note: {n}" for n in self.notes]
        if MODES[self.quantize].calibration:  # static activation ranges: list what stayed float
            if self.float_ops:
                lines.append("  ops left in float: " + ", ".join(f"{op} x{n}" for op, n in sorted(self.float_ops.items())))
            else:
                lines.append("  ops left in float: none")
        if self.search:
            lines.append(_frontier_of(self.search).format_text())
        if self.validation is not None:
            lines.append(self.validation.format_text())
        return "\n".join(lines)


def _frontier_of(data):
    """The :class:`Frontier` of an ExportResult's ``search`` dict (the report's JSON form)."""
    frontier = Frontier(data["asked"], data["judged_by"], ranking=data["ranking"], stopped=data["stopped"])
    frontier.reference = Tried(**data["reference"]) if data["reference"] else None
    frontier.rows = [Tried(**row) for row in data["frontier"]]
    return frontier


def export(options, source=None, log=print, score=None):
    """Runs one export; returns an :class:`ExportResult`.

    Args:
        options: an :class:`ExportOptions`.
        source: an already prepared :class:`~mobilebert_kit.sources.model_source.ModelSource`
            (``prepare.prepare_source``: recipes load and substitute once and export several formats);
            None: ``options.source`` is prepared here with ``options.substitutions``.
        log: where progress lines go (``None``: silent).
        score: ``score(path, data) -> ArtifactEvaluation``, the task metric of a written file on labelled
            data, needed when ``options.eval_data`` is set (the CLI and the pipeline pass
            ``mobilebert_kit.evaluation.artifact_metrics.evaluate_artifact``). Passed in because the
            evaluator reads ``convert/``'s task records and so sits above it (tests/test_layering.py).

    Raises:
        ExportError / ValidationError / ConfigError: with a one-line message.

    Example:
        >>> export(ExportOptions("tiny-bert", "tflite", "dynamic", out="tiny.tflite", seq_len=32))  # doctest: +SKIP
    """
    # Imported here, not at the top: options.check() refuses bad input before TensorFlow loads.
    from mobilebert_kit.convert.prepare import prepare_source

    options.check()
    if options.eval_data and score is None:
        raise ExportError("eval data needs a task scorer: pass score=evaluate_artifact "
                          "(mobilebert_kit.evaluation.artifact_metrics) to export()")
    sources = _sources(options, source)
    # Checked before loading and converting: a refused --out must not cost the whole export first.
    for path, kind in _outputs(options):
        check_output(path, kind, overwrite=options.overwrite, sources=sources)
    say = log or (lambda *_: None)
    start = time.perf_counter()
    if source is None:
        if isinstance(options.source, (str, os.PathLike)):
            # Loading builds the Keras model: up to a minute for a full-size preset, so say it first.
            say(f"loading {options.source} ...")
        source = prepare_source(options.source, options.substitutions, _recovery(options), head=options.head,
                                log=say).source
    model = source.model
    from mobilebert_kit.convert.rebuild import architecture_of
    from mobilebert_kit.models.api import check_finite_weights, max_positions, named_weights

    # The task, pooling and sequence length follow from the source (task auto); everything below reads these.
    config = _config(model)
    positions = max_positions(config)
    num_outputs = getattr(model, "head_config", {}).get("num_labels")
    options = options.resolve(architecture_of(model), _declared_pooling(source, options), positions, num_outputs,
                              trained_seq_len=getattr(source, "trained_seq_len", None))
    _check_labels(options, architecture_of(model), num_outputs)

    # Before converting: validation inputs may never reach a poisoned row (an unused token's embedding).
    check_finite_weights(named_weights(model), f"the model to export ({source.describe()})", error=ExportError,
                         fix="fix or re-train the source model; an exported copy would answer NaN")
    reference = model  # the artifact's Keras source (after substitution, when there is one)
    calibration, validation_inputs = _input_sets(source, model, options, say)
    from mobilebert_kit.convert.input_set import validation_lines

    mode = quantization_mode(options.quantize)
    graph = _export_graph(model, options, for_qat=mode.trains)
    notes = []
    if calibration is not None and not options.calibration:
        notes.append(f"calibrated on {calibration.description}: pass --calibration FILE (text like your app's) "
                     "so the int8 ranges fit your inputs")
    if mode.trains:
        from mobilebert_kit.convert.qat import quantization_aware_graph

        say(f"quantization-aware fine-tuning: {options.qat_steps} step(s) on {calibration.description}")
        graph = quantization_aware_graph(graph, calibration, steps=options.qat_steps,
                                         learning_rate=options.qat_learning_rate)
    metadata = _metadata(source, model, graph, options)
    out = Path(options.out)
    say(f"exporting {source.describe()} to {out} ({options.format}, {options.quantize}, task {options.task}, "
        f"seq {options.seq_len})")
    texts = validation_lines(options.validation_data, source.tokenizer, options.validation_count,
                             options.seq_len)
    search = _Search(options, mode, lambda quantize: _ranking(model, options, quantize, calibration, validation_inputs,
                                                              reference, search.frontier))
    # The written result and its (options, file); the last candidate; the user's own setting's failure.
    result = chosen = candidate = failure = None
    passing = []  # a search's settings that held the budget: (row, label, result, (options, file))
    calibrated = {}  # TFLite: one calibration per mode for every setting tried (tflite_export.convert)
    with _report_of(out) as report, \
            atomic_path(out, kind=options.format, overwrite=options.overwrite, sources=sources) as tmp, \
            scratch_directory("export") as scratch, _named_for_user(scratch, out):
        if search.budget_needed:
            search.set_reference(_float_reference(graph, options, metadata, Path(scratch), validation_inputs, score))
        for index, (step, layers, attempt) in enumerate(search.attempts()):
            path = Path(scratch) / f"candidate-{index}.{options.format}"
            label = step.describe(layers) if step else attempt.quantize
            if index and not mode.search:
                last = search.frontier.rows[-1]
                say(f"{last.setting} failed validation ({last.why}); trying {label} (the mode's fallback; pass "
                    "--keep-float LAYERS to choose)")
            meta = (candidate_metadata(metadata[0], options.quantize, attempt.quantize, label,
                                       attempt.keep_float_layers, search.judged_by) if step else metadata[0],
                    metadata[1])
            try:
                write = _write_tflite if attempt.format == "tflite" else _write_onnx
                written = write(graph, attempt, calibration, meta, path, calibrated)
            except ExportError as err:
                if step is None:
                    raise
                search.record(label, attempt, why=str(err).splitlines()[0])
                continue  # the model has none of the step's layers: the next setting is tried
            candidate = _result(path, out, attempt, source, notes + written, start)
            candidate_of = (attempt, path)
            if not options.validate:
                result, chosen = candidate, candidate_of
                break
            if mode.search:
                say(f"evaluating {label} on {options.eval_data} ...")
                value = score(path, options.eval_data).metrics[search.budget.metric]
                row = search.record(label, attempt, path, validation_inputs, metric=value)
            else:
                say(f"validating {label} against the Keras model on {validation_inputs.description} ...")
                candidate.validation = validate_file(
                    path, reference, validation_inputs, attempt.quantize, options.thresholds, artifact_name=str(out),
                    fmt=options.format, task=options.task, pooling=options.pooling, normalize=options.normalize,
                    texts=texts, tokenizer=source.tokenizer,
                )
                passed = candidate.validation.passed
                # Host latency only where settings are compared: a plain export that passes costs nothing more.
                row = search.record(label, attempt, path if step or not passed else None, validation_inputs,
                                    passed=passed, why=candidate.validation.summary_line())
                if not row.passed and failure is None:
                    # The user's own setting's failure stands if none passes.
                    failure, result, chosen = row.why, candidate, candidate_of
            if row.passed:
                if step is not None and not mode.search:
                    candidate.notes = candidate.notes + [f"{options.quantize} as asked failed validation ({failure}); "
                                                         f"wrote {label} (the fewest float layers that pass)"]
                    result, chosen = candidate, candidate_of
                    break
                if mode.search:
                    passing.append((row, label, candidate, candidate_of))
                    continue  # the search's attempts() measure the other modes' plain settings, then end
                result, chosen = candidate, candidate_of
                break
        if passing:
            row, label, result, chosen = search.fastest(passing)
        result = result or candidate
        if chosen is not None:
            attempt, path = chosen  # the written (or refused) setting: what the drift report and copy read
        if mode.search and not search.passed:
            search.frontier.stopped = "no setting met the budget"
            if result is not None:
                result.search = search.frontier.to_dict()
                _write_report(out, result, start, options, sources, note=f"{out} was not written: no setting met "
                              f"{search.budget.describe()}")
            raise ExportError(refusal(search.frontier, search.budget, options.eval_data, options.name_of))
        result.search = search.frontier.to_dict() if search.searched else None
        if options.validate:
            if mode.search:
                result.validation = validate_file(
                    path, reference, validation_inputs, result.quantize, options.thresholds, artifact_name=str(out),
                    fmt=options.format, task=options.task, pooling=options.pooling, normalize=options.normalize)
                result.notes.append(f"{label} chosen: {search.budget.metric} {row.metric:.4f} on "
                                    f"{options.eval_data} ({search.budget.describe()})")
                if not result.validation.passed:
                    # The task metric on the user's data decided; the Keras comparison's thresholds are the mode's
                    # generic guesses, kept in the note so nothing measured is hidden.
                    result.notes.append(f"the Keras comparison missed {result.quantize}'s thresholds "
                                        f"({result.validation.summary_line()}); the task metric held")
                    result.validation.failures = []
            if options.eval_data and not mode.search:
                evaluation = score(path, options.eval_data)
                result.notes.append(f"{evaluation.primary} {evaluation.metrics[evaluation.primary]:.4f} on "
                                    f"{options.eval_data} ({evaluation.rows} rows)")
            elif mode.quantized and not mode.search:
                result.notes.extend(_changed_answers(result.validation, options))
            if options.drift_report and mode.quantized:
                result.validation.drift = drift(model, attempt, calibration, validation_inputs, reference,
                                                qat_graph=graph if mode.trains else None)
            if not result.validation.passed:
                # The metrics are what the user needs to decide (thresholds, keep-float layers): show and keep them.
                say(result.validation.format_text())
                _write_report(out, result, start, options, sources, note=f"{out} was not written: validation failed")
            result.validation.raise_for_failures()
        shutil.copyfile(path, tmp)
        # The report is written before the file is put in place, so that a full disk (or any failure) while
        # writing it leaves neither: the file alone would be an export whose report says nothing.
        _write_report(out, result, start, options, sources)
        report["written"] = True
    return result


def _changed_answers(validation, options):
    """A note when a quantized file passed validation but changed a classifier's answer on some of its rows.

    The thresholds are loose (argmax agreement >= 0.7 for int8) and the rows few: a fine-tuned MiniLM whose
    full-int8 file changed 1 of 16 validation answers lost 4.7 accuracy points on real held-out text, and the
    export said only PASSED. Only a task metric on the user's labelled data says what the change costs.
    """
    changed = [m for m in validation.outputs if m.argmax_agreement is not None and m.argmax_agreement < 1.0]
    if not changed:
        return []
    worst = min(changed, key=lambda m: m.argmax_agreement)
    return [f"{options.quantize} changed the {worst.name} answer on {1 - worst.argmax_agreement:.0%} of the "
            f"validation rows ({validation.inputs}); what that costs on your task only a metric on labelled data "
            f"says: pass {options.name_of('eval_data')} FILE (or {options.name_of('quantize')} auto to pick the "
            "fastest setting that holds it)"]


@contextlib.contextmanager
def _named_for_user(scratch, out):
    """An error raised inside names ``out``, not the scratch candidate it came from: the user never sees
    ``/tmp/mbk-export-.../candidate-0.tflite`` and cannot act on its name (``could not run candidate-0.tflite``)."""
    import re

    from mobilebert_kit.errors import MbkError

    try:
        yield
    except MbkError as err:
        candidate = re.compile(re.escape(str(scratch)) + r"/candidate-\d+\.\w+|\bcandidate-\d+\.(?:tflite|onnx)\b")
        text = str(err)
        named = candidate.sub(lambda m: str(out) if "/" in m.group(0) else Path(out).name, text)
        if named != text:
            err.args = (named,) + tuple(err.args[1:])  # the same error, type and traceback: only its text
        raise


@contextlib.contextmanager
def _report_of(out):
    """Removes the success report written inside the block when the file itself is then not put in place."""
    state = {"written": False}
    try:
        yield state
    except BaseException:
        if state["written"]:
            remove_path(Path(f"{out}.report.json"), ignore_errors=True)
        raise


class _Search:
    """The settings one export tries (the user's, then a fallback or a search ladder) and its frontier."""

    def __init__(self, options, mode, ranking):
        self.options, self.mode, self._ranking = options, mode, ranking
        self.fallback = mode.fallback if _fallback_allowed(options, mode) else ()
        self.budget_needed = bool(mode.search) and options.validate
        self.judged_by = (f"{options.name_of('eval_data')} task metric" if mode.search else
                          "validation against the Keras model")
        self.frontier = Frontier(options.quantize, self.judged_by)
        self.budget = None
        self.passed = False
        self.searched = False

    def set_reference(self, reference):
        row, evaluation = reference
        self.frontier.reference = row
        max_drop = DEFAULT_MAX_DROP if self.options.max_drop is None else self.options.max_drop
        self.budget = Budget(evaluation.primary, float(evaluation.metrics[evaluation.primary]), max_drop,
                             bool(evaluation.higher_is_better))
        row.metric = self.budget.reference
        # The row count shows how much a pass proves: one row of ten is 10 accuracy points.
        self.frontier.judged_by = f"{self.judged_by} ({self.budget.describe()}, {evaluation.rows} row(s))"

    def attempts(self):
        """``(step, ranked layers, options)`` in turn: step None is the user's own setting (a searched mode has none).

        A search's ladder is ordered by the speed each mode usually has, which the host may not share (full
        int8 ran slower than dynamic int8 for a fine-tuned MiniLM, issue 15). After the first setting that
        holds the budget, the plain setting of each mode not yet tried is measured too, so that
        :meth:`fastest` picks the fastest that holds it; ranked rungs (a probe conversion each) are not.
        """
        if not self.mode.search:
            yield None, (), self.options
        steps = self.mode.search or self.fallback
        ladder = settings(steps, self._ranking)
        while not self.passed:  # checked before the next rung: a ranked rung costs a probe conversion to expand
            step_layers = next(ladder, None)
            if step_layers is None:
                break
            self.searched = True
            yield step_layers[0], step_layers[1], as_attempt(self.options, *step_layers)
        if self.passed and self.mode.search:
            tried = {row.quantize for row in self.frontier.rows}
            for step in steps:
                if step.float_layers == "none" and step.quantize not in tried:
                    tried.add(step.quantize)
                    yield step, (), as_attempt(self.options, step, ())

    def fastest(self, passing):
        """The entry of ``passing`` (``(row, ...)`` in ladder order) to write: the first, unless a later one ran
        clearly faster on this host (by more than :data:`FASTER_BY`, above the few-run timing's noise)."""
        best = passing[0]
        for entry in passing[1:]:
            row, mine = entry[0], best[0]
            if row.latency_ms is not None and mine.latency_ms is not None \
                    and row.latency_ms < (1 - FASTER_BY) * mine.latency_ms:
                best = entry
        first, chosen = passing[0][0], best[0]
        if chosen is first:
            others = [f"{row.setting} {row.latency_ms:.2f} ms" for row, *_ in passing[1:] if row.latency_ms is not None]
            self.frontier.stopped = (f"{first.setting} is the first setting (fastest first) that passed"
                                     + (f" ({first.latency_ms:.2f} ms); {', '.join(others)} was not faster by "
                                        f"{FASTER_BY:.0%}" if others else ""))
        else:
            self.frontier.stopped = (f"{chosen.setting} passed and ran faster on this host than {first.setting}, the "
                                     f"first that passed ({chosen.latency_ms:.2f} against {first.latency_ms:.2f} ms)")
        # Float32 is the reference, not a candidate (the user asked for a quantized file, about 4x smaller), but
        # on a small model it can be the fastest: say so rather than let "fastest" mislead.
        ref = self.frontier.reference
        if ref is not None and ref.latency_ms is not None and chosen.latency_ms is not None \
                and ref.latency_ms < (1 - FASTER_BY) * chosen.latency_ms:
            self.frontier.stopped += (f"; float32 ran faster on this host still ({ref.latency_ms:.2f} ms): "
                                      "--quantize none writes that file, at about 4x the size")
        return best

    def record(self, label, attempt, path=None, inputs=None, metric=None, passed=None, why=""):
        latency = host_latency_ms(path, inputs) if path is not None else None
        row = Tried(label, attempt.quantize, list(attempt.keep_float_layers), latency, why=why)
        if metric is not None:
            row.metric, row.drop = float(metric), self.budget.drop(metric)
            passed = self.budget.holds(metric)
        row.passed = bool(passed)
        self.frontier.rows.append(row)
        if row.passed and not self.passed:
            self.passed = True
            self.frontier.stopped = f"{label} is the first setting (fastest first) that passed"
        return row


def _fallback_allowed(options, mode):
    """A mode's fallback applies only when the user chose no float ops or layers and no integer-only io: then
    the first setting that passes validation is written, and the note says what was kept in float."""
    return bool(mode.fallback) and options.validate and not options.keep_float_layers \
        and options.keep_float_ops is None and options.io_type == "float32"


def _ranking(model, options, quantize, calibration, inputs, reference, frontier):
    """Layers, most drift-sensitive first, of the ``quantize`` conversion (the drift probe, one conversion)."""
    ranked = sensitivity(drift(model, replace(options, quantize=quantize, keep_float_layers=()), calibration, inputs,
                               reference))
    frontier.ranking = [{"layer": layer, "added_noise": round(noise, 6)} for layer, noise in ranked]
    return [layer for layer, _ in ranked]


def _float_reference(graph, options, metadata, scratch, inputs, score):
    """``(frontier row, evaluation)`` of the float export on the eval data: the metric the budget is taken from."""
    float_options = replace(options, quantize="none", keep_float_layers=(), keep_float_ops=None)
    path = scratch / f"float.{options.format}"
    writer = _write_tflite if options.format == "tflite" else _write_onnx
    writer(graph, float_options, None, (dict(metadata[0], quantization="none"), metadata[1]), path)
    evaluation = score(path, options.eval_data)
    return Tried("float32 (reference)", "none", [], host_latency_ms(path, inputs), passed=True), evaluation


def _export_graph(model, options, hidden_states=False, for_qat=False):
    """The export graph of resolved ``options`` (:meth:`ExportOptions.resolve`): the one place its arguments
    are read from the options, for the artifact and the drift probe alike."""
    from mobilebert_kit.convert.export_model import build_export_model

    if options.fold_nonorm and not for_qat:  # QAT trains the model it is given: nothing to fold into yet
        model = _folded(model, options)
    batch = None if options.dynamic_axes else options.batch_size
    seq = None if options.dynamic_axes else options.seq_len
    return build_export_model(model, batch, seq, options.mask_dtype, options.attention_mask_value,
                              hidden_states=hidden_states, for_qat=for_qat, task=options.task, fmt=options.format,
                              pooling=options.pooling, normalize=bool(options.normalize),
                              ids_dtype=options.ids_dtype)


def _folded(model, options):
    """``model`` with each block's NoNorms folded into its dense layers (``--fold-nonorm``); outputs unchanged.

    The same model object gets the same folded copy: the artifact and the drift probe both ask for it.
    (A weak-keyed module cache, not an attribute: Keras would track a model set on a model as a sublayer,
    and the copy is dropped with its source instead of living as long as the process.)
    """
    from mobilebert_kit.convert.scale_migration import migrate_nonorm_scales, unmigratable

    if model in _FOLDED:
        return _FOLDED[model]
    why = unmigratable(_config(model))
    if why:
        raise ConfigError(f"{options.name_of('fold_nonorm')}: {why}")
    _FOLDED[model], _report = migrate_nonorm_scales(model, "unit")
    return _FOLDED[model]


_FOLDED = weakref.WeakKeyDictionary()


def _declared_pooling(source, options):
    """The checkpoint's sentence pooling, read only when the task may use it.

    ``--task features`` never reads it, and an explicit ``--pooling`` overrides a declaration
    this tool cannot export (max pooling, a Dense module), so neither is refused for it.
    """
    if options.task not in ("auto", "embedding"):
        return None
    try:
        return getattr(source, "pooling", None)
    except ConfigError:
        if options.pooling != "auto":
            return None
        raise


def _outputs(options):
    """The files an export writes, each with its output kind (``utils.atomic.OUTPUT_KINDS``)."""
    return [(Path(options.out), options.format), (Path(f"{options.out}.report.json"), "export-report")]


def _sources(options, source=None):
    """The export's inputs that are files or directories: no output may be, contain or lie inside one."""
    paths = [options.source, options.calibration, options.validation_data, options.recover_data,
             getattr(source, "directory", None), getattr(options.source, "directory", None)]
    return [p for p in paths if isinstance(p, (str, os.PathLike))]


def _write_report(out, result, start, options, sources, note=None):
    result.seconds = time.perf_counter() - start
    # The schema tag lets a later export recognise the report as its own and replace it (utils.atomic).
    data = {"schema": REPORT_SCHEMA, **result.to_dict()}
    if note:
        data["notes"] = data["notes"] + [note]
    with atomic_file(f"{out}.report.json", "w", kind="export-report", overwrite=options.overwrite,
                     sources=sources) as handle:
        json.dump(data, handle, indent=2, default=_json_default)


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)


def _recovery(options):
    """The recovery settings of an export: its recovery data, read at the export's sequence length."""
    from mobilebert_kit.convert.prepare import Recovery

    from mobilebert_kit.convert.export_options import DEFAULT_SEQ_LEN

    # Before the source is loaded the task (and so a task's default length) is unknown: recovery reads
    # its data at the export default then.
    return Recovery(steps=options.recover_steps, data=options.recover_data,
                    seq_len=options.seq_len or DEFAULT_SEQ_LEN)


def _config(model):
    from mobilebert_kit.convert.rebuild import encoder_of

    return encoder_of(model).config


def _input_sets(source, model, options, say=None):
    """(calibration, validation) InputSets for this export."""
    from mobilebert_kit.convert.input_set import default_inputs, InputSet

    config = _config(model)
    tokenizer = source.tokenizer
    calibration = None
    if options.calibration:
        calibration = InputSet.for_model(options.calibration, options.seq_len, tokenizer, config,
                                         count=options.calibration_count)
    elif quantization_mode(options.quantize).calibration:
        # ExportOptions.check refused the modes that may not calibrate on built-in data (the record's
        # default_calibration rule, quantization_modes.py); the rows never overlap the validation rows.
        calibration = InputSet.default_calibration(tokenizer, config["vocab_size"], options.calibration_count,
                                                   options.seq_len, config["type_vocab_size"])
        (say or (lambda *_: None))(f"calibrating on {calibration.description}; pass --calibration FILE for your data")
    if options.validation_data:
        validation = InputSet.for_model(options.validation_data, options.seq_len, tokenizer, config,
                                        count=options.validation_count)
    elif tokenizer is not None:
        validation = InputSet.sample(tokenizer, options.seq_len)  # real text the calibration did not see
    elif options.calibration:
        validation = calibration
    else:
        validation = default_inputs(config, options.seq_len, None, count=options.validation_count)
    return calibration, validation.take(options.validation_count)


def _check_labels(options, architecture, num_outputs):
    """Given class names must name the head's classes one to one: MediaPipe's classifier maps output
    column i to line i of ``labels.txt``, so a short or long list labels answers wrongly in the app."""
    if not options.labels:
        return
    if architecture not in _LABELLED:
        raise ConfigError(f"{options.name_of('labels')} names classes, and this source is {architecture}, not a "
                          "classifier; remove it")
    if num_outputs is not None and len(options.labels) != num_outputs:
        raise ConfigError(f"{options.name_of('labels')} lists {len(options.labels)} names and the model's head has "
                          f"{num_outputs} classes; list one name per class, in the head's order")


def _metadata(source, model, graph, options):
    """``(mbk_metadata dict, vocabulary lines or None)`` of an export with resolved ``options``.

    Besides describing the file, the dict carries what the TFLite client metadata is written from
    (:func:`client_metadata_args`): the task's client family, the output names, the labels.
    """
    from mobilebert_kit.convert.rebuild import architecture_of
    from mobilebert_kit.models.api import max_positions

    config = _config(model)
    tokenizer = source.tokenizer
    architecture = architecture_of(model)
    labels = list(options.labels) or (source.labels if architecture in _LABELLED else [])
    dtypes = graph.input_dtypes
    meta = {
        "format": "mobilebert-kit",
        "format_version": FORMAT_VERSION,
        "architecture": architecture,
        "task": options.task,
        "client": export_task(options.task).client,
        "pooling": {"mode": options.pooling, "normalize": bool(options.normalize)} if options.pooling else None,
        "source": source.describe(),
        "quantization": options.quantize,
        "seq_len": options.seq_len if not options.dynamic_axes else None,
        "batch_size": options.batch_size if not options.dynamic_axes else None,
        "inputs": {
            "input_ids": f"{dtypes['input_ids']} word-piece ids",
            "attention_mask": f"{dtypes['attention_mask']}: 1 for real tokens, 0 for padding",
            "token_type_ids": f"{dtypes['token_type_ids']} segment ids (0: first sentence, 1: second)",
        },
        "input_dtypes": dict(dtypes),
        "outputs": list(graph.output_order),
        "mask_dtype": options.mask_dtype,
        "io_type": options.io_type,
        "vocab_size": config["vocab_size"],
        # The longest input the position table takes (None: relative positions, no table): a reader of a
        # dynamic-axis file (the profiler, mbk validate) picks a default length within it.
        "max_seq_len": max_positions(config),
        "do_lower_case": tokenizer.do_lower_case if tokenizer is not None else None,
        "special_tokens": {"cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "unk": "[UNK]", "mask": "[MASK]"},
        "labels": labels,
        # The table columns of the fine-tune (its task.json), so that `mbk evaluate FILE` reads the same table.
        "table_columns": getattr(source, "table_columns", None),
        "normalization_type": config["normalization_type"],
        "hidden_act": config["hidden_act"],
    }
    vocab = tokenizer.vocab_lines() if (tokenizer is not None and options.embed_vocab) else None
    return meta, vocab


def _write_tflite(graph, options, calibration, metadata, path, calibrated=None):
    from mobilebert_kit.convert import tflite_export, tflite_flatbuffer, tflite_metadata
    from mobilebert_kit.models.encoder import INPUT_NAMES

    quantize = options.quantize
    with warnings.catch_warnings():
        # The converter's calibrator still instantiates tf.lite.Interpreter internally.
        warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
        data, notes = tflite_export.convert(
            graph, quantize, calibration, options.io_type,
            options.keep_float_ops, options.keep_float_layers, calibrated,
            layer_norm=metadata[0].get("normalization_type") == "layer_norm",
        )
    meta, vocab = metadata
    entries = {tflite_flatbuffer.METADATA_JSON: json.dumps(meta, sort_keys=True).encode()}
    if vocab:
        entries[tflite_flatbuffer.METADATA_VOCAB] = ("\n".join(vocab) + "\n").encode()
    # The TFLite clients' metadata (TFLITE_METADATA: input names, tokenizer, labels) and the files it
    # names, packed after the flatbuffer; a drift probe (meta {}) is no client's file and gets none.
    args = client_metadata_args(meta, vocab)
    files = {}
    if args:
        metadata_bytes, files = tflite_metadata.client_metadata(**args)
        entries[tflite_metadata.TFLITE_METADATA] = metadata_bytes
    data = tflite_flatbuffer.finalize(data, INPUT_NAMES, graph.output_order, entries)
    if files:
        data = tflite_metadata.pack_files(data, files)
    Path(path).write_bytes(data)
    return notes


def client_metadata_args(meta, vocab):
    """The arguments of ``tflite_metadata.client_metadata`` for an export's ``mbk_metadata`` and vocabulary.

    Args:
        meta (dict): the ``mbk_metadata`` of :func:`_metadata` (``{}`` for a drift probe).
        vocab (list[str] | None): the vocabulary lines (None: the model has none, or ``--no-vocab``).

    Returns:
        dict | None: ``client``, ``output_names``, ``vocab_lines``, ``labels``, ``name``, ``description``;
        None for a file without a task (a drift probe).

    Example:
        >>> client_metadata_args({"task": "classification", "client": "classifier", "outputs": ["probability"],
        ...                       "labels": ["neg", "pos"], "source": "m"}, None)["labels"]
        ['neg', 'pos']
    """
    if not meta.get("task"):
        return None
    return {
        "client": meta["client"], "output_names": list(meta["outputs"]), "vocab_lines": vocab or None,
        "labels": list(meta.get("labels") or []) or None, "name": meta["source"],
        "description": f"{meta['task']} export of {meta['source']} by mobilebert-kit",
    }


def _write_onnx(graph, options, calibration, metadata, path, calibrated=None):
    # ``calibrated`` is _write_tflite's cache; ORT's quantizer calibrates inside quantize_static each time.
    import onnx

    from mobilebert_kit.convert import onnx_export

    model = onnx_export.convert(graph, options.opset)
    onnx_as = quantization_mode(options.quantize).onnx_as  # qat -> int8 (the record says why)
    if onnx_as is not None:
        model = onnx_export.quantize(
            model, onnx_as, calibration, graph.input_dtypes, options.keep_float_ops or (), options.keep_float_layers,
        )
    meta, vocab = metadata
    entries = {"mbk_metadata": json.dumps(meta, sort_keys=True)}
    if vocab:
        entries["mbk_vocab"] = "\n".join(vocab) + "\n"
    onnx_export.add_metadata(model, entries)
    onnx_export.check(model)
    onnx.save(model, str(path))
    return []


def _result(tmp, out, options, source, notes, start):
    from mobilebert_kit.artifacts.inspection import inspect_artifact

    info = inspect_artifact(tmp, fmt=options.format)
    return ExportResult(
        path=str(out), format=options.format, quantize=options.quantize, size_bytes=info.size_bytes,
        seconds=time.perf_counter() - start, source=source.describe(), task=options.task, seq_len=options.seq_len,
        notes=notes,
        float_ops=dict(info.float_ops), op_counts=dict(info.op_counts),
    )


def reference_outputs(reference, inputs, pairs, pooling=None, normalize=False):
    """The Keras source's values of an export's outputs on ``inputs``: ``{exported name: array}``.

    Args:
        reference: the Keras source model.
        inputs: an InputSet.
        pairs: ``((exported name, canonical name), ...)`` (``export_model.task_names``).
        pooling (str): the embedding's pooling; normalize (bool): its normalization.

    The canonical values come from the source's own outputs (and its encoder's, for a head's
    embedding); derived outputs go through ``export_model.task_outputs``, the graph's own function.
    """
    from mobilebert_kit.convert.export_model import task_outputs
    from mobilebert_kit.convert.rebuild import encoder_of

    arrays = {k: np.asarray(v) for k, v in inputs.arrays.items()}
    values = dict(reference(arrays, training=False))
    if any(canonical in ("sequence_output", "sentence_embedding") and "sequence_output" not in values
           for _, canonical in pairs):
        values.update({k: v for k, v in encoder_of(reference)(arrays, training=False).items() if k not in values})
    out = task_outputs(values, arrays["attention_mask"], pairs, pooling, normalize)
    return {k: np.asarray(v) for k, v in out.items()}


def validate_file(path, reference, inputs, precision, thresholds=None, artifact_name=None, fmt=None, task=MISSING,
                  pooling=None, normalize=None, texts=None, tokenizer=None):
    """Validates an artifact file against a Keras model; returns the ValidationReport (not raised).

    Args:
        path: the ``.tflite`` / ``.onnx`` file.
        reference: the Keras source model.
        inputs: an InputSet with the artifact's sequence length.
        precision: the quantization mode (selects default thresholds).
        thresholds: ``{name: value}`` overrides.
        artifact_name: the name used in messages (default: ``path``).
        fmt: ``"tflite"`` / ``"onnx"`` when ``path`` has another suffix (a temp file).
        task: the file's export task; not given: its ``mbk_metadata``'s (a file without one, from an
            earlier version, has the architecture's canonical outputs: ``task=None``).
        pooling / normalize: the embedding's; not given: the metadata's.
        texts / tokenizer: the validation text and the checkpoint's tokenizer: the file is also compared
            through its clients' tokenization (``convert.client_fidelity``; a warning, never a failure).

    Example:
        >>> validate_file("m.tflite", model, inputs, "dynamic").passed  # doctest: +SKIP
        True
    """
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata
    from mobilebert_kit.artifacts.reader import artifact_format
    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.convert.client_fidelity import client_fidelity_of
    from mobilebert_kit.convert.export_model import logit_outputs, task_names, token_outputs
    from mobilebert_kit.convert.input_set import InputSet
    from mobilebert_kit.convert.rebuild import architecture_of
    from mobilebert_kit.convert.validation import thresholds_for, validate_outputs

    fmt = artifact_format(Path(path), fmt)
    if task is MISSING:
        meta = read_artifact_metadata(path) if Path(path).suffix == f".{fmt}" else {}
        task = meta.get("task")
        declared = meta.get("pooling") or {}
        pooling, normalize = declared.get("mode"), declared.get("normalize")
    architecture = architecture_of(reference)
    if task is not None and architecture not in export_task(task).architectures:
        raise ConfigError(f"{artifact_name or path} is a {task} export, which a {architecture} cannot be compared "
                          "with; pass the model it was exported from as the reference")
    runner = ArtifactRunner(path, fmt=fmt)
    inputs = inputs.with_padded_rows()
    pairs = task_names(reference, task, fmt)
    expected = [name for name, _ in pairs]
    refs = reference_outputs(reference, inputs, pairs, pooling, bool(normalize))
    limits = thresholds_for(precision, **(thresholds or {}))
    floor = export_task(task).quantized_min_cosine if task is not None else None
    if floor is not None and precision != "none" and "min_cosine" not in (thresholds or {}):
        limits = limits.replace(min_cosine=max(limits.min_cosine or 0.0, floor))  # the task's own bar; yours wins
    report = validate_outputs(
        artifact_name or str(path), runner, refs, inputs, expected, token_outputs(reference, task, fmt),
        logit_outputs(reference, task, fmt), precision, limits,
    )
    report.client_tokenization = client_fidelity_of(
        runner, fmt or Path(path).suffix[1:], texts, tokenizer, inputs.seq_len,
        lambda arrays: reference_outputs(reference, InputSet(arrays, "client ids"), pairs, pooling, bool(normalize)))
    return report


def drift(model, options, calibration, inputs, reference, qat_graph=None):
    """Per-layer drift: export a probe with every hidden state as an output, quantized the same way.

    Args:
        model: the exported Keras model (after substitution).
        options: the export's :class:`ExportOptions`.
        calibration: the export's calibration InputSet.
        inputs: the validation InputSet.
        reference: the Keras source the hidden states are compared with.
        qat_graph: for ``qat``, the quantization-aware graph that was converted; the probe is
            cut from it (:func:`~mobilebert_kit.convert.qat.with_layer_outputs`), so the report
            describes the written artifact and QAT runs once per export.

    Returns:
        list[dict]: one row per layer (:func:`~mobilebert_kit.convert.validation.drift_report`).

    Example:
        >>> drift(model, options, calibration, inputs, model, qat_graph=graph)  # doctest: +SKIP
    """
    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.convert.export_model import hidden_state_names
    from mobilebert_kit.convert.rebuild import encoder_of, rebuild
    from mobilebert_kit.convert.validation import drift_report

    probe = rebuild(encoder_of(reference), output_hidden_states=True)
    keras_out = probe({k: np.asarray(v) for k, v in inputs.arrays.items()}, training=False)
    hidden = [np.asarray(h) for h in keras_out["hidden_states"]]
    with scratch_directory("drift") as tmp:
        path = Path(tmp) / f"probe.{options.format}"
        write_drift_probe(model, options, calibration, path, qat_graph=qat_graph)
        return drift_report(ArtifactRunner(path), hidden, inputs, hidden_state_names(model))


def write_drift_probe(model, options, calibration, path, qat_graph=None):
    """Writes the per-layer probe artifact: the export graph with every hidden state as an output.

    Args:
        model: the exported Keras model.
        options: the export's :class:`ExportOptions` (format, quantization, shapes).
        calibration: the export's calibration InputSet.
        path: where the probe file goes.
        qat_graph: for ``qat``, the graph that was converted (required then).

    Example:
        >>> write_drift_probe(model, options, calibration, "probe.tflite", qat_graph=graph)  # doctest: +SKIP
    """
    from mobilebert_kit.convert.export_model import hidden_state_names

    names = hidden_state_names(model)
    if quantization_mode(options.quantize).trains:
        from mobilebert_kit.convert.qat import with_layer_outputs

        graph = with_layer_outputs(qat_graph, names)
    else:
        graph = _export_graph(model, options, hidden_states=True)
    meta = ({}, None)
    if options.format == "tflite":
        _write_tflite(graph, options, calibration, meta, path)
    else:
        _write_onnx(graph, options, calibration, meta, path)
