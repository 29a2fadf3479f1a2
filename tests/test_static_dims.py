"""Static dimensions in the layers (issue 46): a dynamic-length ``.tflite`` has its static twin's ops.

The default TFLite file leaves its sequence open (inputs ``[1, -1]``). Every other dimension is known when it is
traced, and the layers name them (``layers/shapes.py``, ``TokenDense``), so the file carries only the few ops the
open length itself needs: the position clip (one index for the three inputs) and the slice of the position
table. Measured here against the ``--static-axes`` file of the same model, family by family.
"""

import collections

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.tools import flatbuffer_utils as fb

import mobilebert_kit as mbk
from mobilebert_kit.backend import keras, tf
from mobilebert_kit.layers.shapes import leading_dims, reshape_leading
from mobilebert_kit.layers.token_dense import TokenDense
from mobilebert_kit.models.api import named_weights

OP_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
# Ops only a run-time shape computation emits (tf_keras Dense's tensordot: SHAPE, GATHER, REDUCE_PROD,
# CONCATENATION, PACK; attention reshapes from tf.shape: SHAPE, STRIDED_SLICE, PACK).
TENSORDOT = ("REDUCE_PROD",)

# What the open length costs in every family with absolute positions: PositionClip (SHAPE, STRIDED_SLICE,
# MINIMUM, 2 SUB, RANGE, RESHAPE, CONCATENATION, 3 GATHER: 11) and the position table's slice (SHAPE,
# 2 STRIDED_SLICE, RESHAPE: 4). Measured (float, seq 16; static / dynamic ops): tiny-bert 106 / 121,
# tiny-mobilebert 74 / 89, tiny-ib-bert 158 / 173, tiny-convbert 205 / 220, ALBERT-like 107 / 122,
# DistilBERT-like 104 / 118 (no token types: 2 GATHERs). Before TokenDense and layers/shapes.py: tiny-bert
# 108 / 217 ops, tiny-mobilebert 76 / 268.
OPEN_LENGTH = 15
# The relative-position families compute their index slices and skews from the length in every layer
# (2 layers here): measured NEZHA 147 / 220, composite 134 / 179 (with the cut to their 64 positions that every
# open-length file has: 209 and 168 without it), MPNet 108 / 180 (before: 149 / 291,
# 136 / 259, 110 / 282), DeBERTa-v3 135 / 195 (per layer: the c2p and p2c index slices, the gathers of their
# rows from the projected table, which the converter folds into a constant in both files, and two skews).
# DeBERTa-v3's layout at tiny size: no position or token-type table, disentangled attention over 8 log buckets.
DEBERTA_V3 = {"attention_bias": "disentangled", "position_embedding_type": "none", "type_vocab_size": 0,
              "position_buckets": 8, "max_relative_positions": 64}
FAMILIES = {
    "tiny-bert": ("tiny-bert", {}, OPEN_LENGTH),
    "tiny-mobilebert": ("tiny-mobilebert", {}, OPEN_LENGTH),
    "tiny-ib-bert": ("tiny-ib-bert", {}, OPEN_LENGTH),
    "tiny-convbert": ("tiny-convbert", {}, OPEN_LENGTH),
    "albert": ("tiny-bert", {"embedding_size": 16}, OPEN_LENGTH),
    "distilbert": ("tiny-bert", {"type_vocab_size": 0, "pooler_activation": "relu"}, OPEN_LENGTH - 1),
    "roberta": ("tiny-bert", {"position_offset": 2}, OPEN_LENGTH + 1),  # + the ADD of offset + length
    "tiny-nezha": ("tiny-nezha", {}, 73),
    "tiny-composite": ("tiny-composite", {}, 45),
    "mpnet": ("tiny-bert", {"attention_bias": "relative_buckets", "position_offset": 2}, 72),
    "deberta-v2": ("tiny-bert", DEBERTA_V3, 64),
}


def op_counts(path):
    model = fb.read_model(str(path))
    counts = collections.Counter()
    for graph in model.subgraphs:
        for op in graph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            counts[OP_NAMES[max(code.builtinCode, code.deprecatedBuiltinCode)]] += 1
    return counts


def export_pair(model, directory, quantize="none"):
    """Op counts of the dynamic-length file and its ``--static-axes`` twin (embedding task, seq 16)."""
    from mobilebert_kit.convert.exporter import ExportOptions, export

    counts = {}
    for static in (False, True):
        path = directory / f"{'static' if static else 'dynamic'}-{quantize}.tflite"
        export(ExportOptions(model, "tflite", quantize, out=str(path), seq_len=16, static_axes=static,
                             validate=False, task="embedding", pooling="mean"), log=None)
        counts["static" if static else "dynamic"] = op_counts(path)
    return counts["dynamic"], counts["static"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_dynamic_length_file_has_the_ops_of_its_static_twin(family, tmp_path):
    preset, overrides, margin = FAMILIES[family]
    model = mbk.build(preset, attention_mask_value=-120.0, **overrides)
    dynamic, static = export_pair(model, tmp_path)
    total_dynamic, total_static = sum(dynamic.values()), sum(static.values())
    print(f"{family}: static {total_static} ops, dynamic {total_dynamic}")
    assert total_dynamic <= total_static + margin, (family, dynamic - static)
    # Every Dense is one FULLY_CONNECTED in both files, with no tensordot shape arithmetic around it. (NEZHA's
    # value term multiplies by the distance table gathered for the length: a BATCH_MATMUL at an open length.)
    products = [counts["FULLY_CONNECTED"] + counts["BATCH_MATMUL"] for counts in (dynamic, static)]
    assert products[0] == products[1], (dynamic, static)
    assert not any(dynamic[op] for op in TENSORDOT), dynamic


def test_full_int8_dynamic_file_fuses_every_bias_as_the_static_file_does(tmp_path):
    # Measured (tiny-mobilebert, full int8): the dynamic file has the static file's ADDs and FULLY_CONNECTEDs;
    # tf_keras' tensordot left the bias ADDs unfused (issue 46: 36 in all-MiniLM-L6-v2's full-int8 file).
    model = mbk.build("tiny-mobilebert", attention_mask_value=-120.0)
    dynamic, static = export_pair(model, tmp_path, "int8")
    assert dynamic["ADD"] == static["ADD"], (dynamic, static)
    assert dynamic["FULLY_CONNECTED"] == static["FULLY_CONNECTED"], (dynamic, static)
    assert sum(dynamic.values()) <= sum(static.values()) + OPEN_LENGTH + 4, dynamic - static


@pytest.mark.parametrize("shape", [(2, 5, 12), (3, 12)])
def test_token_dense_is_dense(shape):
    # Same weights, names, config and outputs as keras' Dense: checkpoints and saved models load unchanged.
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    ours = TokenDense(7, activation="relu", name="query")
    theirs = keras.layers.Dense(7, activation="relu", name="query")
    ours.build(x.shape)
    theirs.build(x.shape)
    theirs.set_weights(ours.get_weights())
    assert [w.name for w in ours.weights] == [w.name for w in theirs.weights]
    assert ours.get_config() == theirs.get_config()
    np.testing.assert_allclose(ours(x).numpy(), theirs(x).numpy(), rtol=1e-6, atol=1e-6)


def test_token_dense_keeps_encoder_weight_paths():
    encoder = mbk.build("tiny-mobilebert")
    paths = named_weights(encoder)
    for path in ("transformer_layer_0/attention/query/kernel", "transformer_layer_0/ffn_1/intermediate/bias",
                 "transformer_layer_1/bottleneck_input/dense/kernel", "embeddings/embedding_transformation/kernel"):
        assert any(p.endswith(path) for p in paths), path


def test_reshape_leading_names_static_dims_and_leaves_one_open():
    @tf.function(input_signature=[tf.TensorSpec([1, None, 8])])
    def split(x):
        return reshape_leading(x, [2, 4])

    graph = split.get_concrete_function().graph
    assert "Shape" not in {op.type for op in graph.get_operations()}  # one constant shape: [1, -1, 2, 4]
    assert split(tf.ones([1, 5, 8])).shape == (1, 5, 2, 4)

    @tf.function(input_signature=[tf.TensorSpec([None, None, 8])])
    def both_open(x):
        return reshape_leading(x, [2, 4])

    assert both_open(tf.ones([3, 5, 8])).shape == (3, 5, 2, 4)
    assert leading_dims(tf.ones([2, 7, 3])) == [2, 7]

    @tf.function(input_signature=[tf.TensorSpec([1, None, 8])])
    def dims(x):
        batch, seq = leading_dims(x)
        assert batch == 1 and not isinstance(seq, int)  # the static batch as an int, the open length a tensor
        return seq

    assert int(dims(tf.ones([1, 5, 8]))) == 5
