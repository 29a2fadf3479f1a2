"""Figures the profiler reports are right or marked unknown: FLOPs, vocabulary, percentiles, phone data."""

import numpy as np
import pytest

from mobilebert_kit.profiler.bench_parser import parse_benchmark_output
from mobilebert_kit.profiler.device import _summarize_trials
from mobilebert_kit.profiler.errors import BenchmarkParseError, ProfilerError
from mobilebert_kit.profiler.host import HostProfiler
from mobilebert_kit.profiler.model_info import ModelInfo
from mobilebert_kit.profiler.report import build_report
from mobilebert_kit.profiler.result import finish_result, new_result
from mobilebert_kit.profiler.stats import combine_trials, summarize
from mobilebert_kit.profiler.thermal import checked_record, trial_thermal


def _onnx(path, nodes, inits, ids_shape=("b", "s"), opsets=(("", 13),)):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, list(ids_shape))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def _tensordot(path, vocab=50, hidden=8):
    """ids -> Gather -> Reshape to Concat(Gather(Shape(x), [0, 1]), [hidden]) (tf2onnx's Tensordot) -> MatMul:
    the MatMul's input shape follows from the values of the Shape chain only."""
    from onnx import helper

    rng = np.random.default_rng(0)
    inits = {"table": rng.random((vocab, hidden), dtype=np.float32), "w": rng.random((hidden, hidden), dtype=np.float32),
             "free": np.array([0, 1], np.int64), "h": np.array([hidden], np.int64)}
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["x"]),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "free"], ["free_dims"], axis=0),
        helper.make_node("Concat", ["free_dims", "h"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["x2"]),
        helper.make_node("MatMul", ["x2", "w"], ["out"]),
    ]
    return _onnx(path, nodes, inits, opsets=(("", 17),))


# --- 1. FLOPs of ONNX files ----------------------------------------------------------------------------------


def test_onnx_flops_follow_shape_chains(tmp_path):
    # Plain shape inference leaves the Reshape's output unknown; the MatMul behind it was not counted (0 FLOPs).
    info = ModelInfo(_tensordot(tmp_path / "td.onnx", hidden=8))
    flops, by_type, source = info.count_flops(16)
    assert flops == 2 * 16 * 8 * 8 and by_type == {"MatMul": flops}
    assert source.startswith("2 x MACs")


def test_a_matrix_op_of_unknown_shape_makes_the_flops_unknown_not_partial(tmp_path):
    from onnx import helper

    path = _tensordot(tmp_path / "u.onnx")
    import onnx

    model = onnx.load(path)
    # A second MatMul fed by an op shape inference knows nothing about.
    model.graph.node.extend([helper.make_node("Mystery", ["out"], ["m"], domain="com.example"),
                             helper.make_node("MatMul", ["m", "w"], ["out2"])])
    model.opset_import.extend([helper.make_opsetid("com.example", 1)])
    onnx.save(model, path)
    info = ModelInfo(path)
    flops, by_type, source = info.count_flops(16)
    assert flops is None and by_type == {"MatMul": 2 * 16 * 8 * 8}
    assert source.startswith("unknown: shapes of 1 matrix op(s) (MatMul)") and "--flops" in source
    result = finish_result(new_result(info, target="host", seq_len=16))
    result["latency_ms"] = summarize([1.0, 1.0])
    assert result["flops"] is None and result["gflops_per_s"] is None
    assert build_report([finish_result(result)])["results"][0]["flops"] is None  # the schema takes an unknown count


@pytest.fixture(scope="module")
def tiny_exports(tmp_path_factory):
    """tiny-bert exported by mbk itself at seq 16: float .tflite, float .onnx, int8 (QDQ) .onnx."""
    import mobilebert_kit as mbk
    from mobilebert_kit.convert.exporter import ExportOptions, export

    root = tmp_path_factory.mktemp("exports")
    saved = mbk.save(mbk.build("tiny-bert"), root / "saved")
    paths = {}
    for key, fmt, quantize in (("tflite", "tflite", "none"), ("onnx", "onnx", "none"), ("onnx_int8", "onnx", "int8")):
        paths[key] = str(root / f"{key}.{fmt}")
        export(ExportOptions(str(saved), fmt, quantize, out=paths[key], seq_len=16, validate=False), log=None)
    return paths


def test_the_same_model_counts_the_same_flops_as_tflite_and_onnx(tiny_exports):
    tflite = ModelInfo(tiny_exports["tflite"]).count_flops(16)
    for key in ("onnx", "onnx_int8"):
        onnx_flops, _, source = ModelInfo(tiny_exports[key]).count_flops(16)
        assert onnx_flops == pytest.approx(tflite[0], rel=0.03), (key, onnx_flops, tflite)
        assert source == tflite[2]


# --- 5. vocabulary behind DequantizeLinear ----------------------------------------------------------------------


def test_qdq_export_reads_its_embedding_rows_behind_dequantize(tiny_exports):
    info = ModelInfo(tiny_exports["onnx_int8"])
    assert "DequantizeLinear" in info.op_counts
    assert (info.vocab_size, info.vocab_source) == (ModelInfo(tiny_exports["tflite"]).vocab_size, "embedding table")


def test_vocabulary_looks_through_qdq_wrappers(tmp_path):
    from onnx import helper

    inits = {"table_q": np.zeros((77, 4), np.int8), "scale": np.float32(0.1), "zp": np.int8(0)}
    nodes = [helper.make_node("DequantizeLinear", ["table_q", "scale", "zp"], ["table"]),
             helper.make_node("Identity", ["table"], ["table2"]),
             helper.make_node("Gather", ["table2", "input_ids"], ["out"])]
    info = ModelInfo(_onnx(tmp_path / "q.onnx", nodes, inits))
    assert (info.vocab_size, info.vocab_source) == (77, "embedding table")


# --- 6. a static shape with no tokens -----------------------------------------------------------------------------


def test_a_static_shape_without_tokens_says_so(tmp_path):
    path = _tensordot(tmp_path / "zero.onnx")
    import onnx

    model = onnx.load(path)
    for dim in model.graph.input[0].type.tensor_type.shape.dim:
        dim.Clear()
        dim.dim_value = 0
    onnx.save(model, path)
    with pytest.raises(ProfilerError, match=r"static shape \[0, 0\], which holds no tokens; re-export") as err:
        ModelInfo(path)
    assert "--seq-len" not in str(err.value)


# --- 2. benchmark_model lines that contradict themselves --------------------------------------------------------

_SUMMARY = "Inference timings in us: Init: {init}, First inference: {first}, Warmup (avg): 16000, Inference (avg): 15000\n"


@pytest.mark.parametrize(
    "text, message",
    [
        ("count=50 first=15000 curr=15000 min=14000 max=17000 avg=15000 std=500 p5=14000 median=99000 p95=16000\n",
         "inconsistent percentiles .* median=99000"),
        ("count=50 first=1 curr=1 min=10 max=20 avg=15 std=1 p5=12 median=11 p95=18\n", "min <= p5 <= median <= p95 <= max"),
        ("count=-5 first=15000 curr=15000 min=14000 max=17000 avg=15000 std=500\n" + _SUMMARY.format(init=100, first=2),
         "count=-5 but values; a run count is at least 1"),
        ("count=50 first=15000 curr=15000 min=14000 max=17000 avg=15000 std=500\n" + _SUMMARY.format(init=-100, first=2),
         "negative time Init: -100"),
        ("count=50 first=15000 curr=15000 min=14000 max=17000 avg=15000 std=500\n" + _SUMMARY.format(init=1, first=-20000),
         "negative time First inference: -20000"),
        ("count=3 first=-1 curr=-1 min=-2 max=-1 avg=-1.5 std=0.5\n", "negative latency"),
    ],
)
def test_self_contradicting_results_are_refused(text, message):
    with pytest.raises(BenchmarkParseError, match=message):
        parse_benchmark_output(text)


def test_consistent_percentiles_still_parse():
    log = parse_benchmark_output("count=50 first=15000 curr=15000 min=14000 max=17000 avg=15000 std=500 p5=14000 median=15000 p95=16000\n")
    assert log.latency_ms()["median"] == 15.0


def _device_result(trials, runs=50):
    return {"trials": trials, "warnings": [], "config": {"runs": runs, "max_time_s": 150.0}, "memory": {}}


def _device_trial(**latency):
    stats = {"count": 50, "avg": 15.0, "std": 0.5, "min": 14.0, "max": 17.0, "median": None}
    stats.update(latency)
    return {"latency_ms": stats, "count": stats["count"], "memory": {}, "init_ms": 1.0, "first_inference_ms": 2.0,
            "throttled": False}


def test_device_median_from_averages_is_noted():
    result = _device_result([_device_trial(), _device_trial(median=14.5)])
    _summarize_trials(result)
    assert result["warnings"] == ["benchmark_model printed no median in 1 of 2 trial(s) (an older build): "
                                  "the median column uses those trials' averages"]
    with_median = _device_result([_device_trial(median=14.5)])
    _summarize_trials(with_median)
    assert with_median["warnings"] == []


# --- 3. statistics too few runs cannot give ------------------------------------------------------------------------


def test_one_run_has_no_spread_and_no_tail_percentiles():
    one = summarize([5.0])
    assert one["median"] == 5.0 and one["count"] == 1
    assert [one[k] for k in ("p90", "p99", "std", "mad", "cv")] == [None] * 5
    ten = summarize(np.arange(1.0, 11.0))
    assert ten["p90"] is not None and ten["std"] is not None and ten["p99"] is None
    assert summarize(np.arange(1.0, 101.0))["p99"] is not None


def test_host_and_phone_apply_the_same_rule():
    host = summarize([5.0])
    phone = combine_trials([{"count": 1, "avg": 5.0, "std": 0.0, "min": 5.0, "max": 5.0}])
    for key in ("std", "cv", "p90", "p99", "mad"):
        assert host[key] is None and phone[key] is None, key
    assert combine_trials([{"count": 50, "avg": 5.0, "std": 0.1, "min": 4.9, "max": 5.2}])["std"] == 0.1


def test_host_warns_about_figures_left_na(models):
    result = HostProfiler(runs=1, warmup=1, min_time_s=0.0).profile(models["onnx"], seq_len=16)
    assert result["latency_ms"]["p90"] is None and result["latency_ms"]["cv"] is None
    assert any(w.startswith("p90, p99, std, mad, cv n/a: 1 timed run(s)") for w in result["warnings"])


def test_host_warns_when_max_time_cuts_the_runs_short(models):
    result = HostProfiler(runs=10**6, warmup=1, min_time_s=0.0, max_time_s=0.2).profile(models["onnx"], seq_len=16)
    count = result["latency_ms"]["count"]
    assert count < 10**6
    assert f"only {count} of the 1000000 requested runs were timed: --max-time 0.2 s was reached first" in " ".join(result["warnings"])


def test_phone_warns_when_max_time_cuts_the_runs_short():
    result = _device_result([_device_trial(median=15.0, count=20)], runs=50)
    _summarize_trials(result)
    assert any("only 20 of the 50 requested runs were timed in a trial" in w for w in result["warnings"])


def test_contradictory_time_limits_are_refused():
    with pytest.raises(ProfilerError, match=r"^--min-time 5 exceeds --max-time 0.001: .*; pass a --max-time at least"):
        HostProfiler(min_time_s=5, max_time_s=0.001)
    # The default minimum (1 s) is no contradiction: it yields to a shorter --max-time. An explicit 1 s does not.
    assert HostProfiler(max_time_s=0.5).min_time_s == 0.5
    assert HostProfiler().min_time_s == 1.0
    with pytest.raises(ProfilerError, match=r"^--min-time 1 exceeds --max-time 0.5"):
        HostProfiler(min_time_s=1.0, max_time_s=0.5)


def test_mbk_profile_refuses_contradictory_time_limits(models, mbk):
    code, stdout, stderr = mbk("profile", models["onnx"], "--min-time", "5", "--max-time", "0.001")
    assert code != 0 and stdout == ""
    assert stderr.strip().splitlines() == ["mbk profile: error: --min-time 5 exceeds --max-time 0.001: runs stop at "
                                           "--max-time, so the minimum can never be met; pass a --max-time at least as "
                                           "large as --min-time"]


# --- 4. trial records from the phone -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [
        {"trial": 0, "exit_code": 0, "before": "x", "after": [1, 2]},
        {"trial": 0, "exit_code": 0, "before": {"cpus": [1]}, "after": {"cpus": {"4": "z"}}},
        {"trial": 0, "exit_code": 0, "before": {"zones": {"a": "hot"}, "max_mc": "x"}, "after": {"zones": "q"}},
        {"trial": "x", "exit_code": 0, "cooldown_s": -3, "cooldown_timed_out": "yes", "baseline_mc": float("nan"),
         "before": {"cpus": {"4": {"cur": "1", "max": True, "cap": -5}}, "zones": {"z": 1e300}}, "after": None},
    ],
)
def test_bad_trial_readings_count_as_no_reading(record):
    thermal = trial_thermal(record, [4])
    assert thermal["temp_before_c"] is None and thermal["temp_rise_c"] is None and thermal["throttled"] is False
    assert thermal["freq_before_khz"] == {4: None} and thermal["cap_after_khz"] == {4: None}
    assert all(v is None for v in thermal["zones_before_c"].values())
    assert thermal["baseline_c"] is None or thermal["baseline_c"] == pytest.approx(record["baseline_mc"] / 1000)


def test_trial_record_types_and_ranges():
    assert checked_record({"exit_code": "0"})["exit_code"] == 0  # a numeric string is that number, not a failure
    assert checked_record({"exit_code": "x"})["exit_code"] is None
    assert checked_record({"exit_code": True})["exit_code"] is None
    good = {"trial": 2, "exit_code": 0, "cooldown_s": 4, "cooldown_timed_out": False, "baseline_mc": 40000,
            "before": {"zones": {"cpu": 41000}, "max_mc": 41000, "cpus": {"4": {"cur": 100, "max": 200, "cap": 150}}}}
    thermal = trial_thermal(good, [4])
    assert thermal["temp_before_c"] == 41.0 and thermal["throttled"] and thermal["cooldown_s"] == 4
