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


def model_products(model, seq_len):
    """``Counter`` of the matrix products of ``model`` traced at ``[1, seq_len]``: ``(batch, m, k, n, weight)``
    -> count, ``weight`` True where the second operand is a 2-D weight (a Dense kernel), False for attention's
    products of two activations. The same graph :func:`mobilebert_kit.count_flops` counts."""
    from collections import Counter

    from mobilebert_kit.backend import tf
    from mobilebert_kit.models.encoder import INPUT_NAMES
    from mobilebert_kit.models.flops import _walk

    spec = {name: tf.TensorSpec([1, seq_len], tf.int32, name=name) for name in INPUT_NAMES}
    graph = tf.function(lambda inputs: model(inputs, training=False)).get_concrete_function(spec).graph
    products = Counter()
    for op in _walk(graph):
        if op.type not in ("MatMul", "BatchMatMulV2", "BatchMatMulV3", "BatchMatMul"):
            continue
        a, b = (t.shape.as_list() for t in op.inputs[:2])
        adj_a = op.get_attr("transpose_a" if op.type == "MatMul" else "adj_x")
        adj_b = op.get_attr("transpose_b" if op.type == "MatMul" else "adj_y")
        m, k = (a[-1], a[-2]) if adj_a else (a[-2], a[-1])
        n = b[-2] if adj_b else b[-1]
        weight = len(b) == 2
        batch = tuple(d for d in (a[:-2] if weight else np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))) if d != 1)
        products[(batch, m, k, n, weight)] += 1
    return products


def shape_floor(products, work_dir, kind):
    """One call of an ONNX model that runs every product of :func:`model_products` (once per count), each with
    its own weights: ``kind`` ``"float32"`` (ORT ``MatMul``) or ``"u8s8"`` (weight products as ORT's
    ``MatMulInteger``; attention's stay float, as in a dynamic-int8 file). Float weight products are chained
    (one's output is the next one's input where the widths meet, as in the encoder, so ORT reuses the
    buffers); int8 ones and attention's read the graph's inputs and each output stays a graph output. Its time
    is what the model's matrix products alone take in ORT's kernels on this core, one session call included:
    the floor under any graph of the same products."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inputs, feeds, nodes, outputs, inits = {}, {}, [], [], []

    def graph_input(kernel, shape):
        name = f"a_{kernel}_{'x'.join(map(str, shape))}"
        if name not in inputs:
            dtype = TensorProto.FLOAT if kernel == "float32" else TensorProto.UINT8
            inputs[name] = helper.make_tensor_value_info(name, dtype, shape)
            feeds[name] = (rng.standard_normal(shape).astype(np.float32) if kernel == "float32"
                           else rng.integers(0, 256, shape).astype(np.uint8))
        return name

    def product(a_name, b_shape, kernel):
        tag = str(len(nodes))
        if kernel == "float32":  # scaled so that a chain of products keeps its values' size
            weights = (rng.standard_normal(b_shape) / np.sqrt(b_shape[-2])).astype(np.float32)
            nodes.append(helper.make_node("MatMul", [a_name, f"b{tag}"], [f"y{tag}"]))
        else:
            weights = rng.integers(-127, 128, b_shape).astype(np.int8)
            nodes.append(helper.make_node("MatMulInteger", [a_name, f"b{tag}", "a_zero", "b_zero"], [f"y{tag}"]))
        inits.append(numpy_helper.from_array(weights, f"b{tag}"))
        return f"y{tag}"

    def output(name, dtype, shape):
        outputs.append(helper.make_tensor_value_info(name, dtype, shape))

    chain = {}  # (m, k, n) -> count: the float weight products, chained below
    for (batch, m, k, n, weight), count in sorted(products.items()):
        if weight and kind == "float32":
            chain[(m, k, n)] = chain.get((m, k, n), 0) + count
            continue
        kernel = kind if weight else "float32"
        shape = list(batch) + [m, k]
        for _ in range(count):
            b_shape = [k, n] if weight else list(batch) + [k, n]
            if not weight:  # both operands are activations
                b_name = graph_input("float32", b_shape)
                tag = str(len(nodes))
                nodes.append(helper.make_node("MatMul", [graph_input("float32", shape), b_name], [f"y{tag}"]))
                output(f"y{tag}", TensorProto.FLOAT, list(batch) + [m, n])
                continue
            y = product(graph_input(kernel, shape), b_shape, kernel)
            output(y, TensorProto.INT32, [m, n])
    current, width, m_last = None, None, None
    while chain:
        # the next product reads the current tensor where one of that width is left, else starts a new chain
        (m, k, n) = next((key for key in chain if key[1] == width), None) or max(chain, key=chain.get)
        if k != width:
            if current is not None:
                output(current, TensorProto.FLOAT, [m_last, width])
            current = graph_input("float32", [m, k])
        current, width, m_last = product(current, [k, n], "float32"), n, m
        chain[(m, k, n)] -= 1
        if not chain[(m, k, n)]:
            del chain[(m, k, n)]
    if current is not None:
        output(current, TensorProto.FLOAT, [m_last, width])
    if kind != "float32":
        inits += [numpy_helper.from_array(np.array(128, np.uint8), "a_zero"),
                  numpy_helper.from_array(np.array(0, np.int8), "b_zero")]
    graph = helper.make_graph(nodes, f"floor_{kind}", list(inputs.values()), outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(work_dir, f"floor_{kind}.onnx")
    onnx.save(model, path)
    return _ort_runner(path, feeds)


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
