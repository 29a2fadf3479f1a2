"""The issue 7 benchmark harness (benchmarks/perf) end to end at tiny size, so it cannot rot.

Runs ``benchmarks.perf.run`` on ``tiny-mobilebert`` at sequence length 16
with a handful of timed calls: our exports (when ``mbk export`` exists), the
peers (Model Garden when tf-models-official is installed, Hugging Face with
the dev extra), the GEMM peak, the ratio table, the RESULTS.md section and
the plots. No timing is asserted: only that every figure is produced and finite.
"""

import math
import os

import pytest

from benchmarks.perf import report

pytestmark = pytest.mark.filterwarnings("ignore")


def _finite(x):
    return x is not None and math.isfinite(x) and x > 0


def test_harness_end_to_end_on_tiny_preset(tmp_path):
    from benchmarks.perf import run as perf
    from benchmarks.perf.edge_peers import executorch_available, litert_torch_available
    from benchmarks.perf.ours import export_command_available
    from benchmarks.perf.peers import hf_available, model_garden_available

    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## someone else's section\n\nkept as is\n")
    # float32 only and a one-point sweep that reuses the main exports: each conversion costs
    # 5-15 s on the shared 2-core machine. Other precisions and Table 6: the slow test below.
    argv = [
        "--preset", "tiny-mobilebert", "--seq-len", "16", "--quick", "--precisions", "float32",
        "--min-runs", "3", "--min-time", "0.05", "--rounds", "2", "--warmup", "1",
        "--sweep", "16", "--sweep-precisions", "float32", "--formats", "tflite,onnx",
        "--workdir", str(tmp_path / "work"), "--results", str(results), "--plots-dir", str(tmp_path / "plots"),
    ]
    out = perf.run(argv, log=lambda *_: None)
    records = out["records"]

    ok = [r for r in records if r["status"] == "ok"]
    for r in ok:
        assert _finite(r["median_ms"]) and r["p90_ms"] >= r["median_ms"], r
        assert r["runs"] >= 3
    for r in records:
        if r["status"] != "ok":
            assert r["reason"], r  # a skip always says why

    def status(family, fmt, precision, set_name="main"):
        return {r["status"] for r in records
                if (r["set"], r["family"], r["format"], r["precision"]) == (set_name, family, fmt, precision)}

    if export_command_available() is None:  # the converter exists: our exports must run
        for fmt in ("tflite", "onnx"):
            assert status("ours", fmt, "float32") == {"ok"}, [r for r in records if r["family"] == "ours"]
            assert status("ours", "tflite", "float32", "sweep") == {"ok"}
    if hf_available() is None:
        assert status("hugging-face", "onnx", "float32") == {"ok"}
    if model_garden_available() is None:
        assert status("model-garden", "tflite", "float32") == {"ok"}
    else:
        assert "setup_peers.sh" in next(r["reason"] for r in records if r["family"] == "model-garden")
    for family, fmt, available in (("executorch", "pte", executorch_available), ("litert-torch", "tflite", litert_torch_available)):
        if available() is None:  # installed (setup_peers.sh --edge): it must export and run
            assert status(family, fmt, "float32") == {"ok"}, [r for r in records if r["family"] == family]
        else:
            assert "setup_peers.sh --edge" in next(r["reason"] for r in records if r["family"] == family)

    # Cold start (--quick: one fresh process per file of the main set): every timed file has its figures.
    timed_files = [r for r in ok if r["set"] == "main" and r["family"] != "gemm"]
    assert timed_files
    for r in timed_files:
        cold = r.get("cold_start")
        assert cold is not None, (r["family"], r["format"], r["precision"], r.get("cold_start_error"))
        assert cold["launches"] == 1 and all(_finite(cold[k]) for k in ("load_ms", "first_ms", "peak_rss_mb")), cold
        assert cold["peak_rss_mb"] >= cold["model_rss_mb"] >= 0

    gemm = [r for r in records if r["family"] == "gemm"]
    assert {r["precision"] for r in gemm} >= {"float32", "int8"}
    assert all(_finite(r["gflops_per_s"]) for r in gemm)
    assert _finite(out["meta"]["peaks_gflops"]["float32"]) and _finite(out["meta"]["peaks_gflops"]["int8"])

    rows = report.ratios(records)
    if export_command_available() is None and (hf_available() is None or model_garden_available() is None):
        assert rows and all(_finite(row["ratio"]) for row in rows if row["peer"] is not None)
        assert any(row["peer"] is not None for row in rows)
    for r in ok:
        if r["family"] != "gemm":
            assert _finite(r["gflops_per_s"]) and _finite(r["peak_fraction"]) and _finite(r["size_mb"])

    text = results.read_text()
    assert text.startswith("# Benchmark results\n\n## someone else's section\n\nkept as is\n")
    assert "## Performance against the peers" in text and "PRELIMINARY" in text  # --quick is always labelled
    assert "python -m benchmarks.perf.run --preset tiny-mobilebert" in text
    assert "### Ours / best peer" in text and "### Targets (issue 17)" in text
    assert "### Cold start and memory" in text
    _assert_png(out["plots"], 1)


def _assert_png(paths, count):
    assert len(paths) == count
    for path in paths:
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_harness_all_precisions_and_table6_on_tiny_preset(tmp_path):
    """Every precision, a two-length sweep and the four Table 6 settings (about 20 conversions)."""
    from benchmarks.perf import run as perf
    from benchmarks.perf.ours import export_command_available

    if export_command_available() is not None:
        pytest.skip(export_command_available())
    argv = [
        "--preset", "tiny-mobilebert", "--seq-len", "16", "--quick", "--min-runs", "3", "--min-time", "0.05",
        "--calibration-count", "4", "--sweep", "8,16", "--table6", "--validate",
        "--workdir", str(tmp_path / "work"), "--no-results", "--plots-dir", str(tmp_path / "plots"),
    ]
    out = perf.run(argv, log=lambda *_: None)
    ours = [r for r in out["records"] if r["family"] == "ours"]
    failed = [(r["format"], r["precision"], r["set"], r["reason"]) for r in ours if r["status"] != "ok"]
    # static int8 ONNX is optional in the converter; everything else must export and run
    assert all(fmt == "onnx" and precision == "int8" for fmt, precision, _, _ in failed), failed
    assert {r["setting"] for r in ours if r["set"] == "table6" and r["status"] == "ok"} == set(perf.SETTING_OVERRIDES)
    assert all(r.get("fidelity") for r in ours if r["status"] == "ok"), "validation summary missing"
    _assert_png(out["plots"], 2)
    assert "### Table 6 layout" in out["markdown"]


def _rec(family, fmt, precision, ms, **extra):
    return dict(dict(set="main", family=family, format=fmt, precision=precision, median_ms=ms, status="ok"), **extra)


def test_ratios_pick_the_fastest_peer_of_the_same_precision():
    records = [
        _rec("ours", "tflite", "float32", 50.0, peak_fraction=0.8),
        _rec("ours", "tflite", "dynamic-int8", 20.0),
        _rec("ours", "tflite", "int8", 15.0),
        _rec("model-garden", "tflite", "float32", 60.0),
        _rec("hugging-face", "onnx", "float32", 40.0),
        _rec("model-garden", "tflite", "dynamic-int8", 25.0),
        _rec("model-garden", "tflite", "int8", 30.0),
        _rec("model-garden", "tflite", "float16", 1.0, status="skipped", reason="test"),
    ]
    by = {(r["format"], r["precision"]): r for r in report.ratios(records)}
    assert by[("tflite", "float32")]["ratio"] == pytest.approx(50 / 40)  # best peer in any format
    assert by[("tflite", "float32")]["ratio_same_format"] == pytest.approx(50 / 60)
    assert by[("tflite", "int8")]["ratio"] == pytest.approx(15 / 30)
    assert by[("tflite", "best-int8")]["ratio"] == pytest.approx(15 / 25)
    assert ("tflite", "float16") not in by  # ours not measured
    met = {name: (value, ok) for name, value, ok in report.targets(records)}
    assert met["ours tflite full int8 / dynamic int8 <= 0.8"] == (pytest.approx(0.75), True)
    assert met["ours best int8 / best int8 of every peer <= 0.8"] == (pytest.approx(15 / 25), True)
    assert met["ours float32 / every peer's float32 <= 1.0"] == (pytest.approx(50 / 40), False)
    assert met["ours float32 >= 75% of the float32 GEMM peak"] == (0.8, True)
    assert met["bert-base / ours tflite float32 >= 4.0 at every length (the smallest)"] == (None, False)
    # The speed-up target takes the worst sequence length of main and sweep.
    records += [_rec("baseline", "tflite", "float32", 200.0, model="bert-base", seq_len=128),
                _rec("baseline", "tflite", "float32", 60.0, model="bert-base", seq_len=32, set="sweep"),
                _rec("ours", "tflite", "float32", 20.0, seq_len=32, set="sweep")]
    records[0]["seq_len"] = 128
    met = {name: (value, ok) for name, value, ok in report.targets(records)}
    assert met["bert-base / ours tflite float32 >= 4.0 at every length (the smallest)"] == (pytest.approx(3.0), False)


def test_plots_and_tables_from_records(tmp_path):
    from benchmarks.perf import plots

    rows = []
    for setting, ms in zip(report.SETTINGS, (4.0, 3.0, 3.5, 2.0)):
        for precision, scale in (("float32", 1.0), ("int8", 0.5)):
            rows.append(dict(_rec("ours", "tflite", precision, ms * scale), set="table6", setting=setting, seq_len=16))
    for seq_len in (8, 16, 32):
        for family in ("ours", "model-garden"):
            rows.append(dict(_rec(family, "tflite", "float32", seq_len / 4, p90_ms=seq_len / 3), set="sweep", seq_len=seq_len))
    table = report.table6(rows)
    assert table[2].startswith("| LayerNorm+GELU | 4.00 (1.00x) | 2.00 (1.00x) |")
    assert table[-1] == "| NoNorm+ReLU | 2.00 (2.00x) | 1.00 (2.00x) |"
    assert report.table_sweep(rows)[-1] == "| ours tflite float32 | 2.00 | 4.00 | 8.00 |"
    paths = [plots.table6(rows, str(tmp_path / "t6.png"), "test"),
             plots.latency_vs_seq_len(rows, str(tmp_path / "sweep.png"), "test")]
    _assert_png(paths, 2)


def test_appending_keeps_existing_sections(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("## other\nno trailing newline")
    report.append_section(str(path), "## mine\n")
    assert path.read_text() == "## other\nno trailing newline\n\n## mine\n"
    report.append_section(str(path), "## again\n")
    assert path.read_text().endswith("## mine\n\n## again\n")
    assert os.path.getsize(path) > 0


def test_fidelity_summary_of_mbk_export_output():
    from benchmarks.perf.ours import fidelity

    output = (
        "wrote x.tflite: tflite int8, 0.09 MB (17.6 s)\n"
        "validation of x.tflite (int8) on 8 row(s) of calib.npz:\n"
        "  sequence_output        max|err| 1.368e-03  mean|err| 2.997e-04  cos 0.999900 (min 0.999856)  SNR   36.9 dB\n"
        "  pooled_output          max|err| 1.093e-03  mean|err| 3.145e-04  cos 0.999895 (min 0.999884)  SNR   36.7 dB\n"
        "  PASSED\n"
    )
    assert fidelity(output) == "sequence_output min cos 0.999856, SNR 36.9 dB, PASSED"
    assert fidelity("  FAILED\n") == "FAILED"
    assert fidelity("no validation lines") is None
