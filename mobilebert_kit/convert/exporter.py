"""Exporter: source model in, validated ``.tflite`` / ``.onnx`` artifact out.

The story of one export, each step in its own module:

1. **plan** (``plan/``): the source loads, and :func:`~mobilebert_kit.convert.plan.export_plan.plan_export`
   decides every setting once (task, pooling, length, axes, input types, mode, labels, tokenizer) from
   what the user said and what the source declares;
2. **prepare** (``prepare/``): operator substitution and recovery, at the planned length;
3. **build** (``export_model.plan_graph``): the export graph (the task's outputs under the clients' names,
   the planned input shapes and types, an int8-friendly mask constant), and the calibration and
   validation inputs at the planned length (``plan/input_set.py``);
4. **search** (``quantization/search.py``: ``Search``): the user's setting, then the mode's fallback or the
   ``auto`` ladder, each written by its format's writer (``tflite/writer.py`` / ``onnx/writer.py``) to a
   scratch file and judged (validation against the Keras source, ``validation/file_validation.py``, or the task metric);
5. **write** (``export_report``): the report beside the artifact, then the chosen file moved into place.

A failed validation or an interrupted run leaves no file at ``out`` (``utils.atomic``).
"""

import contextlib
import hashlib
import os
import re
import shutil
import time
from pathlib import Path

from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.convert.export_model import plan_graph
from mobilebert_kit.convert.plan.export_options import DEFAULT_MAX_DROP, FORMATS, ExportOptions  # noqa: F401  (public)
from mobilebert_kit.convert.plan.export_plan import FileMetadata, plan_export, pooling_notes
from mobilebert_kit.convert.export_report import EXPORT_REPORT_OUTPUT, ExportResult, report_guard, report_path, write_report
from mobilebert_kit.convert.plan.export_tasks import export_task
from mobilebert_kit.convert.artifact_writer import WRITERS
from mobilebert_kit.convert.validation.file_validation import changed_answers, drift, validate_file
from mobilebert_kit.convert.plan.input_set import InputSet, default_inputs, validation_lines
from mobilebert_kit.convert.prepare.source import Recovery, prepare_source, source_facts
from mobilebert_kit.convert.quantization.qat import quantization_aware_graph
from mobilebert_kit.convert.quantization.search import (
    Search,
    Tried,
    Verdict,
    candidate_metadata,
    host_latency_ms,
    refusal,
    sensitivity,
)
from mobilebert_kit.convert.prepare.rebuild import encoder_of
from mobilebert_kit.data.tokenizer_kinds import VOCAB_FILE
from mobilebert_kit.artifacts.carried_tokenizer import carries_app_tokenizer
from mobilebert_kit.artifacts.inspection import inspect_artifact
from mobilebert_kit.errors import MbkError
from mobilebert_kit.models.api import check_finite_weights, max_positions, named_weights
from mobilebert_kit.sources.model_source import ModelSource
from mobilebert_kit.utils.atomic import atomic_path, check_output, check_unchanged, file_signature, install_lock
from mobilebert_kit.utils.scratch import scratch_directory

FORMAT_VERSION = 1


def export(options, source=None, log=print, score=None):
    """Runs one export; returns an :class:`~mobilebert_kit.convert.export_report.ExportResult`.

    Args:
        options (ExportOptions): the user's words.
        source (ModelSource | None): an already prepared source (``Recipe.prepare``: recipes load and substitute
            once and export several formats); None: ``options.source`` is loaded and substituted here.
        log (callable | None): where progress lines go (``None``: silent).
        score (callable | None): ``score(path, data) -> ArtifactEvaluation``, the task metric of a written file
            on labelled data, needed when ``options.eval_data`` is set (the CLI and the pipeline pass
            ``mobilebert_kit.evaluation.artifact_metrics.evaluate_artifact``). Passed in because the
            evaluator reads ``convert/``'s task records and so sits above it (tests/test_layering.py).

    Raises:
        ExportError / ValidationError / ConfigError: with a one-line message.

    Example:
        >>> export(ExportOptions("tiny-bert", "tflite", "dynamic", out="tiny.tflite", seq_len=32))  # doctest: +SKIP
    """
    options.check()
    if options.eval_data and score is None:
        raise ExportError("eval data needs a task scorer: pass score=evaluate_artifact "
                          "(mobilebert_kit.evaluation.artifact_metrics) to export()")
    sources = _sources(options, source)
    # Checked before loading and converting: a refused --out must not cost the whole export first.
    outputs = ((options.out, WRITERS[options.format].output), (report_path(options.out), EXPORT_REPORT_OUTPUT))
    for path, kind in outputs:
        check_output(path, kind, overwrite=options.overwrite, sources=sources)
    # What OUT and its report were when this export began: another command may install one meanwhile.
    began = {path: file_signature(path) for path in (options.out, report_path(options.out))}
    say = log or (lambda *_: None)
    start = time.perf_counter()

    # 1. plan: the source as loaded declares what the plan needs; substitution changes none of it.
    if source is None and isinstance(options.source, (str, os.PathLike)):
        say(f"loading {options.source} ...")  # up to a minute for a full-size preset
    loaded = source or (options.source if isinstance(options.source, ModelSource)
                        else ModelSource.load(options.source, head=options.head))
    facts = source_facts(loaded, options)
    plan = plan_export(options, facts)
    if score is not None:
        score = _scorer(score, plan)
    # 2. prepare: substitution and recovery at the planned length.
    if source is None and options.substitutions:
        recovery = Recovery(steps=options.recover_steps, data=options.recover_data, seq_len=plan.seq_len)
        loaded = prepare_source(loaded, options.substitutions, recovery, log=say).source
    source, model = loaded, loaded.model
    # Before converting: validation inputs may never reach a poisoned row (an unused token's embedding).
    check_finite_weights(named_weights(model), f"the model to export ({source.describe()})", error=ExportError,
                         fix="fix or re-train the source model; an exported copy would answer NaN")

    # 3. build: the graph and the inputs, at the planned length.
    calibration, validation_inputs = _input_sets(model, plan, say)
    graph = plan_graph(model, plan, for_qat=plan.mode.trains)
    notes = pooling_notes(options, facts.declared_pooling)  # shown with the result and kept in the report
    if calibration is not None and not options.calibration:
        notes.append(f"calibrated on {calibration.description}: pass --calibration FILE (text like your app's) "
                     "so the int8 ranges fit your inputs")
    if plan.mode.trains:
        say(f"quantization-aware fine-tuning: {options.qat_steps} step(s) on {calibration.description}")
        graph = quantization_aware_graph(graph, calibration, steps=options.qat_steps,
                                         learning_rate=options.qat_learning_rate)
    metadata = _metadata(source, model, graph, plan)
    out = Path(options.out)
    say(f"exporting {source.describe()} to {out} ({plan.describe()})")
    texts = validation_lines(options.validation_data, plan.tokenizer, options.validation_count, plan.seq_len)

    # 4. search: each setting written to a scratch file and judged; the chosen one is copied into place.
    search = Search(plan, lambda quantize: _ranking(model, plan.setting(quantize), calibration, validation_inputs,
                                                    search.frontier),
                    latency=lambda path: host_latency_ms(path, validation_inputs))
    calibrated = {}  # TFLite: one calibration per mode for every setting tried (tflite/export.py: convert)

    def write(candidate):
        meta = metadata.meta
        if candidate.step is not None:
            meta = candidate_metadata(meta, options.quantize, candidate.plan.quantize, candidate.label,
                                      candidate.plan.keep_float_layers, search.judged_by)
        written = WRITERS[plan.format].write(graph, candidate.plan, calibration, metadata._replace(meta=meta), candidate.path,
                                       calibrated)
        info = inspect_artifact(candidate.path, fmt=plan.format)
        return ExportResult(path=str(out), format=plan.format, quantize=candidate.plan.quantize,
                            size_bytes=info.size_bytes, seconds=time.perf_counter() - start,
                            source=source.describe(), task=plan.task, seq_len=plan.seq_len, notes=notes + written,
                            input_shape=[-1 if n is None else n for n in (
                                (plan.batch_size,) if options.tokenizer_in_graph else
                                (plan.batch_size, plan.static_seq_len))],
                            float_ops=dict(info.float_ops), op_counts=dict(info.op_counts),
                            clients={name: list(reasons) for name, reasons in (info.clients or {}).items()})

    def validate(candidate, precision, with_texts=True, arch=None):
        return validate_file(candidate.path, model, validation_inputs, precision, options.thresholds,
                             artifact_name=str(out), fmt=plan.format, task=plan.task, pooling=plan.pooling,
                             normalize=plan.normalize, texts=texts if with_texts else None,
                             tokenizer=plan.tokenizer if with_texts else None, input_names=plan.input_names,
                             arch=arch, cpu=options.check_cpu)  # the cache build, if any, speaks on stderr

    def emulated(candidate, precision):
        """The ArchComparison of ``candidate`` run on --check-arch's emulated CPU (None: it could not run)."""
        say(f"running {candidate.label} on {options.check_arch} (emulated) on {validation_inputs.description} ...")
        return validate(candidate, precision, with_texts=False, arch=options.check_arch).arch

    def judge(candidate):
        # With --check-arch every setting a search judges runs on the emulated CPU too, so a fallback or auto's
        # ladder moves on from a setting whose outputs there miss the mode's thresholds (issue 46).
        arch = options.check_arch
        if plan.asked.search:
            say(f"evaluating {candidate.label} on {options.eval_data} ...")
            metric = score(candidate.path, options.eval_data).metrics[search.budget.metric]
            if arch is None or not search.budget.holds(metric):  # one the metric refuses is not run there
                return Verdict(metric=metric)
            there = emulated(candidate, candidate.plan.quantize)
            why = "; ".join(str(f).splitlines()[0] for f in there.failures) if there is not None else ""
            return Verdict(passed=False if why else None, metric=metric, why=why, report=there)
        say(f"validating {candidate.label} against the Keras model on {validation_inputs.description} ...")
        candidate.written.validation = report = validate(candidate, candidate.plan.quantize)
        if arch is not None and report.passed:  # a setting that fails here is not run there (seconds a row)
            report.arch = emulated(candidate, candidate.plan.quantize)
            report.failures.extend(report.arch.failures if report.arch is not None else ())
        return Verdict(passed=report.passed, why=report.summary_line(), report=report)

    with install_lock(out) as install, report_guard(out) as report, \
            atomic_path(out, kind=WRITERS[options.format].output, overwrite=options.overwrite, sources=sources) as tmp, \
            scratch_directory("export") as scratch, _named_for_user(scratch, out):
        if search.budget_needed:
            row, evaluation = _float_reference(graph, plan, metadata, Path(scratch), validation_inputs, score)
            search.set_reference(row, evaluation, DEFAULT_MAX_DROP if options.max_drop is None else options.max_drop)
        chosen = search.run(write, judge if options.validate else None, scratch, say)
        result = chosen.written if chosen is not None else None
        if plan.asked.search and not search.passed:
            if result is not None:
                result.search = search.frontier.to_dict()
                write_report(out, result, start, options.overwrite, sources,
                             note=f"{out} was not written: no setting met {search.budget.describe()}")
            raise ExportError(refusal(search.frontier, search.budget, options.eval_data, options.name_of))
        result.search = search.frontier.to_dict() if search.searched else None
        if options.validate:
            _judge_written(result, chosen, search, plan, validate, score, say)
            if options.check_arch and result.validation.passed and result.validation.arch is None:
                # The judge ran it there already (chosen.verdict); an unjudged file (no validation asked of the
                # search) runs now.
                there = chosen.verdict.report if plan.asked.search and chosen.verdict is not None else None
                if there is None:
                    there = emulated(chosen, result.quantize)
                if there is not None:
                    result.validation.arch = there
                    result.validation.failures.extend(there.failures)
            if options.drift_report and plan.mode.quantized:
                result.validation.drift = drift(model, chosen.plan, calibration, validation_inputs, model,
                                                qat_graph=graph if plan.mode.trains else None)
            if not result.validation.passed:
                # The metrics are what the user needs to decide (thresholds, keep-float layers): show and keep them.
                say(result.validation.format_text())
                write_report(out, result, start, options.overwrite, sources,
                             note=f"{out} was not written: validation failed")
            result.validation.raise_for_failures()
        shutil.copyfile(chosen.path, tmp)
        # The file and its report are installed as one unit, under the lock of OUT's directory, which every export
        # into it takes for the moment of its install: two exports into one OUT each wrote their report and
        # renamed their file, and one's file stood beside the other's report, both saying "wrote".
        install.hold()
        # --overwrite too: it lets the export replace what the user had at OUT when the export began, not what
        # another command installed while it ran (two `--overwrite` exports, or a `profile --json` into the
        # report's name, each said "wrote" and the later one silently replaced the other's).
        for path, signature in began.items():
            check_unchanged(path, signature, "this export", ExportError)
        # The report first, then the file (export_report's module doc says why).
        report.write(out, result, start, options.overwrite, sources)
    return result


def _judge_written(result, chosen, search, plan, validate, score, say):
    """The chosen file's validation and notes: a search's winner is compared with the Keras model too, the
    fallback says what it kept float, and a quantized file says how many answers changed."""
    options = plan.options
    if plan.asked.search:
        result.validation = validate(chosen, result.quantize, with_texts=False)
        result.notes.append(f"{chosen.label} chosen: {search.budget.metric} {chosen.row.metric:.4f} on "
                            f"{options.eval_data} ({search.budget.describe()})")
        if not result.validation.passed:
            # The task metric on the user's data decided; the Keras comparison's thresholds are the mode's
            # generic guesses, kept in the note so nothing measured is hidden.
            result.notes.append(f"the Keras comparison missed {result.quantize}'s thresholds "
                                f"({result.validation.summary_line()}); the task metric held")
            result.validation.failures = []
        return
    if chosen.step is not None and chosen.row.passed:
        result.notes.append(f"{options.quantize} as asked failed validation ({search.failure}); wrote {chosen.label} "
                            "(the fewest float layers that pass)")
    if options.eval_data:
        evaluation = score(chosen.path, options.eval_data)
        result.notes.append(f"{evaluation.primary} {evaluation.metrics[evaluation.primary]:.4f} on "
                            f"{options.eval_data} ({evaluation.rows} rows)")
    elif plan.mode.quantized:
        result.notes.extend(changed_answers(result.validation, plan))


@contextlib.contextmanager
def _named_for_user(scratch, out):
    """An error raised inside names ``out``, not the scratch candidate it came from: the user never sees
    ``/tmp/mbk-export-.../candidate-0.tflite`` and cannot act on its name (``could not run candidate-0.tflite``)."""
    try:
        yield
    except MbkError as err:
        candidate = re.compile(re.escape(str(scratch)) + r"/candidate-\d+\.\w+|\bcandidate-\d+\.(?:tflite|onnx)\b")
        text = str(err)
        named = candidate.sub(lambda m: str(out) if "/" in m.group(0) else Path(out).name, text)
        if named != text:
            err.args = (named,) + tuple(err.args[1:])  # the same error, type and traceback: only its text
        raise


def _ranking(model, setting, calibration, inputs, frontier):
    """Layers, most drift-sensitive first, of ``setting``'s conversion (the drift probe, one conversion)."""
    ranked = sensitivity(drift(model, setting, calibration, inputs, model))
    frontier.ranking = [{"layer": layer, "added_noise": round(noise, 6)} for layer, noise in ranked]
    return [layer for layer, _ in ranked]


def _scorer(score, plan):
    """``score``, told the checkpoint's tokenizer for a file that carries none for its app (byte-level BPE: RoBERTa,
    ModernBERT; an .onnx of a SentencePiece checkpoint, whose .tflite packs the model): the --eval-data gate refused
    them, asking for an option export lacks. Decided per written file: what a file carries depends on its format."""
    tokenizer = plan.tokenizer
    if tokenizer is None:
        return score
    return lambda path, data: (score(path, data) if carries_app_tokenizer(path)
                               else score(path, data, tokenizer=tokenizer.source))


def _float_reference(graph, plan, metadata, scratch, inputs, score):
    """``(frontier row, evaluation)`` of the float export on the eval data: the metric the budget is taken from."""
    path = scratch / f"float.{plan.format}"
    WRITERS[plan.format].write(graph, plan.as_float(), None, metadata._replace(meta=dict(metadata.meta, quantization="none")),
                         path)
    evaluation = score(path, plan.options.eval_data)
    return Tried("float32 (reference)", "none", [], host_latency_ms(path, inputs), passed=True), evaluation


def _metadata(source, model, graph, plan):
    """The :class:`~mobilebert_kit.convert.plan.export_plan.FileMetadata` of an export: the plan as the file records it.

    Besides describing the file, the dict carries what the TFLite client metadata is written from
    (``tflite.writer.client_metadata_args``): the task's client family, the output names, the labels; and
    the plan's length (``planned_seq_len``), which ``mbk validate`` and ``mbk evaluate`` read instead of
    deciding one of their own.
    """
    config = encoder_of(model).config
    tokenizer = plan.tokenizer
    dtypes = graph.input_dtypes
    meta = {
        "format": "mobilebert-kit",
        "format_version": FORMAT_VERSION,
        "architecture": plan.architecture,
        "task": plan.task,
        "client": export_task(plan.task).client,
        "pooling": {"mode": plan.pooling, "normalize": bool(plan.normalize)} if plan.pooling else None,
        "source": source.describe(),
        "quantization": plan.quantize,
        "seq_len": plan.static_seq_len,
        "planned_seq_len": plan.seq_len,
        "batch_size": plan.batch_size,
        "inputs": {name: f"{dtypes[name]} {what}" for name, what in (
            ("input_ids", "token ids of the checkpoint's tokenizer"),
            ("attention_mask", "1 for real tokens, 0 for padding"),
            ("token_type_ids", "segment ids (0: first sentence, 1: second)")) if name in dtypes},
        "input_names": list(plan.input_names),
        "input_dtypes": dict(dtypes),
        "outputs": list(graph.output_order),
        "mask_dtype": plan.mask_dtype,
        "io_type": plan.options.io_type,
        "vocab_size": config["vocab_size"],
        # The longest input the position table takes (None: relative positions, no table): a reader of a
        # dynamic-axis file (the profiler, mbk validate) picks a default length within it.
        "max_seq_len": max_positions(config),
        "do_lower_case": tokenizer.do_lower_case if tokenizer is not None else None,
        # The checkpoint's own special tokens and tokenizer kind (RoBERTa's <s>, not BERT's [CLS]).
        "special_tokens": dict(getattr(tokenizer, "special_tokens", None) or
                               {"cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "unk": "[UNK]", "mask": "[MASK]"}),
        "tokenizer_kind": tokenizer.kind.name if tokenizer is not None else None,
        "labels": list(plan.labels),
        # The table columns of the fine-tune (its task.json), so that `mbk evaluate FILE` reads the same table.
        "table_columns": getattr(source, "table_columns", None),
        "squad_windows": getattr(source, "squad_windows", None),  # and its SQuAD windows (stride, question cut)
        "normalization_type": config["normalization_type"],
        "hidden_act": config["hidden_act"],
    }
    if getattr(plan.options, "tokenizer_in_graph", False):
        from mobilebert_kit.convert.onnx.text_graph import TEXT_INPUT, in_graph_record

        meta["tokenizer_in_graph"] = in_graph_record(tokenizer, plan.seq_len)
        meta["inputs"] = {TEXT_INPUT: f"string [batch] raw text, tokenized inside the file by "
                                      f"{meta['tokenizer_in_graph']['library']}"}
        meta["input_names"] = [TEXT_INPUT]
    if tokenizer is None or not plan.options.embed_vocab:
        return FileMetadata(meta)
    # mbk_vocab is a vocab.txt (our evaluate and inspect read it as one): WordPiece only; the other kinds'
    # files are run from the checkpoint's tokenizer.json (mbk evaluate --tokenizer DIR).
    vocab = tokenizer.vocab_lines() if VOCAB_FILE in tokenizer.kind.model_files else None
    unit = tokenizer.client_unit()
    if unit is not None:
        # What inspect and evaluate compare the packed file with, whatever its kind (a SentencePiece model has no
        # lines to compare with mbk_vocab).
        meta["client_tokenizer_sha256"] = hashlib.sha256(unit.data).hexdigest()
    return FileMetadata(meta, vocab, unit)


def _input_sets(model, plan, say=None):
    """(calibration, validation) InputSets of an export, at the planned length."""
    options, config, tokenizer, seq_len = plan.options, encoder_of(model).config, plan.tokenizer, plan.seq_len
    calibration = None
    if options.calibration:
        calibration = InputSet.for_model(options.calibration, seq_len, tokenizer, config,
                                         count=options.calibration_count)
    elif plan.mode.calibration:
        # ExportOptions.check refused the modes that may not calibrate on built-in data (the record's
        # default_calibration rule, quantization/modes.py); the rows never overlap the validation rows.
        calibration = InputSet.default_calibration(tokenizer, config["vocab_size"], options.calibration_count,
                                                   seq_len, config["type_vocab_size"])
        (say or (lambda *_: None))(f"calibrating on {calibration.description}; pass --calibration FILE for your data")
    if options.validation_data:
        validation = InputSet.for_model(options.validation_data, seq_len, tokenizer, config,
                                        count=options.validation_count)
    elif tokenizer is not None:
        validation = InputSet.sample(tokenizer, seq_len)  # real text the calibration did not see
    elif options.calibration:
        validation = calibration
    else:
        validation = default_inputs(config, seq_len, None, count=options.validation_count)
    return calibration, validation.take(options.validation_count)


def _sources(options, source=None):
    """The export's inputs that are files or directories: no output may be, contain or lie inside one."""
    paths = [options.source, options.calibration, options.validation_data, options.recover_data,
             getattr(source, "directory", None), getattr(options.source, "directory", None)]
    return [p for p in paths if isinstance(p, (str, os.PathLike))]
