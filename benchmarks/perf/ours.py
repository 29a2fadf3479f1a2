"""Our exports, obtained the way a user gets them: the converter's ``mbk export`` command.

The command runs in this process (``mobilebert_kit.cli.main.main(argv)``), so
TensorFlow is imported once for the whole benchmark, but through the same
argument parsing, defaults and error handling as ``mbk export`` on a shell.
The contract (issue 5) is::

    mbk export SRC --format tflite|onnx --quantize none|dynamic|int8|float16 --seq-len N --out FILE

SRC is a preset name or, for configurations a preset does not name (the
Table 6 mixes), a directory written by ``mbk.save`` with the preset's seed.

Until ``mbk export`` exists, TFLite exports fall back to the converter's
Python functions (``convert.export_model.build_export_model`` +
``convert.tflite.export.convert``) when those import, and ONNX exports are
skipped; either way the reason is reported with the result.
"""

import contextlib
import io
import os

# (format, precision) -> ``--quantize`` value. Precision names are the report's.
QUANTIZE = {
    "float32": "none",
    "dynamic-int8": "dynamic",
    "int8": "int8",
    "float16": "float16",
    "int4": "int4",
}
SUFFIX = {"tflite": ".tflite", "onnx": ".onnx"}


class ExportUnavailable(RuntimeError):
    """Our converter cannot produce this export (not written yet, or it refused)."""


def export_command_available():
    """None if ``mbk export`` is registered, else the reason it is not."""
    from mobilebert_kit.cli.main import build_parser

    parser = build_parser()
    for action in parser._actions:  # noqa: SLF001  (argparse keeps sub-commands only here)
        if getattr(action, "choices", None) and isinstance(action.choices, dict) and "export" in action.choices:
            return None
    return "`mbk export` is not registered yet (converter, issue 5)"


def source_for(preset, overrides, work_dir):
    """The SRC argument: a saved model of ``preset`` (with ``overrides``) and trained-like vectors.

    Why not the preset name: a fresh model has all-zero biases and NoNorm betas
    and all-one gammas, and converters fold such constants away (tf2onnx drops
    an Add of zeros), which a trained checkpoint never allows. Every family
    gets the same treatment (:func:`trained_like_vectors`; peers.py does it to
    the peers), so no export is timed on a graph a real model would not have.
    """
    import mobilebert_kit as mbk
    from mobilebert_kit.backend import keras

    tag = "_".join(f"{k}-{v}" for k, v in sorted(overrides.items())) or "base"
    directory = os.path.join(work_dir, f"src_{preset}_{tag}_trained-like")
    if not os.path.isdir(directory):
        keras.utils.set_random_seed(0)
        model = mbk.build(preset, **overrides)
        for var in model.weights:
            if len(var.shape) == 1:
                var.assign(trained_like_vectors(var.numpy(), var.name))
        mbk.save(model, directory)
    return directory


def trained_like_vectors(value, name, seed=0):
    """``value`` (a 1-D bias, beta or gamma) plus N(0, 0.02) noise: no zero or one constants left."""
    import zlib

    import numpy as np

    rng = np.random.default_rng(seed + zlib.crc32(name.encode()))
    return (value + rng.normal(0.0, 0.02, value.shape)).astype(value.dtype)


def export(src, fmt, precision, seq_len, out_path, extra_args=(), calibration=None, validate=False):
    """Exports ``src`` to ``out_path``.

    Args:
        calibration: an ``.npz`` of input arrays, passed as ``--calibration`` to
            the quantizations that need one (full int8).
        validate: let ``mbk export`` validate the file (its default); the
            fidelity lines it prints are returned.

    Returns:
        ``(how, fidelity)``: how the file was made and the validation summary
        (None without validation). Raises :class:`ExportUnavailable`.
    """
    if precision not in QUANTIZE:
        raise ExportUnavailable(f"no --quantize value for precision {precision}")
    reason = export_command_available()
    if reason is None:
        args = list(extra_args)
        if calibration and precision == "int8":
            args += ["--calibration", str(calibration)]
        if not validate:
            args.append("--no-validate")
        output = _export_cli(src, fmt, precision, seq_len, out_path, args)
        return "mbk export", (fidelity(output) if validate else None)
    if fmt == "tflite":
        _export_api(src, precision, seq_len, out_path, reason)
        return "converter API (no CLI yet)", None
    raise ExportUnavailable(reason)


def fidelity(output):
    """Summary of ``mbk export``'s validation lines: worst cosine and SNR of the first output, and the verdict."""
    import re

    first = next((line for line in output.splitlines() if " cos " in line and "SNR" in line), None)
    verdict = next((w for line in output.splitlines() for w in ("PASSED", "FAILED") if line.strip().startswith(w)), None)
    if first is None:
        return verdict
    cos = re.search(r"\(min ([0-9.]+)\)", first) or re.search(r"cos ([0-9.]+)", first)
    snr = re.search(r"SNR\s+(-?[0-9.]+) dB", first)
    name = first.split()[0]
    parts = [f"{name} min cos {cos.group(1)}" if cos else name, f"SNR {snr.group(1)} dB" if snr else None, verdict]
    return ", ".join(p for p in parts if p)


def _export_cli(src, fmt, precision, seq_len, out_path, extra_args):
    from mobilebert_kit.cli.main import main

    # The fixed-length tables compare static files, as the peers' TFLite exports are (issue 36 made the .tflite
    # dynamic-length by default; benchmarks/real_text_latency.py times that default on real sentences).
    static = ["--static-axes"] if fmt == "tflite" else []
    argv = [
        "export", str(src), "--format", fmt, "--quantize", QUANTIZE[precision],
        "--seq-len", str(seq_len), "--out", str(out_path), *static, *extra_args,
    ]
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(argv)
    if code != 0:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        raise ExportUnavailable(f"mbk {' '.join(argv)} exited {code}: {lines[-1] if lines else 'no message'}")
    if not os.path.isfile(out_path):
        raise ExportUnavailable(f"mbk export exited 0 but wrote no file {out_path}")
    return out.getvalue()


def _export_api(src, precision, seq_len, out_path, reason):
    try:
        from mobilebert_kit.convert.export_model import build_export_model
        from mobilebert_kit.convert.plan.input_set import InputSet
        from mobilebert_kit.sources.model_source import ModelSource
        from mobilebert_kit.convert.tflite.export import convert
    except ImportError as err:
        raise ExportUnavailable(f"{reason}; converter modules not importable either ({err})") from err
    try:
        model = ModelSource.load(src).model
        graph = build_export_model(model, batch_size=1, seq_len=seq_len)
        config = model.config if "vocab_size" in model.config else model.encoder.config
        calibration = InputSet.random(config["vocab_size"], 16, seq_len) if precision == "int8" else None
        data, _notes = convert(graph, QUANTIZE[precision], calibration=calibration)
    except Exception as err:  # noqa: BLE001  (an unfinished converter: report, don't crash the run)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ExportUnavailable(f"{reason}; converter API failed: {type(err).__name__}: {first}") from err
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out_path)
    return out_path
