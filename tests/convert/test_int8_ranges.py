"""Full int8 of a LayerNorm model (issue 46 item 3): each tensor's calibrated range is its own, and the feed-forward
output projections take dynamic-range int8, so a one-ULP float difference between CPU kernels stays small.

TFLite's calibrator records an op's input after the op ran, and the interpreter runs element-wise ops in place:
the attention scores got the masked scores' range (the mask value -120 inside it) and a block's output projection
that of the residual sum, until ``tflite_export._measured_ranges`` measured them again.
"""

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools import flatbuffer_utils as fb

from tests.convert.conftest import export_tiny

MASK = -120.0  # the fixtures' attention_mask_value


def _ops(data):
    """``(op type, input tensors, output tensors)`` of a ``.tflite`` flatbuffer's first subgraph, in order."""
    model = fb.read_model_from_bytearray(bytearray(data))
    graph = model.subgraphs[0]
    names = {v: k for k, v in schema.BuiltinOperator.__dict__.items() if not k.startswith("_")}
    for op in graph.operators:
        yield names[fb.get_builtin_code_from_operator_code(model.operatorCodes[op.opcodeIndex])], \
            [graph.tensors[t] for t in op.inputs if t >= 0], [graph.tensors[t] for t in op.outputs]


def _real_range(tensor):
    scale, zero = float(tensor.quantization.scale[0]), int(tensor.quantization.zeroPoint[0])
    return (-128 - zero) * scale, (127 - zero) * scale


def test_attention_scores_are_quantized_over_their_own_range(tiny_bert, tmp_path):
    out = tmp_path / "m.tflite"
    export_tiny(tiny_bert, out, "tflite", "int8", validate=False)
    ops = list(_ops(out.read_bytes()))
    dequantized = {id(i[0]) for kind, i, _ in ops if kind == "DEQUANTIZE"}
    # The scores: int8 BATCH_MATMUL outputs dequantized for the float mask ADD and softmax.
    scores = [o[0] for kind, _, o in ops if kind == "BATCH_MATMUL" and o[0].type == schema.TensorType.INT8
              and any(id(o[0]) == d for d in dequantized)]
    assert len(scores) == 2, len(scores)  # tiny-bert's two blocks
    for tensor in scores:
        low, high = _real_range(tensor)
        # Within the real scores', far from the mask value the in-place ADD wrote over them (range below -120).
        assert MASK / 2 < low < 0 < high, (tensor.name, low, high)


def test_layernorm_feed_forward_outputs_are_dynamic_range_int8(tiny_bert, tiny_mobilebert, tmp_path):
    result = export_tiny(tiny_bert, tmp_path / "bert.tflite", "tflite", "int8", validate=False)
    ops = _ops((tmp_path / "bert.tflite").read_bytes())
    hybrid = [(i[0].type, i[1].type, o[0].type, o[0].name.decode()) for kind, i, o in ops
              if kind == "FULLY_CONNECTED" and i[0].type == schema.TensorType.FLOAT32]
    # Float input and output, int8 weights, one per block: the feed-forward output projections, nothing else.
    assert len(hybrid) == 2 and all(w == schema.TensorType.INT8 and y == schema.TensorType.FLOAT32
                                    and "ffn_0/output" in name for _, w, y, name in hybrid), hybrid
    assert any("2 feed-forward output projection(s) with int8 weights" in n for n in result.notes), result.notes
    # A NoNorm model keeps its all-int8 residual path (its NoNorm runs in int8 inside XNNPACK).
    export_tiny(tiny_mobilebert, tmp_path / "mb.tflite", "tflite", "int8", validate=False)
    assert not [1 for kind, i, _ in _ops((tmp_path / "mb.tflite").read_bytes())
                if kind == "FULLY_CONNECTED" and i[0].type == schema.TensorType.FLOAT32]


def test_dynamic_range_weights_keep_the_float_products(tmp_path):
    """The pass itself on a one-layer graph: int8 weights per output channel, the products within one step."""
    import tensorflow as tf

    from mobilebert_kit.convert.tflite.int8_graph import dynamic_range_weights

    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(8, 4)).astype(np.float32) * np.array([1, 10, 100, 0.01], np.float32)
    layer = tf.keras.layers.Dense(4, use_bias=False)
    layer.build((1, 8))
    layer.set_weights([kernel])
    func = tf.function(lambda x: layer(x), input_signature=[tf.TensorSpec([1, 8], tf.float32)])
    data = tf.lite.TFLiteConverter.from_concrete_functions([func.get_concrete_function()], layer).convert()
    name = next(o[0].name.decode() for kind, _, o in _ops(data) if kind == "FULLY_CONNECTED")
    written, changed = dynamic_range_weights(data, [name])
    assert changed == 1 and dynamic_range_weights(data, ["no such node"]) == (data, 0)
    from ai_edge_litert.interpreter import Interpreter

    x = rng.normal(size=(1, 8)).astype(np.float32)
    got = []
    for model in (data, written):
        it = Interpreter(model_content=model)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        got.append(it.get_tensor(it.get_output_details()[0]["index"])[0])
    # Per output channel: the 0.01 column keeps its own scale (per tensor, it would round to 0).
    assert np.all(np.abs(got[1] - got[0]) <= 0.02 * np.abs(kernel).max(axis=0) * np.abs(x).sum()), got
    assert abs(got[1][3]) > 0 and not np.allclose(got[1], got[0], rtol=0, atol=0)
