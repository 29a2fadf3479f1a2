"""Tiny BERT-shaped fixture models for the profiler tests.

The profiler itself never imports TensorFlow; the tests may, to build small
``.tflite`` files the way users get them (TFLiteConverter). ONNX fixtures are
written with ``onnx.helper`` directly, so they need no exporter.

Every model has the three inputs the profiler expects: ``input_ids``,
``attention_mask`` and ``token_type_ids`` (int32, ``[1, seq]``).

Example:
    >>> path = build_tflite_bert(tmp_path / "tiny.tflite")  # doctest: +SKIP
"""

import numpy as np

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def build_tflite_bert(
    path,
    *,
    vocab_size=100,
    hidden=32,
    layers=2,
    intermediate=64,
    seq_len=16,
    norm="layernorm",
    activation="gelu",
    dynamic_seq=False,
    quantization=None,
    seed=0,
    type_vocab_size=2,
):
    """Writes a tiny BERT-like encoder as a ``.tflite`` file and returns its path.

    Args:
        path: destination file.
        vocab_size: rows of the word embedding table.
        hidden: hidden size (one attention head).
        layers: number of transformer blocks.
        intermediate: feed-forward width.
        seq_len: sequence length of the static input signature.
        norm: ``"layernorm"`` or ``"nonorm"`` (MobileBERT's element-wise affine).
        activation: ``"gelu"`` or ``"relu"``.
        dynamic_seq: if True the sequence dimension is ``None`` (resizable).
        quantization: None (float32) or ``"dynamic"`` (dynamic-range int8).
        seed: weight seed.
        type_vocab_size: rows of the segment embedding table.
    """
    import tensorflow as tf

    rng = np.random.default_rng(seed)

    def var(*shape):
        return tf.constant(rng.normal(0.0, 0.05, size=shape).astype(np.float32))

    weights = {
        "word": var(vocab_size, hidden),
        "segment": var(type_vocab_size, hidden),
        "position": var(max(seq_len, 256), hidden),
    }
    for i in range(layers):
        for name, shape in (
            ("q", (hidden, hidden)),
            ("k", (hidden, hidden)),
            ("v", (hidden, hidden)),
            ("o", (hidden, hidden)),
            ("ff1", (hidden, intermediate)),
            ("ff2", (intermediate, hidden)),
        ):
            weights[f"{name}{i}"] = var(*shape)
        for j in (0, 1):
            weights[f"gamma{i}_{j}"] = tf.constant(np.ones(hidden, np.float32))
            weights[f"beta{i}_{j}"] = tf.constant(np.zeros(hidden, np.float32))

    def normalize(x, gamma, beta):
        if norm == "layernorm":
            mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
            return (x - mean) * tf.math.rsqrt(variance + 1e-12) * gamma + beta
        return x * gamma + beta  # NoNorm: element-wise affine only

    def act(x):
        return tf.nn.gelu(x) if activation == "gelu" else tf.nn.relu(x)

    seq_dim = None if dynamic_seq else seq_len
    spec = [tf.TensorSpec([1, seq_dim], tf.int32, name=n) for n in INPUT_NAMES]

    @tf.function(input_signature=spec)
    def encoder(input_ids, attention_mask, token_type_ids):
        length = tf.shape(input_ids)[1]
        x = tf.gather(weights["word"], input_ids)
        x += tf.gather(weights["segment"], token_type_ids)
        x += weights["position"][tf.newaxis, :length]
        bias = (1.0 - tf.cast(attention_mask, tf.float32))[:, tf.newaxis, :] * -10000.0
        for i in range(layers):
            q = tf.matmul(x, weights[f"q{i}"])
            k = tf.matmul(x, weights[f"k{i}"])
            v = tf.matmul(x, weights[f"v{i}"])
            scores = tf.matmul(q, k, transpose_b=True) / np.sqrt(hidden) + bias
            context = tf.matmul(tf.nn.softmax(scores), v)
            x = normalize(x + tf.matmul(context, weights[f"o{i}"]), weights[f"gamma{i}_0"], weights[f"beta{i}_0"])
            ff = tf.matmul(act(tf.matmul(x, weights[f"ff1{i}"])), weights[f"ff2{i}"])
            x = normalize(x + ff, weights[f"gamma{i}_1"], weights[f"beta{i}_1"])
        return {"sequence_output": x}

    converter = tf.lite.TFLiteConverter.from_concrete_functions([encoder.get_concrete_function()])
    if quantization == "dynamic":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    elif quantization is not None:
        raise ValueError(f"unknown quantization {quantization!r}; valid values: None, 'dynamic'")
    data = converter.convert()
    with open(path, "wb") as f:
        f.write(data)
    return path


def build_onnx_bert(path, *, vocab_size=100, hidden=32, layers=2, seq_len=None, activation="relu", mask_dtype="int32", seed=0):
    """Writes a tiny BERT-like encoder as an ``.onnx`` file and returns its path.

    Args:
        path: destination file.
        vocab_size: rows of the word embedding table.
        hidden: hidden size.
        layers: number of blocks (self-attention + feed-forward).
        seq_len: static sequence length, or None for a symbolic ``seq`` dimension.
        activation: ``"relu"`` or ``"gelu"`` (ONNX ``Gelu``, opset 20).
        mask_dtype: ``"int32"`` or ``"float32"`` for ``attention_mask``.
        seed: weight seed.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    dim = seq_len if seq_len is not None else "seq"
    mask_type = TensorProto.FLOAT if mask_dtype == "float32" else TensorProto.INT32
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT32, [1, dim]),
        helper.make_tensor_value_info("attention_mask", mask_type, [1, dim]),
        helper.make_tensor_value_info("token_type_ids", TensorProto.INT32, [1, dim]),
    ]
    w = lambda *s: rng.normal(0, 0.05, size=s).astype(np.float32)  # noqa: E731
    const("word", w(vocab_size, hidden))
    const("segment", w(2, hidden))
    nodes += [
        helper.make_node("Gather", ["word", "input_ids"], ["we"]),
        helper.make_node("Gather", ["segment", "token_type_ids"], ["se"]),
        helper.make_node("Add", ["we", "se"], ["x0"]),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Sub", [const("one", np.float32(1.0)), "maskf"], ["inv"]),
        helper.make_node("Mul", ["inv", const("neg", np.float32(-10000.0))], ["bias2d"]),
        helper.make_node("Unsqueeze", ["bias2d", const("ax1", np.array([1], np.int64))], ["bias"]),
    ]
    x = "x0"
    for i in range(layers):
        for n in ("q", "k", "v", "o"):
            const(f"w{n}{i}", w(hidden, hidden))
        const(f"ff1_{i}", w(hidden, 2 * hidden))
        const(f"ff2_{i}", w(2 * hidden, hidden))
        nodes += [
            helper.make_node("MatMul", [x, f"wq{i}"], [f"q{i}"]),
            helper.make_node("MatMul", [x, f"wk{i}"], [f"k{i}"]),
            helper.make_node("MatMul", [x, f"wv{i}"], [f"v{i}"]),
            helper.make_node("Transpose", [f"k{i}"], [f"kt{i}"], perm=[0, 2, 1]),
            helper.make_node("MatMul", [f"q{i}", f"kt{i}"], [f"s{i}"]),
            helper.make_node("Add", [f"s{i}", "bias"], [f"sb{i}"]),
            helper.make_node("Softmax", [f"sb{i}"], [f"p{i}"], axis=-1),
            helper.make_node("MatMul", [f"p{i}", f"v{i}"], [f"c{i}"]),
            helper.make_node("MatMul", [f"c{i}", f"wo{i}"], [f"a{i}"]),
            helper.make_node("Add", [x, f"a{i}"], [f"r{i}"]),
            helper.make_node("MatMul", [f"r{i}", f"ff1_{i}"], [f"h{i}"]),
            helper.make_node("Gelu" if activation == "gelu" else "Relu", [f"h{i}"], [f"g{i}"]),
            helper.make_node("MatMul", [f"g{i}", f"ff2_{i}"], [f"f{i}"]),
            helper.make_node("Add", [f"r{i}", f"f{i}"], [f"x{i + 1}"]),
        ]
        x = f"x{i + 1}"
    nodes.append(helper.make_node("Identity", [x], ["sequence_output"]))
    output = helper.make_tensor_value_info("sequence_output", TensorProto.FLOAT, [1, dim, hidden])
    graph = helper.make_graph(nodes, "tiny_bert", inputs, [output], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def tiny_onnx_matmuls(hidden=32, layers=2, seq_len=16):
    """Multiply-accumulates of :func:`build_onnx_bert`'s MatMuls, counted by hand.

    Per layer: q, k, v, o projections (4 * seq * h * h), scores and context
    (2 * seq * seq * h), feed-forward (2 * seq * h * 2h).
    """
    per_layer = 4 * seq_len * hidden * hidden + 2 * seq_len * seq_len * hidden + 2 * seq_len * hidden * 2 * hidden
    return layers * per_layer


def tiny_tflite_matmuls(hidden=32, layers=2, intermediate=64, seq_len=16):
    """Multiply-accumulates of :func:`build_tflite_bert`'s matrix products, counted by hand."""
    per_layer = 4 * seq_len * hidden * hidden + 2 * seq_len * seq_len * hidden + 2 * seq_len * hidden * intermediate
    return layers * per_layer
