"""A written ``.tflite`` / ``.onnx`` file checked against its Keras source: outputs, per-layer drift.

:func:`validate_file` runs the file (the one runner, ``artifacts.runner``) and the Keras model on the same
inputs and compares every output with the mode's thresholds (``convert.validation.compare``); it also compares the
file through its clients' tokenization (``convert.validation.client_fidelity``). :func:`drift` exports a probe with
every hidden state as an output, quantized the same way, and reports each layer's drift. Used by the
export's search (the fallback's judge), by ``mbk validate`` and by the drift report.
"""

from dataclasses import MISSING
from pathlib import Path

import numpy as np

from mobilebert_kit.artifacts.metadata import read_artifact_metadata
from mobilebert_kit.artifacts.reader import artifact_format
from mobilebert_kit.artifacts.runner import ArtifactRunner
from mobilebert_kit.convert.validation.arch_validation import compare_on_arch
from mobilebert_kit.convert.validation.client_fidelity import client_fidelity_of
from mobilebert_kit.convert.export_model import (
    hidden_state_names,
    logit_outputs,
    plan_graph,
    task_names,
    task_outputs,
    token_outputs,
)
from mobilebert_kit.convert.plan.export_plan import FileMetadata
from mobilebert_kit.convert.plan.export_tasks import export_task, graph_inputs
from mobilebert_kit.convert.plan.input_set import InputSet
from mobilebert_kit.convert.artifact_writer import WRITERS
from mobilebert_kit.convert.quantization.qat import with_layer_outputs
from mobilebert_kit.convert.prepare.rebuild import architecture_of, encoder_of, rebuild
from mobilebert_kit.convert.validation.compare import drift_report, thresholds_for, validate_outputs
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.scratch import scratch_directory


def reference_outputs(reference, inputs, pairs, pooling=None, normalize=False):
    """The Keras source's values of an export's outputs (``export_model.task_names`` pairs) on the InputSet
    ``inputs``: ``{exported name: array}``.

    The canonical values come from the source's own outputs (and its encoder's, for a head's
    embedding); derived outputs go through ``export_model.task_outputs``, the graph's own function.
    """
    arrays = {k: np.asarray(v) for k, v in inputs.arrays.items()}
    values = dict(reference(arrays, training=False))
    if any(canonical in ("sequence_output", "sentence_embedding") and "sequence_output" not in values
           for _, canonical in pairs):
        values.update({k: v for k, v in encoder_of(reference)(arrays, training=False).items() if k not in values})
    out = task_outputs(values, arrays["attention_mask"], pairs, pooling, normalize)
    return {k: np.asarray(v) for k, v in out.items()}


def validate_file(path, reference, inputs, precision, thresholds=None, artifact_name=None, fmt=None, task=MISSING,
                  pooling=None, normalize=None, texts=None, tokenizer=None, input_names=None, arch=None, cpu=None,
                  say=None):
    """Validates an artifact file against a Keras model; returns the ValidationReport (not raised).

    Args:
        path (str | Path): the ``.tflite`` / ``.onnx`` file (``fmt`` names its format when the suffix does not).
        reference (keras.Model): the Keras source model.
        inputs (InputSet): rows at the artifact's sequence length.
        precision (str): the quantization mode (selects default thresholds; ``thresholds`` overrides them).
        artifact_name (str | None): the name used in messages (default: ``path``).
        task (str | None): the file's export task; not given: its ``mbk_metadata``'s, with ``pooling`` and
            ``normalize`` (a file without one has the architecture's canonical outputs: ``task=None``).
        texts, tokenizer: the validation text and the checkpoint's tokenizer: the file is also compared
            through its clients' tokenization (``convert.validation.client_fidelity``; a warning, never a failure).
        input_names (tuple | None): the graph inputs the file must take (the plan's); None: as its metadata
            records them, else ``export_tasks.graph_inputs``.
        arch (str | None): also run the file on this architecture's runtime, emulated on ``cpu``, and compare
            it with the x86-64 run and the Keras model (``convert.validation.arch_validation``; ``report.arch``);
            ``say`` takes the emulation cache's build lines.

    Example:
        >>> validate_file("m.tflite", model, inputs, "dynamic").passed  # doctest: +SKIP
        True
    """
    fmt = artifact_format(Path(path), fmt)
    meta = read_artifact_metadata(path) if Path(path).suffix == f".{fmt}" and (
        task is MISSING or input_names is None) else {}
    if input_names is None:
        recorded = meta.get("input_names")
        input_names = tuple(recorded) if isinstance(recorded, list) and recorded else graph_inputs(
            fmt, encoder_of(reference).config["type_vocab_size"], getattr(tokenizer, "token_types", None))
    if task is MISSING:
        task = meta.get("task")
        declared = meta.get("pooling") or {}
        pooling, normalize = declared.get("mode"), declared.get("normalize")
    architecture = architecture_of(reference)
    if task is not None and architecture not in export_task(task).architectures:
        raise ConfigError(f"{artifact_name or path} is a {task} export, which a {architecture} cannot be compared "
                          "with; pass the model it was exported from as the reference")
    runner = ArtifactRunner(path, fmt=fmt)
    if runner.takes_text:
        # Its rows pad each other (texts of several lengths in one batch); rows cut in half have no text.
        input_names = tuple(s["name"] for s in runner.input_specs)
        inputs = inputs.single_texts()
    else:
        inputs = inputs.with_padded_rows()
    pairs = task_names(reference, task, fmt)
    expected = [name for name, _ in pairs]
    refs = reference_outputs(reference, inputs, pairs, pooling, bool(normalize))
    limits = thresholds_for(precision, **(thresholds or {}))
    floor = export_task(task).quantized_min_cosine if task is not None else None
    if floor is not None and precision != "none" and "min_cosine" not in (thresholds or {}):
        limits = limits.replace(min_cosine=max(limits.min_cosine or 0.0, floor))  # the task's own bar; yours wins
    tokens, logits = token_outputs(reference, task, fmt), logit_outputs(reference, task, fmt)
    report = validate_outputs(
        artifact_name or str(path), runner, refs, inputs, expected, tokens, logits, precision, limits,
        expected_inputs=tuple(input_names),
    )
    if arch is not None and report.outputs:  # a file that could not be run here is not run there either
        report.arch = compare_on_arch(runner, runner.run(inputs.arrays), refs, inputs, tokens, logits, limits,
                                      arch, cpu, say)
        report.failures.extend(report.arch.failures)
    report.client_tokenization = client_fidelity_of(
        runner, fmt or Path(path).suffix[1:], texts, tokenizer, inputs.seq_len,
        lambda arrays: reference_outputs(reference, InputSet(arrays, "client ids"), pairs, pooling, bool(normalize)),
        logits)
    return report


def changed_answers(validation, plan):
    """``[note]`` when a quantized file passed validation but changed a classifier's answer on some rows, else ``[]``.

    The thresholds are loose (argmax agreement >= 0.7 for int8) and the rows few: a fine-tuned MiniLM whose
    full-int8 file changed 1 of 16 validation answers lost 4.7 accuracy points on real held-out text, and the
    export said only PASSED. Only a task metric on the user's labelled data says what the change costs.
    """
    changed = [m for m in validation.outputs if m.argmax_agreement is not None and m.argmax_agreement < 1.0]
    if not changed:
        return []
    worst = min(changed, key=lambda m: m.argmax_agreement)
    return [f"{plan.quantize} changed the {worst.name} answer on {1 - worst.argmax_agreement:.0%} of the "
            f"validation {'rows' if worst.answers == 'argmax' else 'labels'} ({validation.inputs}); what that costs "
            "on your task only a metric on labelled data "
            f"says: pass {plan.name_of('eval_data')} FILE (or {plan.name_of('quantize')} auto to pick the "
            "fastest setting that holds it)"]


def drift(model, plan, calibration, inputs, reference, qat_graph=None):
    """Per-layer drift: export a probe with every hidden state as an output, quantized the same way.

    ``model`` is the exported Keras model (after substitution), ``reference`` the source its hidden states are
    compared with on the validation ``inputs``. For ``qat`` the probe is cut from ``qat_graph``, the graph that
    was converted (:func:`~mobilebert_kit.convert.quantization.qat.with_layer_outputs`), so the report
    describes the written artifact and QAT runs once per export. Returns one row per layer
    (:func:`~mobilebert_kit.convert.validation.compare.drift_report`).
    """
    probe = rebuild(encoder_of(reference), output_hidden_states=True)
    keras_out = probe({k: np.asarray(v) for k, v in inputs.arrays.items()}, training=False)
    hidden = [np.asarray(h) for h in keras_out["hidden_states"]]
    with scratch_directory("drift") as tmp:
        path = Path(tmp) / f"probe.{plan.format}"
        write_drift_probe(model, plan, calibration, path, qat_graph=qat_graph)
        return drift_report(ArtifactRunner(path), hidden, inputs, hidden_state_names(model))


def write_drift_probe(model, plan, calibration, path, qat_graph=None):
    """Writes the per-layer probe artifact of :func:`drift` at ``path``: the export graph with every hidden state as
    an output.
    """
    graph = (with_layer_outputs(qat_graph, hidden_state_names(model)) if plan.mode.trains
             else plan_graph(model, plan, hidden_states=True))
    WRITERS[plan.format].write(graph, plan, calibration, FileMetadata({}), path)
