"""Operator substitution: LayerNorm -> NoNorm and GELU -> ReLU in a trained model.

MobileBERT (Sun et al., 2020, Sec. 4.3 and Appendix C; Table 6) replaces
LayerNorm with NoNorm (``gamma * h + beta``) and GELU with ReLU because both
are slow on phones; performance-notes.md measured that on this kind of CPU the
change matters most for integer models (LayerNorm + GELU full int8 138 ms,
NoNorm + ReLU 41 ms).

Each substitution is a record (:data:`SUBSTITUTIONS`): the encoder option it
changes, the values it accepts, and how weights carry over. :func:`substitute`
applies any set of them and assigns every weight by its stable name (nothing by
position; the source model is not modified). What the carry rules measured is
docs/export.md's ("Operator substitution"):

- ``norm``: without data NoNorm starts as LayerNorm's affine part; given
  ``fit_inputs``, each NoNorm gets the per-feature least-squares fit of its
  LayerNorm's output on its input over real tokens (``a_j = cov(x_j, y_j) /
  var(x_j)``, ``b_j = mean(y_j) - a_j mean(x_j)``): LayerNorm divides by a
  per-token scale that the affine copy ignores.
- ``act``: activations have no weights.
- ``ffn``: a narrower FFN (``intermediate_size``) keeps, in every FFN, the
  hidden units that carry the most of its output (with data, the mean
  ``|act(x w_j + b_j)|`` over real tokens times the norm of the unit's output
  row; without, the norms of its input column and output row): structured
  pruning, not an exact rewrite. Grouped FFNs (ConvBERT) are refused.

The masked-LM head's transform keeps its real LayerNorm in every MobileBERT
configuration (parity-notes.md), so a substituted pre-training model still
has that one LayerNorm; the encoder has none.
"""

import contextlib
from dataclasses import dataclass, field

import numpy as np

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.convert.prepare.rebuild import encoder_of, rebuild, weight_arrays
from mobilebert_kit.errors import ConfigError, check_choice
from mobilebert_kit.layers.activations import ACTIVATIONS
from mobilebert_kit.layers.normalization import NORMALIZATIONS
from mobilebert_kit.models.api import named_weights


def _copy_weights(arrays, model, data, value):
    return dict(arrays)


def _model_paths(model):
    """``{encoder weight path: the same weight's path in model}``: a task model's paths carry its encoder's scope."""
    in_model = {id(var): path for path, var in named_weights(model).items()}
    return {path: in_model[id(var)] for path, var in named_weights(encoder_of(model)).items()}


def _fit_norms(arrays, model, data, value):
    """Replaces each LayerNorm's gamma/beta with the per-feature affine fit of its output (see module doc)."""
    if data is None:
        return dict(arrays)
    arrays = dict(arrays)
    paths = _model_paths(model)
    for path, (count, sx, sy, sxx, sxy) in _norm_moments(model, data).items():
        x_mean, y_mean = sx / count, sy / count
        var = sxx / count - x_mean ** 2
        cov = sxy / count - x_mean * y_mean
        scale = np.where(var > 1e-12, cov / np.maximum(var, 1e-12), 0.0)
        arrays[paths[f"{path}/gamma"]] = scale.astype(np.float32)
        arrays[paths[f"{path}/beta"]] = (y_mean - scale * x_mean).astype(np.float32)
    return arrays


def _check_width(value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"--intermediate-size must be a positive whole number of FFN units, got {value!r}")


def _ffn_unit_scores(model, data):
    """``{encoder path of an FFN's intermediate kernel: importance of each hidden unit}`` (see module doc)."""
    encoder = encoder_of(model)
    variables = named_weights(encoder)
    kernels = [path for path in variables if path.endswith("/intermediate/kernel")]

    def norms(path, axis):  # only the FFN kernels are read, not every weight of the model
        return np.linalg.norm(np.asarray(variables[path].numpy(), dtype=np.float64), axis=axis)

    out_norm = {path: norms(path[: -len("intermediate/kernel")] + "output/kernel", 1) for path in kernels}
    if data is None:
        return {path: norms(path, 0) * out_norm[path] for path in kernels}
    dense = {id(layer.kernel): layer for layer in _sublayers(encoder)
             if isinstance(layer, keras.layers.Dense) and layer.name == "intermediate"}
    layer_of = {path: dense[id(variables[path])] for path in kernels}
    sums = {path: 0.0 for path in kernels}
    for records, keep in recorded_batches(encoder, keras.layers.Dense, layer_of.values(), data.arrays):
        for path, layer in layer_of.items():
            (_, y), = records[id(layer)]  # the activated output: the Dense applies hidden_act
            sums[path] = sums[path] + np.abs(y[keep].astype(np.float64)).sum(0)
    return {path: sums[path] * out_norm[path] for path in kernels}


def _narrow_ffns(arrays, model, data, value):
    """Keeps the ``value`` most important hidden units of every FFN (see module doc)."""
    config = encoder_of(model).config
    if config.get("num_groups", 1) != 1:
        raise ConfigError(
            f"--intermediate-size cannot narrow grouped FFNs (num_groups {config['num_groups']}): a unit belongs "
            "to one group's projection; substitute without --intermediate-size"
        )
    if value > config["intermediate_size"]:
        raise ConfigError(
            f"--intermediate-size {value} is wider than the source's FFNs ({config['intermediate_size']} units): "
            "narrowing keeps units and cannot add any; pass at most that"
        )
    arrays = dict(arrays)
    paths = _model_paths(model)
    for kernel, scores in _ffn_unit_scores(model, data).items():
        keep = np.sort(np.argsort(-scores, kind="stable")[:value])
        scope = kernel[: -len("intermediate/kernel")]
        for name, axis in (("intermediate/kernel", 1), ("intermediate/bias", 0), ("output/kernel", 0)):
            path = paths[scope + name]
            arrays[path] = np.take(arrays[path], keep, axis=axis)
    return arrays


@contextlib.contextmanager
def patched_classes(name, values):
    """Sets attribute ``name`` of each class of ``values`` (``{cls: value}``) while active; always restores, and a
    class that only inherited it inherits it again."""
    own = {cls: cls.__dict__.get(name) for cls in values}
    for cls, value in values.items():
        setattr(cls, name, value)
    try:
        yield
    finally:
        for cls, original in own.items():
            if original is None:
                delattr(cls, name)
            else:
                setattr(cls, name, original)


@contextlib.contextmanager
def recording_calls(cls, layers):
    """Records ``(input, output)`` arrays of the given layers of class ``cls`` while active; always restores.

    The one activation recorder of the converters: substitution fits NoNorm to
    LayerNorm's (input, output), scale migration reads NoNorm's output ranges. Other instances of ``cls`` run
    unrecorded.

    Example:
        >>> with recording_calls(NoNorm, [norm]) as records:  # doctest: +SKIP
        ...     encoder(arrays, training=False)
        >>> (x, y), = records[id(norm)]  # doctest: +SKIP
    """
    # The class of each recorded layer is patched too: a subclass with its own call (TokenDense, a Dense on token
    # tensors) does not go through cls.call. Originals are read before any patch, so none records twice.
    classes = [cls] + [c for c in dict.fromkeys(type(layer) for layer in layers) if c is not cls]
    originals = {c: c.call for c in classes}
    wanted = {id(layer): layer for layer in layers}
    records = {key: [] for key in wanted}

    def patched(original):
        def call(self, inputs, *args, **kwargs):
            outputs = original(self, inputs, *args, **kwargs)
            if id(self) in wanted and tf.executing_eagerly():
                records[id(self)].append((np.asarray(inputs), np.asarray(outputs)))
            return outputs

        return call

    with patched_classes("call", {c: patched(originals[c]) for c in classes}):
        yield records


# Rows per forward pass while recording. Recording the whole data set at once kept every LayerNorm's
# input and output of every token (all-MiniLM-L6-v2, 1,800 lines at seq 64: 13 norms x 2 x 177 MB in
# float32, then float64 copies) and made `mbk substitute` peak near 10 GB (issue 15); per batch, only
# running sums stay.
RECORD_ROWS = 32


def recorded_batches(model, cls, layers, arrays, rows=RECORD_ROWS):
    """Runs ``model`` over ``arrays`` ``rows`` at a time, yielding each batch's :func:`recording_calls` records
    and its boolean ``[rows, seq]`` real-token mask.

    Example:
        >>> for records, keep in recorded_batches(encoder, NoNorm, [norm], arrays):  # doctest: +SKIP
        ...     (x, y), = records[id(norm)]
    """
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    count = len(arrays["attention_mask"])
    for start in range(0, count, rows):
        batch = {k: v[start:start + rows] for k, v in arrays.items()}
        with recording_calls(cls, layers) as records:
            model(batch, training=False)
        yield records, batch["attention_mask"].astype(bool)


def _norm_moments(model, data):
    """``{layer path: (tokens, sum x, sum y, sum x^2, sum xy)}`` per feature of every encoder LayerNorm, real tokens.

    Sums in float64, accumulated batch by batch (:func:`recorded_batches`), so memory does not grow with the data.
    """
    encoder = encoder_of(model)
    gammas = {path[: -len("/gamma")]: var for path, var in named_weights(encoder).items() if path.endswith("/gamma")}
    by_var = {id(layer.gamma): layer for layer in _sublayers(encoder)
              if isinstance(layer, keras.layers.LayerNormalization)}
    layer_of = {p: by_var[id(v)] for p, v in gammas.items() if id(v) in by_var}
    sums = {path: (0, 0.0, 0.0, 0.0, 0.0) for path in layer_of}
    for records, keep in recorded_batches(encoder, keras.layers.LayerNormalization, layer_of.values(), data.arrays):
        for path, layer in layer_of.items():
            (x, y), = records[id(layer)]
            x, y = x[keep].astype(np.float64), y[keep].astype(np.float64)
            batch = (len(x), x.sum(0), y.sum(0), (x * x).sum(0), (x * y).sum(0))
            sums[path] = tuple(total + part for total, part in zip(sums[path], batch))
    return sums


def _sublayers(layer):
    return layer._flatten_layers(include_self=False, recursive=True)  # noqa: SLF001  (Keras' own walker)


@dataclass(frozen=True)
class Substitution:
    """One operator replacement.

    Args:
        name (str): the keyword users pass (``norm``, ``act``).
        config_key (str): the Encoder option it changes.
        choices (tuple | None): the values that option accepts (None: ``check`` decides).
        carry (callable): ``(arrays, model, data, value) -> arrays``: how the source model's weights move to the
            substituted architecture (``data``: an optional InputSet for rules that fit to activations).
        carry_rule (str): one line saying what ``carry`` does, for the report.
        check (callable): ``value -> None``, raising ConfigError, for options without a fixed set of choices.
    """

    name: str
    config_key: str
    choices: tuple
    carry: object = _copy_weights
    carry_rule: str = ""
    check: object = None

    def validate(self, value, name=None):
        """Raises ConfigError unless ``value`` is a valid setting of this record; ``name``: the option as the user
        wrote it (default ``--NAME``, ``mbk substitute``'s flag)."""
        if self.check is not None:
            self.check(value)
        else:
            check_choice(name or f"--{self.name}", value, self.choices)


SUBSTITUTIONS = {
    "norm": Substitution(
        "norm", "normalization_type", tuple(NORMALIZATIONS), _fit_norms,
        "gamma/beta carried by name: LayerNorm's affine part, or with data the per-feature fit of its output",
    ),
    "act": Substitution("act", "hidden_act", tuple(ACTIVATIONS), _copy_weights, "activations have no weights"),
    "ffn": Substitution(
        "ffn", "intermediate_size", None, _narrow_ffns,
        "each FFN keeps its most active hidden units (structured pruning; recovery learns the rest back)",
        check=_check_width,
    ),
}


@dataclass
class SubstitutionResult:
    """The substituted model and what changed."""

    model: object
    changes: dict = field(default_factory=dict)
    rules: list = field(default_factory=list)
    carried: int = 0

    def summary(self):
        if not self.changes:
            return "substitution: nothing to change (the model already has these operators)"
        changed = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in self.changes.items())
        return f"substitution: {changed}; {self.carried} weights carried by name ({'; '.join(self.rules)})"


def substitute(model, fit_inputs=None, **targets):
    """Returns ``model`` rebuilt with operators replaced and its weights carried over.

    Args:
        model: an Encoder or task model (not modified).
        fit_inputs: an InputSet for carry rules that fit to activations (``norm``);
            None carries LayerNorm's gamma/beta unchanged.
        **targets: record name -> new value, e.g. ``norm="no_norm", act="relu"``
            or ``ffn=768`` (None skips a record).

    Raises:
        ConfigError: an unknown record or value (listing the valid ones).
        CheckpointError: a weight that does not fit the substituted model.

    Example:
        >>> result = substitute(mbk.build("tiny-bert"), norm="no_norm", act="relu")  # doctest: +SKIP
        >>> result.model.encoder.config["normalization_type"]  # doctest: +SKIP
        'no_norm'
    """
    unknown = sorted(set(targets) - set(SUBSTITUTIONS))
    if unknown:
        raise ConfigError(f"unknown substitution(s) {', '.join(unknown)}; valid: {', '.join(SUBSTITUTIONS)}")
    old_config = encoder_of(model).config
    overrides, records = {}, []
    for name, value in targets.items():
        if value is None:
            continue
        record = SUBSTITUTIONS[name]
        record.validate(value)
        if old_config[record.config_key] != value:
            overrides[record.config_key] = value
            records.append(record)
    if not overrides:
        return SubstitutionResult(model)
    arrays = weight_arrays(model)
    for record in records:
        arrays = record.carry(arrays, model, fit_inputs, overrides[record.config_key])
    new = rebuild(model, arrays=arrays, **overrides)
    return SubstitutionResult(
        new,
        changes={r.config_key: (old_config[r.config_key], overrides[r.config_key]) for r in records},
        rules=[f"{r.name}: {r.carry_rule}" for r in records],
        carried=len(arrays),
    )
