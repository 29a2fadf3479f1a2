"""LiteRT's two Python APIs on real exports: CompiledModel's outputs equal the Interpreter's, and a dynamic file falls back."""

import numpy as np
import pytest

from mobilebert_kit.artifacts.runner import ArtifactRunner
from tests.convert.conftest import export_tiny, padded_inputs


@pytest.fixture(scope="module")
def tiny_bert_files(tiny_bert, tmp_path_factory):
    """``mbk export tiny-bert --format tflite``, once with ``--static-axes`` and once as the default ``[1, -1]`` file."""
    root = tmp_path_factory.mktemp("runtimes")
    export_tiny(tiny_bert, root / "static.tflite", static_axes=True)
    export_tiny(tiny_bert, root / "dynamic.tflite", dynamic_axes=True)
    return {"static": root / "static.tflite", "dynamic": root / "dynamic.tflite"}


def test_compiled_model_runs_a_static_export_as_the_interpreter_does(tiny_bert, tiny_bert_files):
    inputs = padded_inputs(tiny_bert, count=3).arrays
    compiled = ArtifactRunner(tiny_bert_files["static"], num_threads=1)
    interpreter = ArtifactRunner(tiny_bert_files["static"], num_threads=1, runtime="interpreter")
    assert (compiled.runtime.name, interpreter.runtime.name) == ("compiled_model", "interpreter")
    assert compiled.runtime_warnings == ()
    assert compiled.output_names == interpreter.output_names == ["sequence_output", "pooled_output"]
    assert compiled.input_specs == interpreter.input_specs
    ours, theirs = compiled.run(inputs), interpreter.run(inputs)
    for name in compiled.output_names:
        np.testing.assert_array_equal(ours[name], theirs[name])  # the same XNNPACK kernels: equal, not close


def test_a_dynamic_export_runs_on_the_interpreter_and_says_why(tiny_bert, tiny_bert_files):
    runner = ArtifactRunner(tiny_bert_files["dynamic"], runtime="compiled-model")
    assert runner.runtime.name == "interpreter"
    assert "cannot resize" in runner.runtime_warnings[0] and "Interpreter instead" in runner.runtime_warnings[0]
    inputs = padded_inputs(tiny_bert, count=2).arrays
    static = ArtifactRunner(tiny_bert_files["static"]).run_as_app(inputs)
    dynamic = runner.run_as_app(inputs)
    np.testing.assert_allclose(dynamic["pooled_output"], static["pooled_output"], atol=1e-5)


def test_every_format_names_runtimes_that_run_its_files():
    from mobilebert_kit.artifacts.formats import FORMATS
    from mobilebert_kit.artifacts.runtimes import RUNTIMES

    for fmt in FORMATS.values():
        assert fmt.runtimes and all(RUNTIMES[name].format == fmt.name for name in fmt.runtimes)
    assert {r.load for r in RUNTIMES.values()} == {"load_tflite", "load_compiled_model", "load_onnx"}
