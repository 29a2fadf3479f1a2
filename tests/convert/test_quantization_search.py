"""``--quantize auto`` and full int8's ranked fallback on a tiny classifier with one deliberately sensitive layer.

``transformer_layer_1``'s feed-forward gets two channels x200 (``with_outliers``, MiniLM's shape of problem in
one layer; full int8 keeps a LayerNorm model's norms and residual ADDs float by default, so outliers there no
longer break it). Measured on 128 held-out rows labelled with the Keras model's own predictions: float 1.0,
full int8 0.836, int8 with transformer_layer_1's residual path (norm, add, intermediate, output) float 0.953,
the whole of transformer_layer_1 float 0.945, dynamic 0.992.

The task metric here is argmax accuracy computed from the artifact's outputs (``_accuracy``), a stand-in
for ``mobilebert_kit.evaluation.artifact_metrics.evaluate_artifact`` (issue 15, another branch) with the
same fields; once that module is merged these tests keep patching only the function the search calls.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.convert.conftest import SEQ, trained_like, with_outliers

SENSITIVE = "transformer_layer_1"
PARTS = ("norm", "add", "intermediate", "output")  # the residual path the ranked rung keeps float per layer


@dataclass(frozen=True)
class _Evaluation:
    """The fields of q1's ``ArtifactEvaluation`` that the search reads."""

    metrics: dict
    primary: str
    task: str
    rows: int
    higher_is_better: bool


def _accuracy(path, data):
    """Argmax accuracy of a classifier file's ``probability`` on an .npz of inputs and ``labels``."""
    from mobilebert_kit.artifacts.runner import ArtifactRunner

    stored = np.load(data)
    inputs = {k: stored[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    outputs = ArtifactRunner(path).run(inputs)
    predicted = outputs["probability" if "probability" in outputs else "logits"].argmax(-1)  # TFLite / ONNX
    return _Evaluation({"accuracy": float(np.mean(predicted == stored["labels"]))}, "accuracy", "classification",
                       len(predicted), True)


@pytest.fixture(scope="module")
def sensitive(tmp_path_factory):
    """(classifier, saved directory, eval .npz) with transformer_layer_1 made int8-sensitive."""
    import mobilebert_kit as mbk
    from mobilebert_kit.convert.plan.input_set import InputSet
    from mobilebert_kit.models.heads import HEADS

    encoder = mbk.build("tiny-bert", attention_mask_value=-120.0)
    model = trained_like(HEADS["sequence_classifier"](encoder, num_labels=3), seed=1)
    # In the feed-forward: full int8 keeps a LayerNorm model's norms and residual ADDs float by default, so
    # outliers there (MiniLM's) no longer make int8 fail; x200 channels of block 1's GELU input still do.
    model = with_outliers(model, factor=200.0, layers=(SENSITIVE,), weights=("intermediate/kernel", "intermediate/bias"))
    tmp = tmp_path_factory.mktemp("sensitive")
    rows = InputSet.random(encoder.config["vocab_size"], 128, SEQ, seed=7)
    labels = np.argmax(model(rows.arrays, training=False)["logits"].numpy(), -1)
    data = tmp / "eval.npz"
    np.savez(data, **rows.arrays, labels=labels)
    return model, mbk.save(model, tmp / "saved"), data


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """32 calibration rows: a sixth of the default's conversion time, the same verdicts (measured)."""
    from mobilebert_kit.convert.plan.input_set import InputSet

    path = tmp_path_factory.mktemp("calibration") / "calib.npz"
    InputSet.random(vocab_size=512, count=32, seq_len=SEQ, seed=1).save(path)
    return path


def _latencies(monkeypatch, ms_by_mode):
    """Host latency by the file's quantization mode: the search's choice between settings that pass depends on
    timing, which at this size is noise; here each mode's speed is given."""
    import mobilebert_kit.convert.exporter as exporter
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata

    monkeypatch.setattr(exporter, "host_latency_ms",
                        lambda path, inputs, runs=10: ms_by_mode[read_artifact_metadata(path)["quantization"]])


def _passed(frontier):
    return [row for row in frontier if row["passed"]]


def _auto(sensitive, calibration, tmp_path, monkeypatch, latencies, fmt="tflite", max_drop=0.15):
    """``--quantize auto`` of the sensitive classifier with each mode's host latency given; (result, file, data)."""
    from mobilebert_kit.convert.exporter import ExportOptions, export

    _latencies(monkeypatch, latencies)
    model, _, data = sensitive
    out = tmp_path / f"m.{fmt}"
    result = export(ExportOptions(model, fmt, "auto", out=str(out), seq_len=SEQ, eval_data=str(data),
                                  max_drop=max_drop, calibration=str(calibration)), log=None, score=_accuracy)
    return result, out, data


@pytest.fixture
def standin(monkeypatch):
    import mobilebert_kit.evaluation.artifact_metrics as artifact_metrics

    # The CLI passes artifact_metrics.evaluate_artifact to export(); direct calls pass score=_accuracy.
    monkeypatch.setattr(artifact_metrics, "evaluate_artifact", _accuracy)


def test_auto_keeps_the_sensitive_layer_float_and_meets_the_budget(sensitive, standin, calibration, tmp_path,
                                                                   monkeypatch):
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata

    result, out, data = _auto(sensitive, calibration, tmp_path, monkeypatch, {"none": 3.0, "int8": 1.0, "dynamic": 1.3,
                                                                         "int4-channel": 1.5})
    search = result.search
    assert search["ranking"][0]["layer"] == SENSITIVE, search["ranking"]
    first, chosen = search["frontier"][0], _passed(search["frontier"])[0]
    assert first["setting"] == "int8" and not first["passed"] and first["drop"] > 0.15, first
    # The sensitive block's residual path alone (norm, add, intermediate, output) is kept float.
    assert chosen["passed"] and chosen["quantize"] == "int8", chosen
    assert chosen["float_layers"] == [f"{SENSITIVE}/**/{part}" for part in PARTS], chosen
    # int4 per channel and dynamic int8 passed too and were measured: slower, so the int8 setting is written.
    assert [r["quantize"] for r in _passed(search["frontier"])] == ["int8", "int4-channel", "dynamic"], \
        search["frontier"]
    assert search["reference"]["metric"] == 1.0 and "first setting" in search["stopped"]
    assert "dynamic 1.30 ms was not faster by 5%" in search["stopped"], search["stopped"]
    assert "float32 ran faster" not in search["stopped"], search["stopped"]
    assert search["judged_by"].endswith(", 128 row(s))"), search["judged_by"]  # how much a pass proves
    # The written file is the chosen one, it holds the metric, and its metadata records the setting.
    meta = read_artifact_metadata(out)
    assert meta["quantization"] == "int8" and meta["quantization_search"]["float_layers"] == chosen["float_layers"]
    assert _accuracy(out, data).metrics["accuracy"] >= 0.85
    report = json.loads((tmp_path / "m.tflite.report.json").read_text())
    assert [r["setting"] for r in report["search"]["frontier"]] == [r["setting"] for r in search["frontier"]]
    assert all(r["latency_ms"] > 0 for r in report["search"]["frontier"])
    assert "quantization search" in result.format_text()


def test_auto_writes_a_later_setting_that_passed_and_ran_faster(sensitive, standin, calibration, tmp_path,
                                                                 monkeypatch):
    # The ladder's order (full int8 first) is the usual speed, not this host's: a fine-tuned MiniLM ran full
    # int8 slower than dynamic int8 (issue 15), and auto wrote the slower file.
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata

    # Float32 faster still (a tiny model on a host CPU): it is no candidate, but the report says so.
    result, out, _ = _auto(sensitive, calibration, tmp_path, monkeypatch, {"none": 0.5, "int8": 2.0, "dynamic": 1.0,
                                                                          "int4-channel": 1.5})
    search = result.search
    assert [r["quantize"] for r in _passed(search["frontier"])] == ["int8", "int4-channel", "dynamic"], \
        search["frontier"]
    assert search["stopped"].startswith("dynamic passed and ran faster on this host than int8, residual path of"), \
        search["stopped"]
    assert search["stopped"].endswith("float32 ran faster on this host still (0.50 ms): --quantize none writes that "
                                      "file, at about 4x the size"), search["stopped"]
    meta = read_artifact_metadata(out)
    assert meta["quantization"] == "dynamic" and meta["quantization_search"]["setting"] == "dynamic"
    assert result.quantize == "dynamic" and any(n.startswith("dynamic chosen: accuracy") for n in result.notes)


def test_auto_onnx_keeps_the_sensitive_residual_path_float_and_meets_the_budget(sensitive, standin, calibration,
                                                                                tmp_path, monkeypatch):
    """The same ladder with ONNX Runtime's quantizers (static QDQ int8 keeps no LayerNorm float by default, so
    all-int8 misses a 10% budget here); the budget stops at the second rung."""
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata

    result, out, data = _auto(sensitive, calibration, tmp_path, monkeypatch, {"none": 3.0, "int8": 1.0, "dynamic": 1.3},
                              fmt="onnx", max_drop=0.10)
    frontier = result.search["frontier"]
    first, chosen = frontier[0], _passed(frontier)[0]
    assert first["setting"] == "int8" and not first["passed"] and first["drop"] > 0.10, frontier
    assert chosen["passed"] and chosen["quantize"] == "int8", frontier
    assert chosen["float_layers"] == [f"{SENSITIVE}/**/{part}" for part in PARTS], chosen
    assert _accuracy(out, data).metrics["accuracy"] >= 0.90
    meta = read_artifact_metadata(out)
    assert meta["quantization"] == "int8" and meta["quantization_search"]["float_layers"] == chosen["float_layers"]


def test_auto_refuses_in_one_line_when_no_setting_meets_the_budget(sensitive, standin, calibration, tmp_path, capsys):
    from mobilebert_kit.cli.main import main

    _, saved, data = sensitive
    out = tmp_path / "m.tflite"
    out.write_bytes(b"the user's own file")
    code = main(["export", str(saved), "--format", "tflite", "--quantize", "auto", "--eval-data", str(data),
                 "--max-drop", "0.005", "--seq-len", str(SEQ), "--out", str(out), "--overwrite",
                 "--calibration", str(calibration)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("mbk export: error: --quantize auto: no setting held accuracy"), err
    for tried in ("int8 0.", f"residual path of {SENSITIVE}", "dynamic 0.", "--max-drop"):
        assert tried in err[0], (tried, err)
    assert out.read_bytes() == b"the user's own file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tflite", "m.tflite.report.json"]
    report = json.loads((tmp_path / "m.tflite.report.json").read_text())
    assert report["search"]["stopped"] == "no setting met the budget" and not any(
        r["passed"] for r in report["search"]["frontier"])


def test_int8_fallback_keeps_the_fewest_ranked_layers_float(sensitive, calibration, tmp_path):
    """No eval data: the same ranking, judged by validation; the user's setting is tried first."""
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata
    from mobilebert_kit.convert.exporter import ExportOptions, export

    model, _, _ = sensitive
    out = tmp_path / "m.tflite"
    # The user's bar: with the LayerNorms float by default, all-int8 (0.84 agreement) passes the loose default 0.7.
    result = export(ExportOptions(model, "tflite", "int8", out=str(out), seq_len=SEQ, calibration=str(calibration),
                                  thresholds={"min_argmax_agreement": 0.9}), log=None)
    rows = result.search["frontier"]
    assert rows[0]["setting"] == "int8" and not rows[0]["passed"], rows
    chosen = rows[-1]
    assert chosen["passed"] and chosen["float_layers"] and all(p.startswith(f"{SENSITIVE}/") for p in chosen["float_layers"]), rows
    assert result.validation.passed
    assert read_artifact_metadata(out)["quantization_search"]["float_layers"] == chosen["float_layers"]
    assert any(f"wrote int8, residual path of {SENSITIVE} float" in n for n in result.notes), result.notes


@pytest.mark.parametrize("args, fragment", [
    ([], "--quantize auto needs labelled data to judge by: --eval-data FILE"),
    (["--eval-data", "EVAL", "--max-drop", "0.9"], "--max-drop"),
    (["--eval-data", "EVAL", "--keep-float", "transformer_layer_0"], "auto chooses the float layers itself"),
])
def test_auto_refuses_bad_options_before_loading(tmp_path, args, fragment):
    from tests.helpers import assert_one_line_error, run_mbk

    (tmp_path / "eval.tsv").write_text("sentence\tlabel\na\tx\n")
    args = [str(tmp_path / "eval.tsv") if a == "EVAL" else a for a in args]
    proc = run_mbk("export", "tiny-bert", "--quantize", "auto", "--out", tmp_path / "m.tflite", *args)
    assert proc.returncode == 2
    assert_one_line_error(proc, fragment)
    assert not (tmp_path / "m.tflite").exists()


def test_recipe_names_the_eval_data_and_budget(tmp_path):
    """``[evaluation] data`` / ``max_drop`` set auto's data (resolved beside the recipe) and budget."""
    from mobilebert_kit.convert.recipe import Recipe
    from mobilebert_kit.errors import MbkError

    (tmp_path / "dev.tsv").write_text("sentence\tlabel\na\tx\n")
    text = ('[source]\npreset = "tiny-bert"\n[export]\nformats = ["tflite"]\nquantize = "auto"\n'
            '[evaluation]\ndata = "dev.tsv"\nmax_drop = 0.02\n')
    (tmp_path / "auto.toml").write_text(text)
    options = Recipe.load(tmp_path / "auto.toml").options()[0]
    assert Path(options.eval_data).resolve() == (tmp_path / "dev.tsv").resolve() and options.max_drop == 0.02
    (tmp_path / "bad.toml").write_text(text.replace('quantize = "auto"', 'quantize = "int8"'))
    with pytest.raises(MbkError, match=r"\[evaluation\] max_drop is the budget of \[export\] quantize = 'auto'"):
        Recipe.load(tmp_path / "bad.toml").options()


def test_a_passing_int8_file_that_changed_answers_says_so_and_how_to_measure_it(sensitive, calibration, tmp_path):
    # A fine-tuned MiniLM's full-int8 file changed 1 of 16 validation answers, lost 4.7 accuracy points on real
    # text, and the export said only PASSED (session 12's probe).
    from mobilebert_kit.convert.exporter import ExportOptions, export

    model, _, _ = sensitive
    # Static, as when the fixture was tuned: its int8 file sits just above the 0.7 agreement floor (12 of 16), and
    # a dynamic-length file's calibration (rows at their own length, 8 of them padded too) lands it at 11 of 16.
    result = export(ExportOptions(model, "tflite", "int8", out=str(tmp_path / "m.tflite"), seq_len=SEQ,
                                  calibration=str(calibration), static_axes=True), log=None)
    assert result.validation.passed and result.search is None
    note = next(n for n in result.notes if " changed the " in n)
    assert note.startswith("int8 changed the probability answer on ") and "eval_data FILE" in note, note  # API spelling
    float_file = export(ExportOptions(model, "tflite", "none", out=str(tmp_path / "f.tflite"), seq_len=SEQ), log=None)
    assert not any(" changed the " in n for n in float_file.notes)


def test_auto_with_check_arch_moves_past_a_setting_that_disagrees_on_arm64(sensitive, standin, calibration,
                                                                             tmp_path, monkeypatch,
                                                                             arm64_disagrees_first):
    # --check-arch (issue 46): each setting that holds the budget also runs on the emulated CPU; the first is made
    # to disagree there, so it is refused whatever its metric, and the report carries the written one's run.
    from mobilebert_kit.convert.exporter import ExportOptions, export

    calls = arm64_disagrees_first
    _latencies(monkeypatch, {"none": 3.0, "int8": 1.0, "dynamic": 1.3, "int4-channel": 1.2})
    model, _, data = sensitive
    result = export(ExportOptions(model, "tflite", "auto", out=str(tmp_path / "m.tflite"), seq_len=SEQ,
                                  eval_data=str(data), max_drop=0.15, calibration=str(calibration),
                                  check_arch="arm64"), log=None, score=_accuracy)
    rows = result.search["frontier"]
    refused = [r for r in rows if "on arm64 (cortex-a76) vs x86-64" in r["why"]]
    assert len(refused) == 1 and not refused[0]["passed"] and refused[0]["metric"] is not None, rows
    assert len(calls) == len([r for r in rows if r["passed"]]) + 1, (calls, rows)
    assert result.validation.arch is not None and result.validation.arch.cpu == "cortex-a76"
    assert result.validation.passed
