"""``mbk pipeline`` with other sources and targets: a TF1 checkpoint via --source, a (SIMULATED) phone via --device."""

import json
import math
import os
import sys
from pathlib import Path

import pytest

from tests.helpers import run_mbk

PROFILER_TESTS = Path(__file__).resolve().parents[1] / "profiler"
FLOAT_TFLITE = """
[source]
preset = "tiny-bert"

[export]
formats = ["tflite"]
quantize = "none"
seq_len = 16
name = "one"
# The TF1 test checkpoint has large random weights (std 0.3): attention scores exceed the int8-friendly
# default mask of -120, so padded keys would leak into the float export; -10000 masks them fully.
mask_value = -10000.0

[validation]
count = 4
"""


@pytest.mark.slow  # ~28 s; TF1 import is covered by tests/test_checkpoints.py, recipe sources by the other tests here
def test_tf1_checkpoint_source_override(tmp_path):
    from tests.test_checkpoints import OFFICIAL_TINY, write_tf1_checkpoint

    ckpt = tmp_path / "tf1"
    write_tf1_checkpoint(ckpt, OFFICIAL_TINY)
    recipe = tmp_path / "recipes" / "one.toml"
    recipe.parent.mkdir()
    recipe.write_text(FLOAT_TFLITE)
    out = tmp_path / "out"
    proc = run_mbk("pipeline", recipe, "--source", ckpt, "--out", out, "--runs", "3")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "one.pipeline.json").read_text())
    assert report["source"] == str(ckpt.resolve())
    exported = json.loads((out / "one.tflite.report.json").read_text())
    assert exported["source"].startswith("TF1 checkpoint")
    (artifact,) = report["artifacts"]
    assert artifact["validation_passed"] and artifact["fidelity_cosine"] > 0.9999
    # The checkpoint's bytes are part of the export stage's key: changing a weight re-exports.
    manifest = json.loads((out / "one.tflite.stage.json").read_text())
    assert manifest["inputs"]["source"]["path"] == str(ckpt.resolve())
    proc = run_mbk("pipeline", recipe, "--source", ckpt, "--out", out, "--runs", "3")
    assert "export one.tflite (tflite, none, seq 16): unchanged, skipped" in proc.stdout
    write_tf1_checkpoint(ckpt, OFFICIAL_TINY, seed=1)
    proc = run_mbk("pipeline", recipe, "--source", ckpt, "--out", out, "--runs", "3")
    assert proc.returncode == 0, proc.stderr
    assert "export one.tflite (tflite, none, seq 16): done" in proc.stdout


@pytest.fixture
def simulated_adb(tmp_path, monkeypatch):
    """The DEVICE SIMULATOR of the profiler tests: an ``adb`` stand-in and one simulated Pixel 3."""
    sys.path.insert(0, str(PROFILER_TESTS / "simulator"))
    try:
        from sim_device import SimulatedPhone
    finally:
        sys.path.pop(0)
    root = tmp_path / "sim"
    root.mkdir()
    wrapper = tmp_path / "adb"
    wrapper.write_text(f'#!/bin/sh\n# DEVICE SIMULATOR adb stand-in\nexec "{sys.executable}" '
                       f'"{PROFILER_TESTS / "simulator" / "fake_adb.py"}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("MBK_SIM_ROOT", str(root))
    monkeypatch.setenv("MBK_SIM_WARMUP_MIN_SECS", "0")
    SimulatedPhone(str(root), "SIMPIPE").install()
    return wrapper


def test_device_profile_on_a_simulated_phone(tmp_path, simulated_adb):
    recipe = tmp_path / "one.toml"
    recipe.write_text(FLOAT_TFLITE)
    out = tmp_path / "out"
    proc = run_mbk("pipeline", recipe, "--out", out, "--runs", "5", "--trials", "1", "--device", "SIMPIPE",
                   "--adb", simulated_adb, "--benchmark-binary", PROFILER_TESTS / "simulator" / "fake_benchmark_model.py")
    assert proc.returncode == 0, proc.stderr
    assert "profile one.tflite on SIMPIPE: done" in proc.stdout
    report = json.loads((out / "one.pipeline.json").read_text())
    targets = {r["target"]: r for r in report["latency"]}
    assert set(targets) == {"host", "SIMPIPE (simulated)"}
    assert all(math.isfinite(r["median_ms"]) and r["median_ms"] > 0 for r in targets.values())
    assert report["profile"]["simulated"] is True
    assert "SIMULATED" in (out / "one.pipeline.html").read_text()
    assert os.path.isfile(out / "one.tflite.device-SIMPIPE.json")
