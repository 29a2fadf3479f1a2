"""Quantization searches: ``--quantize auto`` (judged by the task metric) and full int8's fallback (by validation).

A searched setting is a mode plus the layers kept float. The ladders are data, the
:class:`~mobilebert_kit.convert.quantization.modes.SearchStep` records of a mode's ``search`` (``auto``) or
``fallback`` (``int8``); :func:`settings` expands them, fastest first. A ``"ranked"`` step keeps the k most
sensitive layers float, k = 1, 2, 4, ...: the ranking is the per-layer drift probe
(``file_validation.drift``) of the step's mode, one extra conversion, read as the noise each layer adds
(:func:`sensitivity`). One-layer-at-a-time ablations would cost one calibrated conversion per layer (L + 1
for MiniLM's 6 layers and the embeddings, against 1); the probe ranks the layer whose output error grows
most, which is where a float layer helps.

Every setting tried becomes a row of the frontier in the export report: setting, float layers, host
latency, metric (or validation line), drop, passed. A fallback stops at the first setting that passes;
``auto`` then also measures the plain setting of each mode not yet tried and writes a later one only when
it held the metric and ran clearly faster on this host (:meth:`Search.fastest`); both say why they
stopped. :class:`Search` owns the loop: it asks a writer for each setting's file and a judge for its verdict
(validation against the Keras model for the fallback, the task metric for ``auto``), both passed in, so the
search is tested with a fake writer and judge.

Standard library, numpy and the TF-free runner only.

Example:
    >>> Budget("accuracy", 0.8, 0.01).holds(0.795)
    True
"""

import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mobilebert_kit.artifacts.runner import ArtifactRunner
from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.convert.quantization.modes import quantization_mode, ranked_counts
from mobilebert_kit.errors import first_line


@dataclass(frozen=True)
class Budget:
    """The task metric a searched export must hold: within ``max_drop`` (a fraction) of the float export's.

    Args:
        metric (str): the metric's key (``ArtifactEvaluation.primary``).
        reference (float): the float export's value on the same data.
        max_drop (float): the largest drop, a fraction of ``|reference|`` (0.01: MLPerf Mobile's 99% rule).
        higher_is_better (bool): the metric's direction.

    Example:
        >>> Budget("accuracy", 0.8, 0.01).drop(0.76)
        0.05
    """

    metric: str
    reference: float
    max_drop: float
    higher_is_better: bool = True

    def drop(self, value):
        """The loss against the float export, a fraction of its value (negative: better than float)."""
        scale = abs(self.reference) or 1.0
        lost = self.reference - value if self.higher_is_better else value - self.reference
        return round(lost / scale, 6)

    def holds(self, value):
        """Whether ``value`` is within the budget (a NaN never is)."""
        return bool(np.isfinite(value)) and self.drop(value) <= self.max_drop + 1e-12

    def describe(self):
        sign = ">=" if self.higher_is_better else "<="
        return (f"{self.metric} {sign} {1 - self.max_drop if self.higher_is_better else 1 + self.max_drop:.3g} x "
                f"float {self.reference:.4f}")


@dataclass
class Tried:
    """One row of the frontier: a setting converted and judged."""

    setting: str
    quantize: str
    float_layers: list
    latency_ms: float = None
    metric: float = None
    drop: float = None
    passed: bool = False
    why: str = ""


@dataclass
class Frontier:
    """What a search tried, in order, and why it stopped (the export report's ``search``)."""

    asked: str
    judged_by: str
    reference: Tried = None
    rows: list = field(default_factory=list)
    ranking: list = field(default_factory=list)
    stopped: str = ""

    def to_dict(self):
        return {"asked": self.asked, "judged_by": self.judged_by,
                "reference": asdict(self.reference) if self.reference else None,
                "frontier": [asdict(r) for r in self.rows], "ranking": self.ranking, "stopped": self.stopped}

    def best(self):
        """The tried row with the best metric (None when no row was measured)."""
        measured = [r for r in self.rows if r.metric is not None]
        return min(measured, key=lambda r: r.drop) if measured else None

    def format_text(self):
        lines = [f"  quantization search ({self.asked}, judged by {self.judged_by}); latency: this host, 1 thread:"]
        rows = ([self.reference] if self.reference else []) + self.rows
        for r in rows:
            latency = f"{r.latency_ms:8.2f} ms" if r.latency_ms is not None else "       - ms"
            metric = f"{r.metric:.4f}" if r.metric is not None else "-"
            drop = f"{100 * r.drop:+.2f}%" if r.drop is not None else ""
            verdict = "reference" if r is self.reference else ("passed" if r.passed else "failed")
            lines.append(f"    {r.setting:<48} {latency}  {metric:>8} {drop:>8}  {verdict}"
                         + (f" ({r.why})" if r.why and not r.passed else ""))
        if self.stopped:
            lines.append(f"  stopped: {self.stopped}")
        return "\n".join(lines)


def settings(steps, ranking):
    """The ``(step, layers kept float)`` settings of a ladder of ``SearchStep`` records in order, each distinct one
    once; ``ranking`` is called only when a ``"ranked"`` step is reached (:class:`Search`).

    Example:
        >>> from mobilebert_kit.convert.quantization.modes import SearchStep
        >>> [layers for _, layers in settings((SearchStep("int8", "ranked"),), lambda mode: ["b", "a", "c"])]
        [('b',), ('b', 'a')]
    """
    seen = set()
    for step in steps:
        if step.float_layers == "none":
            candidates = [()]
        elif step.float_layers == "ranked":
            ranked = list(ranking(step.quantize))
            candidates = [tuple(ranked[:k]) for k in ranked_counts(len(ranked))]
        else:
            candidates = [tuple(step.float_layers)]
        for layers in candidates:
            key = (step.quantize, step.paths(layers))
            if key not in seen:
                seen.add(key)
                yield step, layers


def sensitivity(drift_rows):
    """Layers ranked by the error each adds, most first, from a drift probe's rows.

    A layer's output error includes every earlier layer's; what the layer itself adds is the growth of the
    relative noise power ``10^(-SNR/10)`` from its input to its output. ``drift_rows``: the drift report's rows
    (``layer``, ``snr_db``) in layer order; returns ``(layer, added noise)`` pairs.

    Example:
        >>> sensitivity([{"layer": "embeddings", "snr_db": 40.0}, {"layer": "transformer_layer_0", "snr_db": 10.0}])[0][0]
        'transformer_layer_0'
    """
    added, before = [], 0.0
    for row in drift_rows:
        snr = row["snr_db"]
        noise = 10.0 ** (-snr / 10.0) if np.isfinite(snr) else (0.0 if snr > 0 else np.inf)
        added.append((row["layer"], float(noise - before)))
        before = noise
    return sorted(added, key=lambda item: -item[1])


def host_latency_ms(path, inputs, runs=10):
    """Median latency of one call of the artifact on this host, one thread, fed the first row of the InputSet
    ``inputs`` (``runs`` timed calls after one warm-up: a ranking, not a benchmark).
    """
    runner = ArtifactRunner(path, num_threads=1)
    batch = runner.batch_size or 1
    row = {k: np.asarray(v)[:batch] for k, v in inputs.arrays.items()}
    if runner.takes_text and inputs.texts is not None:
        row = {runner.input_specs[0]["name"]: np.asarray(inputs.texts[:batch], dtype=object)}
    runner.run(row)
    times = []
    for _ in range(runs):
        begin = time.perf_counter()
        runner.run(row)
        times.append(time.perf_counter() - begin)
    return round(1000.0 * statistics.median(times), 3)


def refusal(frontier, budget, data, name_of):
    """The one-line error of a search in which no setting met the budget: what was tried, the best, what to do."""
    best = frontier.best()
    tried = "; ".join(f"{r.setting} {r.metric:.4f}" if r.metric is not None else f"{r.setting} ({r.why})"
                      for r in frontier.rows)
    reached = f"best {best.setting}: {budget.metric} {best.metric:.4f} ({100 * best.drop:.2f}% below float)" \
        if best else "no setting could be measured"
    return (f"{name_of('quantize', frontier.asked)}: no setting held {budget.describe()} on {data} (tried: {tried}; "
            f"{reached}); allow more with {name_of('max_drop')} (now {budget.max_drop:g}), calibrate on text like "
            f"your app's ({name_of('calibration')} FILE), or export {name_of('quantize', 'dynamic')} / none; the "
            "report lists the frontier")


def candidate_metadata(meta, asked, quantize, label, layers, judged_by):
    """The ``mbk_metadata`` of a searched candidate: the mode it was converted with and the setting chosen."""
    out = dict(meta, quantization=quantize)
    if asked != quantize or layers:
        out["quantization_search"] = {"asked": asked, "setting": label, "float_layers": list(layers),
                                      "judged_by": judged_by}
    return out


# A searched setting after the first that passed is written only when it ran faster by more than this share.
FASTER_BY = 0.05


def fallback_allowed(plan):
    """A mode's fallback applies only when the user chose no float ops or layers and no integer-only io: then
    the first setting that passes validation is written, and the note says what was kept in float."""
    options = plan.options
    return bool(plan.asked.fallback) and options.validate and not options.keep_float_layers \
        and options.keep_float_ops is None and options.io_type == "float32"


@dataclass
class Verdict:
    """A judge's verdict on one candidate file: ``passed`` (None: the budget judges ``metric``; False with a
    metric: it missed its thresholds on an emulated CPU), the one-line ``why`` and the judge's full ``report``
    (a ValidationReport; with a metric, the emulated run's ArchComparison)."""

    passed: bool = None
    metric: float = None
    why: str = ""
    report: object = None


@dataclass
class Candidate:
    """One setting (its frontier ``label``, ``plan`` and ``step``; None: the user's own) written to the scratch
    file ``path``: what the writer returned (``written``), the judge's ``verdict`` and its frontier ``row``."""

    label: str
    plan: object
    path: object
    step: object = None
    written: object = None
    verdict: Verdict = None
    row: Tried = None


class Search:
    """The settings one export tries, in order, and the frontier they make (the module doc tells the loop).

    Args:
        plan: the export's :class:`~mobilebert_kit.convert.plan.export_plan.ExportPlan`.
        ranking (callable): ``ranking(mode) -> [layer, ...]``, most drift-sensitive first (a ranked step's
            probe conversion; called only when such a step is reached).
        latency (callable): ``latency(path) -> ms`` on this host (default: :func:`host_latency_ms` of the
            first validation row, which :meth:`run`'s caller binds).

    Example:
        >>> search = Search(plan, ranking, latency=lambda path: 1.0)  # doctest: +SKIP
        >>> chosen = search.run(write, judge, scratch)  # doctest: +SKIP
    """

    def __init__(self, plan, ranking, latency):
        self.plan, self.mode, self._ranking, self._latency = plan, plan.asked, ranking, latency
        self.fallback = self.mode.fallback if fallback_allowed(plan) else ()
        self.budget_needed = bool(self.mode.search) and plan.options.validate
        self.judged_by = (f"{plan.name_of('eval_data')} task metric" if self.mode.search else
                          "validation against the Keras model")
        self.frontier = Frontier(plan.options.quantize, self.judged_by)
        self.budget = None
        self.passed = False
        self.searched = False
        self.failure = None  # the user's own setting's validation line, when it failed

    def set_reference(self, row, evaluation, max_drop):
        """The float export's frontier row and evaluation: the budget every setting is held to."""
        self.frontier.reference = row
        self.budget = Budget(evaluation.primary, float(evaluation.metrics[evaluation.primary]), max_drop,
                             bool(evaluation.higher_is_better))
        row.metric = self.budget.reference
        # The row count shows how much a pass proves: one row of ten is 10 accuracy points.
        self.frontier.judged_by = f"{self.judged_by} ({self.budget.describe()}, {evaluation.rows} row(s))"

    def attempts(self):
        """``(step, ranked layers, setting plan)`` in turn: step None is the user's own setting.

        A ladder is ordered by each mode's usual speed, which the host may not share (full int8 ran slower than
        dynamic int8 for a fine-tuned MiniLM, issue 15): after the first setting that holds the budget, the plain
        setting of each mode not yet tried is measured too, so that :meth:`fastest` picks the fastest that holds
        it; ranked rungs (a probe conversion each) are not.
        """
        if not self.mode.search:
            yield None, (), self.plan
        # A rung whose mode has no file of this format (int4 ONNX) is no candidate: its record says why.
        steps = tuple(step for step in self.mode.search or self.fallback
                      if quantization_mode(step.quantize).allows(f"format:{self.plan.format}"))
        ladder = settings(steps, self._ranking)
        while not self.passed:  # checked before the next rung: a ranked rung costs a probe conversion to expand
            step_layers = next(ladder, None)
            if step_layers is None:
                break
            self.searched = True
            step, layers = step_layers
            yield step, layers, self.plan.setting(step.quantize, step.paths(layers))
        if self.passed and self.mode.search:
            tried = {row.quantize for row in self.frontier.rows}
            for step in steps:
                if step.float_layers == "none" and step.quantize not in tried:
                    tried.add(step.quantize)
                    yield step, (), self.plan.setting(step.quantize)

    def run(self, write, judge, scratch, say=None):
        """Tries the settings in turn; returns the :class:`Candidate` to write (or whose failure stands).

        ``write(candidate)`` converts ``candidate.plan`` to ``candidate.path`` in ``scratch`` (an ExportError from
        a searched step skips it); ``judge(candidate) -> Verdict`` (None: the first file written is the answer,
        ``--no-validate``); ``say`` takes progress lines. Returns the passing candidate (a search: the fastest
        that held the budget), else the user's own failing setting, else the last one written (None: none).
        """
        say = say or (lambda *_: None)
        fmt = self.plan.format
        passing, last, failed = [], None, None
        for index, (step, layers, setting) in enumerate(self.attempts()):
            label = step.describe(layers) if step else setting.quantize
            if index and not self.mode.search:
                previous = self.frontier.rows[-1]
                say(f"{previous.setting} failed validation ({previous.why}); trying {label} (the mode's fallback; "
                    f"pass {self.plan.name_of('keep_float_layers')} LAYERS to choose)")
            candidate = Candidate(label, setting, Path(scratch) / f"candidate-{index}.{fmt}", step)
            try:
                candidate.written = write(candidate)
            except ExportError as err:
                if step is None:
                    raise
                self.record(candidate, why=first_line(err))
                continue  # the model has none of the step's layers: the next setting is tried
            last = candidate
            if judge is None:
                return candidate
            candidate.verdict = verdict = judge(candidate)
            if self.mode.search:
                row = self.record(candidate, measure=True, metric=verdict.metric, passed=verdict.passed,
                                  why=verdict.why)
            else:
                # Host latency only where settings are compared: a plain export that passes costs nothing more.
                row = self.record(candidate, measure=step is not None or not verdict.passed, passed=verdict.passed,
                                  why=verdict.why)
                if not row.passed and failed is None:
                    self.failure, failed = row.why, candidate  # the user's own setting's failure stands if none passes
            if row.passed:
                if self.mode.search:
                    passing.append(candidate)
                    continue  # attempts() measure the other modes' plain settings, then end
                return candidate
        if passing:
            return self.fastest(passing)
        if self.mode.search:
            self.frontier.stopped = "no setting met the budget"
        return failed or last

    def fastest(self, passing):
        """The candidate of ``passing`` (in ladder order) to write: the first, unless a later one ran clearly
        faster on this host (by more than :data:`FASTER_BY`, above the few-run timing's noise)."""
        best = passing[0]
        for candidate in passing[1:]:
            row, mine = candidate.row, best.row
            if row.latency_ms is not None and mine.latency_ms is not None \
                    and row.latency_ms < (1 - FASTER_BY) * mine.latency_ms:
                best = candidate
        first, chosen = passing[0].row, best.row
        if chosen is first:
            others = [f"{c.row.setting} {c.row.latency_ms:.2f} ms" for c in passing[1:] if c.row.latency_ms is not None]
            self.frontier.stopped = (f"{first.setting} is the first setting (fastest first) that passed"
                                     + (f" ({first.latency_ms:.2f} ms); {', '.join(others)} was not faster by "
                                        f"{FASTER_BY:.0%}" if others else ""))
        else:
            self.frontier.stopped = (f"{chosen.setting} passed and ran faster on this host than {first.setting}, the "
                                     f"first that passed ({chosen.latency_ms:.2f} against {first.latency_ms:.2f} ms)")
        # Float32 is the reference, not a candidate (the user asked for a quantized file, about 4x smaller), but
        # on a small model it can be the fastest: say so rather than let "fastest" mislead.
        ref = self.frontier.reference
        if ref is not None and ref.latency_ms is not None and chosen.latency_ms is not None \
                and ref.latency_ms < (1 - FASTER_BY) * chosen.latency_ms:
            self.frontier.stopped += (f"; float32 ran faster on this host still ({ref.latency_ms:.2f} ms): "
                                      "--quantize none writes that file, at about 4x the size")
        return best

    def record(self, candidate, measure=False, metric=None, passed=None, why=""):
        """Appends ``candidate``'s frontier row (its host latency when ``measure``) and returns it."""
        setting = candidate.plan
        latency = self._latency(candidate.path) if measure else None
        row = Tried(candidate.label, setting.quantize, list(setting.keep_float_layers), latency, why=why)
        if metric is not None:
            row.metric, row.drop = float(metric), self.budget.drop(metric)
            # A judge's own False (the file missed its thresholds on an emulated CPU) stands over the budget.
            passed = self.budget.holds(metric) and passed is not False
        row.passed = bool(passed)
        candidate.row = row
        self.frontier.rows.append(row)
        if row.passed and not self.passed:
            self.passed = True
            self.frontier.stopped = f"{candidate.label} is the first setting (fastest first) that passed"
        return row
