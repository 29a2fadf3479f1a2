"""``mbk pipeline`` end to end on a tiny preset: report contents, stage skipping, re-runs, bad input."""

import json
import math
import re

import pytest

from tests.helpers import assert_one_line_error, run_mbk

TINY = """
[source]
preset = "tiny-bert"

[export]
formats = ["tflite", "onnx"]
quantize = "dynamic"
seq_len = 16
name = "tiny"

[validation]
count = 4
"""
ARTIFACTS = ["tiny-float32.tflite", "tiny.tflite", "tiny-float32.onnx", "tiny.onnx"]


def _stage_lines(stdout):
    """``{stage title: "skipped" | "done"}`` from the progress lines."""
    out = {}
    for line in stdout.splitlines():
        match = re.match(r"\[\d+/\d+\] (.+?): (unchanged, skipped|done in [\d.]+ s)$", line.strip())
        if match:
            out[match.group(1)] = "skipped" if match.group(2).startswith("unchanged") else "done"
    return out


def _mtimes(directory):
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir()}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline")
    recipe = root / "tiny.toml"
    recipe.write_text(TINY)
    out = root / "out"
    proc = run_mbk("pipeline", recipe, "--out", out, "--runs", "5")
    assert proc.returncode == 0, proc.stderr
    return recipe, out, proc


def test_report_has_validation_and_latency_for_every_artifact(first_run):
    recipe, out, proc = first_run
    html = (out / "tiny.pipeline.html").read_text()
    report = json.loads((out / "tiny.pipeline.json").read_text())
    assert report["schema"] == "mobilebert_kit.pipeline" and report["source"] == "tiny-bert"
    names = [a["name"] for a in report["artifacts"]]
    assert names == ARTIFACTS
    for name in ARTIFACTS:
        assert (out / name).stat().st_size > 0
        rows = [v for v in report["validation"] if v["artifact"] == name]
        # The features task's outputs, named per format (optimum's names for ONNX).
        want = {"sequence_output", "pooled_output"} if name.endswith(".tflite") else {"last_hidden_state", "pooler_output"}
        assert {v["output"] for v in rows} == want
        assert all(math.isfinite(v["cosine"]) and math.isfinite(v["snr_db"]) and v["passed"] for v in rows)
        (lat,) = [r for r in report["latency"] if r["artifact"] == name]
        assert lat["target"] == "host" and lat["count"] >= 5
        assert math.isfinite(lat["median_ms"]) and lat["median_ms"] > 0
    by_name = {a["name"]: a for a in report["artifacts"]}
    for fmt in ("tflite", "onnx"):
        quantized, base = by_name[f"tiny.{fmt}"], by_name[f"tiny-float32.{fmt}"]
        assert quantized["quantize"] == "dynamic" and base["quantize"] == "none"
        # Dynamic int8 weights: the file shrinks, and fidelity is below the float export's.
        assert quantized["size_bytes"] < base["size_bytes"]
        assert 0.99 < quantized["fidelity_cosine"] < base["fidelity_cosine"]
        speedup = quantized["speedup_vs_float"]["host"]
        if quantized["speedup_withheld"]["host"]:  # either figure stayed noisy after the reruns: no ratio printed
            assert speedup is None and (quantized["noisy"]["host"] or base["noisy"]["host"])
        else:
            assert speedup == pytest.approx(base["latency_ms"]["host"] / quantized["latency_ms"]["host"])
        if not base["noisy"]["host"]:
            assert base["speedup_vs_float"]["host"] == pytest.approx(1.0)
    # The page carries the tables and the embedded plots.
    assert "Validation against the Keras source" in html and "<h2>Latency</h2>" in html
    assert html.count("data:image/png;base64,") >= 2
    for name in ARTIFACTS:
        assert name in html
    # The summary table at the end of the output.
    assert "mbk pipeline summary" in proc.stdout and "speed-up over float" in proc.stdout
    assert all(name in proc.stdout.split("mbk pipeline summary")[1] for name in ARTIFACTS)
    stages = _stage_lines(proc.stdout)
    assert len(stages) == 9 and set(stages.values()) == {"done"}


def test_rerun_skips_everything_and_rewrites_nothing(first_run):
    recipe, out, _ = first_run
    before = _mtimes(out)
    proc = run_mbk("pipeline", recipe, "--out", out, "--runs", "5")
    assert proc.returncode == 0, proc.stderr
    stages = _stage_lines(proc.stdout)
    assert len(stages) == 9 and set(stages.values()) == {"skipped"}, proc.stdout
    assert _mtimes(out) == before
    assert "mbk pipeline summary" in proc.stdout


def test_recipe_change_reruns_only_affected_stages_and_force_reruns_all(first_run, tmp_path):
    recipe, out, _ = first_run
    tflite_before = (out / "tiny.tflite").stat().st_mtime_ns
    onnx_before = (out / "tiny.onnx").stat().st_mtime_ns
    recipe.write_text(TINY + "\n[export.onnx]\nopset = 15\n")
    proc = run_mbk("pipeline", recipe, "--out", out, "--runs", "5")
    assert proc.returncode == 0, proc.stderr
    stages = _stage_lines(proc.stdout)
    exports = {k.split()[1]: v for k, v in stages.items() if k.startswith("export ")}
    assert exports == {"tiny-float32.tflite": "skipped", "tiny.tflite": "skipped",
                       "tiny-float32.onnx": "done", "tiny.onnx": "done"}
    assert stages["report tiny.pipeline.html"] == "done"
    assert (out / "tiny.tflite").stat().st_mtime_ns == tflite_before
    assert (out / "tiny.onnx").stat().st_mtime_ns != onnx_before
    # A changed option reaches the artifact's manifest.
    manifest = json.loads((out / "tiny.onnx.stage.json").read_text())
    assert manifest["inputs"]["options"]["opset"] == 15

    proc = run_mbk("pipeline", recipe, "--out", out, "--runs", "5", "--force")
    assert proc.returncode == 0, proc.stderr
    stages = _stage_lines(proc.stdout)
    assert len(stages) == 9 and set(stages.values()) == {"done"}
    assert (out / "tiny.tflite").stat().st_mtime_ns != tflite_before


def test_deleted_artifact_is_rebuilt(first_run):
    recipe, out, _ = first_run
    (out / "tiny.tflite").unlink()
    proc = run_mbk("pipeline", recipe, "--out", out, "--runs", "5")
    assert proc.returncode == 0, proc.stderr
    stages = _stage_lines(proc.stdout)
    assert stages["export tiny.tflite (tflite, dynamic, seq 16)"] == "done"
    assert stages["export tiny.onnx (onnx, dynamic, seq 16)"] == "skipped"
    assert (out / "tiny.tflite").is_file()


@pytest.mark.parametrize(
    "text, args, fragments",
    [
        (None, (), ("does not exist",)),
        (TINY.replace("seq_len = 16", "seq_len = 16\nsequence = 3"), (), ("unknown key 'sequence' in [export]",)),
        (TINY, ("--source", "no-such-model-or-dir"), ("--source no-such-model-or-dir",)),
        (TINY, ("--runs", "0"), ("--runs", "must be an integer >= 1")),
        (TINY, ("--adb", "/bin/true"), ("--adb and --benchmark-binary go with --device",)),
    ],
)
def test_bad_input_is_one_line_error_and_writes_nothing(tmp_path, text, args, fragments):
    recipe = tmp_path / "r.toml"
    if text is not None:
        recipe.write_text(text)
    out = tmp_path / "out"
    proc = run_mbk("pipeline", recipe, "--out", out, *args)
    assert_one_line_error(proc, *fragments)
    assert not out.exists()


def test_missing_device_fails_before_any_export(tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text(TINY)
    out = tmp_path / "out"
    adb = tmp_path / "adb"
    # An adb that lists no device: the pipeline must stop before exporting anything.
    adb.write_text("#!/bin/sh\necho 'List of devices attached'\necho\n")
    adb.chmod(0o755)
    proc = run_mbk("pipeline", recipe, "--out", out, "--device", "SERIAL1", "--adb", adb)
    assert_one_line_error(proc)
    assert "device" in proc.stderr.lower()
    assert not out.exists()


def test_interrupted_run_leaves_no_partial_files_and_resumes(tmp_path):
    import signal
    import subprocess
    import sys

    from tests.helpers import REPO

    recipe = tmp_path / "tiny.toml"
    recipe.write_text(TINY)
    out = tmp_path / "out"
    # Ctrl-C as a terminal delivers it. A test run started in the background of a shell without job control
    # (`nohup pytest &`, some CI runners) inherits SIGINT ignored, and Python then installs no handler.
    proc = subprocess.Popen([sys.executable, "-m", "mobilebert_kit.cli.main", "pipeline", str(recipe), "--out", str(out),
                             "--runs", "5"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for line in proc.stdout:
            if line.startswith("[2/9] export tiny.tflite") and line.rstrip().endswith("..."):
                proc.send_signal(signal.SIGINT)  # Ctrl-C during the second export
                break
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert not (out / "tiny.pipeline.html").exists() and not (out / "tiny.pipeline.json").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".partial")]
    assert not (out / "tiny.tflite.stage.json").exists()
    resumed = run_mbk("pipeline", recipe, "--out", out, "--runs", "5")
    assert resumed.returncode == 0, resumed.stderr
    stages = _stage_lines(resumed.stdout)
    assert stages["export tiny-float32.tflite (tflite, none, seq 16)"] == "skipped"
    assert stages["export tiny.tflite (tflite, dynamic, seq 16)"] == "done"
    assert (out / "tiny.pipeline.html").is_file()


def test_a_roberta_recipe_is_scored_and_timed_with_its_checkpoints_tokenizer(tmp_path):
    """A RoBERTa (byte-level BPE) recipe with [evaluation] data and [profile] text was refused ('the source has no
    vocab.txt'), though its files run on the checkpoint's tokenizer.json, as `mbk evaluate --tokenizer DIR` does."""
    import torch
    import transformers

    from tests.tokenizer_fixtures import LABELS, save_checkpoint

    reference = save_checkpoint("roberta", tmp_path / "rob")
    sentences = ["the film was fine", "a dull and slow story", "I loved every minute of it", "not my kind of thing"]
    (tmp_path / "test.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{s}\t{LABELS[i % 3]}\n" for i, s in enumerate(sentences)))
    (tmp_path / "text.txt").write_text("\n".join(sentences) + "\n")
    (tmp_path / "r.toml").write_text('[source]\nmodel = "rob"\n[export]\nformats = ["tflite"]\nseq_len = 16\n'
                                      '[validation]\ncount = 2\n[evaluation]\ndata = "test.tsv"\n'
                                      '[profile]\ntext = "text.txt"\n')
    proc = run_mbk("pipeline", tmp_path / "r.toml", "--runs", "2")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "r.pipeline.json").read_text())
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "rob")
    with torch.no_grad():
        predicted = [int(reference(**tokenizer(s, return_tensors="pt")).logits.argmax(-1)) for s in sentences]
    accuracy = sum(p == i % 3 for i, p in enumerate(predicted)) / len(sentences)
    assert report["evaluation"]["models"][0]["metrics"]["accuracy"] == pytest.approx(accuracy)
    assert report["artifacts"][0]["real_text"]["sentences"] == len(sentences)
    # The files do not carry that tokenizer: a changed one re-runs the stages it feeds, though no file changes.
    (tmp_path / "rob" / "tokenizer.json").write_text(json.dumps(json.loads(
        (tmp_path / "rob" / "tokenizer.json").read_text()), indent=1))
    proc = run_mbk("pipeline", tmp_path / "r.toml", "--runs", "2")
    assert proc.returncode == 0, proc.stderr
    stages = _stage_lines(proc.stdout)
    assert stages["evaluate 1 file(s) on test.tsv"] == stages["profile r.tflite on the host (2 runs)"] == "done"


def test_a_quantize_auto_recipe_runs_and_reports_the_mode_it_chose(tmp_path):
    """quantize = "auto" with [evaluation] max_drop failed at its float32 baseline ('[evaluation] max_drop is the
    budget of [export] quantize = 'auto'', of a recipe saying exactly that), and the report's quantize was 'auto'."""
    from tests.tokenizer_fixtures import LABELS, save_checkpoint

    save_checkpoint("bert", tmp_path / "clf")
    (tmp_path / "test.tsv").write_text("sentence\tlabel\n" + "".join(
        f"sentence number {i} of the test\t{LABELS[i % 3]}\n" for i in range(12)))
    (tmp_path / "r.toml").write_text('[source]\nmodel = "clf"\n[export]\nformats = ["tflite"]\nquantize = "auto"\n'
                                      'seq_len = 16\n[validation]\ncount = 2\n[calibration]\ncount = 8\n'
                                      '[evaluation]\ndata = "test.tsv"\nmax_drop = 0.5\n')
    proc = run_mbk("pipeline", tmp_path / "r.toml", "--runs", "2")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "r.pipeline.json").read_text())
    chosen = json.loads((tmp_path / "out" / "r.tflite.report.json").read_text())["quantize"]
    assert [a["quantize"] for a in report["artifacts"]] == ["none", chosen] and chosen != "auto"
