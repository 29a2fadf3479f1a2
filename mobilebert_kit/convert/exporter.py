"""Exporter: source model in, validated ``.tflite`` / ``.onnx`` artifact out.

Steps: load the source, apply operator substitutions (if any), build the
export graph (static ``[batch, seq]``, float32 attention mask, int8-friendly
mask constant), convert and quantize, embed metadata, validate the file
against the Keras source, and only then move it into place. A failed
validation or an interrupted run leaves no file at ``out`` (artifacts are
written to a temporary sibling and renamed; ``utils.atomic``). The report
(sizes, float ops left in quantized models, validation metrics, per-layer
drift) is written next to the artifact as ``<out>.report.json``.
"""

import json
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.errors import ConfigError, check_choice

FORMATS = ("tflite", "onnx")
QUANTIZATIONS = ("none", "dynamic", "int8", "float16", "int16x8", "qat")
FORMAT_VERSION = 1


@dataclass
class ExportOptions:
    """Everything one export needs; the CLI flags and a recipe's keys map onto these fields.

    Args:
        source: saved-model directory, Hugging Face directory, preset name, or a model object.
        format: ``"tflite"`` or ``"onnx"``.
        quantize: one of ``QUANTIZATIONS``.
        out: the artifact path.
        seq_len: static sequence length.
        batch_size: static batch size (ONNX: ignored with ``dynamic_axes``).
        calibration: ``.txt`` (tokenized) or ``.npz`` file of calibration inputs.
        calibration_count: rows of calibration data used at most.
        validation_data: ``.txt`` / ``.npz`` validation inputs (default: the built-in sample
            sentences when the model has a vocabulary, else calibration rows, else random ids).
        validation_count: rows validated.
        validate: check the artifact against the Keras source before writing it.
        thresholds: overrides of the precision's default thresholds.
        drift_report: also export a per-layer probe and report each layer's drift (quantized only).
        io_type: ``"float32"`` or ``"int8"`` inputs/outputs (TFLite int8/qat).
        mask_dtype: ``"float32"`` (default: no CAST) or ``"int32"`` attention-mask input.
        attention_mask_value: score of padded keys in the exported graph (None keeps the model's).
        keep_float_ops: op types left in float (TFLite names for tflite, ONNX op types for onnx);
            None: the format's default (TFLite full int8 keeps SOFTMAX and the mask ADD float, see
            tflite_export).
        keep_float_layers: layer paths left in float (``transformer_layer_5``, ``norm``, ``ffn_0/output``).
        opset: ONNX opset.
        dynamic_axes: ONNX with dynamic batch and sequence axes.
        embed_vocab: store the vocabulary in the artifact's metadata.
        labels: class names to record (default: from the source).
        substitutions: ``{"norm": ..., "act": ...}`` applied before export (see substitution.py).
        recover_steps / recover_data: recovery distillation after substitution.
        qat_steps / qat_learning_rate: quantization-aware fine-tuning for ``qat``.
        head: head to load from a Hugging Face directory (``"auto"``).
    """

    source: object
    format: str = "tflite"
    quantize: str = "none"
    out: str = None
    seq_len: int = 128
    batch_size: int = 1
    calibration: str = None
    calibration_count: int = 200
    validation_data: str = None
    validation_count: int = 16
    validate: bool = True
    thresholds: dict = field(default_factory=dict)
    drift_report: bool = False
    io_type: str = "float32"
    mask_dtype: str = "float32"
    attention_mask_value: float = -120.0
    keep_float_ops: tuple = None
    keep_float_layers: tuple = ()
    opset: int = 17
    dynamic_axes: bool = False
    embed_vocab: bool = True
    labels: tuple = ()
    substitutions: dict = field(default_factory=dict)
    recover_steps: int = 0
    recover_data: str = None
    qat_steps: int = 100
    qat_learning_rate: float = 1e-5
    head: str = "auto"

    def check(self):
        check_choice("format", self.format, FORMATS)
        check_choice("quantize", self.quantize, QUANTIZATIONS)
        if not self.out:
            raise ConfigError("no output file; pass --out FILE")
        suffix = Path(self.out).suffix
        if suffix != f".{self.format}":
            raise ConfigError(f"--out {self.out} should end in .{self.format} for --format {self.format}")
        if not isinstance(self.seq_len, int) or self.seq_len < 2:
            raise ConfigError(f"--seq-len must be an integer >= 2, got {self.seq_len!r}")
        if self.batch_size is not None and (not isinstance(self.batch_size, int) or self.batch_size < 1):
            raise ConfigError(f"batch size must be a positive integer, got {self.batch_size!r}")
        if self.format == "onnx" and self.io_type != "float32":
            raise ConfigError("int8 inputs/outputs are a TFLite option; ONNX artifacts keep float32/int32 io")
        if self.format == "tflite" and self.dynamic_axes:
            raise ConfigError("TFLite artifacts have static [batch, seq] shapes; dynamic axes are an ONNX option")
        if self.quantize == "qat" and not self.calibration:
            # QAT trains on its data: random rows would teach the model noise (int8 and int16x8 only
            # calibrate, and do that on realistic random rows when the model has no vocabulary).
            raise ExportError(_needs_calibration(self.quantize))
        for what, path in (("calibration data", self.calibration), ("validation data", self.validation_data),
                           ("recovery data", self.recover_data)):
            if path and not Path(path).is_file():
                raise ExportError(f"{what} {path} does not exist; pass a .txt or .npz file")
        return self


@dataclass
class ExportResult:
    """What an export produced and measured."""

    path: str
    format: str
    quantize: str
    size_bytes: int
    seconds: float
    source: str
    notes: list = field(default_factory=list)
    float_ops: dict = field(default_factory=dict)
    op_counts: dict = field(default_factory=dict)
    validation: object = None

    def to_dict(self):
        out = {k: v for k, v in asdict(self).items() if k != "validation"}
        out["validation"] = self.validation.to_dict() if self.validation is not None else None
        return out

    def format_text(self):
        lines = [f"wrote {self.path}: {self.format} {self.quantize}, {self.size_bytes / 1e6:.2f} MB "
                 f"({self.seconds:.1f} s) from {self.source}"]
        lines += [f"  note: {n}" for n in self.notes]
        if self.quantize in ("int8", "int16x8", "qat"):
            if self.float_ops:
                lines.append("  ops left in float: " + ", ".join(f"{op} x{n}" for op, n in sorted(self.float_ops.items())))
            else:
                lines.append("  ops left in float: none")
        if self.validation is not None:
            lines.append(self.validation.format_text())
        return "\n".join(lines)


def export(options, source=None, log=print):
    """Runs one export; returns an :class:`ExportResult`.

    Args:
        options: an :class:`ExportOptions`.
        source: an already loaded :class:`~mobilebert_kit.convert.model_source.ModelSource`
            (recipes load once and export several formats).
        log: where progress lines go (``None``: silent).

    Raises:
        ExportError / ValidationError / ConfigError: with a one-line message.

    Example:
        >>> export(ExportOptions("tiny-bert", "tflite", "dynamic", out="tiny.tflite", seq_len=32))  # doctest: +SKIP
    """
    from mobilebert_kit.convert.model_source import ModelSource

    options.check()
    say = log or (lambda *_: None)
    start = time.perf_counter()
    if source is None:
        if isinstance(options.source, ModelSource):
            source = options.source
        elif hasattr(options.source, "get_layer"):
            source = ModelSource(options.source, "model", getattr(options.source, "name", "model"))
        else:
            # Loading builds the Keras model: up to a minute for a full-size preset, so say it first.
            say(f"loading {options.source} ...")
            source = ModelSource.load(options.source, head=options.head)
    model = _substituted(source, options, say)
    reference = model  # the artifact's Keras source (after substitution, when there is one)
    calibration, validation_inputs = _input_sets(source, model, options, say)
    from mobilebert_kit.convert.export_model import build_export_model

    batch = None if options.dynamic_axes else options.batch_size
    seq = None if options.dynamic_axes else options.seq_len
    graph = build_export_model(model, batch, seq, options.mask_dtype, options.attention_mask_value,
                               for_qat=options.quantize == "qat")
    notes = []
    if options.quantize == "qat":
        from mobilebert_kit.convert.qat import quantization_aware_graph

        say(f"quantization-aware fine-tuning: {options.qat_steps} step(s) on {calibration.description}")
        graph = quantization_aware_graph(graph, calibration, steps=options.qat_steps,
                                         learning_rate=options.qat_learning_rate)
    metadata = _metadata(source, model, graph, options)
    out = Path(options.out)
    say(f"exporting {source.describe()} to {out} ({options.format}, {options.quantize}, seq {options.seq_len})")
    from mobilebert_kit.utils.atomic import atomic_path

    with atomic_path(out) as tmp:
        if options.format == "tflite":
            notes += _write_tflite(graph, options, calibration, metadata, tmp)
        else:
            notes += _write_onnx(graph, options, calibration, metadata, tmp)
        result = _result(tmp, out, options, source, notes, start)
        if options.validate:
            say(f"validating {out.name} against the Keras model on {validation_inputs.description} ...")
            result.validation = validate_file(
                tmp, reference, validation_inputs, options.quantize, options.thresholds, artifact_name=str(out),
                fmt=options.format,
            )
            if options.drift_report and options.quantize != "none":
                result.validation.drift = drift(model, options, calibration, validation_inputs, reference)
            if not result.validation.passed:
                # The metrics are what the user needs to decide (thresholds, keep-float layers): show and keep them.
                say(result.validation.format_text())
                _write_report(out, result, start, note=f"{out} was not written: validation failed")
            result.validation.raise_for_failures()
    _write_report(out, result, start)
    return result


def _write_report(out, result, start, note=None):
    from mobilebert_kit.utils.atomic import atomic_file

    result.seconds = time.perf_counter() - start
    data = result.to_dict()
    if note:
        data["notes"] = data["notes"] + [note]
    with atomic_file(f"{out}.report.json", "w") as handle:
        json.dump(data, handle, indent=2, default=_json_default)


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)


def _substituted(source, options, say):
    if not options.substitutions:
        return source.model
    return apply_substitutions(source, options.substitutions, _recover_inputs(source, options),
                               recover_steps=options.recover_steps, log=say)


def apply_substitutions(source, substitutions, data, recover_steps=0, learning_rate=1e-4, fit=True, log=None):
    """Substitutes operators in ``source.model`` (NoNorm fitted on ``data``), then recovers; returns the model.

    Shared by ``export`` and recipes (which substitute once for all their formats).
    """
    from mobilebert_kit.convert.recovery import recover
    from mobilebert_kit.convert.substitution import substitute

    say = log or (lambda *_: None)
    result = substitute(source.model, fit_inputs=data if fit else None, **substitutions)
    say(result.summary())
    report = recover(source.model, result.model, data, steps=recover_steps, learning_rate=learning_rate, log=say)
    say(report.format_text())
    return result.model


def _recover_inputs(source, options):
    from mobilebert_kit.convert.input_set import InputSet, default_inputs

    if options.recover_data:
        return InputSet.from_file(options.recover_data, options.seq_len, source.tokenizer, _config(source.model)["vocab_size"])
    return default_inputs(_config(source.model), options.seq_len, source.tokenizer, count=64)


def _config(model):
    from mobilebert_kit.convert.rebuild import encoder_of

    return encoder_of(model).config


def _needs_calibration(quantize):
    return (f"--quantize {quantize} needs calibration data: --calibration FILE (.txt, one sentence per line, "
            "or .npz input arrays, see docs/export.md)")


def _input_sets(source, model, options, say=None):
    """(calibration, validation) InputSets for this export."""
    from mobilebert_kit.convert.input_set import default_inputs, InputSet

    config = _config(model)
    tokenizer = source.tokenizer
    calibration = None
    if options.calibration:
        calibration = InputSet.from_file(options.calibration, options.seq_len, tokenizer, config["vocab_size"])
        calibration = calibration.take(options.calibration_count)
    elif options.quantize in ("int8", "int16x8"):
        if tokenizer is not None:
            # A model with a vocabulary is calibrated on the user's text: the built-in sample
            # sentences are kept for validation, which must not see the calibration rows.
            raise ExportError(_needs_calibration(options.quantize))
        # A preset has no vocabulary to tokenize text with; rows shaped like tokenized text
        # calibrate it (issue 12: without this, full int8 of a preset needed an undocumented .npz).
        calibration = InputSet.like_text(config["vocab_size"], options.calibration_count, options.seq_len,
                                         config["type_vocab_size"], seed=1)
        (say or (lambda *_: None))(f"calibrating on {calibration.description}; pass --calibration FILE for your data")
    if options.validation_data:
        validation = InputSet.from_file(options.validation_data, options.seq_len, tokenizer, config["vocab_size"])
    elif tokenizer is not None:
        validation = InputSet.sample(tokenizer, options.seq_len)  # real text the calibration did not see
    elif options.calibration:
        validation = calibration
    else:
        validation = default_inputs(config, options.seq_len, None, count=options.validation_count)
    return calibration, validation.take(options.validation_count)


def _metadata(source, model, graph, options):
    from mobilebert_kit.convert.rebuild import architecture_of

    config = _config(model)
    tokenizer = source.tokenizer
    architecture = architecture_of(model)
    labels = list(options.labels) or (source.labels if architecture in ("sequence_classifier", "token_classifier") else [])
    meta = {
        "format": "mobilebert-kit",
        "format_version": FORMAT_VERSION,
        "architecture": architecture,
        "source": source.describe(),
        "quantization": options.quantize,
        "seq_len": options.seq_len if not options.dynamic_axes else None,
        "batch_size": options.batch_size if not options.dynamic_axes else None,
        "inputs": {
            "input_ids": "int32 word-piece ids",
            "attention_mask": f"{options.mask_dtype}: 1 for real tokens, 0 for padding",
            "token_type_ids": "int32 segment ids (0: first sentence, 1: second)",
        },
        "outputs": list(graph.output_order),
        "mask_dtype": options.mask_dtype,
        "io_type": options.io_type,
        "vocab_size": config["vocab_size"],
        "do_lower_case": tokenizer.do_lower_case if tokenizer is not None else None,
        "special_tokens": {"cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "unk": "[UNK]", "mask": "[MASK]"},
        "labels": labels,
        "normalization_type": config["normalization_type"],
        "hidden_act": config["hidden_act"],
    }
    vocab = tokenizer.vocab_lines() if (tokenizer is not None and options.embed_vocab) else None
    return meta, vocab


def _write_tflite(graph, options, calibration, metadata, path):
    from mobilebert_kit.convert import tflite_export, tflite_flatbuffer
    from mobilebert_kit.models.encoder import INPUT_NAMES

    quantize = options.quantize
    with warnings.catch_warnings():
        # The converter's calibrator still instantiates tf.lite.Interpreter internally.
        warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
        data, notes = tflite_export.convert(
            graph, "qat" if quantize == "qat" else quantize, calibration, options.io_type,
            options.keep_float_ops, options.keep_float_layers,
        )
    meta, vocab = metadata
    entries = {tflite_flatbuffer.METADATA_JSON: json.dumps(meta, sort_keys=True).encode()}
    if vocab:
        entries[tflite_flatbuffer.METADATA_VOCAB] = ("\n".join(vocab) + "\n").encode()
    data = tflite_flatbuffer.finalize(data, INPUT_NAMES, graph.output_order, entries)
    Path(path).write_bytes(data)
    return notes


def _write_onnx(graph, options, calibration, metadata, path):
    import onnx

    from mobilebert_kit.convert import onnx_export

    model = onnx_export.convert(graph, options.opset)
    if options.quantize != "none":
        # qat: tf2onnx folds the fake-quantized weights into float constants, so the
        # quantization-aware graph is then quantized statically (QDQ int8) like int8.
        mode = "int8" if options.quantize == "qat" else options.quantize
        model = onnx_export.quantize(
            model, mode, calibration, options.mask_dtype, options.keep_float_ops or (), options.keep_float_layers,
        )
    elif options.keep_float_ops or options.keep_float_layers:
        raise ExportError(f"keep-float options need a quantized export, not --quantize {options.quantize}")
    meta, vocab = metadata
    entries = {"mbk_metadata": json.dumps(meta, sort_keys=True)}
    if vocab:
        entries["mbk_vocab"] = "\n".join(vocab) + "\n"
    onnx_export.add_metadata(model, entries)
    onnx_export.check(model)
    onnx.save(model, str(path))
    return []


def _result(tmp, out, options, source, notes, start):
    from mobilebert_kit.convert.inspection import inspect_artifact

    info = inspect_artifact(tmp, fmt=options.format)
    return ExportResult(
        path=str(out), format=options.format, quantize=options.quantize, size_bytes=info.size_bytes,
        seconds=time.perf_counter() - start, source=source.describe(), notes=notes,
        float_ops=dict(info.float_ops), op_counts=dict(info.op_counts),
    )


def reference_outputs(reference, inputs, names):
    """Runs the Keras source on ``inputs`` (int32 arrays) and returns ``{name: array}`` for ``names``."""
    out = reference({k: np.asarray(v) for k, v in inputs.arrays.items()}, training=False)
    return {k: np.asarray(out[k]) for k in names if k in out}


def validate_file(path, reference, inputs, precision, thresholds=None, artifact_name=None, fmt=None):
    """Validates an artifact file against a Keras model; returns the ValidationReport (not raised).

    Args:
        path: the ``.tflite`` / ``.onnx`` file.
        reference: the Keras source model.
        inputs: an InputSet with the artifact's sequence length.
        precision: the quantization mode (selects default thresholds).
        thresholds: ``{name: value}`` overrides.
        artifact_name: the name used in messages (default: ``path``).
        fmt: ``"tflite"`` / ``"onnx"`` when ``path`` has another suffix (a temp file).
    """
    from mobilebert_kit.convert.artifact_runner import ArtifactRunner
    from mobilebert_kit.convert.export_model import LOGIT_OUTPUTS, output_names, token_outputs
    from mobilebert_kit.convert.validation import thresholds_for, validate_outputs

    runner = ArtifactRunner(path, fmt=fmt)
    expected = output_names(reference)
    refs = reference_outputs(reference, inputs, expected)
    return validate_outputs(
        artifact_name or str(path), runner, refs, inputs, expected, token_outputs(reference), LOGIT_OUTPUTS,
        precision, thresholds_for(precision, **(thresholds or {})),
    )


def drift(model, options, calibration, inputs, reference):
    """Per-layer drift: export a probe with every hidden state as an output, quantized the same way."""
    import tempfile

    from mobilebert_kit.convert.artifact_runner import ArtifactRunner
    from mobilebert_kit.convert.export_model import build_export_model, hidden_state_names
    from mobilebert_kit.convert.rebuild import encoder_of, rebuild
    from mobilebert_kit.convert.validation import drift_report

    probe = rebuild(encoder_of(reference), output_hidden_states=True)
    keras_out = probe({k: np.asarray(v) for k, v in inputs.arrays.items()}, training=False)
    hidden = [np.asarray(h) for h in keras_out["hidden_states"]]
    graph = build_export_model(model, options.batch_size, options.seq_len, options.mask_dtype,
                               options.attention_mask_value, hidden_states=True, for_qat=options.quantize == "qat")
    if options.quantize == "qat":
        from mobilebert_kit.convert.qat import quantization_aware_graph

        graph = quantization_aware_graph(graph, calibration, steps=options.qat_steps,
                                         learning_rate=options.qat_learning_rate)
    with tempfile.TemporaryDirectory(prefix="mbk-drift-") as tmp:
        path = Path(tmp) / f"probe.{options.format}"
        meta = ({}, None)
        if options.format == "tflite":
            _write_tflite(graph, options, calibration, meta, path)
        else:
            _write_onnx(graph, options, calibration, meta, path)
        return drift_report(ArtifactRunner(path), hidden, inputs, hidden_state_names(model))
