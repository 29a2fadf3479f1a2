"""Single-core GEMM peak: the ceiling a transformer's matrix products can reach on this core.

Shape [128 x 512] x [512 x 2048]: a MobileBERT-sized product at sequence
length 128 (the paper's setting). Each kernel is a one-op model with constant
weights, as in an exported network, timed like the models (same core, one
thread). The peak of a precision is its fastest kernel:

- float32: NumPy (OpenBLAS), ONNX Runtime ``MatMul``, LiteRT ``FULLY_CONNECTED`` (XNNPACK).
- int8: ONNX Runtime ``MatMulInteger`` u8 x s8 (its fast path; s8 x s8 is a slow
  one, ~25 GOP/s per performance-notes.md, and is reported for reference), and
  LiteRT full-int8 ``FULLY_CONNECTED`` (XNNPACK QS8).
"""

import os

import numpy as np

M, K, N = 128, 512, 2048
FLOPS = 2 * M * K * N


def _onnx_matmul(path, kind):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    if kind == "float32":
        a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])
        b = numpy_helper.from_array(rng.standard_normal((K, N)).astype(np.float32), "b")
        node = helper.make_node("MatMul", ["a", "b"], ["y"])
        inits = [b]
    else:
        a_type = TensorProto.UINT8 if kind == "u8s8" else TensorProto.INT8
        a = helper.make_tensor_value_info("a", a_type, [M, K])
        y = helper.make_tensor_value_info("y", TensorProto.INT32, [M, N])
        b = numpy_helper.from_array(rng.integers(-127, 128, (K, N)).astype(np.int8), "b")
        a_zero = numpy_helper.from_array(np.array(128 if kind == "u8s8" else 0, np.uint8 if kind == "u8s8" else np.int8), "a_zero")
        b_zero = numpy_helper.from_array(np.array(0, np.int8), "b_zero")
        node = helper.make_node("MatMulInteger", ["a", "b", "a_zero", "b_zero"], ["y"])
        inits = [b, a_zero, b_zero]
    graph = helper.make_graph([node], f"gemm_{kind}", [a], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    feeds = {
        "float32": rng.standard_normal((M, K)).astype(np.float32),
        "u8s8": rng.integers(0, 256, (M, K)).astype(np.uint8),
        "s8s8": rng.integers(-127, 128, (M, K)).astype(np.int8),
    }[kind]
    return {"a": feeds}


def _ort_runner(path, feeds):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, feeds)


def _tflite_fc(path, int8):
    from mobilebert_kit.backend import tf

    rng = np.random.default_rng(0)
    w = tf.constant(rng.standard_normal((K, N)).astype(np.float32) * 0.05)

    @tf.function(input_signature=[tf.TensorSpec([M, K], tf.float32, name="a")])
    def fc(a):
        return tf.matmul(a, w)

    converter = tf.lite.TFLiteConverter.from_concrete_functions([fc.get_concrete_function()], None)
    if int8:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([rng.standard_normal((M, K)).astype(np.float32)] for _ in range(4))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    with open(path, "wb") as f:
        f.write(converter.convert())
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=path, num_threads=1)
    interpreter.allocate_tensors()
    detail = interpreter.get_input_details()[0]
    value = rng.integers(-127, 128, (M, K)) if int8 else rng.standard_normal((M, K))
    interpreter.set_tensor(detail["index"], value.astype(detail["dtype"]))
    return interpreter.invoke


def kernels(work_dir, with_tflite=True):
    """Returns dict name -> (precision, zero-argument callable doing one GEMM)."""
    out = {}
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.empty((M, N), np.float32)
    out["numpy fp32 (BLAS)"] = ("float32", lambda: np.matmul(a, b, out=c))
    for kind, precision, label in (
        ("float32", "float32", "ORT MatMul fp32"),
        ("u8s8", "int8", "ORT MatMulInteger u8xs8"),
        ("s8s8", "int8-slow", "ORT MatMulInteger s8xs8"),
    ):
        path = os.path.join(work_dir, f"gemm_{kind}.onnx")
        feeds = _onnx_matmul(path, kind)
        out[label] = (precision, _ort_runner(path, feeds))
    if with_tflite:
        out["LiteRT FC fp32 (XNNPACK)"] = ("float32", _tflite_fc(os.path.join(work_dir, "gemm_fc_f32.tflite"), False))
        out["LiteRT FC int8 (XNNPACK)"] = ("int8", _tflite_fc(os.path.join(work_dir, "gemm_fc_int8.tflite"), True))
    return out
