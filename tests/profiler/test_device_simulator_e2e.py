"""End-to-end tests of ``mbk profile --target adb`` through the DEVICE SIMULATOR.

No phone is involved: an ``adb`` stand-in on PATH emulates a big.LITTLE
Pixel 3 (two clusters in a fake sysfs, thermal zones that heat up under
load), and the ``benchmark_model`` stand-in really runs the model on the host
with ai-edge-litert and prints the real tool's output format. What these
tests verify is the profiler's side: the mask it chooses, the cooldown and
throttling logic, quoting, clean-up, error paths, parsing and the report.
Latency figures from the simulator are host figures and are marked
``"simulated": true``.
"""

import json
import os
import subprocess
import sys

import pytest

from profiler_testlib import SIM_BENCHMARK_MODEL

# 5 warm-up + 40 timed runs per trial; with 600 mC per run a trial warms the
# simulated SoC by 27 C: from 35 C to 62 C, past the 60 C throttling point.
HOT = {"heat_per_run_mc": 600.0}
RUN = ("--target", "adb", "--benchmark-binary", SIM_BENCHMARK_MODEL, "--runs", "40", "--warmup", "5", "--min-time", "0", "--poll", "2")


def _report(path):
    with open(path) as f:
        return json.load(f)


def test_device_simulator_big_cores_cooldown_throttling_and_report(simulator, models, mbk, tmp_path):
    phone = simulator.add("SIM3A", thermal=HOT)
    out = tmp_path / "r.json"
    html = tmp_path / "r.html"
    code, stdout, stderr = mbk("profile", models["ln_gelu"], *RUN, "--trials", "2", "--cooldown-timeout", "300", "--json", out, "--html", html, "--csv", tmp_path / "r.csv")
    assert code == 0, stderr
    assert "SIMULATED" in stdout
    # Pinning: Pixel 3 big cores are 4-7.
    assert phone.taskset_masks() == ["f0", "f0"]
    report = _report(out)
    assert report["simulated"] is True and not report["incomplete"]
    (result,) = report["results"]
    assert result["simulated"] is True and result["target"] == "adb"
    assert result["config"]["mask"] == "f0" and result["config"]["cpus"] == [4, 5, 6, 7]
    assert result["device"]["model"] == "Pixel 3" and result["device"]["profile"] == "Pixel 3" and result["device"]["abi"] == "arm64-v8a"
    first, second = result["trials"]
    # Parsing: the stand-in prints the tool's format; counts are exactly --runs.
    assert first["count"] == second["count"] == 40
    assert {"level_prefix", "percentiles", "summary", "memory_delta"} <= set(first["output_formats"])
    assert first["latency_ms"]["median"] is not None and first["init_ms"] > 0
    # Thermal: the first trial starts at the baseline and ends hot and capped.
    assert first["cooldown_s"] == 0 and first["baseline_c"] == 35.0
    assert first["temp_after_c"] == pytest.approx(62.0, abs=0.5)
    assert first["throttled"] and first["throttle_reasons"][0] == "cpu4 capped at 1680 MHz of 2800 MHz after the trial"
    # Cooldown: the second trial waited until within 2 C of the baseline, which also lifted the cap.
    assert 40 <= second["cooldown_s"] <= 60 and not second["cooldown_timed_out"]
    assert second["temp_before_c"] <= 37.0
    assert not any("before the trial" in reason for reason in second["throttle_reasons"])
    assert result["throttled"] is True
    assert result["latency_ms"]["count"] == 80 and result["latency_ms"]["trials"] == 2
    assert result["gflops_per_s"] == pytest.approx(result["flops"] / (result["latency_ms"]["median"] / 1e3) / 1e9)
    assert "SIMULATED" in html.read_text()
    # Clean-up: nothing left in /data/local/tmp.
    assert phone.leftover_files() == []


def test_device_simulator_cooldown_time_limit_flags_a_throttled_start(simulator, models, mbk, tmp_path):
    simulator.add("SIM3A", thermal=HOT)
    out = tmp_path / "r.json"
    code, _, stderr = mbk("profile", models["ln_gelu"], *RUN, "--trials", "2", "--cooldown-timeout", "10", "--json", out)
    assert code == 0, stderr
    second = _report(out)["results"][0]["trials"][1]
    assert second["cooldown_timed_out"] and second["cooldown_s"] == 10
    assert second["temp_before_c"] > 50
    assert second["throttled"] and any("before the trial" in reason for reason in second["throttle_reasons"])


def test_device_simulator_core_sets_and_explicit_mask(simulator, models, mbk):
    phone = simulator.add("SIM3A")
    for cores in ("little", "0x30"):
        code, _, stderr = mbk("profile", models["ln_gelu"], *RUN, "--trials", "1", "--cores", cores)
        assert code == 0, stderr
    assert phone.taskset_masks() == ["f", "30"]
    code, _, stderr = mbk("profile", models["ln_gelu"], *RUN, "--cores", "100")
    assert code == 2 and "names cores [8] that are offline or absent" in stderr
    assert phone.leftover_files() == []


def test_device_simulator_paths_are_quoted(simulator, models, mbk, tmp_path):
    phone = simulator.add("SIM3A")
    # File names cannot hold "/", so each injection first goes home (the simulated phone's root).
    weird = tmp_path / "my model; cd; touch INJECTED1; $(cd; touch INJECTED2) `cd; touch INJECTED3` 'q' \"dq\" & x.tflite"
    weird.write_bytes(open(models["ln_gelu"], "rb").read())
    out = tmp_path / "r.json"
    code, _, stderr = mbk("profile", weird, *RUN, "--trials", "1", "--json", out)
    assert code == 0, stderr
    injected = [os.path.join(d, f) for d, _, files in os.walk(tmp_path) for f in files if f.startswith("INJECTED")]
    assert injected == []
    result = _report(out)["results"][0]
    assert result["model"]["name"] == weird.stem and result["trials"][0]["count"] == 40
    graph_flag = next(f for f in result["runtime"]["flags"] if f.startswith("--graph="))
    assert graph_flag.endswith("/" + weird.name)
    assert phone.leftover_files() == []


@pytest.mark.parametrize("payload, fragment", [
    ("[1]", "not a JSON object"),
    ("[" * 50_000, "malformed trial data"),
    ("{bad", "malformed trial data"),
])
def test_device_simulator_trial_data_that_is_not_a_record_is_one_line(simulator, models, mbk, tmp_path, payload,
                                                                       fragment):
    """What the phone prints is parsed data: a list or a 50,000-deep array was an AttributeError / RecursionError."""
    simulator.add("SIM3A", trial_json=payload)
    code, _, stderr = mbk("profile", models["ln_gelu"], *RUN, "--trials", "1")
    assert code == 2 and "Traceback" not in stderr, stderr[-2000:]
    assert fragment in stderr.strip().splitlines()[-1] and "bench_loop.sh intact" in stderr


def test_device_simulator_a_broken_device_profile_of_the_users_is_one_line(simulator, models, mbk, tmp_path,
                                                                          monkeypatch):
    """A phone profile added with MBK_ANDROID_BENCH_DIR was read with a bare json.load and profile["name"]."""
    import shutil

    from sim_device import REPO

    bench = tmp_path / "my_bench"
    shutil.copytree(os.path.join(REPO, "android_bench"), bench)
    (bench / "devices" / "pixel9.json").write_text('{"name": "Pixel 9", "clusters": [{"cpus": ["0-3"]}]}')
    monkeypatch.setenv("MBK_ANDROID_BENCH_DIR", str(bench))
    simulator.add("SIM3A")
    code, _, stderr = mbk("profile", models["ln_gelu"], *RUN, "--trials", "1")
    assert code == 2 and "Traceback" not in stderr, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == (
        f"mbk profile: error: device profile {bench / 'devices' / 'pixel9.json'}: clusters[0].cpus must be a list of "
        "1 to 1024 CPU numbers from 0 to 1023; fix or remove the file")


def test_device_simulator_disconnect_keeps_finished_trials(simulator, models, mbk, tmp_path):
    phone = simulator.add("SIM3A", disconnect_after_trials=2)
    out = tmp_path / "r.json"
    code, _, stderr = mbk("profile", models["ln_gelu"], models["nn_relu"], *RUN, "--trials", "3", "--json", out)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert lines[-1] == (
        "mbk profile: error: device SIM3A disconnected during trial 3 of 3 for ln_gelu.tflite; "
        "2 finished trial(s) are kept in the report; reconnect the phone and re-run"
    )
    assert "Traceback" not in stderr
    report = _report(out)
    assert report["incomplete"] is True and "disconnected" in report["error"]
    (result,) = report["results"]
    assert result["incomplete"] is True and [t["trial"] for t in result["trials"]] == [0, 1]
    assert result["latency_ms"]["count"] == 80
    # The cable went after the second trial: the third never started.
    assert phone.taskset_masks() == ["f0", "f0"]


@pytest.mark.parametrize(
    "state, message",
    [
        ("unauthorized", "mbk profile: error: device SIM3A is unauthorized; unlock the phone and accept the 'Allow USB debugging' prompt, then re-run"),
        ("offline", "mbk profile: error: device SIM3A is offline; reconnect the USB cable (or run `adb reconnect`), then re-run"),
    ],
)
def test_device_simulator_unusable_device_states(simulator, models, mbk, state, message):
    simulator.add("SIM3A", state=state)
    code, _, stderr = mbk("profile", models["ln_gelu"], *RUN)
    assert code == 2 and stderr.strip().splitlines() == [message]


def test_device_simulator_no_device_and_unknown_serial(simulator, models, mbk):
    code, _, stderr = mbk("profile", models["ln_gelu"], *RUN)
    assert code == 2 and "no Android device found by adb" in stderr and len(stderr.strip().splitlines()) == 1
    simulator.add("SIM3A")
    code, _, stderr = mbk("profile", models["ln_gelu"], *RUN, "--serial", "OTHER")
    assert code == 2 and stderr.strip() == "mbk profile: error: device OTHER is not connected (adb sees: SIM3A); pass one of those to --serial"


def test_device_simulator_wrong_abi_binary(simulator, models, mbk, tmp_path):
    phone = simulator.add("SIM3A")
    # An ELF header for x86-64 (e_machine 62), as in linux_x86-64_benchmark_model.
    fake = tmp_path / "linux_x86-64_benchmark_model"
    fake.write_bytes(b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + b"\x02\x00" + (62).to_bytes(2, "little") + b"\x00" * 44)
    code, _, stderr = mbk("profile", models["ln_gelu"], "--target", "adb", "--benchmark-binary", fake)
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert "is built for x86_64 but device SIM3A runs arm64-v8a, armeabi-v7a, armeabi" in stderr
    assert "android_aarch64_benchmark_model" in stderr
    # Nothing was pushed.
    assert not any("push" in call for call in simulator.adb_calls())
    assert phone.leftover_files() == []


def test_device_simulator_two_phones_in_parallel(simulator, models, mbk, tmp_path):
    first = simulator.add("SIM3A")
    second = simulator.add("SIM8P", profile="pixel8")
    out = tmp_path / "r.json"
    code, stdout, stderr = mbk("profile", models["ln_gelu"], *RUN, "--trials", "1", "--serial", "SIM3A,SIM8P", "--json", out)
    assert code == 0, stderr
    results = _report(out)["results"]
    assert [(r["device"]["serial"], r["config"]["mask"]) for r in results] == [("SIM3A", "f0"), ("SIM8P", "1f0")]
    assert first.taskset_masks() == ["f0"] and second.taskset_masks() == ["1f0"]
    code, stdout, _ = mbk("profile", "--target", "adb", "--list-devices")
    assert code == 0 and "SIM3A" in stdout and "SIM8P" in stdout and "SIMULATED" in stdout


def test_device_simulator_op_profile_and_float_mask_inputs(simulator, models, mbk, tmp_path):
    simulator.add("SIM3A")
    out = tmp_path / "r.json"
    code, _, stderr = mbk("profile", models["ln_gelu_int8"], *RUN, "--trials", "1", "--op-profile", "--json", out)
    assert code == 0, stderr
    result = _report(out)["results"][0]
    assert result["precision"] == "dynamic-int8"
    # The simulated tool has no op tables; the profiler reports an empty profile rather than inventing one, and
    # says why: the report showed an empty table with no word that the tool had printed none.
    assert result["op_profile"] == [] and "enable_op_profiling" in result["op_profile_source"]
    assert any("printed no per-op table" in w and "op profile is empty" in w for w in result["warnings"])
    code, _, stderr = mbk("profile", models["onnx"], *RUN)
    assert code == 2 and "runs .tflite files with benchmark_model" in stderr


def test_device_simulator_frequency_lock_needs_root(simulator, models, mbk):
    phone = simulator.add("SIM3A")
    code, _, stderr = mbk("profile", models["ln_gelu"], *RUN, "--lock-freq", "max")
    assert code == 2 and stderr.strip().splitlines() == [
        "mbk profile: error: device SIM3A: frequency locking needs root: run 'adb root' (userdebug/eng builds) or leave out --lock-freq"
    ]
    assert phone.leftover_files() == []


def test_device_simulator_frequency_lock_on_a_rooted_phone(simulator, models, mbk, tmp_path):
    phone = simulator.add("SIM3A", rooted=True)
    out = tmp_path / "r.json"
    code, _, stderr = mbk("profile", models["ln_gelu"], *RUN, "--trials", "1", "--lock-freq", "max", "--json", out)
    assert code == 0, stderr
    # During the run the big cores' floor was their maximum; afterwards the old floor is back.
    assert phone.taskset_log() == [("f0", 2800000)]
    assert phone.read_sys("devices/system/cpu/cpu4/cpufreq/scaling_min_freq") == "300000"
    assert _report(out)["results"][0]["config"]["lock_freq"] == "max"


def test_device_simulator_python_keeps_the_tests_environment(simulator):
    # The phone's python3 must see the same packages as the test run (a venv included): a symlink to a
    # venv's python loses the venv and ai_edge_litert with it (issue 12).
    phone = simulator.add("SIMPY")
    python3 = os.path.join(phone.fs, "system", "bin", "python3")
    code = "import sys, ai_edge_litert; print(sys.prefix)"
    done = subprocess.run([python3, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == sys.prefix
