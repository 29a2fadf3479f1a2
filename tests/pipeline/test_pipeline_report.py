"""The pipeline report's facts (issue 49), each checked against the command a user would ask instead.

A tiny BERT checkpoint with its own WordPiece tokenizer, exported as a mean-pooled embedder, goes through ``mbk pipeline`` (TFLite and ONNX, dynamic
int8, and the float32 baselines). For every file the report must name its ready clients as ``mbk inspect`` does,
its real-text latency on the packaged sentences as ``mbk profile --text`` tokenizes them, its planned-length
latency with CV and interval at the length ``mbk profile`` picks, and an arm64 line; the HTML page must show them.
"""

import json
import math

import pytest

from mobilebert_kit.artifacts.emulated_runner import emulation_ready
from mobilebert_kit.convert.plan.sample_text import SAMPLE_TEXT
from mobilebert_kit.pipeline.report import ARM64_BASELINE, ARM64_HOWTO, NOISE_TOLERANCE, SCHEMA_VERSION
from tests.helpers import run_mbk

RECIPE = """
[source]
model = "ckpt"

[export]
formats = ["tflite", "onnx"]
quantize = "dynamic"
task = "embedding"
pooling = "mean"
seq_len = 16
name = "clf"

[validation]
count = 4
"""
NAMES = ["clf-float32.tflite", "clf.tflite", "clf-float32.onnx", "clf.onnx"]


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
    from tests.tokenizer_fixtures import save_checkpoint

    root = tmp_path_factory.mktemp("report")
    save_checkpoint("bert", root / "ckpt", head=None)
    (root / "clf.toml").write_text(RECIPE)
    proc = run_mbk("pipeline", root / "clf.toml", "--out", root / "out", "--runs", "10", timeout=900)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((root / "out" / "clf.pipeline.json").read_text())
    return root / "out", report, proc


def _mbk_json(*args):
    proc = run_mbk(*args)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_every_file_names_the_clients_mbk_inspect_names(pipeline_run):
    out, report, _ = pipeline_run
    assert report["schema_version"] == SCHEMA_VERSION == 2
    assert [a["name"] for a in report["artifacts"]] == NAMES
    for artifact in report["artifacts"]:
        inspected = json.loads(_mbk_json("inspect", out / artifact["name"], "--json").stdout)["clients"]
        assert artifact["clients"]["ready"] == [c for c, v in inspected.items() if v["ready"]]
        assert artifact["clients"]["not_ready"] == {c: v["reasons"][0] for c, v in inspected.items() if not v["ready"]}
    by_name = {a["name"]: a for a in report["artifacts"]}
    assert "onnxruntime (optimum-style)" in by_name["clf.onnx"]["clients"]["ready"]
    assert "MediaPipe TextEmbedder" in by_name["clf-float32.tflite"]["clients"]["ready"]


def test_real_text_latency_is_the_packaged_sentences_as_mbk_profile_text_feeds_them(pipeline_run, tmp_path):
    out, report, _ = pipeline_run
    for artifact in report["artifacts"]:
        real = artifact["real_text"]
        assert "skipped" not in real, real
        assert real["source"] == str(SAMPLE_TEXT) and real["median_ms"] > 0 and math.isfinite(real["cv"])
        profiled = tmp_path / f"{artifact['name']}.json"
        _mbk_json("profile", out / artifact["name"], "--text", SAMPLE_TEXT, "--runs", "3", "--json", profiled)
        (record,) = json.loads(profiled.read_text())["results"]
        # The same sentences, tokenized by the same app tokenizer, fed the same way.
        assert real["sentences"] == record["text"]["sentences"] == 67
        assert real["tokens_median"] == record["text"]["tokens"]["median"]
        assert real["fed"] == record["text"]["fed"] == "own length"  # the default files are dynamic-length
        rows = [r for r in report["latency"] if r["artifact"] == artifact["name"] and r["kind"] == "real text"]
        assert len(rows) == 1 and rows[0]["median_ms"] == real["median_ms"] and rows[0]["count"] >= 67


def test_planned_length_latency_has_its_cv_interval_and_the_length_mbk_profile_picks(pipeline_run, tmp_path):
    out, report, _ = pipeline_run
    for artifact in report["artifacts"]:
        (row,) = [r for r in report["latency"] if r["artifact"] == artifact["name"] and r["kind"] == "padded"]
        profiled = tmp_path / f"{artifact['name']}.json"
        _mbk_json("profile", out / artifact["name"], "--runs", "3", "--json", profiled)
        (record,) = json.loads(profiled.read_text())["results"]
        assert row["seq_len"] == record["seq_len"] == artifact["seq_len"] == 16
        assert row["median_ms"] == artifact["latency_ms"]["host"] > 0
        assert row["cv"] is not None and math.isfinite(row["cv"]) and row["attempts"] >= 1
        low, high = artifact["latency_ci95_ms"]["host"]
        assert low <= row["median_ms"] <= high
        # Noisy means the interval is wider than the tolerance, and then no speed-up is printed.
        assert artifact["noisy"]["host"] == ((high - low) / 2 > NOISE_TOLERANCE * row["median_ms"])
        if artifact["speedup_withheld"]["host"]:
            assert artifact["speedup_vs_float"]["host"] is None


def test_every_file_has_an_arm64_line(pipeline_run):
    out, report, _ = pipeline_run
    for artifact in report["artifacts"]:
        arm = artifact["arm64"]
        if not emulation_ready("arm64"):
            assert arm == {"checked": False, "line": ARM64_HOWTO}
        elif artifact["quantize"] == "none":
            assert arm == {"checked": False, "line": ARM64_BASELINE}
        else:  # the recipe's own files ran on the emulated arm64 runtimes (the export's --check-arch)
            emulated = json.loads((out / f"{artifact['name']}.report.json").read_text())["validation"]["arch"]
            assert arm["checked"] and arm["arch"] == emulated["arch"] == "arm64" and arm["passed"] is True
            assert arm["min_cosine_vs_x86"] == min(o["vs_x86"]["cosine_min"] for o in emulated["outputs"]) > 0.99


def test_the_page_and_the_summary_show_them(pipeline_run):
    out, report, proc = pipeline_run
    page = (out / "clf.pipeline.html").read_text()
    for heading in ("App clients", "The phone's kernels (arm64)", "Latency", "Validation against the Keras source"):
        assert f"<h2>{heading}" in page
    for artifact in report["artifacts"]:
        assert artifact["arm64"]["line"].replace("`", "") in page.replace("`", "").replace("&#x27;", "'")
        for client in artifact["clients"]["ready"]:
            assert client in page
    assert page.count("real text") >= len(NAMES) and "95% CI ms" in page
    assert "http://" not in page and "https://" not in page  # nothing the page would fetch
    summary = proc.stdout.split("mbk pipeline summary")[1]
    assert "ready clients" in summary and "real text" in summary and "CV" in summary and "arm64" in summary


def test_a_text_in_recipe_is_timed_on_the_sentences_themselves_and_says_why_arm64_is_not_checked(tmp_path):
    """``tokenizer_in_graph = true``: the file is timed on the sample sentences fed as text (no padded timing,
    which would feed token arrays it has no input for), and its arm64 line says why it is not emulated."""
    import numpy as np

    from mobilebert_kit.pipeline.report import ARM64_TEXT_IN
    from tests.tokenizer_fixtures import save_checkpoint

    pytest.importorskip("onnxruntime_extensions")
    save_checkpoint("bert", tmp_path / "ckpt", head=None)
    (tmp_path / "text.toml").write_text(RECIPE.replace('formats = ["tflite", "onnx"]', 'formats = ["onnx"]')
                                        .replace('quantize = "dynamic"', 'tokenizer_in_graph = true'))
    proc = run_mbk("pipeline", tmp_path / "text.toml", "--out", tmp_path / "out", "--runs", "10", timeout=900)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "clf.pipeline.json").read_text())
    (artifact,) = report["artifacts"]
    sentences = [line for line in SAMPLE_TEXT.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert artifact["real_text"]["characters_median"] == float(np.median([len(s) for s in sentences]))
    assert artifact["real_text"]["median_ms"] > 0 and artifact["latency_ms"] == {}
    assert [row["kind"] for row in report["latency"]] == ["real text"]
    assert artifact["arm64"]["checked"] is False and artifact["arm64"]["line"] == ARM64_TEXT_IN
