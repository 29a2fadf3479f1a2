"""A validation report's JSON is strict JSON: an exact comparison's infinite SNR is the string "inf"."""

import json

import numpy as np

from mobilebert_kit.convert.validation.compare import ValidationReport, compare, thresholds_for


def test_an_exact_comparison_reports_as_strict_json():
    values = np.random.default_rng(0).normal(size=(2, 4, 8)).astype(np.float32)
    exact = compare("sequence_output", values, values.copy())
    assert exact.snr_db == float("inf")  # the metric itself stays a number for the threshold checks
    report = ValidationReport("m.tflite", "none", thresholds_for("none"), "rows", outputs=[exact],
                              drift=[{"layer": "transformer_layer_0", "cosine": 1.0, "snr_db": float("inf")}])

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    text = json.dumps(report.to_dict(), allow_nan=False)
    data = json.loads(text, parse_constant=refuse)  # jq and JSON.parse accept what this accepts
    assert data["outputs"][0]["snr_db"] == "inf" and data["drift"][0]["snr_db"] == "inf"
    assert data["outputs"][0]["cosine"] == 1.0
