"""The host profiler on LiteRT's CompiledModel: the runtime table's choice, its fallbacks, equal outputs."""

import os
import subprocess
import sys

import numpy as np
import pytest

from mobilebert_kit.artifacts.runner import ArtifactRunner, load_compiled_model, load_tflite
from mobilebert_kit.artifacts.runtimes import TFLITE_RUNTIMES, choose_tflite_runtime
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.profiler.host import HostProfiler

QUICK = {"runs": 5, "warmup": 1, "min_time_s": 0.0}


def _feeds(shape, seed=0):
    """Token ids below the fixtures' vocabulary, a mask with padding, segment ids 0/1."""
    rng = np.random.default_rng(seed)
    mask = np.ones(shape, np.int32)
    mask[..., shape[-1] // 2 + 1:] = 0
    return {"input_ids": rng.integers(1, 50, shape).astype(np.int32), "attention_mask": mask,
            "token_type_ids": (np.arange(shape[-1]) >= 4).astype(np.int32) * np.ones(shape, np.int32)}


def test_every_record_says_why_it_lacks_a_capability():
    for runtime in TFLITE_RUNTIMES.values():
        lacking = [c for c in ("available", "dynamic_shapes", "preserve_all_tensors", "quantized_io", "int16_guard",
                                "repeated_output_names")
                   if not getattr(runtime, c)]
        assert set(lacking) <= set(runtime.why_not), runtime.name
    interpreter = TFLITE_RUNTIMES["interpreter"]
    assert interpreter.dynamic_shapes and interpreter.preserve_all_tensors and not interpreter.why_not


@pytest.mark.parametrize(("requested", "needs", "chosen", "warned"), [
    ("auto", {}, "compiled_model", False),
    ("auto", {"dynamic": True}, "interpreter", True),
    ("auto", {"preserve_all_tensors": True}, "interpreter", True),
    ("auto", {"repeated_output_names": True}, "interpreter", True),
    ("compiled-model", {"quantized_io": True}, "interpreter", True),
    ("interpreter", {}, "interpreter", False),
    ("compiled_model", {"delegate": "none"}, "compiled_model", False),
])
def test_the_choice_is_made_once_from_the_table(requested, needs, chosen, warned):
    choice = choose_tflite_runtime(requested, **needs)
    assert choice.runtime.name == chosen and bool(choice.warnings) == warned


def test_an_unknown_runtime_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="valid values: 'auto', 'interpreter', 'compiled_model'"):
        HostProfiler(runtime="gpu")


@pytest.mark.parametrize("name", ["ln_gelu", "ln_gelu_int8", "nn_relu"])
@pytest.mark.parametrize("delegate", ["xnnpack", "none"])
def test_compiled_model_outputs_equal_the_interpreters(models, name, delegate):
    compiled = load_compiled_model(models[name], num_threads=1, delegate=delegate)
    interpreter = load_tflite(models[name], num_threads=1, delegate=delegate)
    feeds = _feeds(compiled.input_details[0]["shape"])
    compiled.set_inputs(feeds)
    compiled.invoke()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], feeds[detail["name"]])
    interpreter.invoke()
    ours = compiled.outputs()
    for detail in interpreter.get_output_details():
        np.testing.assert_array_equal(ours[detail["name"]], interpreter.get_tensor(detail["index"]))


def test_host_profile_records_the_api_that_ran(models):
    auto = HostProfiler(**QUICK).profile(models["ln_gelu"])
    assert auto["runtime"]["api"] == "compiled_model" and auto["runtime"]["kernel_mode"] == "XNNPACK"
    assert auto["runtime"]["api_class"].endswith("CompiledModel") and auto["config"]["runtime"] == "auto"
    builtin = HostProfiler(delegate="none", runtime="compiled-model", **QUICK).profile(models["ln_gelu"])
    assert builtin["runtime"]["kernel_mode"] == "BUILTIN"
    old = HostProfiler(runtime="interpreter", **QUICK).profile(models["ln_gelu"])
    assert old["runtime"]["api"] == "interpreter" and old["runtime"]["op_resolver"] == "AUTO"
    assert not [w for w in auto["warnings"] + old["warnings"] if "Interpreter instead" in w]


def test_a_dynamic_file_falls_back_with_a_warning(models):
    result = HostProfiler(runtime="compiled-model", **QUICK).profile(models["dynamic"], seq_len=12)
    assert result["runtime"]["api"] == "interpreter" and result["seq_len"] == 12
    assert any("cannot resize" in w and "Interpreter instead" in w for w in result["warnings"])


def test_artifact_runner_on_the_fixtures_equals_the_interpreter(models):
    inputs = _feeds([3, 16])
    for name in ("ln_gelu", "ln_gelu_int8"):
        ours = ArtifactRunner(models[name]).run(inputs)
        theirs = ArtifactRunner(models[name], runtime="interpreter").run(inputs)
        assert ours.keys() == theirs.keys()
        for key in ours:
            np.testing.assert_array_equal(ours[key], theirs[key])


def test_litert_teardown_logs_nothing_after_the_commands_output(models, tmp_path):
    """CompiledModel's global environment logs 'DestroyAccelerator' from a C++ destructor at exit; quiet_teardown
    keeps that off a command's stderr while what the command itself prints to fd 2 still arrives."""
    script = ("import sys\nfrom mobilebert_kit.artifacts.runner import load_compiled_model\n"
              f"m = load_compiled_model({str(models['ln_gelu'])!r}, num_threads=1)\nm.invoke()\n"
              "print('the command printed this', file=sys.stderr)\n")
    env = {k: v for k, v in os.environ.items() if k != "MBK_VERBOSE_TF"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert "the command printed this" in done.stderr
    assert "DestroyAccelerator" not in done.stderr and "INFO:" not in done.stderr, done.stderr


@pytest.mark.parametrize("runtime", ["compiled-model", "interpreter", "auto"])
def test_profile_of_a_file_truncated_in_place_is_one_line_exit_2(models, tmp_path, runtime):
    """A real file cut with os.truncate: every runtime loads the bytes read once, so no SIGBUS (issue 47)."""
    path = tmp_path / "cut.tflite"
    data = open(models["ln_gelu"], "rb").read()
    path.write_bytes(data)
    os.truncate(path, len(data) // 3)
    done = subprocess.run([sys.executable, "-m", "mobilebert_kit.cli.main", "profile", str(path), "--runtime", runtime],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "SIGBUS" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("loader", ["load_compiled_model", "load_tflite"])
def test_a_file_truncated_in_place_while_it_runs_is_not_a_sigbus(models, tmp_path, loader):
    """Issue 47 item 8: the CompiledModel path mapped the file (``CompiledModel.from_file``), so a file truncated
    in place while ``mbk profile`` timed it killed the process with SIGBUS; every runtime path loads the bytes."""
    import shutil

    path = tmp_path / "m.tflite"
    shutil.copy(models["ln_gelu"], path)
    script = (
        "import os, sys, numpy as np\n"
        f"from mobilebert_kit.artifacts.runner import {loader} as load\n"
        "m = load(sys.argv[1], num_threads=1)\n"
        "os.truncate(sys.argv[1], 64)  # a re-export into the same name, cut short\n"
        "for d in ([] if hasattr(m, 'set_inputs') else m.get_input_details()):  # the Interpreter's inputs\n"
        "    m.set_tensor(d['index'], np.zeros(d['shape'], d['dtype']))\n"
        "m.invoke(); print('ran')\n")
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0 and "ran" in done.stdout, (done.returncode, done.stderr[-500:])
    assert os.path.getsize(path) == 64
