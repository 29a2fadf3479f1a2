"""NoNorm/ReLU substitution: records applied by one mechanism, weights by name, no LayerNorm/GELU left."""

import logging

import numpy as np
import pytest

from mobilebert_kit.artifacts.inspection import inspect_artifact
from mobilebert_kit.convert.plan.input_set import InputSet
from mobilebert_kit.convert.prepare.rebuild import weight_arrays
from mobilebert_kit.convert.prepare.substitution import SUBSTITUTIONS, substitute
from mobilebert_kit.errors import ConfigError
from tests.convert.conftest import SEQ, export_tiny


def test_weights_carry_over_by_name(tiny_bert):
    result = substitute(tiny_bert, norm="no_norm", act="relu")
    config = result.model.config
    assert (config["normalization_type"], config["hidden_act"]) == ("no_norm", "relu")
    before, after = weight_arrays(tiny_bert), weight_arrays(result.model)
    assert before.keys() == after.keys()
    for path in before:  # without data, every weight (LayerNorm gamma/beta included) is copied unchanged
        np.testing.assert_array_equal(before[path], after[path], err_msg=path)
    assert tiny_bert.config["normalization_type"] == "layer_norm"  # the source is untouched


def test_fit_to_data_brings_nonorm_closer_to_layernorm(tiny_bert):
    from mobilebert_kit.convert.prepare.recovery import fidelity

    data = InputSet.random(512, 32, SEQ, seed=4)
    copied = fidelity(tiny_bert, substitute(tiny_bert, norm="no_norm").model, data)
    fitted = fidelity(tiny_bert, substitute(tiny_bert, fit_inputs=data, norm="no_norm").model, data)
    assert fitted["hidden_cosine"][0] > copied["hidden_cosine"][0]  # the embedding LayerNorm's fit
    assert fitted["outputs"]["sequence_output"]["cosine"] > copied["outputs"]["sequence_output"]["cosine"]


def test_recovery_reduces_the_loss_and_reports_both_sides(tiny_bert):
    from mobilebert_kit.convert.prepare.recovery import recover

    data = InputSet.random(512, 32, SEQ, seed=5)
    model = substitute(tiny_bert, fit_inputs=data, norm="no_norm", act="relu").model
    report = recover(tiny_bert, model, data, steps=30, learning_rate=1e-3)
    assert report.after is not None and len(report.losses) == 30
    assert np.mean(report.losses[-5:]) < report.losses[0]
    assert "before recovery" in report.format_text() and "after 30 recovery step(s)" in report.format_text()


def test_recovery_trains_only_what_its_loss_reads(tiny_bert):
    # The pooler is not in the hidden-state loss: it must neither move nor make TensorFlow warn
    # "Gradients do not exist for variables ['pooler/kernel:0', ...]" (issue 12; the log is not filtered).
    from mobilebert_kit.convert.prepare.recovery import recover

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        data = InputSet.random(512, 16, SEQ, seed=6)
        model = substitute(tiny_bert, norm="no_norm").model
        pooler = weight_arrays(model)["pooler/kernel"]
        recover(tiny_bert, model, data, steps=2, learning_rate=1e-3)
    finally:
        logger.removeHandler(handler)
    assert not [r for r in records if "Gradients do not exist" in r.getMessage()]
    after = weight_arrays(model)
    np.testing.assert_array_equal(after["pooler/kernel"], pooler)
    assert not np.array_equal(after["transformer_layer_0/attention/query/kernel"],
                              weight_arrays(tiny_bert)["transformer_layer_0/attention/query/kernel"])


def test_unknown_records_and_values_list_the_valid_ones(tiny_bert):
    with pytest.raises(ConfigError, match="valid: norm, act"):
        substitute(tiny_bert, normalisation="no_norm")
    with pytest.raises(ConfigError, match="'layer_norm', 'no_norm'"):
        substitute(tiny_bert, norm="rms_norm")
    assert set(SUBSTITUTIONS) == {"norm", "act", "ffn"}
    assert substitute(tiny_bert, norm="layer_norm").model is tiny_bert  # nothing to change


@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_substituted_graph_has_no_layer_norm_or_gelu(tiny_bert, tmp_path, fmt):
    original = tmp_path / f"orig.{fmt}"
    export_tiny(tiny_bert, original, fmt, validate=False)
    left = inspect_artifact(original).variant_ops()
    assert left["layer_norm"] and left["gelu"]  # the check can see them when they are there
    model = substitute(tiny_bert, norm="no_norm", act="relu").model
    out = tmp_path / f"sub.{fmt}"
    assert export_tiny(model, out, fmt).validation.passed
    assert inspect_artifact(out).variant_ops() == {"layer_norm": {}, "gelu": {}}


def test_fit_and_report_run_in_bounded_batches_and_match_the_one_pass_fit(tiny_bert):
    # Issue 15: the NoNorm fit and the fidelity report ran the whole data set in one forward pass and kept
    # every LayerNorm's input and output (all-MiniLM-L6-v2, 1,800 lines at seq 64: about 10 GB). Each
    # forward pass must see at most RECORD_ROWS / FIDELITY_ROWS rows, whatever the data size, and the
    # running sums must give the same fit as the centred one-pass formula.
    import mobilebert_kit.convert.prepare.substitution as substitution
    from mobilebert_kit.backend import keras
    from mobilebert_kit.convert.prepare.recovery import FIDELITY_ROWS, fidelity

    data = InputSet.random(512, 3 * substitution.RECORD_ROWS + 5, SEQ, seed=7)
    seen = []
    original = keras.layers.LayerNormalization.call

    def call(self, inputs):  # LayerNormalization.call's own signature (Keras reads it when a layer is built)
        if inputs.shape[0] is not None:  # eager calls (the fit, the report), not the functional build
            seen.append(int(inputs.shape[0]))
        return original(self, inputs)

    keras.layers.LayerNormalization.call = call
    try:
        fitted = substitute(tiny_bert, fit_inputs=data, norm="no_norm").model
        fidelity(tiny_bert, fitted, data)
    finally:
        keras.layers.LayerNormalization.call = original
    assert seen and max(seen) <= max(substitution.RECORD_ROWS, FIDELITY_ROWS)
    assert data.count > max(seen)

    arrays = {k: np.asarray(v) for k, v in data.arrays.items()}
    keep = arrays["attention_mask"].astype(bool)
    norm = tiny_bert.blocks[0].attention_output.norm
    with substitution.recording_calls(keras.layers.LayerNormalization, [norm]) as records:
        tiny_bert(arrays, training=False)
    (x, y), = records[id(norm)]
    x, y = x[keep].astype(np.float64), y[keep].astype(np.float64)
    scale = ((x - x.mean(0)) * (y - y.mean(0))).mean(0) / x.var(0)
    got = weight_arrays(fitted)["transformer_layer_0/attention_output/norm/gamma"]
    np.testing.assert_allclose(got, scale, rtol=1e-4, atol=1e-6)


def _with_dead_units(model, dead):
    """``model`` with the output rows of FFN units ``dead`` zeroed in every FFN: those units contribute nothing."""
    from mobilebert_kit.convert.prepare.rebuild import rebuild

    arrays = weight_arrays(model)
    for path in arrays:
        if path.endswith("/output/kernel") and "/ffn_" in path:
            arrays[path] = arrays[path].copy()
            arrays[path][dead] = 0.0
    return rebuild(model, arrays=arrays)


@pytest.mark.parametrize("with_data", [False, True])
def test_narrowing_keeps_the_units_that_carry_the_output(tiny_bert, with_data):
    # Half the units of every FFN are dead (zero output rows), scattered: narrowing to the other half must keep
    # exactly those, in order, with their weights, so the narrowed model computes the same function.
    width = tiny_bert.config["intermediate_size"]
    dead = np.arange(0, width, 2)
    model = _with_dead_units(tiny_bert, dead)
    data = InputSet.random(512, 24, SEQ, seed=8)
    result = substitute(model, fit_inputs=data if with_data else None, ffn=width // 2)
    narrow = result.model
    assert narrow.config["intermediate_size"] == width // 2
    assert result.changes == {"intermediate_size": (width, width // 2)}
    live = np.arange(1, width, 2)
    before, after = weight_arrays(model), weight_arrays(narrow)
    scope = "transformer_layer_1/ffn_0/"
    np.testing.assert_array_equal(after[scope + "intermediate/kernel"], before[scope + "intermediate/kernel"][:, live])
    np.testing.assert_array_equal(after[scope + "intermediate/bias"], before[scope + "intermediate/bias"][live])
    np.testing.assert_array_equal(after[scope + "output/kernel"], before[scope + "output/kernel"][live])
    arrays = {k: np.asarray(v) for k, v in data.arrays.items()}
    expected = model(arrays, training=False)["sequence_output"].numpy()
    got = narrow(arrays, training=False)["sequence_output"].numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_narrowing_a_task_model_with_data_keeps_its_head(tiny_bert):
    # A fine-tuned classifier is what users substitute; its weight paths carry the encoder's scope. The NoNorm
    # fit with data used the encoder's own paths and refused the model (a CheckpointError of "unexpected" norms).
    from mobilebert_kit.models.heads import HEADS

    classifier = HEADS["sequence_classifier"](tiny_bert, 3)
    data = InputSet.random(512, 16, SEQ, seed=9)
    gamma = "encoder/transformer_layer_0/ffn_0/norm/gamma"
    fitted = weight_arrays(substitute(classifier, fit_inputs=data, norm="no_norm").model)
    copied = weight_arrays(substitute(classifier, norm="no_norm").model)
    assert not np.allclose(fitted[gamma], copied[gamma])  # fitted, not copied
    result = substitute(classifier, fit_inputs=data, norm="no_norm", act="relu", ffn=16)
    before, after = weight_arrays(classifier), weight_arrays(result.model)
    np.testing.assert_array_equal(after["classifier/kernel"], before["classifier/kernel"])
    assert after["encoder/transformer_layer_0/ffn_0/intermediate/kernel"].shape[1] == 16
    np.testing.assert_array_equal(after[gamma], fitted[gamma])  # the fit reads the source, not the narrowed model


def test_narrowing_refuses_what_it_cannot_do(tiny_bert):
    import mobilebert_kit as mbk

    with pytest.raises(ConfigError, match="wider than the source's FFNs"):
        substitute(tiny_bert, ffn=tiny_bert.config["intermediate_size"] + 1)
    for bad in (0, -3, 2.5, True, "64"):
        with pytest.raises(ConfigError, match="positive whole number"):
            substitute(tiny_bert, ffn=bad)
    with pytest.raises(ConfigError, match="grouped FFNs"):
        substitute(mbk.build("tiny-convbert", num_groups=2), ffn=8)
