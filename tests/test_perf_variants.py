"""Issue 17's variant benchmark (benchmarks/perf/variants.py): twins, the table, the before formulation.

No export and no timing here (the module's full run takes half an hour): the
twin construction, the table's arithmetic on made-up records, and that the
pre-issue-17 formulations it times as "(before)" compute what today's layers do.
"""

import numpy as np
import pytest

import mobilebert_kit as mbk
from benchmarks.perf import variants

pytestmark = pytest.mark.filterwarnings("ignore")


def test_twins_copy_the_matrix_sizes_and_nothing_else():
    assert variants.twin_overrides("convbert-small") == dict(
        hidden_size=256, num_layers=12, num_heads=4, intermediate_size=1024, embedding_size=128, vocab_size=30522)
    nezha = variants.twin_overrides("nezha-base")
    assert "embedding_size" not in nezha and nezha["vocab_size"] == 21128 and nezha["hidden_size"] == 768
    assert variants.twin_overrides("composite-bert-small")["vocab_size"] == 30004
    twin = mbk.build(variants.TWIN_BASE, **variants.twin_overrides("tiny-convbert")).config
    variant = mbk.build("tiny-convbert").config
    for key in variants.TWIN_KEYS:
        assert twin[key] == variant[key], key
    # plain BERT layers: what the comparison is about
    assert twin["attention_type"] == "self_attention" and variant["attention_type"] == "convbert_mixed"
    assert (twin["normalization_type"], twin["hidden_act"]) == ("layer_norm", "gelu")
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        variants.twin_overrides("nope")


def test_arguments_default_to_every_variant_with_its_before_row():
    args = variants.parse_args([])
    assert args.presets == list(variants.VARIANTS) and args.before == list(variants.VARIANTS)
    assert (args.min_runs, args.rounds) == (20, 4)
    args = variants.parse_args(["--quick", "--presets", "tiny-nezha", "--before", "none"])
    assert args.before == [] and args.min_runs == 5
    with pytest.raises(SystemExit):
        variants.parse_args(["--presets", "tiny-nezha", "--before", "tiny-convbert"])
    models = variants.Bench.__new__(variants.Bench)
    models.args = variants.parse_args(["--presets", "tiny-convbert", "--before", "tiny-convbert"])
    assert [(role, label) for _, role, label, _, _ in models.models()] == [
        ("variant", "tiny-convbert"), ("before", "tiny-convbert (before)"), ("twin", "BERT twin of tiny-convbert")]


def _rec(group, role, model, precision, ms, flops, **extra):
    return dict(dict(group=group, role=role, model=model, precision=precision, flops=flops, status="ok",
                     median_ms=ms), **extra)


def test_table_picks_the_best_int8_and_divides_by_the_twin():
    records = [
        _rec("v", "variant", "v", "float32", 30.0, 2e9),
        _rec("v", "variant", "v", "dynamic-int8", 20.0, 2e9),
        _rec("v", "variant", "v", "int8", 12.0, 2e9),
        _rec("v", "before", "v (before)", "float32", 45.0, 2e9),
        _rec("v", "before", "v (before)", "dynamic-int8", 1.0, 2e9, status="skipped", median_ms=None,
             reason="export failed: ValueError: bad"),
        _rec("v", "twin", "twin of v", "float32", 20.0, 4e9),
        _rec("v", "twin", "twin of v", "dynamic-int8", 10.0, 4e9),
        _rec("v", "twin", "twin of v", "int8", 16.0, 4e9),
    ]
    rows = {r["model"]: r for r in variants.summary(records)}
    assert list(rows) == ["v", "v (before)", "twin of v"]
    v = rows["v"]
    assert (v["gflop"], v["float32_ms"], v["int8_ms"], v["int8_which"]) == (2.0, 30.0, 12.0, "int8")
    assert v["ms_ratio"] == (pytest.approx(1.5), pytest.approx(1.2)) and v["flop_ratio"] == pytest.approx(0.5)
    assert rows["twin of v"]["int8_which"] == "dynamic-int8" and rows["twin of v"]["ms_ratio"] == (1.0, 1.0)
    before = rows["v (before)"]
    assert before["int8_ms"] is None and before["ms_ratio"] == (pytest.approx(2.25), None)
    assert before["failed"] == ["dynamic-int8: export failed: ValueError: bad"]

    lines = variants.table(records)
    assert lines[2] == "| **v** | 2.000 | 30.00 | 15.00 | 12.00 (int8) | 1.50 | 1.20 | 0.50 |"
    assert lines[3] == "| v (before) | 2.000 | 45.00 | 22.50 | - | 2.25 | - | 0.50 |"
    assert lines[4] == "| v (before): not measured | dynamic-int8: export failed: ValueError: bad | | | | | | |"
    assert lines[5].startswith("| twin of v | 4.000 | 20.00 | 5.00 | 10.00 (dynamic-int8) | 1.00 | 1.00 | 1.00 |")


@pytest.mark.parametrize("preset", ["tiny-convbert", "tiny-nezha", "tiny-composite"])
def test_before_formulation_computes_the_same_outputs(preset):
    from mobilebert_kit.layers import relative_positions
    from mobilebert_kit.layers.span_dynamic_convolution import SpanDynamicConvolution

    encoder = mbk.build(preset, hidden_dropout=0.0, attention_dropout=0.0)
    rng = np.random.default_rng(0)
    for var in encoder.weights:  # beyond-init weights: every term shows in the outputs
        var.assign(rng.normal(0, 0.2, var.shape).astype(np.float32))
    seq = 24  # beyond the tiny relative windows, so the clipped edges are exercised
    inputs = {"input_ids": rng.integers(5, 500, (2, seq)).astype(np.int32),
              "attention_mask": np.ones((2, seq), np.int32), "token_type_ids": np.zeros((2, seq), np.int32)}
    now, now_ops = _run(encoder, inputs)
    saved = SpanDynamicConvolution.call, relative_positions.expand_offsets
    with variants.formulation_before_issue_17():
        before, before_ops = _run(encoder, inputs)
    assert (SpanDynamicConvolution.call, relative_positions.expand_offsets) == saved  # restored
    # the old graph really was traced: its Pack (span convolution) or per-layer Gather (relative spread)
    replaced = "Pack" if preset == "tiny-convbert" else "GatherV2"
    assert before_ops[replaced] > now_ops[replaced], (before_ops[replaced], now_ops[replaced])
    np.testing.assert_allclose(now, before, rtol=0, atol=1e-5)


def _run(encoder, inputs):
    """Sequence output of a fresh trace, and the traced graph's op counts by type."""
    import collections

    from mobilebert_kit.backend import tf

    fn = tf.function(lambda x: encoder(x, training=False)["sequence_output"])
    graph = fn.get_concrete_function({k: tf.TensorSpec(v.shape, tf.int32) for k, v in inputs.items()}).graph
    ops = collections.Counter(op.type for op in graph.get_operations())
    for function in graph._functions.values():  # noqa: SLF001  (nested tf.function bodies, as flops.py reads them)
        ops.update(op.type for op in function.graph.get_operations())
    return fn(inputs).numpy(), ops
