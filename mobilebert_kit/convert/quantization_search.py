"""Quantization searches: ``--quantize auto`` (judged by the task metric) and full int8's fallback (by validation).

A searched setting is a mode plus the layers kept float. The ladders are data, the
:class:`~mobilebert_kit.convert.quantization_modes.SearchStep` records of a mode's ``search`` (``auto``) or
``fallback`` (``int8``); :func:`settings` expands them, fastest first. A ``"ranked"`` step keeps the k most
sensitive layers float, k = 1, 2, 4, ...: the ranking is the per-layer drift probe
(``exporter.drift``) of the step's mode, one extra conversion, read as the noise each layer adds
(:func:`sensitivity`). One-layer-at-a-time ablations would cost one calibrated conversion per layer (L + 1
for MiniLM's 6 layers and the embeddings, against 1); the probe ranks the layer whose output error grows
most, which is where a float layer helps.

Every setting tried becomes a row of the frontier in the export report: setting, float layers, host
latency, metric (or validation line), drop, passed. A fallback stops at the first setting that passes;
``auto`` then also measures the plain setting of each mode not yet tried and writes a later one only when
it held the metric and ran clearly faster on this host (``exporter._Search.fastest``); both say why they
stopped.

Standard library, numpy and the TF-free runner only: the exporter imports it lazily around converters.

Example:
    >>> Budget("accuracy", 0.8, 0.01).holds(0.795)
    True
"""

import statistics
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from mobilebert_kit.convert.quantization_modes import ranked_counts


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

    def to_dict(self):
        return asdict(self)


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
                "reference": self.reference.to_dict() if self.reference else None,
                "frontier": [r.to_dict() for r in self.rows], "ranking": self.ranking, "stopped": self.stopped}

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
    """The ``(step, layers kept float)`` settings of a ladder in order, each distinct one once.

    Args:
        steps (tuple): :class:`~mobilebert_kit.convert.quantization_modes.SearchStep` records.
        ranking (callable): ``ranking(mode) -> [layer, ...]``, most sensitive first; called only when a
            ``"ranked"`` step is reached (it converts a probe).

    Example:
        >>> from mobilebert_kit.convert.quantization_modes import SearchStep
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
            key = (step.quantize, paths_of(step, layers))
            if key not in seen:
                seen.add(key)
                yield step, layers


def sensitivity(drift_rows):
    """Layers ranked by the error each adds, most first, from a drift probe's rows.

    A layer's output error includes every earlier layer's; what the layer itself adds is the growth of the
    relative noise power ``10^(-SNR/10)`` from its input to its output.

    Args:
        drift_rows (list[dict]): ``validation.drift_report`` rows (``layer``, ``snr_db``), in layer order.

    Returns:
        list[tuple[str, float]]: ``(layer, added noise)``, most sensitive first.

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
    """Median latency of one call of the artifact on this host, one thread (a few runs: a ranking, not a benchmark).

    Args:
        path: the artifact.
        inputs: an InputSet; its first row is fed.
        runs (int): timed calls after one warm-up.

    Example:
        >>> host_latency_ms("m.tflite", inputs)  # doctest: +SKIP
        3.1
    """
    from mobilebert_kit.artifacts.runner import ArtifactRunner

    runner = ArtifactRunner(path, num_threads=1)
    batch = runner.batch_size or 1
    row = {k: np.asarray(v)[:batch] for k, v in inputs.arrays.items()}
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
    """The ``mbk_metadata`` of a searched candidate: the mode it was converted with and the setting chosen.

    Example:
        >>> candidate_metadata({"quantization": "auto"}, "auto", "int8", "int8", (), "validation")["quantization"]
        'int8'
    """
    out = dict(meta, quantization=quantize)
    if asked != quantize or layers:
        out["quantization_search"] = {"asked": asked, "setting": label, "float_layers": list(layers),
                                      "judged_by": judged_by}
    return out


def paths_of(step, layers):
    """The ``keep_float_layers`` paths of a setting: a ranked step's units of ``layers``, else ``layers``."""
    return step.paths(layers) if step.float_layers == "ranked" else tuple(layers)


def as_attempt(options, step, layers):
    """The export options of one searched setting (the user's options with the step's mode and float layers)."""
    return replace(options, quantize=step.quantize, keep_float_layers=paths_of(step, layers))
