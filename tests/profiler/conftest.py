"""Shared fixtures of the profiler tests: tiny model files and the DEVICE SIMULATOR.

The model files are built once per session (TensorFlow's converter for
``.tflite``, ``onnx.helper`` for ``.onnx``). The simulator fixture puts an
``adb`` stand-in on PATH that drives simulated phones (``simulator/``); it is
never a real device, and every report it produces says ``"simulated": true``.
"""

import os
import shutil
import sys

import pytest

import mobilebert_kit  # noqa: F401  (sets TF_USE_LEGACY_KERAS before the fixtures import TensorFlow)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "simulator"))

from fixture_models import build_onnx_bert, build_tflite_bert  # noqa: E402
from sim_device import SimulatedPhone  # noqa: E402


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Paths of the tiny fixture models (seq 16 unless dynamic)."""
    root = tmp_path_factory.mktemp("models")
    return {
        "ln_gelu": str(build_tflite_bert(root / "ln_gelu.tflite")),
        "nn_relu": str(build_tflite_bert(root / "nn_relu.tflite", norm="nonorm", activation="relu")),
        "ln_gelu_int8": str(build_tflite_bert(root / "ln_gelu_int8.tflite", quantization="dynamic")),
        "nn_relu_int8": str(build_tflite_bert(root / "nn_relu_int8.tflite", norm="nonorm", activation="relu", quantization="dynamic")),
        "dynamic": str(build_tflite_bert(root / "dynamic.tflite", dynamic_seq=True)),
        # Takes every id in [0, 100) in every input: what benchmark_litert_model feeds (it takes no input values).
        "any_ids": str(build_tflite_bert(root / "any_ids.tflite", type_vocab_size=100)),
        "onnx": str(build_onnx_bert(root / "tiny.onnx")),
        "onnx16_float_mask": str(build_onnx_bert(root / "tiny16.onnx", seq_len=16, mask_dtype="float32")),
    }


class Simulator:
    """Test helper around the DEVICE SIMULATOR root (see simulator/sim_device.py)."""

    def __init__(self, root):
        self.root = str(root)
        self.phones = {}

    def add(self, serial, **options):
        phone = SimulatedPhone(self.root, serial, **options).install()
        self.phones[serial] = phone
        return phone

    def adb_calls(self):
        import json

        path = os.path.join(self.root, "adb_calls.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f]


@pytest.fixture
def simulator(tmp_path, monkeypatch):
    """A DEVICE SIMULATOR root with the ``adb`` stand-in first on PATH."""
    root = tmp_path / "sim"
    root.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "adb"
    wrapper.write_text(f'#!/bin/sh\n# DEVICE SIMULATOR adb stand-in\nexec "{sys.executable}" "{os.path.join(HERE, "simulator", "fake_adb.py")}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("MBK_SIM_ROOT", str(root))
    # The real tool warms up for at least 0.5 s; the simulated one runs exactly --warmup_runs.
    monkeypatch.setenv("MBK_SIM_WARMUP_MIN_SECS", "0")
    assert shutil.which("adb") == str(wrapper)
    return Simulator(root)


@pytest.fixture
def mbk(capsys):
    """Runs ``mbk`` in-process; returns ``(exit code, stdout, stderr)``."""
    from mobilebert_kit.cli.main import main

    def run(*argv):
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
