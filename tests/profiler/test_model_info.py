"""Model facts read from .tflite/.onnx files: FLOPs, precision, variant, vocabulary, bad files."""

import pytest

from mobilebert_kit.profiler.errors import ProfilerError
from mobilebert_kit.profiler.inputs import benchmark_input_flags, make_feeds
from mobilebert_kit.profiler.model_info import ModelInfo, input_role

from fixture_models import tiny_onnx_matmuls, tiny_tflite_matmuls


def test_tflite_flops_match_a_hand_count(models):
    info = ModelInfo(models["ln_gelu"])
    flops, by_type = info.flops(16)
    assert flops == 2 * tiny_tflite_matmuls(seq_len=16)
    assert set(by_type) == {"FULLY_CONNECTED", "BATCH_MATMUL"}
    assert by_type["BATCH_MATMUL"] == 2 * 2 * (2 * 16 * 16 * 32)  # 2 layers x (scores + context)


def test_dynamic_tflite_flops_follow_the_sequence_length(models):
    info = ModelInfo(models["dynamic"])
    assert info.static_seq_len is None
    assert info.flops(16)[0] == 2 * tiny_tflite_matmuls(seq_len=16)
    assert info.flops(128)[0] == 2 * tiny_tflite_matmuls(seq_len=128)


def test_onnx_flops_match_a_hand_count(models):
    info = ModelInfo(models["onnx"])
    assert info.flops(16)[0] == 2 * tiny_onnx_matmuls(seq_len=16)
    assert info.flops(64)[0] == 2 * tiny_onnx_matmuls(seq_len=64)


def test_fixed_length_model_refuses_another_length(models):
    with pytest.raises(ProfilerError, match="fixed sequence length 16, not 32; use --seq-len 16"):
        ModelInfo(models["ln_gelu"]).flops(32)


@pytest.mark.parametrize(
    "key, precision, variant",
    [
        ("ln_gelu", "float32", "LayerNorm+GELU"),
        ("nn_relu", "float32", "NoNorm+ReLU"),
        ("ln_gelu_int8", "dynamic-int8", "LayerNorm+GELU"),
        ("nn_relu_int8", "dynamic-int8", "NoNorm+ReLU"),
        ("onnx", "float32", "NoNorm+ReLU"),
    ],
)
def test_precision_and_variant(models, key, precision, variant):
    info = ModelInfo(models[key])
    assert (info.precision, info.variant) == (precision, variant)


def test_inputs_roles_and_vocabulary(models):
    info = ModelInfo(models["onnx16_float_mask"])
    assert [(i["name"], i["role"], i["dtype"], i["shape"]) for i in info.inputs] == [
        ("input_ids", "input_ids", "int32", [1, 16]),
        ("attention_mask", "attention_mask", "float32", [1, 16]),
        ("token_type_ids", "token_type_ids", "int32", [1, 16]),
    ]
    assert (info.vocab_size, info.vocab_source) == (100, "embedding table")
    assert ModelInfo(models["ln_gelu"]).vocab_size == 100


@pytest.mark.parametrize(
    "name, role",
    [("serving_default_input_ids:0", "input_ids"), ("input_word_ids", "input_ids"), ("input_mask", "attention_mask"),
     ("segment_ids", "token_type_ids"), ("token_type_ids", "token_type_ids"), ("pixel_values", None)],
)
def test_input_roles(name, role):
    assert input_role(name) == role


def test_realistic_inputs(models):
    info = ModelInfo(models["ln_gelu"])
    feeds = make_feeds(info.inputs, 16, info.vocab_size, fill=0.75, seed=3)
    ids, mask, segments = feeds["input_ids"], feeds["attention_mask"], feeds["token_type_ids"]
    assert ids.dtype.name == "int32" and ids.shape == (1, 16)
    assert ids[0, :12].min() >= 1 and ids.max() < 100 and (ids[0, 12:] == 0).all()
    assert mask.tolist() == [[1] * 12 + [0] * 4]
    assert segments.tolist() == [[0] * 6 + [1] * 6 + [0] * 4]
    flags, files = benchmark_input_flags(info.inputs, 16, info.vocab_size)
    assert flags == [
        "--input_layer=input_ids,attention_mask,token_type_ids",
        "--input_layer_shape=1,16:1,16:1,16",
        "--input_layer_value_range=input_ids,1,99:attention_mask,1,1:token_type_ids,0,1",
    ]
    assert files == {}


def test_float_mask_gets_a_value_file_of_ones(models):
    import numpy as np

    info = ModelInfo(models["onnx16_float_mask"])
    flags, files = benchmark_input_flags(info.inputs, 16, info.vocab_size)
    assert "attention_mask,1,1" not in flags[-1]
    assert np.frombuffer(files["attention_mask"], dtype=np.float32).tolist() == [1.0] * 16


@pytest.mark.parametrize(
    "content, suffix, message",
    [
        (b"not a model at all", ".tflite", "not a TFLite flatbuffer"),
        (None, ".tflite", "corrupt TFLite file"),
        (b"\x08\x07garbage\xff\xfe", ".onnx", "not a readable ONNX model"),
        (b"x", ".pb", "unsupported model file type"),
    ],
)
def test_bad_model_files_give_one_clear_error(tmp_path, models, content, suffix, message):
    path = tmp_path / f"bad{suffix}"
    if content is None:
        # A truncated download: the identifier is there, the tables are not.
        with open(models["ln_gelu"], "rb") as f:
            content = f.read()[:600]
    path.write_bytes(content)
    with pytest.raises(ProfilerError, match=message):
        ModelInfo(path)


def test_missing_file(tmp_path):
    with pytest.raises(ProfilerError, match="no such model file"):
        ModelInfo(tmp_path / "absent.tflite")


@pytest.mark.parametrize("key", ["ln_gelu", "nn_relu", "ln_gelu_int8", "nn_relu_int8", "onnx", "onnx16_float_mask"])
def test_inspect_and_profile_describe_a_file_alike(models, key):
    """``mbk inspect`` and ``mbk profile`` read the file through one reader and one taxonomy (issue 13 item 4)."""
    from mobilebert_kit.artifacts.inspection import inspect_artifact

    info, inspected = ModelInfo(models[key]), inspect_artifact(models[key])
    left = inspected.variant_ops()
    assert info.variant.startswith("LayerNorm") == bool(left["layer_norm"])
    assert info.variant.endswith("GELU") == bool(left["gelu"])
    # inspect names a dynamic ONNX dimension ("seq") where the profiler writes -1.
    assert [(i["name"], i["dtype"], i["shape"]) for i in info.inputs] == [
        (i["name"], i["dtype"], [d if isinstance(d, int) else -1 for d in i["shape"]]) for i in inspected.inputs]
    assert dict(info.op_counts) == dict(inspected.op_counts)


def test_a_roberta_file_is_timed_with_the_one_segment_id_its_table_holds(tmp_path):
    """RoBERTa's segment table has one row: `mbk profile` (and every pipeline) fed segment id 1 and the TFLite
    file failed with 'gather index out of bounds'; benchmark_model was given the range 0-1 as well."""
    from mobilebert_kit.profiler.host import HostProfiler
    from tests.helpers import run_mbk
    from tests.tokenizer_fixtures import save_checkpoint

    save_checkpoint("roberta", tmp_path / "rob")
    run_mbk("export", tmp_path / "rob", "--format", "tflite", "--seq-len", "16", "--out", tmp_path / "r.tflite",
            check=True)
    info = ModelInfo(tmp_path / "r.tflite")
    (segments,) = [spec for spec in info.inputs if spec["role"] == "token_type_ids"]
    assert segments["segments"] == 1
    assert make_feeds(info.inputs, 16, info.vocab_size)["token_type_ids"].max() == 0
    assert benchmark_input_flags(info.inputs, 16, info.vocab_size)[0][-1].endswith("token_type_ids,0,0")
    result = HostProfiler(threads=1, runs=2, warmup=1, min_time_s=0.0).profile(tmp_path / "r.tflite")
    assert result["latency_ms"]["median"] > 0
