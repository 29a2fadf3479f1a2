"""The quantization-mode table and the export-options schema drive the CLI, the recipe reader and both converters.

Adding a record (a mode to ``MODES``, an option to ``ExportOptions``) must change every consumer, and every
refusal must carry the record's reason in the spelling the user wrote (flag or ``[table] key``).
"""

import argparse
import dataclasses

import pytest

from mobilebert_kit.artifacts.formats import SEQ_LEN
from mobilebert_kit.artifacts.reader import read_artifact
from mobilebert_kit.artifacts.taxonomy import precision
from mobilebert_kit.cli.main import build_parser
from mobilebert_kit.convert.onnx import export as onnx_export
from mobilebert_kit.convert.tflite import export as tflite_export
from mobilebert_kit.convert.errors import ExportError, RecipeError
from mobilebert_kit.convert.plan.export_options import ExportOptions, add_arguments, option, recipe_keys
from mobilebert_kit.convert.quantization.modes import CAPABILITIES, CONVERTED_MODES, MODES
from mobilebert_kit.convert.recipe import _SECTIONS, Recipe
from mobilebert_kit.convert.validation.compare import thresholds_for
from mobilebert_kit.errors import ConfigError
from tests.convert.conftest import SEQ, export_tiny
from tests.reliability.conftest import mbk  # noqa: F401  (the in-process mbk fixture)


def _subparser(name):
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return action.choices[name]


def _choices(parser, flag):
    return list(next(a for a in parser._actions if flag in a.option_strings).choices)  # noqa: SLF001


def _formats(mode):
    return ["tflite", "onnx"] if mode.allows("format:onnx") else ["tflite"]


def _recipe(tmp_path, quantize, calibration=False):
    formats = _formats(MODES[quantize])
    text = f"[source]\npreset = 'tiny-bert'\n[export]\nformats = {formats!r}\nquantize = '{quantize}'\n"
    if calibration:
        (tmp_path / "calib.txt").write_text("a line\n")
        text += "[calibration]\ndata = 'calib.txt'\n"
    path = tmp_path / "r.toml"
    path.write_text(text)
    return Recipe.load(path)


def test_every_mode_is_a_choice_of_export_validate_and_recipes(tmp_path):
    assert _choices(_subparser("export"), "--quantize") == list(MODES)
    # A file is converted by one of the modes; auto is a search over them (its recipe: test_quantization_search.py).
    assert _choices(_subparser("validate"), "--precision") == list(CONVERTED_MODES)
    for name, mode in ((name, MODES[name]) for name in CONVERTED_MODES):
        assert thresholds_for(name).min_cosine == mode.thresholds["min_cosine"]
        if mode.calibration and not mode.allows("default_calibration"):
            with pytest.raises(RecipeError) as err:
                _recipe(tmp_path, name).options()
            # The refusal names the recipe's keys and carries the record's reason.
            assert "[calibration] data" in str(err.value) and mode.refused["default_calibration"] in str(err.value)
        options = _recipe(tmp_path, name, calibration=mode.calibration).options()
        assert [(o.format, o.quantize) for o in options] == [(fmt, name) for fmt in _formats(mode)]


_REFUSED = [(name, capability) for name, mode in MODES.items() for capability in CAPABILITIES
            if capability in mode.refused and capability != "default_calibration"]


@pytest.mark.parametrize("name, capability", _REFUSED)
def test_refusals_carry_the_record_reason_in_the_users_spelling(tmp_path, mbk, name, capability):  # noqa: F811
    mode = MODES[name]
    fmt = "onnx" if capability in ("keep_float:onnx", "format:onnx") else "tflite"
    flags = {"int8_io": ["--io-type", "int8"], "format:onnx": ["--format", "onnx"]}.get(
        capability, ["--keep-float-ops", "SOFTMAX"])
    calibration = tmp_path / "calib.txt"
    calibration.write_text("a line\n")
    proc = mbk("export", "tiny-bert", "--format", fmt, "--quantize", name, "--out", tmp_path / f"m.{fmt}",
               "--calibration", calibration, *flags)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{flags[0]} " in proc.stderr and mode.refused[capability] in proc.stderr
    assert not (tmp_path / f"m.{fmt}").exists()
    # The converters refuse on their own, with the same reason, before touching the graph (None here).
    if capability == "format:onnx":
        with pytest.raises(ExportError) as err:
            onnx_export.quantize(None, name)
        assert mode.refused[capability] in str(err.value)
    elif fmt == "tflite":
        with pytest.raises(ExportError) as err:
            tflite_export.convert(None, name, io_type="int8" if capability == "int8_io" else "float32",
                                  keep_float_ops=None if capability == "int8_io" else ("SOFTMAX",))
        assert mode.refused[capability] in str(err.value)
    elif mode.onnx is not None:  # a mode with its own ONNX Runtime quantizer
        with pytest.raises(ExportError) as err:
            onnx_export.quantize(None, name, keep_float_ops=("MatMul",))
        assert mode.refused[capability] in str(err.value)


def test_a_new_mode_record_reaches_the_cli_the_recipe_and_both_converters(tiny_mobilebert, tmp_path, monkeypatch):
    alias = dataclasses.replace(MODES["dynamic"], name="dynamic-copy")
    monkeypatch.setitem(MODES, "dynamic-copy", alias)
    assert "dynamic-copy" in _choices(_subparser("export"), "--quantize")
    assert _recipe(tmp_path, "dynamic-copy").options()[0].quantize == "dynamic-copy"
    for fmt in ("tflite", "onnx"):
        out = tmp_path / f"m.{fmt}"
        result = export_tiny(tiny_mobilebert, out, fmt, "dynamic-copy")
        assert result.validation.passed and result.validation.thresholds.min_cosine == alias.thresholds["min_cosine"]
        # The profiler's name for what it reads from the file is the record's.
        assert precision(read_artifact(out)) == alias.profiled_as


def test_flags_and_recipe_keys_are_generated_from_the_options_schema():
    export = _subparser("export")
    flags = {s for a in export._actions for s in a.option_strings} | {"src"}  # noqa: SLF001
    declared = {f.metadata["flag"] for f in dataclasses.fields(ExportOptions) if f.metadata.get("flag")}
    assert declared and declared <= flags and flags - declared == {"-h", "--help", "--recipe"}
    for table, keys in recipe_keys().items():
        for key, target in keys.items():
            assert _SECTIONS[table][key] is target.type
            assert ExportOptions.__dataclass_fields__[target.field].metadata["recipe"] == (table, key)

    @dataclasses.dataclass(frozen=True)
    class Extended(ExportOptions):
        new_knob: int = option(3, flag="--new-knob", recipe=("export", "new_knob"), limit=SEQ_LEN,
                               help="a knob declared once")

    parser = add_arguments(argparse.ArgumentParser(), Extended)
    assert parser.parse_args(["src", "--new-knob", "7"]).new_knob == 7
    with pytest.raises(SystemExit):
        parser.parse_args(["src", "--new-knob", "1"])  # its declared bound (SEQ_LEN: >= 2) applies to the flag
    assert recipe_keys(Extended)["export"]["new_knob"].field == "new_knob"


@pytest.mark.parametrize("named_by, expected", [
    ("flag", "--seq-len must be"), ("recipe", "[export] seq_len must be"), ("field", "seq_len must be"),
])
def test_option_errors_name_the_option_as_the_user_wrote_it(named_by, expected):
    with pytest.raises(ConfigError) as err:
        ExportOptions("tiny-bert", out="m.tflite", seq_len=1, named_by=named_by).check()
    assert str(err.value).startswith(expected)
    with pytest.raises(ConfigError) as err:
        ExportOptions("tiny-bert", out="m.tflite", attention_mask_value=5.0, named_by=named_by).check()
    assert {"flag": "--mask-value", "recipe": "[export] mask_value", "field": "attention_mask_value"}[named_by] \
        in str(err.value)


def test_recipe_option_errors_name_the_recipe_key(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text(f"[source]\npreset = 'tiny-bert'\n[export]\nio_type = 'int8'\nseq_len = {SEQ}\n")
    with pytest.raises(RecipeError) as err:
        Recipe.load(path).options()
    message = str(err.value)
    assert "[export] io_type" in message and "--" not in message and MODES["none"].refused["int8_io"] in message
