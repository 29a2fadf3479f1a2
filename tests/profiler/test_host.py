"""The host profiler: ai-edge-litert and onnxruntime runs, pinning, loop rules, figures, errors."""

import json
import os
import subprocess
import sys

import pytest

from mobilebert_kit.errors import ConfigError
from mobilebert_kit.profiler.errors import ProfilerError
from mobilebert_kit.profiler.host import HostProfiler, onnx_op_summary
from mobilebert_kit.profiler.stats import summarize

QUICK = {"runs": 12, "warmup": 2, "min_time_s": 0.0}


def test_tflite_run_has_every_figure(models):
    # 100 runs: p99 needs that many (stats.MIN_COUNT); fewer leave it n/a.
    result = HostProfiler(threads=1, runs=100, warmup=2, min_time_s=0.0).profile(models["ln_gelu"])
    latency = result["latency_ms"]
    assert latency["count"] == len(result["samples_ms"]) >= 100
    assert latency == summarize(result["samples_ms"])
    assert latency["min"] <= latency["median"] <= latency["p90"] <= latency["p99"] <= latency["max"]
    assert result["init_ms"] > 0 and result["first_inference_ms"] > 0 and result["peak_rss_mb"] > 0
    assert result["gflops_per_s"] == pytest.approx(result["flops"] / (latency["median"] / 1e3) / 1e9)
    assert (result["precision"], result["variant"], result["seq_len"]) == ("float32", "LayerNorm+GELU", 16)
    assert result["runtime"]["name"] == "ai-edge-litert" and not result["simulated"]


def test_xnnpack_switch_changes_the_execution_plan(models):
    # The Interpreter's execution plan (delegate nodes); CompiledModel's kernel mode is in test_compiled_model.
    on = HostProfiler(delegate="xnnpack", runtime="interpreter", **QUICK).profile(models["ln_gelu"])
    off = HostProfiler(delegate="none", runtime="interpreter", **QUICK).profile(models["ln_gelu"])
    assert on["runtime"]["op_resolver"] == "AUTO" and on["runtime"]["delegate_nodes"] >= 1
    assert off["runtime"]["op_resolver"] == "BUILTIN_WITHOUT_DEFAULT_DELEGATES" and off["runtime"]["delegate_nodes"] == 0


def test_runs_until_both_count_and_time_are_reached(models):
    by_count = HostProfiler(runs=7, warmup=1, min_time_s=0.0).profile(models["ln_gelu"])
    assert by_count["latency_ms"]["count"] == 7
    by_time = HostProfiler(runs=2, warmup=1, min_time_s=0.2).profile(models["ln_gelu"])
    assert by_time["trials"][0]["duration_s"] >= 0.2 and by_time["latency_ms"]["count"] > 2


def test_dynamic_model_runs_at_the_requested_length(models):
    result = HostProfiler(**QUICK).profile(models["dynamic"], seq_len=48)
    assert result["seq_len"] == 48
    short = HostProfiler(**QUICK).profile(models["dynamic"], seq_len=8)
    assert result["flops"] > short["flops"]


def test_onnx_run_with_options_and_op_profile(models):
    profiler = HostProfiler(threads=1, inter_op_threads=1, graph_optimization="basic", op_profile=True, profile_runs=3, **QUICK)
    result = profiler.profile(models["onnx"], seq_len=32)
    assert result["runtime"] == {
        "name": "onnxruntime", "version": result["runtime"]["version"], "provider": "CPUExecutionProvider",
        "threads": 1, "inter_op_threads": 1, "graph_optimization": "basic",
    }
    ops = {row["node_type"]: row for row in result["op_profile"]}
    assert ops["MatMul"]["count"] >= 10 and ops["MatMul"]["avg_ms"] > 0
    assert sum(r["pct"] for r in result["op_profile"]) == pytest.approx(100.0)


def test_onnx_float_mask_model(models):
    result = HostProfiler(**QUICK).profile(models["onnx16_float_mask"])
    assert result["seq_len"] == 16 and result["latency_ms"]["median"] > 0


def test_onnx_op_summary_skips_warmup_and_uses_medians():
    events = [
        {"cat": "Session", "name": "model_run", "ts": 0, "dur": 100},
        {"cat": "Node", "name": "mm_kernel_time", "ts": 10, "dur": 999, "args": {"op_name": "MatMul"}},
        {"cat": "Session", "name": "model_run", "ts": 200, "dur": 50},
        {"cat": "Node", "name": "mm_kernel_time", "ts": 210, "dur": 30, "args": {"op_name": "MatMul"}},
        {"cat": "Node", "name": "add_kernel_time", "ts": 240, "dur": 10, "args": {"op_name": "Add"}},
        {"cat": "Session", "name": "model_run", "ts": 300, "dur": 50},
        {"cat": "Node", "name": "mm_kernel_time", "ts": 310, "dur": 34, "args": {"op_name": "MatMul"}},
        {"cat": "Node", "name": "add_kernel_time", "ts": 340, "dur": 10, "args": {"op_name": "Add"}},
    ]
    rows = onnx_op_summary(events, runs=2, skip_runs=1)
    assert rows[0] == {"node_type": "MatMul", "count": 1, "avg_ms": 0.032, "pct": pytest.approx(76.19, abs=0.01), "times_called": 1}
    assert rows[1]["node_type"] == "Add"


def test_pinning_restores_the_affinity(models):
    before = os.sched_getaffinity(0)
    cpu = min(before)
    result = HostProfiler(cores=format(1 << cpu, "x"), **QUICK).profile(models["ln_gelu"])
    assert result["config"]["cpus"] == [cpu]
    assert os.sched_getaffinity(0) == before


def test_timed_loop_runs_on_the_pinned_core(models, monkeypatch):
    import mobilebert_kit.profiler.host as host

    seen = []
    real = host.HostProfiler._loop

    def spy(self, call, *runs):
        seen.append(os.sched_getaffinity(0))
        return real(self, call, *runs)

    monkeypatch.setattr(host.HostProfiler, "_loop", spy)
    cpu = max(os.sched_getaffinity(0))
    HostProfiler(cores=format(1 << cpu, "x"), **QUICK).profile(models["onnx"])
    assert seen == [{cpu}]


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"delegate": "gpu"}, ProfilerError, "runs on a phone only"),
        ({"delegate": "tpu"}, ConfigError, "unknown delegate 'tpu'; valid values: 'xnnpack', 'none'"),
        ({"graph_optimization": "max"}, ConfigError, "valid values: 'all', 'extended', 'basic', 'disabled'"),
        ({"threads": 0}, ProfilerError, "threads must be at least 1"),
        ({"cores": "zz"}, ConfigError, "unknown core set 'zz'"),
    ],
)
def test_bad_options(kwargs, error, message):
    with pytest.raises(error, match=message):
        HostProfiler(**kwargs)


def test_fixed_length_model_at_another_length(models):
    with pytest.raises(ProfilerError, match="fixed sequence length 16"):
        HostProfiler(**QUICK).profile(models["ln_gelu"], seq_len=64)


def test_flops_override(models):
    result = HostProfiler(flops=1e9, **QUICK).profile(models["ln_gelu"])
    assert result["flops"] == 10**9 and result["flops_source"].startswith("override")


def test_tflite_op_profile_through_a_host_benchmark_binary(models, tmp_path):
    # A stand-in for a host-built benchmark_model that prints a real op-profiling log
    # (fixtures: TF 2.8 on qemuriscv64); it checks the plumbing, not the numbers.
    from profiler_testlib import FIXTURES

    script = tmp_path / "benchmark_model"
    script.write_text(f'#!/bin/sh\ncat "{os.path.join(FIXTURES, "tf28_riscv_qemu_op_profiling.txt")}"\n')
    script.chmod(0o755)
    result = HostProfiler(op_profile=True, benchmark_binary=str(script), **QUICK).profile(models["ln_gelu"])
    assert result["op_profile"][0]["node_type"] == "CONV_2D"
    assert "enable_op_profiling" in result["op_profile_source"]
    without = HostProfiler(op_profile=True, **QUICK).profile(models["ln_gelu"])
    assert without["op_profile"] is None and any("--benchmark-binary" in w for w in without["warnings"])


def test_the_profiler_never_imports_tensorflow(models):
    code = (
        "import sys\n"
        "from mobilebert_kit.cli.main import main\n"
        f"rc = main(['profile', {models['ln_gelu']!r}, {models['onnx']!r}, '--runs', '3', '--warmup', '1', '--min-time', '0'])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'tf_keras', 'keras') or m.startswith('mobilebert_kit.models'))\n"
        "print('IMPORTED', bad)\n"
        "sys.exit(rc)\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert "IMPORTED []" in completed.stdout


def test_cli_host_end_to_end(models, tmp_path, mbk):
    out = tmp_path / "r.json"
    code, stdout, stderr = mbk("profile", models["ln_gelu"], models["onnx"], "--target", "host", "--runs", "5", "--warmup", "1",
                               "--min-time", "0", "--seq-len", "16", "--json", out, "--threads", "1", "--cores", "all")
    assert code == 0, stderr
    report = json.loads(out.read_text())
    assert [r["model"]["name"] for r in report["results"]] == ["ln_gelu", "tiny"]
    assert "ln_gelu" in stdout and "median ms" in stdout


def test_a_length_named_twice_is_timed_once(models, tmp_path, mbk):
    """``--seq-len 16,16``: two rows of length 16 in one report would read as two different measurements."""
    out = tmp_path / "r.json"
    code, _, stderr = mbk("profile", models["ln_gelu"], "--runs", "2", "--warmup", "1", "--min-time", "0",
                          "--seq-len", "16,16", "--json", out)
    assert code == 0, stderr
    assert [r["seq_len"] for r in json.loads(out.read_text())["results"]] == [16]


def test_a_phone_option_without_target_adb_is_refused(models, tmp_path, mbk):
    """``--serial ABC`` (or ``--lock-freq``) without ``--target adb`` timed the host under a command naming a phone."""
    for option in (("--serial", "ABC123"), ("--lock-freq", "max")):
        out = tmp_path / "r.json"
        code, _, stderr = mbk("profile", models["ln_gelu"], *option, "--runs", "2", "--min-time", "0", "--json", out)
        assert code == 2 and stderr.count("\n") == 1, stderr
        assert f"{option[0]} is an option of a phone" in stderr and "--target adb" in stderr
        assert not out.exists()


def test_cli_corrupt_model_is_one_line(tmp_path, mbk):
    bad = tmp_path / "broken.tflite"
    bad.write_bytes(b"\x00" * 64)
    out = tmp_path / "r.json"
    code, stdout, stderr = mbk("profile", bad, "--json", out)
    assert code == 2
    assert stderr.count("\n") == 1 and stderr.startswith("mbk profile: error: ") and "not a TFLite flatbuffer" in stderr
    assert "Traceback" not in stderr and not out.exists()


def test_a_dynamic_onnx_export_profiles_within_its_position_table(tmp_path):
    """ONNX exports are dynamic by default; the profiler's default 128 must not overrun a 64-row table."""
    from mobilebert_kit.convert.exporter import ExportOptions, export
    from mobilebert_kit.profiler.host import HostProfiler

    out = tmp_path / "tiny.onnx"
    export(ExportOptions("tiny-bert", "onnx", "none", out=str(out), validate=False), log=None)
    result = HostProfiler(runs=3, warmup=1, min_time_s=0.0, max_time_s=5.0).profile(str(out))
    assert result["seq_len"] == 64, result["seq_len"]


def test_a_default_export_is_timed_at_the_length_it_was_exported_at(tmp_path, mbk):
    """Issue 44 item 3: ``mbk export ... --seq-len 32`` then ``mbk profile`` timed the file at 64 (the profiler's own
    rule); the length is read where the export wrote it (``artifacts.metadata.planned_length``)."""
    out, report = tmp_path / "e.tflite", tmp_path / "p.json"
    code, _, stderr = mbk("export", "tiny-bert", "--task", "embedding", "--pooling", "mean", "--seq-len", "32",
                          "--no-validate", "--out", out)
    assert code == 0, stderr
    code, _, stderr = mbk("profile", out, "--runs", "3", "--warmup", "1", "--min-time", "0", "--json", report)
    assert code == 0, stderr
    assert [r["seq_len"] for r in json.loads(report.read_text())["results"]] == [32]


def test_a_file_without_a_plan_runs_at_its_own_static_length(models):
    """A file that records no plan (the fixtures carry no ``mbk_metadata``) runs at the length its inputs fix."""
    from mobilebert_kit.profiler.host import HostProfiler

    assert HostProfiler(**QUICK).profile(models["ln_gelu"])["seq_len"] == 16
