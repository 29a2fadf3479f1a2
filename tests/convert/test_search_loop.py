"""The export search at unit level (issue 34): the candidate loop, the fallback and ``auto`` as one search over
settings with a writer and a judge, both fakes here, so each rule is tested without converting a model."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.convert.plan.export_options import ExportOptions
from mobilebert_kit.convert.plan.export_plan import SourceFacts, plan_export
from mobilebert_kit.convert.quantization.search import Search, Tried, Verdict

RANKING = ["transformer_layer_1", "transformer_layer_0", "embeddings"]


@dataclass
class Evaluation:
    """Shaped like ``ArtifactEvaluation`` where the search reads it."""

    metrics: dict
    primary: str = "accuracy"
    higher_is_better: bool = True
    rows: int = 100


def plan_of(quantize, fmt="tflite", **options):
    if quantize == "auto":
        options.setdefault("eval_data", None)
    opts = ExportOptions("tiny-bert", fmt, quantize, out=f"m.{fmt}", **options)
    return plan_export(opts, SourceFacts("encoder", 64))


class Fakes:
    """A writer that records what it was asked to write, and a judge that passes the settings ``passes`` says."""

    def __init__(self, passes, latency=None, metric=None, fails_to_write=()):
        self.passes, self.metric, self.fails_to_write = passes, metric, fails_to_write
        self.latency_ms = latency or {}
        self.written, self.measured = [], []

    def write(self, candidate):
        if candidate.label in self.fails_to_write:
            raise ExportError(f"the model has no layer for {candidate.label}\nsecond line")
        self.written.append(candidate.label)
        return {"label": candidate.label}

    def judge(self, candidate):
        if self.metric is not None:
            return Verdict(metric=self.metric(candidate))
        passed = self.passes(candidate)
        return Verdict(passed=passed, why="PASSED" if passed else "cosine 0.8 < 0.9")

    def latency(self, path):
        self.measured.append(Path(path).name)
        return self.latency_ms.get(Path(path).name, 1.0)


def search_of(plan, fakes):
    return Search(plan, lambda quantize: RANKING, latency=fakes.latency)


def test_the_users_own_setting_that_passes_is_written_and_costs_no_timing(tmp_path):
    fakes = Fakes(passes=lambda c: True)
    search = search_of(plan_of("int8"), fakes)
    chosen = search.run(fakes.write, fakes.judge, tmp_path)
    assert chosen.step is None and chosen.plan.quantize == "int8" and chosen.written == {"label": "int8"}
    assert fakes.written == ["int8"] and fakes.measured == [] and not search.searched
    assert [(r.setting, r.passed) for r in search.frontier.rows] == [("int8", True)]


def test_the_fallback_writes_the_fewest_float_layers_that_pass_and_keeps_the_failure(tmp_path):
    # Passes once the two most sensitive units are float: the ladder doubles (1, 2), so no third rung is written.
    fakes = Fakes(passes=lambda c: "transformer_layer_0" in c.label)
    lines = []
    search = search_of(plan_of("int8"), fakes)
    chosen = search.run(fakes.write, fakes.judge, tmp_path, say=lines.append)
    assert chosen.step is not None and chosen.row.passed and search.searched
    assert len(fakes.written) == 3 and fakes.written[0] == "int8"
    assert search.failure == "cosine 0.8 < 0.9"
    assert "transformer_layer_1" in chosen.label and "transformer_layer_0" in chosen.label
    assert len(lines) == 2 and lines[0].startswith("int8 failed validation (cosine 0.8 < 0.9); trying ")
    # Every compared setting is timed; each candidate has its own scratch file.
    assert fakes.measured == ["candidate-0.tflite", "candidate-1.tflite", "candidate-2.tflite"]
    assert [r.passed for r in search.frontier.rows] == [False, False, True]


def test_when_nothing_passes_the_users_own_failure_stands(tmp_path):
    fakes = Fakes(passes=lambda c: False)
    search = search_of(plan_of("int8"), fakes)
    chosen = search.run(fakes.write, fakes.judge, tmp_path)
    assert chosen.step is None and chosen.plan.quantize == "int8" and not search.passed
    assert len(search.frontier.rows) > 2 and not any(r.passed for r in search.frontier.rows)


def test_no_fallback_when_the_user_chose_float_layers_or_no_validation(tmp_path):
    fakes = Fakes(passes=lambda c: False)
    search = search_of(plan_of("int8", keep_float_layers=("embeddings",)), fakes)
    assert search.run(fakes.write, fakes.judge, tmp_path).step is None and fakes.written == ["int8"]
    fakes = Fakes(passes=lambda c: False)
    search = search_of(plan_of("int8"), fakes)
    chosen = search.run(fakes.write, None, tmp_path)  # --no-validate: the first file written is the answer
    assert chosen.verdict is None and fakes.written == ["int8"] and search.frontier.rows == []


def test_a_step_the_model_cannot_take_is_skipped_but_the_users_own_setting_raises(tmp_path):
    fakes = Fakes(passes=lambda c: bool(c.plan.keep_float_layers), fails_to_write=())
    search = search_of(plan_of("int8"), fakes)
    first_step = next(label for label in _ladder_labels(search) if label != "int8")
    fakes = Fakes(passes=lambda c: bool(c.plan.keep_float_layers), fails_to_write=(first_step,))
    search = search_of(plan_of("int8"), fakes)
    chosen = search.run(fakes.write, fakes.judge, tmp_path)
    skipped = search.frontier.rows[1]
    assert (skipped.setting, skipped.passed, skipped.why) == (first_step, False, f"the model has no layer for "
                                                                                 f"{first_step}")
    assert chosen.row.passed and chosen.label != first_step
    with pytest.raises(ExportError, match="no layer for int8"):
        search_of(plan_of("int8"), Fakes(lambda c: True, fails_to_write=("int8",))).run(
            Fakes(lambda c: True, fails_to_write=("int8",)).write, None, tmp_path)


def _ladder_labels(search):
    return [step.describe(layers) if step else setting.quantize for step, layers, setting in search.attempts()]


def _auto(tmp_path, metric, latency):
    fakes = Fakes(passes=None, metric=metric, latency=latency)
    search = search_of(plan_of("auto"), fakes)
    search.set_reference(Tried("float32 (reference)", "none", [], 10.0, passed=True),
                         Evaluation({"accuracy": 0.80}), max_drop=0.02)
    return search, search.run(fakes.write, fakes.judge, tmp_path), fakes


def test_auto_keeps_the_fastest_setting_that_holds_the_budget(tmp_path):
    # int8 (first rung) holds the budget; int4-channel and dynamic, measured after it, hold it too; dynamic runs 2x faster.
    search, chosen, fakes = _auto(tmp_path, metric=lambda c: 0.795,
                                  latency={"candidate-0.tflite": 4.0, "candidate-1.tflite": 3.0,
                                           "candidate-2.tflite": 2.0})
    assert [r.setting for r in search.frontier.rows] == ["int8", "int4-channel", "dynamic"]
    assert chosen.plan.quantize == "dynamic" and search.passed
    assert search.frontier.stopped.startswith("dynamic passed and ran faster on this host than int8")
    # Not faster by more than 5%: the first that passed stays.
    search, chosen, _ = _auto(tmp_path, metric=lambda c: 0.795,
                              latency={"candidate-0.tflite": 2.0, "candidate-1.tflite": 1.95,
                                       "candidate-2.tflite": 1.95})
    assert chosen.plan.quantize == "int8" and "was not faster by 5%" in search.frontier.stopped


def test_auto_writes_int4_when_it_holds_the_budget_and_runs_fastest(tmp_path):
    search, chosen, _ = _auto(tmp_path, metric=lambda c: 0.795,
                              latency={"candidate-0.tflite": 4.0, "candidate-1.tflite": 2.0,
                                       "candidate-2.tflite": 3.0})
    assert chosen.plan.quantize == "int4-channel" and search.passed
    # int4 that loses the metric is a rung like the others: refused, and the next rung is written.
    search, chosen, _ = _auto(tmp_path, metric=lambda c: 0.70 if c.plan.quantize in ("int8", "int4-channel") else 0.79,
                              latency={})
    assert ("int4-channel", False) in [(r.setting, r.passed) for r in search.frontier.rows]
    assert chosen.plan.quantize == "dynamic"


def test_an_onnx_search_has_no_int4_rung():
    # The int4-channel record refuses ONNX (MatMulNBits has no per-channel layout): its rung is left out
    # rather than tried and failed.
    search = search_of(plan_of("auto", "onnx"), Fakes(passes=None, metric=lambda c: 0.5))
    assert "int4-channel" not in _ladder_labels(search) and "dynamic" in _ladder_labels(search)


def test_auto_climbs_the_ladder_past_a_setting_that_loses_the_metric(tmp_path):
    search, chosen, _ = _auto(tmp_path, metric=lambda c: 0.70 if not c.plan.keep_float_layers and
                              c.plan.quantize == "int8" else 0.79, latency={})
    rows = search.frontier.rows
    assert rows[0].setting == "int8" and not rows[0].passed and rows[0].drop == pytest.approx(0.125)
    assert chosen.plan.quantize == "int8" and chosen.plan.keep_float_layers and chosen.row.passed
    assert rows[-1].setting == "dynamic"  # the other mode's plain setting is measured once a rung passed


def test_auto_that_finds_nothing_says_so(tmp_path):
    search, chosen, _ = _auto(tmp_path, metric=lambda c: 0.5, latency={})
    assert not search.passed and search.frontier.stopped == "no setting met the budget"
    assert chosen is not None and not chosen.row.passed  # the last written, for the report of the refusal
    assert {r.quantize for r in search.frontier.rows} == {"int8", "int4-channel", "dynamic"}


def test_auto_moves_past_a_setting_that_failed_on_the_emulated_cpu(tmp_path):
    # --check-arch: the judge's False (the arm64 run missed the thresholds) stands over a metric that holds the
    # budget (issue 46), and the next rung is written.
    fakes = Fakes(passes=None, metric=lambda c: 0.795)

    def judge(candidate):
        failed = candidate.plan.quantize == "int8" and not candidate.plan.keep_float_layers
        return Verdict(passed=False if failed else None, metric=0.795,
                       why="sentence_embedding on arm64 (cortex-a76) vs x86-64 cosine 0.98 < 0.99" if failed else "")

    search = search_of(plan_of("auto"), fakes)
    search.set_reference(Tried("float32 (reference)", "none", [], 10.0, passed=True),
                         Evaluation({"accuracy": 0.80}), max_drop=0.02)
    chosen = search.run(fakes.write, judge, tmp_path)
    first = search.frontier.rows[0]
    assert first.setting == "int8" and not first.passed and "arm64" in first.why, first
    assert chosen.row.passed and chosen.label != "int8"
