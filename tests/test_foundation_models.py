"""Encoder family: layers, presets, heads, save/load, parameter and FLOP counts."""

import numpy as np
import pytest

import mobilebert_kit as mbk
from mobilebert_kit.errors import ConfigError
from tests.helpers import random_inputs, run_encoder, run_model_saving_test


def test_import_sets_legacy_keras_before_tensorflow():
    import os
    import subprocess
    import sys

    code = "import mobilebert_kit, os, sys; assert 'tensorflow' not in sys.modules; print(os.environ['TF_USE_LEGACY_KERAS'])"
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "1"
    encoder = mbk.build("tiny-bert")
    import tf_keras

    assert isinstance(encoder, tf_keras.Model)


@pytest.mark.parametrize("preset", ["tiny-mobilebert", "tiny-ib-bert", "tiny-bert"])
def test_encoder_contract(preset):
    encoder = mbk.build(preset)
    inputs = random_inputs(encoder.config["vocab_size"], batch_size=3, seq_len=7)
    out = run_encoder(encoder, inputs)
    hidden = encoder.config["hidden_size"]
    assert set(out) == {"sequence_output", "pooled_output"}
    assert out["sequence_output"].shape == (3, 7, hidden)
    assert out["pooled_output"].shape == (3, hidden)
    assert np.isfinite(out["sequence_output"]).all()
    assert [i.name for i in encoder.inputs] == ["attention_mask", "input_ids", "token_type_ids"] or {
        i.name for i in encoder.inputs
    } == {"input_ids", "attention_mask", "token_type_ids"}


def test_pooled_output_follows_classifier_activation():
    plain = mbk.build("tiny-mobilebert")  # classifier_activation=False: first token
    out = run_encoder(plain, random_inputs(512, seq_len=6))
    np.testing.assert_array_equal(out["pooled_output"], out["sequence_output"][:, 0])
    pooled = mbk.build("tiny-bert")  # dense + tanh
    out = run_encoder(pooled, random_inputs(512, seq_len=6))
    assert np.abs(out["pooled_output"]).max() <= 1.0
    assert not np.allclose(out["pooled_output"], out["sequence_output"][:, 0])


def test_hidden_states_and_attentions_change_outputs_not_weights():
    encoder = mbk.build("tiny-mobilebert", output_hidden_states=True, output_attentions=True)
    out = encoder(encoder.dummy_inputs(2, 6), training=False)
    assert len(out["hidden_states"]) == encoder.config["num_layers"] + 1
    assert out["attention_probs"][0].shape == (2, 2, 6, 6)
    np.testing.assert_allclose(out["attention_probs"][1].numpy().sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(out["hidden_states"][-1].numpy(), out["sequence_output"].numpy())
    assert mbk.count_params(encoder) == mbk.count_params(mbk.build("tiny-mobilebert"))


def test_block_sublayers_have_stable_names():
    block = mbk.build("tiny-mobilebert").get_layer("transformer_layer_1")
    names = {layer.name for layer in block._flatten_layers(include_self=False, recursive=False)}
    assert {"bottleneck_input", "bottleneck_attention", "attention", "attention_output",
            "ffn_0", "ffn_1", "output_bottleneck"} <= names
    bert_block = mbk.build("tiny-bert").get_layer("transformer_layer_0")
    bert_names = {layer.name for layer in bert_block._flatten_layers(include_self=False, recursive=False)}
    assert "bottleneck_input" not in bert_names and "ffn_0" in bert_names


def test_mobilebert_value_reads_block_input_and_query_reads_shared_bottleneck():
    from mobilebert_kit.models.api import named_weights

    weights = named_weights(mbk.build("tiny-mobilebert"))
    assert weights["transformer_layer_0/attention/value/kernel"].shape == (64, 32)  # from the 64-d block input
    assert weights["transformer_layer_0/attention/query/kernel"].shape == (32, 32)  # from the 32-d bottleneck
    teacher = named_weights(mbk.build("tiny-ib-bert"))
    assert teacher["transformer_layer_0/attention/query/kernel"].shape == (64, 128)  # IB-BERT: q from 64-d input


def test_trigram_embedding_matches_explicit_concatenation():
    encoder = mbk.build("tiny-mobilebert")
    emb = encoder.get_layer("embeddings")
    ids = np.array([[3, 7, 11, 5]], np.int32)
    table = emb.word_embeddings.numpy()
    x = table[ids[0]]
    zero = np.zeros_like(x[:1])
    trigram = np.concatenate([np.concatenate([x[1:], zero]), x, np.concatenate([zero, x[:-1]])], axis=-1)
    kernel = emb.embedding_transformation.kernel.numpy()
    bias = emb.embedding_transformation.bias.numpy()
    pre = trigram @ kernel + bias + emb.position_embeddings.numpy()[:4] + emb.token_type_embeddings.numpy()[0]
    expected = pre * emb.norm.gamma.numpy() + emb.norm.beta.numpy()  # NoNorm
    got = emb(ids, np.zeros_like(ids), training=False).numpy()[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_no_norm_is_elementwise_affine():
    from mobilebert_kit.layers import NoNorm

    layer = NoNorm()
    x = np.random.default_rng(0).normal(size=(2, 3, 5)).astype(np.float32)
    layer.build(x.shape)
    layer.gamma.assign(np.arange(5, dtype=np.float32))
    layer.beta.assign(np.full(5, 0.5, np.float32))
    np.testing.assert_allclose(layer(x).numpy(), x * np.arange(5) + 0.5, rtol=1e-6)


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "relu", "relu6"])
def test_activations_match_their_formulas(act):
    from math import erf, sqrt, tanh, pi

    from mobilebert_kit.layers import get_activation

    xs = np.linspace(-8, 8, 33).astype(np.float32)
    formulas = {
        "gelu": lambda v: 0.5 * v * (1 + erf(v / sqrt(2))),
        "gelu_tanh": lambda v: 0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v**3))),
        "relu": lambda v: max(v, 0.0),
        "relu6": lambda v: min(max(v, 0.0), 6.0),
    }
    expected = np.array([formulas[act](float(v)) for v in xs])
    np.testing.assert_allclose(get_activation(act)(xs).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_mask_value_and_mode_only_affect_padded_keys():
    inputs = random_inputs(512, batch_size=2, seq_len=8, pad_last=3)
    real = inputs["attention_mask"].astype(bool)
    base = mbk.build("tiny-bert", attention_dropout=0.0, hidden_dropout=0.0)
    from mobilebert_kit.models.api import named_weights

    rng = np.random.default_rng(1)
    # Larger-than-init weights so attention is far from uniform and masking visibly matters.
    weights = {k: rng.normal(0, 0.3, v.shape).astype(np.float32) for k, v in named_weights(base).items()}
    mbk.models.api.assign_weights(base, weights)
    reference = run_encoder(base, inputs)["sequence_output"]
    for kwargs, agrees in [({"attention_mask_value": -1e9}, True), ({"attention_mask_value": -120.0}, True),
                           ({"attention_mask_value": -1.0}, False),
                           ({"attention_mask_mode": "mul_add", "attention_mask_value": -6.0}, False)]:
        other = mbk.build("tiny-bert", **kwargs)
        mbk.models.api.assign_weights(other, weights)
        out = run_encoder(other, inputs)["sequence_output"]
        np.testing.assert_allclose(out[0], reference[0], rtol=1e-5, atol=1e-5)  # unpadded row untouched
        close = np.allclose(out[real], reference[real], rtol=1e-4, atol=1e-4)
        assert close == agrees, kwargs


def test_unknown_options_list_valid_values():
    with pytest.raises(ConfigError, match="unknown preset 'nope'; valid presets: mobilebert"):
        mbk.build("nope")
    with pytest.raises(ConfigError, match="unknown hidden_act 'swish'; valid values: 'gelu', 'gelu_tanh', 'relu', 'relu6'"):
        mbk.build("tiny-bert", hidden_act="swish")
    with pytest.raises(ConfigError, match="unknown normalization_type 'batch_norm'; valid values: 'layer_norm', 'no_norm'"):
        mbk.build("tiny-bert", normalization_type="batch_norm")
    with pytest.raises(ConfigError, match="unknown option\\(s\\) hidden_sise; valid options:"):
        mbk.build("tiny-bert", hidden_sise=3)
    with pytest.raises(ConfigError, match="not a multiple of num_heads"):
        mbk.build("tiny-bert", num_heads=5)


@pytest.mark.parametrize("head", ["encoder", "pretrainer", "sequence_classifier", "span_question_answerer", "token_classifier"])
def test_save_load_gives_identical_outputs(head, tmp_path):
    from mobilebert_kit.models.heads import HEADS

    encoder = mbk.build("tiny-mobilebert")
    model = encoder if head == "encoder" else HEADS[head](encoder)
    loaded = run_model_saving_test(model, tmp_path, random_inputs(512, batch_size=2, seq_len=6, pad_last=2))
    assert type(loaded) is type(model)
    assert not list(tmp_path.glob(".*partial"))


def test_heads_output_shapes():
    from mobilebert_kit.models.heads import BertPretrainer, SequenceClassifier, SpanQuestionAnswerer, TokenClassifier

    encoder = mbk.build("tiny-mobilebert")
    inputs = random_inputs(512, batch_size=2, seq_len=6)
    out = run_encoder(BertPretrainer(encoder), inputs)
    assert out["mlm_logits"].shape == (2, 6, 512) and out["nsp_logits"].shape == (2, 2)
    assert run_encoder(SequenceClassifier(encoder, num_labels=3), inputs)["logits"].shape == (2, 3)
    qa = run_encoder(SpanQuestionAnswerer(encoder), inputs)
    assert qa["start_logits"].shape == (2, 6) and qa["end_logits"].shape == (2, 6)
    assert run_encoder(TokenClassifier(encoder, num_labels=5), inputs)["logits"].shape == (2, 6, 5)


def test_mlm_head_ties_embeddings_and_extra_output_weights():
    from mobilebert_kit.models.heads import BertPretrainer
    from mobilebert_kit.models.api import named_weights

    model = BertPretrainer(mbk.build("tiny-mobilebert"))
    weights = named_weights(model)
    assert weights["mlm/extra_output_weights"].shape == (512, 64 - 16)
    assert sum(1 for p in weights if p.endswith("word_embeddings")) == 1  # tied, counted once
    inputs = random_inputs(512, batch_size=1, seq_len=4)
    out = run_encoder(model, inputs)
    mlm = model.get_layer("mlm")
    h = mlm.transform_norm(mlm.transform(out["sequence_output"])).numpy()
    full = np.concatenate([model.encoder.embedding_table.numpy(), weights["mlm/extra_output_weights"].numpy()], 1)
    np.testing.assert_allclose(out["mlm_logits"], h @ full.T + weights["mlm/output_bias"].numpy(), rtol=1e-4, atol=1e-5)


def test_flop_counter_matches_hand_count():
    encoder = mbk.build("tiny-mobilebert")
    s, h, i, f, e, layers = 16, 64, 32, 64, 16, 2
    per_layer = s * (h * i * 3 + i * i * 3 + 2 * 2 * i * f + i * h) + 2 * s * s * i
    expected = 2 * (layers * per_layer + s * 3 * e * h)
    assert mbk.count_flops(encoder, seq_len=16) == expected
    bert = mbk.build("tiny-bert")
    s, h, f = 16, 32, 64
    expected_bert = 2 * (2 * (s * (4 * h * h + 2 * h * f) + 2 * s * s * h) + h * h)  # + pooler
    assert mbk.count_flops(bert, seq_len=16) == expected_bert
