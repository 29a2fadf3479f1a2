"""Numeric options, recipes, input-path hazards and escaped output (issue 12), through the command line.

The numeric cases are generated from the parser itself: every flag whose type is a
mobilebert_kit.utils.limits.number_option (bounds declared by the command that owns the flag) is tried
with values just outside its bounds, non-finite and non-numeric.
"""

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from mobilebert_kit.cli.main import build_parser
from mobilebert_kit.convert.errors import RecipeError
from mobilebert_kit.convert.recipe import _SECTIONS, Recipe, _limit_of
from tests.helpers import REPO, run_mbk
from tests.reliability.test_bad_inputs import assert_refused


def _numeric_flags():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for command, subparser in sorted(sub.choices.items()):
        for action in subparser._actions:
            limit = getattr(action.type, "limit", None)
            if limit and action.option_strings:
                yield command, action.option_strings[0], limit


def _bad_values(limit):
    below = limit.lo if limit.lo_open else limit.lo - 1
    values = [below, limit.hi * 10 + 1, "nan", "inf", "-inf", "abc", "", str(10**30) if limit.hi < 1e30 else "1e400"]
    if limit.kind is int:
        values += ["1e20", "2.5"]
    return [str(int(v)) if isinstance(v, float) and limit.kind is int and math.isfinite(v) else str(v) for v in values]


NUMERIC = [(c, f, k, v) for c, f, k in _numeric_flags() for v in _bad_values(k)]


def test_every_numeric_flag_is_bounded():
    flags = {(c, f) for c, f, _, _ in NUMERIC}
    # the probe's cases are among them
    assert {("validate", "--count"), ("export", "--batch-size"), ("profile", "--min-time")} <= flags
    assert len(flags) >= 50


@pytest.mark.parametrize("command, flag, key, value", NUMERIC)
def test_bad_numbers_are_one_line_errors_naming_the_flag(mbk, command, flag, key, value):
    proc = mbk(command, f"{flag}={value}")
    line = assert_refused(proc, f"mbk {command}: error: argument {flag}")
    assert "must be" in line


# ------------------------------------------------------------------ recipes
RECIPE_NUMBERS = [(s, k) for s, keys in _SECTIONS.items() for k, t in keys.items() if t in (int, float) and _limit_of(s, k)]


def _recipe(tmp_path, body, name="r.toml"):
    path = tmp_path / name
    path.write_text("[source]\npreset = 'tiny-bert'\n" + textwrap.dedent(body))
    return path


@pytest.mark.parametrize("section, key", RECIPE_NUMBERS)
@pytest.mark.parametrize("value", ["nan", "inf", "-1e300", "1e300", "0", "-1"])
def test_recipe_numbers_are_checked_with_the_flags_bounds(tmp_path, section, key, value):
    limit = _limit_of(section, key)
    literal = value if limit.kind is float or value in ("0", "-1") else None
    if literal is None:
        pytest.skip("not an integer literal")
    parsed = float(value)
    valid = math.isfinite(parsed) and (parsed > limit.lo if limit.lo_open else parsed >= limit.lo) and parsed <= limit.hi
    if valid:
        pytest.skip(f"{value} is valid for {key}")
    path = _recipe(tmp_path, f"[{section}]\n{key} = {literal}\n" if section != "source" else "")
    with pytest.raises(RecipeError) as err:
        Recipe.load(path)
    assert f"[{section}] {key} must be" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("body, fragment", [
    ("[export]\nformats = []\n", "[export] formats is empty"),
    ("[export]\nformats = ['tflite', 'tflite']\n", "twice"),
    ("[export]\nname = '../../../x'\n", "must be a file name"),
    ("[export]\nname = ''\n", "is empty"),
    ("[export.onnx]\nout_dir = 'x'\n", "cannot set out_dir"),
    ("[export]\nout_dir = 'a/../..'\n", "escapes"),
    ("[calibration]\ndata = 'link/../../x.txt'\n", "escapes"),
    ("[export]\nkeep_float_ops = ['']\n", "non-empty strings"),
    ("[export]\nlabels = 3\n", "must be a list"),
    ("x = " + "[" * 100000 + "]" * 100000 + "\n", "too deeply"),
])
def test_bad_recipes(tmp_path, body, fragment):
    with pytest.raises(RecipeError) as err:
        Recipe.load(_recipe(tmp_path, body)).options()
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_recipe_output_through_a_symlink_out_of_the_directory_is_refused(tmp_path):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "recipes" / "out").symlink_to(tmp_path / "elsewhere")
    path = _recipe(tmp_path / "recipes", "[export]\nout_dir = 'out'\n")
    with pytest.raises(RecipeError, match="escapes the recipe's directory"):
        Recipe.load(path).options()
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_recipe_run_from_its_own_directory(tmp_path, monkeypatch):
    (tmp_path / "export").mkdir()
    _recipe(tmp_path / "export", "[export]\nout_dir = 'out'\nname = 'm'\n", name="default.toml")
    monkeypatch.chdir(tmp_path / "export")
    options = Recipe.load("default.toml").options()
    assert options[0].out == str((tmp_path / "export" / "out" / "m.tflite").resolve())


# ------------------------------------------------------------------ input paths
@pytest.mark.parametrize("command", [
    ["pipeline", "--source", "{src}"], ["info", "{src}"], ["export", "{src}", "--out", "{tmp}/x.tflite"],
])
def test_fifo_and_dangling_symlink_in_a_source_directory_never_hang(tmp_path, command):
    for hazard in ("fifo", "dangling"):
        src = tmp_path / f"src-{hazard}"
        src.mkdir()
        (src / "config.json").write_text("{}")
        if hazard == "fifo":
            os.mkfifo(src / "model.safetensors")
        else:
            (src / "vocab.txt").symlink_to(tmp_path / "nowhere")
        args = [a.format(src=src, tmp=tmp_path) for a in command]
        proc = run_mbk(*args, timeout=120)  # a hang fails here with TimeoutExpired
        line = assert_refused(proc, "FIFO" if hazard == "fifo" else "dangling symlink")
        assert str(src) in line


@pytest.mark.parametrize("make, fragment", [
    (lambda p: os.mkfifo(p), "FIFO"), (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.symlink_to(p.with_name("gone")), "dangling symlink"), (lambda p: None, "does not exist"),
])
@pytest.mark.parametrize("args", [["inspect", "{p}"], ["profile", "{p}"], ["export", "tiny-bert", "--calibration", "{p}"],
                                  ["validate", "{p}", "--reference", "tiny-bert"], ["pipeline", "{p}"],
                                  ["export", "--recipe", "{p}"]])
def test_every_input_path_is_checked(mbk, tmp_path, make, fragment, args):
    path = tmp_path / "input.tflite"
    make(path)
    proc = mbk(*[a.format(p=path) for a in args])
    assert_refused(proc, fragment, str(path))


# ------------------------------------------------------------------ memory
_MEMORY_CHILD = r"""
import resource, sys
import numpy as np
from mobilebert_kit.convert.plan.input_set import InputSet

class Tokenizer:
    vocab_size = 100
    def encode_inputs(self, lines, seq_len):
        n = len(lines)
        return {k: np.ones((n, seq_len), np.int32) for k in ("input_ids", "attention_mask", "token_type_ids")}

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
inputs = InputSet.from_file(sys.argv[1], 16, Tokenizer(), 100, count=200)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(inputs.count, (after - before) // 1024)
"""


@pytest.mark.parametrize("kind", ["txt", "npz", "one-line-txt"])
def test_large_data_file_is_read_only_as_far_as_the_rows_used(tmp_path, kind):
    path = tmp_path / ("data.npz" if kind == "npz" else "data.txt")
    if kind == "npz":
        rows = 600_000  # 3 arrays x 600k x 16 int32 = 115 MB
        np.savez(path, **{k: np.ones((rows, 16), np.int32) for k in ("input_ids", "attention_mask", "token_type_ids")})
    elif kind == "txt":
        path.write_text("the quick brown fox jumps over the lazy dog\n" * 1_000_000)  # 44 MB
    else:
        path.write_text("word " * 10_000_000)  # 50 MB, no newline
    size_mb = path.stat().st_size >> 20
    proc = subprocess.run([sys.executable, "-c", _MEMORY_CHILD, str(path)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    count, grown_mb = map(int, proc.stdout.split())
    assert count == (1 if kind == "one-line-txt" else 200)
    assert size_mb >= 40 and grown_mb < 16, (size_mb, grown_mb)


def test_zero_row_npz_is_refused(mbk, tmp_path):
    from mobilebert_kit.convert.plan.input_set import InputSet
    from mobilebert_kit.convert.errors import ExportError

    path = tmp_path / "empty.npz"
    np.savez(path, **{k: np.zeros((0, 16), np.int32) for k in ("input_ids", "attention_mask", "token_type_ids")})
    with pytest.raises(ExportError, match="holds 0 rows"):
        InputSet.from_file(path, 16, count=10)


# ------------------------------------------------------------------ escaping
FORGED = "x\n\x1b[2Jimported OK"


def test_tensor_name_cannot_forge_lines_or_send_escapes(mbk, tmp_path):
    import json

    import mobilebert_kit as mbk_api
    from safetensors.numpy import save_file

    from mobilebert_kit.checkpoints.weight_names import reference_name
    from mobilebert_kit.models.api import named_weights

    config = dict(vocab_size=50, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
                  max_position_embeddings=16)
    encoder = mbk_api.build(config)
    arrays = {}
    for path, var in named_weights(encoder).items():
        name, transpose = reference_name(path, "hf", encoder.config)
        arrays[name] = np.ascontiguousarray(var.numpy().T if transpose else var.numpy())
    arrays[FORGED] = np.zeros((2,), np.float32)
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": 50, "hidden_size": 8,
                                                 "num_hidden_layers": 1, "num_attention_heads": 2,
                                                 "intermediate_size": 16, "max_position_embeddings": 16}))
    save_file(arrays, str(src / "model.safetensors"))
    proc = mbk("import", src, "--out", tmp_path / "out")
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and "\x1b" not in proc.stderr + proc.stdout
    assert lines[0].startswith("mbk import: error: ") and all(ln.startswith("  - ") for ln in lines[1:])
    assert any("x\\n\\x1b[2Jimported OK" in ln for ln in lines[1:]), lines
    assert not any(ln.startswith("imported OK") for ln in (proc.stdout + proc.stderr).splitlines())


def test_file_name_with_a_newline_keeps_the_error_on_one_line(mbk, tmp_path):
    path = tmp_path / "bad\nname\x1b[2J\u202e.tflite"
    path.write_bytes(b"not a model")
    proc = mbk("inspect", path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "\x1b" not in proc.stderr and "\u202e" not in proc.stderr
    assert "bad\\nname\\x1b[2J\\u202e.tflite" in proc.stderr


def _odd_outputs(root):
    """Inputs beside outputs whose names hold a newline and rich markup: (directory, {command: argv})."""
    where = root / "runs\nforged[red]x"
    where.mkdir()
    (where / "c.txt").write_text("the cat sat .\nthe dog .\n\na dog sat .\nthe cat ran .\n")
    (where / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "dog"]))
    (where / "t.tsv").write_text("sentence\tlabel\nthe cat\t0\nthe dog\t1\n")
    np.savez(where / "in.npz", **{k: np.ones((2, 8), np.int32) for k in ("input_ids", "attention_mask")},
             token_type_ids=np.zeros((2, 8), np.int32))
    return where, {
        "export": ["export", "tiny-bert", "--format", "onnx", "--seq-len", 8, "--out", where / "m.onnx"],
        "pretraining-data": ["pretraining-data", "--input", where / "c.txt", "--vocab", where / "vocab.txt",
                             "--out", where / "pd", "--seq-len", 16, "--shards", 1],
        "substitute": ["substitute", "tiny-mobilebert", "--norm", "no_norm", "--data", where / "in.npz",
                       "--seq-len", 8, "--out", where / "sub"],
        "finetune": ["finetune", "--model", "tiny-mobilebert", "--task", "classification", "--train", where / "t.tsv",
                     "--vocab", where / "vocab.txt", "--out", where / "ft", "--batch-size", 2, "--seq-len", 8],
    }


@pytest.mark.parametrize("command", ["export", "pretraining-data", "substitute", "finetune"])
def test_an_output_name_with_a_newline_and_markup_is_shown_escaped_on_one_line(mbk, tmp_path, command):
    # "wrote /tmp/runs" then "forged/pd" on a line of its own; rich took [red] for markup and dropped it.
    where, argv = _odd_outputs(tmp_path)
    proc = mbk(*argv[command])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert not [ln for ln in lines if ln.startswith("forged")], proc.stdout
    assert any("runs\\nforged[red]x" in ln for ln in lines), proc.stdout


def test_non_utf8_model_name_profiles_and_reports_valid_json(mbk, tmp_path):
    import json

    pytest.importorskip("ai_edge_litert")
    sys.path.insert(0, str(REPO / "tests" / "profiler"))
    from fixture_models import build_tflite_bert

    model = build_tflite_bert(tmp_path / "m.tflite")
    odd = os.path.join(os.fsencode(tmp_path), b"m\xff.tflite")
    os.rename(model, odd)
    report = tmp_path / "r.json"
    proc = mbk("profile", os.fsdecode(odd), "--runs", 2, "--min-time", 0, "--json", report)
    assert proc.returncode == 0, proc.stderr
    assert "m\\xff" in proc.stdout
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["results"][0]
