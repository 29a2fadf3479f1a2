"""``mbk profile --target adb`` driving LiteRT's ``benchmark_litert_model`` through the DEVICE SIMULATOR.

The stand-in (``simulator/fake_benchmark_litert_model.py``) takes only the new
tool's flags, runs the file with ai-edge-litert's CompiledModel on the host,
prints the tool's results block and writes its binary result file. What is
checked is the profiler's side, as for benchmark_model: the same pinning,
cool-down, throttle detection and statistics, and the result file read back.
Every figure here is a host figure, marked ``"simulated": true``.
"""

import json
import struct

import pytest

from mobilebert_kit.profiler.bench_parser import merge_benchmark_result, parse_benchmark_output, parse_benchmark_result
from mobilebert_kit.profiler.benchmark_binary import BENCHMARK_TOOLS, tool_of
from mobilebert_kit.profiler.errors import BenchmarkParseError
from profiler_testlib import SIM_BENCHMARK_LITERT_MODEL, SIM_BENCHMARK_MODEL

HOT = {"heat_per_run_mc": 600.0}
RUN = ("--target", "adb", "--benchmark-binary", SIM_BENCHMARK_LITERT_MODEL, "--runs", "40", "--warmup", "5",
       "--min-time", "0", "--poll", "2")


def test_the_binary_says_which_tool_it_is(tmp_path):
    assert tool_of(SIM_BENCHMARK_LITERT_MODEL) is BENCHMARK_TOOLS["benchmark_litert_model"]
    assert tool_of(SIM_BENCHMARK_MODEL) is BENCHMARK_TOOLS["benchmark_model"]
    renamed = tmp_path / "bench"
    renamed.write_bytes(b"\x7fELF" + b"\0" * 40 + b"--use_npu\0")  # a renamed build: its own flag name tells
    assert tool_of(renamed).name == "benchmark_litert_model"


def test_litert_tool_on_the_simulator_pins_cools_detects_throttling_and_reads_its_result(simulator, models, mbk, tmp_path):
    phone = simulator.add("SIM3A", thermal=HOT)
    out = tmp_path / "r.json"
    code, stdout, stderr = mbk("profile", models["any_ids"], *RUN, "--trials", "2", "--cooldown-timeout", "300",
                               "--json", out)
    assert code == 0, stderr
    assert "SIMULATED" in stdout
    assert phone.taskset_masks() == ["f0", "f0"]  # the big cores, as for benchmark_model
    (result,) = json.loads(out.read_text())["results"]
    assert result["simulated"] is True
    assert result["runtime"]["name"] == "benchmark_litert_model" and result["runtime"]["api"] == "CompiledModel"
    flags = result["runtime"]["flags"]
    assert "--use_cpu=true" in flags and any(f.startswith("--result_file_path=") for f in flags)
    assert not [f for f in flags if f.startswith("--input_layer")]
    first, second = result["trials"]
    assert first["count"] == second["count"] == 40
    # The median and p5/p95 come only from the result file; the log prints avg/min/max/std.
    assert {"litert_results", "result_file"} <= set(first["output_formats"])
    assert first["latency_ms"]["median"] is not None and first["latency_ms"]["p95"] >= first["latency_ms"]["median"]
    assert first["init_ms"] > 0 and first["first_inference_ms"] > 0
    assert first["throttled"] and 40 <= second["cooldown_s"] <= 60
    assert any("random ids in [0, 99]" in w for w in result["warnings"])


def test_a_file_the_tools_random_inputs_break_fails_in_one_line_with_the_reason(simulator, models, mbk):
    simulator.add("SIM3A")
    code, _, stderr = mbk("profile", models["ln_gelu"], *RUN, "--trials", "1")
    assert code != 0 and "Traceback" not in stderr
    assert "benchmark_litert_model failed on ln_gelu.tflite" in stderr
    assert "time this file with benchmark_model" in stderr


@pytest.mark.parametrize(("extra", "message"), [
    (("--delegate", "none"), "benchmark_litert_model cannot run --delegate none"),
    ((), "cannot set input shapes"),
])
def test_what_the_litert_tool_cannot_do_is_refused_in_one_line(simulator, models, mbk, extra, message):
    simulator.add("SIM3A")
    code, _, stderr = mbk("profile", models["dynamic" if not extra else "any_ids"], *RUN, "--trials", "1", *extra)
    assert code != 0 and message in stderr and "Traceback" not in stderr


def test_result_file_reader_and_merge():
    latency = struct.pack("<BfBfBf", 1 << 3 | 5, 2.0, 5 << 3 | 5, 1.5, 7 << 3 | 5, 3.0)
    data = bytes([1 << 3 | 2, 3]) + b"abc" + bytes([2 << 3 | 2, len(latency)]) + latency + bytes([4 << 3 | 2, 2, 2 << 3, 40])
    result = parse_benchmark_result(data)
    assert result["name"] == "abc" and result["misc"] == {"num_runs": 40}
    assert result["latency"] == {"avg_ms": 2.0, "median_ms": 1.5, "p95_ms": 3.0}
    log = parse_benchmark_output("INFO: ========== BENCHMARK RESULTS ==========\nINFO: Inference (avg): 2.00 ms (40 runs)\n")
    latency_ms = merge_benchmark_result(log, result).latency_ms()
    assert (latency_ms["avg"], latency_ms["median"], latency_ms["count"]) == (2.0, 1.5, 40)
    for cut in (data[:-3], data[:-1]):  # inside a length-delimited field; inside a number
        with pytest.raises(BenchmarkParseError, match="benchmark result file: "):
            parse_benchmark_result(cut)
