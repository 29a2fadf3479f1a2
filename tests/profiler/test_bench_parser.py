"""Parser tests on real benchmark_model output (fixtures/benchmark_model, see SOURCES.md) and fuzzing."""

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobilebert_kit.profiler.bench_parser import parse_benchmark_output
from mobilebert_kit.profiler.errors import BenchmarkParseError

from profiler_testlib import FIXTURES


def fixture_text(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


ALL_FIXTURES = sorted(f for f in os.listdir(FIXTURES) if f.endswith(".txt"))

# Expected figures, copied by hand from each log (ms): avg, count, init, first inference, median.
EXPECTED = {
    "tf28_riscv_qemu_op_profiling.txt": (2950.34, 50, 17.187, 3512.391, None),
    "tf24_android_mi11_cpu_fp32.txt": (249.684, 50, 16.242, 360.262, None),
    "tf24_android_mi11_cpu_int8.txt": (95.7883, 50, 1.779, 152.949, None),
    "tf24_android_mi11_nnapi_op_profiling.txt": (158.715, 50, None, None, None),
    "tf2x_info_prefix_percentiles_cpu.txt": (105.784, 50, 87.639, 106.436, 105.718),
    "tf2x_info_prefix_percentiles_gpu.txt": (115.246, 50, 1361.236, 125.113, 115.35),
    "tf2x_x86_info_prefix_op_profiling_excerpt.txt": (15.5176, 64, 32.163, 19.834, None),
    "litert_sme2_results_block_op_profiling.txt": (0.464545, 2112, 4.48, 1.03, 0.462),
    "litert_build_instructions_results_block.txt": (0.947132, 1054, 5.76, 2.12, 0.942),
    "tf112_legacy_no_stats.txt": (137.722, 50, 4.452, 146.161, None),
    "tf114_android_taskset_op_profiling_spaces_excerpt.txt": (115.062, 50, 1.892, 91.81, None),
    "tf115_android_apk_logcat_legacy.txt": (80.6601, None, 4.108, None, None),
    "tf2x_periodic_peak_memory_lines.txt": (56.2658, 1061, 3.337, 81.913, None),
    "tf2x_logcat_tflite_prefix_lines.txt": (145.528, 25, 92.318, 187.533, 141.253),
    "tf2x_ti_am62_xnnpack_off_indented.txt": (971.535, 50, 6.418, 1041.765, None),
}


def test_every_fixture_has_expectations_and_a_source():
    with open(os.path.join(FIXTURES, "SOURCES.md")) as f:
        sources = f.read()
    for name in ALL_FIXTURES:
        assert name in sources, f"{name} has no provenance note in SOURCES.md"
    assert set(EXPECTED) | {"tf24_android_mi11_nnapi_failure.txt", "tf2x_memory_status_tail.txt"} == set(ALL_FIXTURES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_logs_give_their_figures(name):
    avg, count, init, first, median = EXPECTED[name]
    log = parse_benchmark_output(fixture_text(name))
    latency = log.latency_ms()
    assert latency["avg"] == pytest.approx(avg, rel=1e-6)
    assert latency["count"] == count
    assert log.init_ms() == (None if init is None else pytest.approx(init, rel=1e-6))
    assert log.first_inference_ms() == (None if first is None else pytest.approx(first, rel=1e-6))
    assert latency["median"] == (None if median is None else pytest.approx(median, rel=1e-6))
    assert not log.failed


def test_warmup_and_timed_phases_are_told_apart():
    log = parse_benchmark_output(fixture_text("tf2x_info_prefix_percentiles_cpu.txt"))
    assert log.warmup["count"] == 5 and log.warmup["avg"] == 106065
    assert log.inference["count"] == 50 and log.inference["p95"] == 106281
    assert [p["min_runs"] for p in log.phases] == [1, 50]
    assert log.phases[1]["max_secs"] == 150
    assert {"level_prefix", "percentiles", "summary", "memory_delta"} <= log.formats


def test_memory_lines_in_every_dialect():
    assert parse_benchmark_output(fixture_text("tf28_riscv_qemu_op_profiling.txt")).memory == {"init_mb": 4.21094, "overall_mb": 46.0859}
    assert parse_benchmark_output(fixture_text("tf24_android_mi11_cpu_fp32.txt")).memory == {"init_mb": 4.92969, "overall_mb": 138.809}
    assert parse_benchmark_output(fixture_text("tf2x_periodic_peak_memory_lines.txt")).memory == {"peak_mb": 93.2383}
    litert = parse_benchmark_output(fixture_text("litert_sme2_results_block_op_profiling.txt"))
    assert litert.memory == {"init_mb": 8.94, "overall_mb": 11.51}
    assert litert.litert["throughput_mb_s"] == 525.55 and litert.litert["inference_runs"] == 2112
    tail = parse_benchmark_output(fixture_text("tf2x_memory_status_tail.txt"), require_result=False)
    assert tail.memory == {"init_mb": 2.43359, "overall_mb": 8.67578, "peak_mb": 13.1797, "vm_rss_mb": 13, "rss_anon_mb": 7, "rss_file_shmem_mb": 6}


def test_a_memory_tail_alone_is_not_a_result():
    with pytest.raises(BenchmarkParseError, match="no benchmark result"):
        parse_benchmark_output(fixture_text("tf2x_memory_status_tail.txt"))


def test_op_profiling_tables_tab_separated_with_start_column():
    log = parse_benchmark_output(fixture_text("tf28_riscv_qemu_op_profiling.txt"))
    regular = log.op_profiles["regular"]
    assert len(regular["run_order"]) == 31 and len(regular["top_by_time"]) == 10
    assert regular["nodes_executed"] == 31 and regular["nodes_observed"] == 31
    first = regular["run_order"][0]
    assert first == {
        "node_type": "CONV_2D", "start_ms": 0.066, "first_ms": 87.754, "avg_ms": 60.957, "pct": 2.066, "cdf_pct": 2.066,
        "mem_kb": 0.0, "times_called": 1, "name": "[MobilenetV1/MobilenetV1/Conv2d_0/Relu6]:0",
    }
    summary = log.op_summary()
    assert [r["node_type"] for r in summary] == ["CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "SOFTMAX", "SQUEEZE"]
    assert summary[0]["count"] == 15 and summary[0]["avg_ms"] == 2651.853
    assert regular["timings_us"]["avg"] == 2.9499e06
    assert log.op_profiles["initialization"]["run_order"][0]["node_type"] == "AllocateTensors"


def test_op_profiling_tables_space_separated_names_with_spaces():
    log = parse_benchmark_output(fixture_text("tf2x_x86_info_prefix_op_profiling_excerpt.txt"))
    rows = log.op_profiles["regular"]["run_order"]
    assert "start_ms" not in rows[0]
    post = next(r for r in rows if r["node_type"] == "TFLite_Detection_PostProcess")
    assert post["name"].startswith("[StatefulPartitionedCall:3, StatefulPartitionedCall:2")
    assert log.op_summary()[0] == {
        "node_type": "Convolution (NHWC, QC8) GEMM", "count": 62, "avg_ms": 5.236, "pct": 34.361, "cdf_pct": 34.361, "mem_kb": 0.0, "times_called": 101
    }
    assert log.op_profiles["initialization"]["by_node_type"][0]["node_type"] == "ModifyGraphWithDelegate"


def test_litert_tables_without_section_headers_and_delegation_line():
    log = parse_benchmark_output(fixture_text("litert_sme2_results_block_op_profiling.txt"))
    assert log.op_summary()[0]["node_type"] == "Fully Connected (NC, PF32) GEMM"
    assert log.delegation == [{"delegate": "TfLiteXNNPackDelegate", "replaced": 1, "total": 1, "partitions": 1}]
    assert log.op_profiles["regular"]["timings_us"]["count"] == 3166


def test_profile_excerpt_without_summary_falls_back_to_profiler_timings():
    log = parse_benchmark_output(fixture_text("tf24_android_mi11_nnapi_op_profiling.txt"))
    assert log.latency_ms()["avg"] == pytest.approx(158.715)
    assert log.op_summary()[0]["node_type"] == "TfLiteNnapiDelegate"


def test_a_failed_run_reports_its_error():
    log = parse_benchmark_output(fixture_text("tf24_android_mi11_nnapi_failure.txt"))
    assert log.failed
    assert log.errors[0].startswith("NN API returned error ANEURALNETWORKS_OP_FAILED")
    assert "Benchmarking failed." in log.errors
    assert log.params["NNAPI accelerator name"] == "qti-default"


def test_params_and_model_size():
    log = parse_benchmark_output(fixture_text("tf2x_ti_am62_xnnpack_off_indented.txt"))
    assert log.params["Use xnnpack"] == "0" and log.params["Num threads"] == "4"
    assert log.model_size_mb == 67.3128
    assert log.warmup == {"count": 1, "first": 1041765.0, "curr": 1041765.0, "min": 1041765.0, "max": 1041765.0, "avg": 1041765.0, "std": 0.0}


# The "(all same)" and old "curr= count=" forms come from tsl/util/stats_calculator.h
# (Stat::OutputToStream); no public log with them was found, so they are spelled
# here from that source rather than stored as fixtures.
def test_all_same_and_old_stat_orders():
    log = parse_benchmark_output("Running benchmark for at least 5 iterations\ncount=5 curr=812(all same)\n")
    assert log.inference == {"count": 5, "first": 812.0, "curr": 812.0, "min": 812.0, "max": 812.0, "avg": 812.0, "std": 0.0}
    assert "all_same" in log.formats
    old = parse_benchmark_output("curr=100 count=3 min=90 max=110 avg=100 std=8\n")
    assert old.inference["avg"] == 100 and old.inference["count"] == 3


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "no benchmark result"),
        ("hello world\nthis is not a benchmark", "no benchmark result"),
        ("count=50 first=1 curr=1 min=9 max=1 avg=5 std=1\n", "inconsistent stats"),
        ("count=5 curr=7\n", "only curr="),
        ("Inference timings in us: Init: 1e999, First inference: 2, Warmup (avg): 3, Inference (avg): 4\n", "not finite"),
        ("============================== Run Order ==============================\n\t[node type]\t[avg ms]\t[Name]\n\tCONV_2D\tabc\tx\n", "not a number"),
        ("============================== Run Order ==============================\nno header here\n", "column header"),
        ("abc\x00def\n", "binary data"),
    ],
)
def test_garbage_gives_a_clear_parse_error(text, message):
    with pytest.raises(BenchmarkParseError, match=message):
        parse_benchmark_output(text)


def _check_never_crashes(text):
    try:
        log = parse_benchmark_output(text)
    except BenchmarkParseError as err:
        assert str(err).startswith("cannot parse benchmark_model output")
        return
    log.latency_ms()
    log.init_ms()
    log.first_inference_ms()
    log.op_summary()


_FRAGMENTS = st.sampled_from(
    [
        "count=", "first=", "curr=", "avg=", "std=", "min=", "max=", "p5=", "median=", "p95=", "INFO: ", "ERROR: ", "=====",
        " Run Order ", " Summary by node type ", "[node type]", "[Name]", "\t", "  ", "\n", "Inference timings in us: Init: ",
        ", First inference: ", "Running benchmark for at least ", "(all same)", "1", "0", "-3", "2.5e+06", "nan", "inf", "%",
        "Memory footprint delta from the start of the tool (MB): init=", " overall=", "========== BENCHMARK RESULTS ==========",
        "Inference (avg): ", " ms (", " runs)", "Timings (microseconds): ", "Number of nodes executed: ", "I tflite  : ",
    ]
)


@settings(max_examples=300, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_FRAGMENTS, max_size=60).map("".join))
def test_fuzz_token_soup_never_crashes(text):
    _check_never_crashes(text)


@settings(max_examples=200, database=None, deadline=None)
@given(st.text(max_size=400))
def test_fuzz_arbitrary_text_never_crashes(text):
    _check_never_crashes(text)


@settings(max_examples=100, database=None, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_bytes_never_crash(data):
    _check_never_crashes(data)


@settings(max_examples=300, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(ALL_FIXTURES),
    seed=st.integers(0, 2**31 - 1),
    edits=st.lists(st.tuples(st.sampled_from(["drop", "dup", "swap", "cut", "garble", "truncate"]), st.integers(0, 10**6)), max_size=6),
)
def test_fuzz_mutated_real_logs_never_crash(name, seed, edits):
    import random

    lines = fixture_text(name).splitlines()
    rng = random.Random(seed)
    for kind, where in edits:
        if not lines:
            break
        i = where % len(lines)
        if kind == "drop":
            del lines[i]
        elif kind == "dup":
            lines.insert(i, lines[i])
        elif kind == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "cut":
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        elif kind == "garble" and lines[i]:
            k = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:k] + rng.choice("x9.\t=:[]%-e ") + lines[i][k + 1:]
        elif kind == "truncate":
            lines = lines[:i]
    _check_never_crashes("\n".join(lines))
