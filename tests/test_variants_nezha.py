"""NEZHA (Wei et al., 2019): functional relative positions, import (HF and NEZHA-TensorFlow) and parity.

Parity is against ``transformers.models.deprecated.nezha.NezhaModel``
(transformers 4.57, test-only) with random weights; sequences are longer than
the clipping distance ``max_relative_position`` so the clipped rows are used.
Criterion: max |ours - ref| <= 1e-4 * max |ref| on unpadded inputs; padded
batches agree on real tokens.
"""

import json

import numpy as np
import pytest

import mobilebert_kit as mbk
from mobilebert_kit.errors import ConfigError
from tests.helpers import assert_close_relative, random_inputs, run_encoder
from tests.parity_helpers import assert_parity, randomize, reference_forward

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
nezha = pytest.importorskip("transformers.models.deprecated.nezha.modeling_nezha")

TINY_NEZHA = dict(
    vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
    max_position_embeddings=64, max_relative_position=4, type_vocab_size=2, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def make_reference(seed=0, **overrides):
    from transformers.models.deprecated.nezha.configuration_nezha import NezhaConfig

    return randomize(nezha.NezhaModel(NezhaConfig(**{**TINY_NEZHA, **overrides})), seed)


def check_parity(ours, ref, shapes=((1, 3), (2, 9), (2, 40))):
    assert_parity(ours, ref, shapes, padded=(3, 14, 6))


@pytest.mark.parity
@pytest.mark.parametrize("max_relative_position", [4, 64])
def test_nezha_hf_parity(tmp_path, max_relative_position):
    ref = make_reference(max_relative_position=max_relative_position)
    ref.save_pretrained(tmp_path, safe_serialization=True)
    ours = mbk.import_checkpoint(tmp_path)
    assert ours.config["position_embedding_type"] == "relative_functional"
    assert ours.config["max_relative_position"] == max_relative_position
    assert "embeddings/position_embeddings" not in mbk.models.api.named_weights(ours)
    check_parity(ours, ref)  # seq 9 and 40 > K=4: clipped distances


def _write_tf1_checkpoint(ref, directory, config):
    """Writes ``ref``'s weights under NEZHA-TensorFlow (google-research BERT) variable names."""
    import tensorflow as tf

    arrays = {}
    for name, tensor in ref.state_dict().items():
        if "relative_positions_encoding" in name or name.endswith("token_type_ids"):
            continue
        value = tensor.numpy()
        parts = name.split(".")
        leaf = parts.pop()
        scope = "/".join(f"layer_{p}" if parts[i - 1] == "layer" else p for i, p in enumerate(parts) if p != "layer")
        if scope.endswith("LayerNorm"):
            leaf = {"weight": "gamma", "bias": "beta"}[leaf]
        elif scope.endswith("_embeddings"):
            leaf = None
        elif leaf == "weight":
            leaf, value = "kernel", value.T
        arrays["bert/" + scope + (f"/{leaf}" if leaf else "")] = value
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf.compat.v1.Variable(v, name=k) for k, v in arrays.items()]
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            prefix = saver.save(session, str(directory / "model.ckpt"))
    (directory / "bert_config.json").write_text(json.dumps(config))
    return prefix, sorted(arrays)


@pytest.mark.parity
def test_nezha_tensorflow_checkpoint_import(tmp_path):
    # The TF reference's "gelu" is the tanh form (Hugging Face: gelu_new) and K is fixed at 64.
    ref = make_reference(max_relative_position=64, hidden_act="gelu_new", max_position_embeddings=96)
    config = {"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 37, "hidden_act": "gelu", "max_position_embeddings": 96, "type_vocab_size": 2,
              "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "use_relative_position": True}
    prefix, names = _write_tf1_checkpoint(ref, tmp_path, config)
    assert "bert/encoder/layer_1/attention/self/query/kernel" in names
    assert "bert/embeddings/LayerNorm/gamma" in names and not any("position_embeddings" in n for n in names)
    ours = mbk.import_checkpoint(prefix)
    assert ours.config["hidden_act"] == "gelu_tanh" and ours.config["max_relative_position"] == 64
    check_parity(ours, ref, shapes=((1, 5), (2, 80)))  # 80 > 64: clipping


def test_sinusoid_table_matches_reference_code_formula():
    """NEZHA-TensorFlow: table[pos, 2i] = sin(pos / 10000^(2i/d)), cos on odd dims, pos = shifted index."""
    from mobilebert_kit.layers.relative_positions import sinusoid_table

    table = sinusoid_table(3, 6)
    for pos in range(7):
        for i in range(3):
            assert table[pos, 2 * i] == pytest.approx(np.sin(pos / 10000 ** (2 * i / 6)), abs=1e-7)
            assert table[pos, 2 * i + 1] == pytest.approx(np.cos(pos / 10000 ** (2 * i / 6)), abs=1e-7)


def test_relative_functional_has_no_trainable_position_weights():
    plain = mbk.build("tiny-nezha", position_embedding_type="none")
    relative = mbk.build("tiny-nezha")
    assert mbk.count_params(plain) == mbk.count_params(relative)
    inputs = random_inputs(512, batch_size=1, seq_len=10)
    from mobilebert_kit.models.api import assign_weights, named_weights

    assign_weights(plain, {k: v.numpy() for k, v in named_weights(relative).items()})
    assert not np.allclose(run_encoder(plain, inputs)["sequence_output"],
                           run_encoder(relative, inputs)["sequence_output"], atol=1e-3)


def test_relative_tables_are_bounded_by_max_position_embeddings():
    encoder = mbk.build("tiny-nezha")
    with pytest.raises(ValueError, match="exceeds max_position_embeddings=64"):
        encoder(encoder.dummy_inputs(1, 65))
    with pytest.raises(ConfigError, match="relative_functional.*applies to attention_type='self_attention'"):
        mbk.build("tiny-nezha", attention_type="composite")


@pytest.mark.parity
def test_masked_lm_checkpoint_without_pooler_imports_as_encoder(tmp_path):
    from transformers.models.deprecated.nezha.configuration_nezha import NezhaConfig

    ref = randomize(nezha.NezhaForMaskedLM(NezhaConfig(**TINY_NEZHA)))  # saved without a pooler
    ref.save_pretrained(tmp_path, safe_serialization=True)
    ours = mbk.import_checkpoint(tmp_path)
    assert ours.config["classifier_activation"] is False
    inputs = random_inputs(99, batch_size=2, seq_len=12)
    expected = reference_forward(ref.nezha, inputs).last_hidden_state
    assert_close_relative(run_encoder(ours, inputs)["sequence_output"], expected.numpy())
