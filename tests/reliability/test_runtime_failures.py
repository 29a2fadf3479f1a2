"""A file that loads but fails inside the runtime is one ArtifactError line, not the runtime's traceback.

ORT raised `QLinearGlobalAveragePool parameter out of computation range` from inside validation (issue 14's
CI run): a RuntimeException with multi-line text and a coloured log line on stderr. Any kernel failure
reaches the user the same way, so the test makes one on purpose (a Reshape that only fits one length).
"""

import numpy as np
import pytest


def _reshape_model(path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Cast", ["input_ids"], ["x"], to=TensorProto.FLOAT),
         helper.make_node("Reshape", ["x", "shape"], ["sequence_output"])],
        "fails_at_run_time",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])],
        [helper.make_tensor_value_info("sequence_output", TensorProto.FLOAT, None)],
        [helper.make_tensor("shape", TensorProto.INT64, [1], [3])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_kernel_failure_is_one_artifact_error_line(tmp_path, capfd):
    from mobilebert_kit.artifacts.errors import ArtifactError
    from mobilebert_kit.artifacts.runner import ArtifactRunner

    runner = ArtifactRunner(_reshape_model(tmp_path / "m.onnx"))
    assert "sequence_output" in runner.run({"input_ids": np.ones((1, 3), np.int64)})  # the length it fits runs
    with pytest.raises(ArtifactError) as caught:
        runner.run({"input_ids": np.ones((1, 5), np.int64)})
    message = str(caught.value)
    assert "\n" not in message and "could not run m.onnx" in message and "re-export" in message
    assert "Reshape" in message or "reshape" in message.lower()
    assert "onnxruntime" not in capfd.readouterr().err  # ORT's own log line is not printed as well
