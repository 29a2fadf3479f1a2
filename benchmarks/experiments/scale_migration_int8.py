"""Does exact NoNorm scale migration help full-int8 fidelity? Tiny models, one export each.

For each tiny NoNorm model (random weights of trained scale, see tests/convert/conftest.py:
trained_like), export full int8 TFLite (the path of ``mbk export --quantize int8``)
before and after ``migrate_nonorm_scales`` (``unit``, ``smoothquant`` and ``balance``) and print the
validation metrics against the float Keras model on held-out random rows. The
``outliers`` variant multiplies 2 channels of every in-block NoNorm gamma by 20,
as MiniLM's residual stream carries a few channels far larger than the rest.

Run: nice python benchmarks/experiments/scale_migration_int8.py  (about 2 minutes on one core)
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

import mobilebert_kit as mbk  # noqa: E402
from mobilebert_kit.convert.exporter import ExportOptions, export  # noqa: E402
from mobilebert_kit.convert.plan.input_set import InputSet  # noqa: E402
from mobilebert_kit.convert.prepare.scale_migration import migrate_nonorm_scales  # noqa: E402
from mobilebert_kit.convert.prepare.substitution import substitute  # noqa: E402
from tests.convert.conftest import trained_like, with_outliers  # noqa: E402

SEQ = 16
NEVER_FAIL = {"min_cosine": -1.0, "min_snr_db": -1e9, "min_argmax_agreement": 0.0, "max_abs_error": 1e30}


def models():
    calibration = InputSet.random(512, 32, SEQ, seed=11)
    mobile = trained_like(mbk.build("tiny-mobilebert", attention_mask_value=-120.0))
    bert = substitute(trained_like(mbk.build("tiny-bert", attention_mask_value=-120.0), seed=1),
                      fit_inputs=calibration, norm="no_norm", act="relu").model
    yield "tiny-mobilebert", mobile
    yield "tiny-mobilebert+outliers", with_outliers(mobile)
    yield "tiny-bert substituted", bert
    yield "tiny-bert substituted+outliers", with_outliers(bert)


def main():
    calibration = InputSet.random(512, 32, SEQ, seed=11)
    with tempfile.TemporaryDirectory() as tmp:
        calib_path, valid_path = Path(tmp) / "calib.npz", Path(tmp) / "valid.npz"
        calibration.save(calib_path)
        InputSet.random(512, 16, SEQ, seed=12).save(valid_path)
        print("| model | migration | sequence_output cosine | SNR dB | pooled_output cosine |")
        print("|---|---|---|---|---|")
        for name, model in models():
            for policy in ("none", "unit", "smoothquant", "balance"):
                candidate = model if policy == "none" else migrate_nonorm_scales(model, policy, calibration)[0]
                out = Path(tmp) / f"{len(name)}-{policy}.tflite"
                result = export(ExportOptions(candidate, "tflite", "int8", out=str(out), seq_len=SEQ,
                                              calibration=str(calib_path), validation_data=str(valid_path),
                                              thresholds=NEVER_FAIL, overwrite=True), log=None)
                metrics = {m.name: m for m in result.validation.outputs}
                seq, pooled = metrics["sequence_output"], metrics.get("pooled_output")
                print(f"| {name} | {policy} | {seq.cosine:.4f} | {seq.snr_db:.1f} | "
                      f"{pooled.cosine if pooled else float('nan'):.4f} |", flush=True)


if __name__ == "__main__":
    main()
