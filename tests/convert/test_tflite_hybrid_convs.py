"""Dynamic-range TFLite: depthwise convolution filters stay float32, so XNNPACK takes every ConvBERT layer."""

from tests.convert.conftest import export_tiny, trained_like


def _depthwise_filter_types(path):
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils as fb

    model = fb.read_model_from_bytearray(bytearray(path.read_bytes()))
    names = {v: k for k, v in schema.TensorType.__dict__.items() if not k.startswith("_")}
    graph = model.subgraphs[0]
    return [names[graph.tensors[int(op.inputs[1])].type] for op in graph.operators
            if fb.get_builtin_code_from_operator_code(model.operatorCodes[op.opcodeIndex])
            == schema.BuiltinOperator.DEPTHWISE_CONV_2D]


def test_dynamic_convbert_keeps_depthwise_filters_float_and_its_answers(tmp_path):
    # XNNPACK (LiteRT 2.3) has no hybrid depthwise convolution: with int8 filters each span convolution ran on
    # the builtin kernels and split the graph (convbert-small: 13 partitions; 10.79 -> 10.03 ms with float ones).
    import mobilebert_kit as mbk

    # Hidden 256: the span convolution's filter (9 x 256) is past the 1,024 values under which the converter
    # leaves a weight float anyway, so the converter makes it int8 and the pass has work to do.
    model = trained_like(mbk.build("tiny-convbert", hidden_size=256, intermediate_size=256), seed=1)
    path = tmp_path / "convbert.tflite"
    result = export_tiny(model, path, "tflite", "dynamic")
    types = _depthwise_filter_types(path)
    assert types and set(types) == {"FLOAT32"}, types
    assert any(f"{len(types)} depthwise convolution filter(s) kept float32" in note for note in result.notes), \
        result.notes
    assert result.validation.passed, result.validation.summary_line()
