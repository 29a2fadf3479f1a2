"""NoNorm scale migration: exact in float (1e-5), identity NoNorms inside blocks, clear refusals."""

import numpy as np
import pytest

from mobilebert_kit.convert.plan.input_set import InputSet
from mobilebert_kit.convert.prepare.rebuild import rebuild, weight_arrays
from mobilebert_kit.convert.prepare.scale_migration import RELU_MAX_GROWTH, migrate_nonorm_scales
from mobilebert_kit.convert.prepare.substitution import substitute
from mobilebert_kit.errors import ConfigError
from tests.convert.conftest import SEQ, export_tiny, padded_inputs, trained_like, with_outliers


@pytest.fixture(scope="module")
def nonorm_bert(tiny_bert):
    return substitute(tiny_bert, norm="no_norm", act="relu").model


def _nonorm_model(which, dtype):
    import mobilebert_kit as mbk

    model = trained_like(mbk.build(which, dtype=dtype, normalization_type="no_norm", hidden_act="relu"), seed=3)
    return model


def _outputs(model, inputs):
    out = model(inputs.arrays, training=False)
    out = out if isinstance(out, dict) else {"output": out}
    return {k: np.asarray(v) for k, v in out.items()}


def _assert_same_outputs(before, after, inputs, tolerance=1e-5):
    """Every output within ``tolerance`` of the original, relative to that output's largest magnitude.

    Relative to the scale because float32 rounds differently once the values are
    stored in other units: on trained-like weights the outputs reach ~40 and
    differ by ~2e-4 (5e-6 of the scale); in float64 the same models agree to 1e-12.
    """
    ref, got = _outputs(before, inputs), _outputs(after, inputs)
    assert ref.keys() == got.keys()
    for key in ref:
        scale = max(1.0, float(np.abs(ref[key]).max()))
        error = float(np.abs(got[key] - ref[key]).max())
        assert error <= tolerance * scale, f"{key}: max error {error:.3g} at output scale {scale:.3g}"


# Each block layout, policy and dtype once (a full product doubles the time and adds no path).
@pytest.mark.parametrize("which, scale, dtype, tolerance", [
    ("tiny-mobilebert", "unit", "float32", 1e-5), ("tiny-mobilebert", "balance", "float64", 1e-10),
    ("tiny-bert", "unit", "float64", 1e-10), ("tiny-bert", "balance", "float32", 1e-5),
    ("tiny-mobilebert", "smoothquant", "float64", 1e-10),
])
def test_outputs_unchanged_in_float(which, scale, dtype, tolerance):
    model = _nonorm_model(which, dtype)
    inputs = padded_inputs(model)
    migrated, report = migrate_nonorm_scales(model, scale, inputs=InputSet.random(512, 8, SEQ, seed=7))
    _assert_same_outputs(model, migrated, inputs, tolerance)
    assert report  # something moved
    # The migration changed weights (a no-op would pass the check above trivially).
    before, after = weight_arrays(model), weight_arrays(migrated)
    assert any(not np.allclose(before[k], after[k]) for k in before)


@pytest.mark.parametrize("which, layout", [
    ("tiny-mobilebert", {"use_bottleneck_attention": True}),  # q, k and v read the bottleneck segment
    ("tiny-ib-bert", {}),  # bottleneck without the shared query/key one: q, k, v read the fixed x
    ("tiny-nezha", {}),  # relative positions inside self-attention
    ("tiny-bert", {"num_feedforward_networks": 2}),  # BERT with a segment between two FFNs
])
def test_every_block_layout_is_exact(which, layout):
    import mobilebert_kit as mbk

    model = trained_like(mbk.build(which, dtype="float64", normalization_type="no_norm", hidden_act="relu",
                                   **layout), seed=3)
    inputs = padded_inputs(model)
    _assert_same_outputs(model, migrate_nonorm_scales(model)[0], inputs, 1e-10)
    # The MobileBERT stream fold (--fold-nonorm) reads x with each layout's own readers (bottleneck_input, and
    # q, k, v without any shared bottleneck); BERT layouts have no such segment and are left as they were.
    migrated, report = migrate_nonorm_scales(model, stream=True)
    _assert_same_outputs(model, migrated, inputs, 1e-10)
    assert ("embeddings/norm" in report) == mbk.build(which).config["use_bottleneck"], sorted(report)


@pytest.mark.parametrize("which, layout", [
    ("tiny-bert", {}),
    ("tiny-nezha", {}),  # no position table: the embedding sum is words and types only
    ("tiny-bert", {"num_feedforward_networks": 2}),  # the stream's writer is the last of two FFN NoNorms
])
def test_data_policies_move_embeddings_stream_and_relu_units_exactly(which, layout):
    import mobilebert_kit as mbk

    model = trained_like(mbk.build(which, dtype="float64", normalization_type="no_norm", hidden_act="relu",
                                   **layout), seed=3)
    config = model.config
    migrated, report = migrate_nonorm_scales(model, "balance", InputSet.random(config["vocab_size"], 8, SEQ, seed=7))
    _assert_same_outputs(model, migrated, padded_inputs(model), 1e-10)
    last = config["num_feedforward_networks"] - 1
    streams = ["embeddings/norm"] + [f"transformer_layer_{i}/ffn_{last}/norm" for i in range(config["num_layers"] - 1)]
    units = [f"transformer_layer_{i}/ffn_{f}/intermediate" for i in range(config["num_layers"])
             for f in range(last + 1)]
    assert {"embeddings", *streams, *units} <= set(report), sorted(report)
    # The block output that heads read stays in its units (a last-block NoNorm write is not a segment).
    assert f"transformer_layer_{config['num_layers'] - 1}/ffn_{last}/norm" not in report


def test_balance_flattens_an_embedding_column_and_a_relu_unit(nonorm_bert):
    # The same function with one embedding channel 40x larger in every table (the embedding NoNorm's gamma
    # 40x smaller) and one FFN unit 40x larger (its output row 40x smaller; ReLU is positively homogeneous):
    # the migration must divide that column and that unit by the largest scale of their segments.
    arrays = weight_arrays(nonorm_bert)
    channel, unit = 5, 7
    tables = [k for k in arrays if k.startswith("embeddings/") and k.endswith("_embeddings")]
    for key in tables:
        arrays[key][:, channel] *= 40.0
    arrays["embeddings/norm/gamma"][channel] /= 40.0
    inter, out = "transformer_layer_0/ffn_0/intermediate", "transformer_layer_0/ffn_0/output"
    arrays[f"{inter}/kernel"][:, unit] *= 40.0
    arrays[f"{inter}/bias"][unit] *= 40.0
    arrays[f"{out}/kernel"][unit] /= 40.0
    weak = 11  # a unit that barely fires on the calibration rows may be enlarged RELU_MAX_GROWTH times at most
    arrays[f"{inter}/kernel"][:, weak] *= 1e-3
    arrays[f"{inter}/bias"][weak] *= 1e-3
    arrays[f"{out}/kernel"][weak] *= 1e3
    model = rebuild(nonorm_bert, arrays=arrays)
    _assert_same_outputs(nonorm_bert, model, padded_inputs(model))
    calibration = InputSet.random(model.config["vocab_size"], 64, SEQ, seed=5)
    migrated, report = migrate_nonorm_scales(model, "balance", calibration)
    assert report[inter]["min_scale"] == pytest.approx(1 / RELU_MAX_GROWTH)
    moved = weight_arrays(migrated)
    shrink = np.abs(moved["embeddings/word_embeddings"]).max(0) / np.abs(arrays["embeddings/word_embeddings"]).max(0)
    assert int(np.argmin(shrink)) == channel, shrink
    shrink = np.abs(moved[f"{inter}/kernel"]).max(0) / np.abs(arrays[f"{inter}/kernel"]).max(0)
    assert int(np.argmin(shrink)) == unit, shrink
    # float32 rounding of units rescaled up to 1e3: 1.03e-5 of the scale measured with TokenDense's broadcast
    # matmul (another GEMM path than tensordot's 2-D product, equally exact), just above 1e-5.
    _assert_same_outputs(model, migrated, padded_inputs(model, seed=9), tolerance=2e-5)


def test_gelu_units_and_the_unit_policy_leave_the_outer_segments_alone(tiny_bert, nonorm_bert):
    # GELU is not positively homogeneous, so its units cannot be rescaled; "unit" (--fold-nonorm at export,
    # compared against the unfolded model's hidden states by the drift probe) keeps every hidden state.
    gelu = substitute(tiny_bert, norm="no_norm").model
    calibration = InputSet.random(gelu.config["vocab_size"], 16, SEQ, seed=5)
    migrated, report = migrate_nonorm_scales(gelu, "balance", calibration)
    before, after = weight_arrays(gelu), weight_arrays(migrated)
    assert not [k for k in report if k.endswith("/intermediate")]
    # The output kernel is an adder of its segment (columns divided by that segment's c); a unit's rescaling
    # would also scale its rows, so every column's change must be the same factor on every row.
    for key in (k for k in before if k.endswith("/ffn_0/output/kernel")):
        factor = after[key] / before[key]
        np.testing.assert_allclose(factor, np.broadcast_to(factor[:1], factor.shape), rtol=1e-4, err_msg=key)
    _, report = migrate_nonorm_scales(nonorm_bert)
    assert "embeddings" not in report and "embeddings/norm" not in report
    assert not [k for k in report if k.endswith("/intermediate") or "ffn_0/norm" in k]


def test_substituted_bert_keeps_its_outputs(nonorm_bert):
    inputs = padded_inputs(nonorm_bert)
    _assert_same_outputs(nonorm_bert, migrate_nonorm_scales(nonorm_bert)[0], inputs)


def test_unit_policy_makes_inner_nonorms_identity_and_keeps_block_outputs(tiny_mobilebert):
    migrated, _ = migrate_nonorm_scales(tiny_mobilebert)
    before, after = weight_arrays(tiny_mobilebert), weight_arrays(migrated)
    inner = [k[: -len("/gamma")] for k in after if k.endswith("/gamma") and "transformer_layer" in k
             and "output_bottleneck" not in k]
    assert len(inner) == 2 * 5  # per block: bottleneck_input, bottleneck_attention, attention_output, ffn_0, ffn_1
    for norm in inner:
        np.testing.assert_allclose(after[f"{norm}/gamma"], 1.0, atol=1e-6, err_msg=norm)
        np.testing.assert_allclose(after[f"{norm}/beta"], 0.0, atol=1e-5, err_msg=norm)
    # The norms that write the residual stream x between blocks (an encoder output) keep their values.
    for key in ("embeddings/norm/gamma", "transformer_layer_1/output_bottleneck/norm/beta"):
        np.testing.assert_array_equal(after[key], before[key])


def test_stream_fold_moves_the_mobilebert_stream_within_its_spread_and_keeps_the_outputs(tiny_mobilebert):
    """``stream=True`` (``--fold-nonorm``): the NoNorms writing the stream between blocks become the identity
    where the product of the stream gammas stays within STREAM_MAX_SPREAD; the last block's (the encoder's
    output) takes the product; outputs unchanged."""
    from mobilebert_kit.convert.prepare.scale_migration import STREAM_MAX_SPREAD

    arrays = weight_arrays(tiny_mobilebert)
    rng = np.random.default_rng(3)
    for key in [k for k in arrays if k.endswith("/gamma") and ("output_bottleneck" in k or "embeddings/norm" in k)]:
        arrays[key] = rng.uniform(0.9, 1.1, arrays[key].shape).astype(arrays[key].dtype)  # mild: the product moves
    mild = rebuild(tiny_mobilebert, arrays=arrays)
    inputs = padded_inputs(mild)
    for model, moved in ((mild, ("embeddings/norm", "transformer_layer_0/output_bottleneck/norm")),
                         (tiny_mobilebert, ("embeddings/norm",))):  # gammas in [0.5, 1.5]: the product of two
        migrated, report = migrate_nonorm_scales(model, stream=True)  # spreads beyond 4, block 0 keeps its gamma
        _assert_same_outputs(model, migrated, inputs)
        after = weight_arrays(migrated)
        for norm in moved:
            np.testing.assert_allclose(after[f"{norm}/gamma"], 1.0, atol=1e-6, err_msg=norm)
        for norm in [n for n in report if n.startswith("embeddings") or "output_bottleneck" in n]:
            np.testing.assert_allclose(after[f"{norm}/beta"], 0.0, atol=1e-5, err_msg=norm)  # shifts move always
            assert report[norm]["max_scale"] / report[norm]["min_scale"] <= STREAM_MAX_SPREAD * (1 + 1e-6), norm
        assert np.abs(after["transformer_layer_0/output_bottleneck/norm/gamma"] - 1).max() > 0.1 or model is mild
        last = "transformer_layer_1/output_bottleneck/norm"
        assert last not in report and np.abs(after[f"{last}/gamma"] - 1).max() > 1e-3  # the output stays fixed
    # Without ``stream`` (every caller but --fold-nonorm) the stream's NoNorms keep their values.
    unchanged = weight_arrays(migrate_nonorm_scales(mild)[0])
    np.testing.assert_array_equal(unchanged["embeddings/norm/gamma"], arrays["embeddings/norm/gamma"])


def test_task_model_and_zero_scale_channels():
    import mobilebert_kit as mbk
    from mobilebert_kit.models.heads import SequenceClassifier

    model = SequenceClassifier(trained_like(mbk.build("tiny-mobilebert"), seed=2), num_labels=3)
    inputs = padded_inputs(model)
    arrays = weight_arrays(model)
    key = next(k for k in arrays if k.endswith("transformer_layer_0/attention_output/norm/gamma"))
    arrays[key][:3] = 0.0  # a dead channel: no finite scale can move out of it
    model = rebuild(model, arrays=arrays)
    migrated, report = migrate_nonorm_scales(model)
    _assert_same_outputs(model, migrated, inputs)
    np.testing.assert_array_equal(weight_arrays(migrated)[key][:3], 0.0)
    assert "transformer_layer_0/attention_output/norm" in report  # paths relative to the encoder


def test_task_model_with_a_data_policy_moves_the_encoders_outer_segments():
    # A head wraps the encoder, so its weight paths carry the encoder's name: the outer segments must still be
    # found (their report keys are relative to the encoder) and the logits must not move.
    import mobilebert_kit as mbk
    from mobilebert_kit.models.heads import SequenceClassifier

    encoder = trained_like(mbk.build("tiny-bert", normalization_type="no_norm", hidden_act="relu"), seed=2)
    model = SequenceClassifier(encoder, num_labels=3)
    migrated, report = migrate_nonorm_scales(model, "balance", InputSet.random(encoder.config["vocab_size"], 8, SEQ))
    assert {"embeddings", "embeddings/norm", "transformer_layer_0/ffn_0/intermediate"} <= set(report), sorted(report)
    _assert_same_outputs(model, migrated, padded_inputs(model))


def test_refusals(tiny_bert, nonorm_bert):
    import mobilebert_kit as mbk

    with pytest.raises(ConfigError, match="uses layer_norm, which no scale can move through; run `mbk substitute"):
        migrate_nonorm_scales(tiny_bert)
    with pytest.raises(ConfigError, match="scale='balance' needs calibration inputs"):
        migrate_nonorm_scales(nonorm_bert, "balance")
    with pytest.raises(ConfigError, match="unknown scale policy 'max'; choose one of unit, balance, smoothquant"):
        migrate_nonorm_scales(nonorm_bert, "max")
    convbert = mbk.build("tiny-convbert", normalization_type="no_norm")
    with pytest.raises(ConfigError, match="supports self_attention blocks"):
        migrate_nonorm_scales(convbert)


# Two full-int8 exports (about 11 s): the slow tier; the exactness tests above stay in the default one.
@pytest.mark.slow
# The gain each model must show, in dB. Measured with the calibration ranges measured per tensor (1429b71):
# tiny-mobilebert 17.5 -> 20.5, nonorm_bert 9.2 -> 10.8 (before them 16.0 -> 22.2 and 8.4 -> 10.5: the truer
# ranges lifted what balance starts from more than what it reaches); the margins leave room for converter noise.
@pytest.mark.parametrize("which,gain_db", [("tiny_mobilebert", 2.0), ("nonorm_bert", 1.0)])
def test_balance_improves_full_int8_fidelity_of_an_outlier_model(which, gain_db, request, tmp_path):
    # nonorm_bert: its outliers include the stream between blocks (ffn_0/norm writes it), which only the
    # data policies' stream segments move.
    model = with_outliers(request.getfixturevalue(which))
    calibration = InputSet.random(512, 32, SEQ, seed=11)
    calibration.save(tmp_path / "calib.npz")
    InputSet.random(512, 16, SEQ, seed=12).save(tmp_path / "valid.npz")
    never_fail = {"min_cosine": -1.0, "min_snr_db": -1e9, "min_argmax_agreement": 0.0, "max_abs_error": 1e30}
    snr = {}
    for name, candidate in (("none", model), ("balance", migrate_nonorm_scales(model, "balance", calibration)[0])):
        result = export_tiny(candidate, tmp_path / f"{name}.tflite", "tflite", "int8",
                             calibration=str(tmp_path / "calib.npz"), validation_data=str(tmp_path / "valid.npz"),
                             thresholds=never_fail)
        snr[name] = {m.name: m.snr_db for m in result.validation.outputs}["sequence_output"]
    assert snr["balance"] > snr["none"] + gain_db, snr


def test_substitution_applies_the_default_migration_exactly(tiny_bert):
    # prepare_source (mbk substitute, export --norm, recipes, the pipeline) migrates after recovery by
    # default: the NoNorm scales move (the weights differ from the unmigrated substitution) while every
    # output stays within 1e-5 of it.
    from mobilebert_kit.convert.prepare.source import DEFAULT_SCALE_MIGRATION, Recovery, prepare_source

    source = tiny_bert
    plain = prepare_source(source, {"norm": "no_norm", "act": "relu"}, Recovery(steps=0, seq_len=SEQ, migrate="none"))
    moved = prepare_source(source, {"norm": "no_norm", "act": "relu"}, Recovery(steps=0, seq_len=SEQ))
    assert plain.migration is None and moved.migration["policy"] == DEFAULT_SCALE_MIGRATION != "none"
    before, after = weight_arrays(plain.source.model), weight_arrays(moved.source.model)
    assert any(not np.allclose(before[k], after[k]) for k in before if k.endswith("/gamma"))
    _assert_same_outputs(plain.source.model, moved.source.model, padded_inputs(tiny_bert, seed=9))
    # A LayerNorm model (only the activation substituted) has nothing to migrate: it is left as it is.
    act_only = prepare_source(source, {"act": "relu"}, Recovery(steps=0, seq_len=SEQ))
    assert act_only.migration is None


def test_balance_reads_the_adders_outputs_and_the_sum_not_only_the_writer(nonorm_bert):
    # MiniLM's FFN output (the adder) carries the residual stream's outliers while the NoNorm that writes
    # the segment does not: ranges taken from the writer alone never saw them (all-int8 sentence cosine
    # 0.852 -> 0.926 once counted, benchmarks/nonorm_int8.py). One FFN output column made 50x larger must
    # show in the segment's ranges and get the segment's largest scale.
    from mobilebert_kit.convert.prepare.scale_migration import _model_segments, _segment_ranges

    arrays = weight_arrays(nonorm_bert)
    kernel = next(k for k in arrays if k.endswith("transformer_layer_0/ffn_0/output/kernel"))
    channel = 3
    arrays[kernel][:, channel] *= 50.0
    model = rebuild(nonorm_bert, arrays=arrays)
    calibration = InputSet.random(64, nonorm_bert.config["vocab_size"], SEQ, seed=5)
    ranges = _segment_ranges(model, _model_segments(model.config, set(arrays), outer=True), calibration)
    low, high, added = ranges["transformer_layer_0/attention_output/norm"]
    assert int(np.argmax(added)) == channel and added[channel] > 5 * np.median(added)
    assert high[channel] - low[channel] > 5 * np.median(high - low)  # the sum z sees it too
    migrated, report = migrate_nonorm_scales(model, "balance", calibration)
    moved = weight_arrays(migrated)
    # The adder's column is divided by c: the outlier column shrinks the most.
    ratio = np.abs(moved[kernel]).max(0) / np.abs(arrays[kernel]).max(0)
    assert int(np.argmin(ratio)) == channel, ratio
    # Exact in real arithmetic; in float32 a column 50x larger, divided and multiplied back, rounds at 50x the
    # scale: pooled_output differed by 1.06e-5 on an Intel Xeon (AVX-512) and by less than 1e-5 on an AMD EPYC.
    _assert_same_outputs(model, migrated, padded_inputs(model, seed=9), tolerance=3e-5)


def test_export_fold_nonorm_drops_the_in_block_nonorm_ops_and_keeps_the_answers(tiny_mobilebert, tmp_path):
    """``--fold-nonorm``: the full-int8 file loses each folded NoNorm's MUL and ADD, and still passes validation
    against the unfolded Keras model; in float the folded file gives the unfolded file's outputs (1e-5)."""
    from mobilebert_kit.artifacts.runner import ArtifactRunner

    files = {}
    for fold in (False, True):
        for quantize in ("none", "int8"):
            files[fold, quantize] = export_tiny(tiny_mobilebert, tmp_path / f"{quantize}_{fold}.tflite",
                                                quantize=quantize, fold_nonorm=fold, validation_count=4,
                                                drift_report=fold and quantize == "int8")
    folded, plain = files[True, "int8"], files[False, "int8"]
    assert folded.validation.passed and plain.validation.passed
    # The drift probe reads block outputs, which the stream fold stores in other units (embeddings/norm moves
    # here): its graph folds inside the blocks only, so every layer compares like with like.
    drift = folded.validation.drift
    assert [d["layer"] for d in drift] == ["embeddings", "transformer_layer_0", "transformer_layer_1"]
    assert all(0.9 < d["cosine"] <= 1.0 for d in drift), drift
    # tiny-mobilebert (2 blocks): the converter already folds a NoNorm that follows a dense layer; the ones
    # after a residual add stay as MUL + ADD unless folded (measured 8 -> 4 MULs; mobilebert 122 -> 26).
    assert plain.op_counts["MUL"] - folded.op_counts["MUL"] >= 2 * 2, (plain.op_counts, folded.op_counts)
    assert plain.op_counts["ADD"] - folded.op_counts["ADD"] >= 2 * 2, (plain.op_counts, folded.op_counts)
    assert sum(folded.op_counts.values()) < sum(plain.op_counts.values())
    inputs = padded_inputs(tiny_mobilebert, count=3)
    ref = ArtifactRunner(str(tmp_path / "none_False.tflite")).run(inputs.arrays)
    got = ArtifactRunner(str(tmp_path / "none_True.tflite")).run(inputs.arrays)
    for name in ref:
        scale = max(1.0, float(np.abs(ref[name]).max()))
        assert float(np.abs(got[name] - ref[name]).max()) <= 1e-5 * scale, name


def test_export_fold_nonorm_refuses_a_layernorm_model_in_one_line(tiny_bert, tmp_path):
    out = tmp_path / "m.tflite"
    with pytest.raises(ConfigError, match=r"^fold_nonorm: the model uses layer_norm.*mbk substitute --norm no_norm"):
        export_tiny(tiny_bert, out, fold_nonorm=True)
    assert not out.exists() and not list(tmp_path.iterdir())
