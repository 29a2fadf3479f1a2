"""Parity with Hugging Face's PyTorch MobileBertModel and BertModel (dev extra).

Random weights are written to safetensors with ``save_pretrained`` and imported
with ``mbk.import_checkpoint``. Criterion (issue 2): max |ours - ref| <=
1e-4 * max |ref| on unpadded inputs; padded batches agree on the real tokens.
"""

import numpy as np
import pytest

import mobilebert_kit as mbk
from tests.helpers import assert_close_relative, random_inputs, run_encoder

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.parity

TINY_MOBILEBERT = dict(
    vocab_size=99, hidden_size=48, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40,
    embedding_size=16, intra_bottleneck_size=24, max_position_embeddings=64, type_vocab_size=2,
    num_feedforward_networks=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
)
TINY_BERT = dict(
    vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
    max_position_embeddings=64, type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
)


def _randomize(model, seed=0):
    # Init-scale weights (std 0.02) hide transposition and scaling bugs; use larger ones.
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * (0.3 if param.ndim > 1 else 0.5))
            if name.endswith("LayerNorm.weight"):
                param.add_(1.0)
    return model.eval()


def save_reference(tmp_path, kind, seed=0, **config):
    """Builds a random HF model of ``kind`` ("mobilebert" | "bert"), saves safetensors, returns it."""
    if kind == "mobilebert":
        cfg = transformers.MobileBertConfig(**{**TINY_MOBILEBERT, **config})
        model = transformers.MobileBertModel(cfg)
    else:
        cfg = transformers.BertConfig(**{**TINY_BERT, **config})
        model = transformers.BertModel(cfg)
    _randomize(model, seed)
    model.save_pretrained(tmp_path, safe_serialization=True)
    return model


def reference_outputs(model, inputs):
    with torch.no_grad():
        out = model(**{k: torch.tensor(v, dtype=torch.long) for k, v in inputs.items()})
    return out.last_hidden_state.numpy(), out.pooler_output.numpy()


def check_parity(tmp_path, ref, shapes):
    ours = mbk.import_checkpoint(tmp_path)
    vocab = ref.config.vocab_size
    for batch, seq in shapes:
        inputs = random_inputs(vocab, batch_size=batch, seq_len=seq, seed=batch * 100 + seq)
        seq_ref, pooled_ref = reference_outputs(ref, inputs)
        out = run_encoder(ours, inputs)
        assert_close_relative(out["sequence_output"], seq_ref)
        assert_close_relative(out["pooled_output"], pooled_ref)
    padded = random_inputs(vocab, batch_size=3, seq_len=12, pad_last=5)
    seq_ref, _ = reference_outputs(ref, padded)
    assert_close_relative(run_encoder(ours, padded)["sequence_output"], seq_ref, mask=padded["attention_mask"])
    return ours


SHAPES = [(1, 5), (2, 16), (3, 33)]


@pytest.mark.parametrize("norm", ["no_norm", "layer_norm"])
@pytest.mark.parametrize("act", ["relu", "gelu", "gelu_new", "relu6"])
def test_mobilebert_parity_norms_and_activations(tmp_path, norm, act):
    ref = save_reference(tmp_path, "mobilebert", normalization_type=norm, hidden_act=act)
    ours = check_parity(tmp_path, ref, SHAPES)
    assert ours.config["hidden_act"] == {"gelu_new": "gelu_tanh"}.get(act, act)


@pytest.mark.parametrize(
    "variant",
    [
        dict(key_query_shared_bottleneck=False, use_bottleneck_attention=True),  # MobileBERT-tiny
        dict(trigram_input=False, num_feedforward_networks=1),
        dict(classifier_activation=False, num_feedforward_networks=4),
        dict(use_bottleneck=False, intra_bottleneck_size=48, key_query_shared_bottleneck=False, trigram_input=False,
             embedding_size=48),  # BERT-shaped through the MobileBERT code
    ],
    ids=["bottleneck-attention", "no-trigram-one-ffn", "no-pooler-4-ffn", "no-bottleneck"],
)
def test_mobilebert_parity_structural_options(tmp_path, variant):
    ref = save_reference(tmp_path, "mobilebert", seed=1, **variant)
    check_parity(tmp_path, ref, [(2, 9)])


@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu"])
def test_bert_parity(tmp_path, act):
    ref = save_reference(tmp_path, "bert", hidden_act=act)
    ours = check_parity(tmp_path, ref, SHAPES)
    assert ours.config["classifier_activation"] is True


def test_mobilebert_pretraining_heads_import_and_match(tmp_path):
    cfg = transformers.MobileBertConfig(**TINY_MOBILEBERT)
    ref = _randomize(transformers.MobileBertForPreTraining(cfg), seed=3)
    ref.save_pretrained(tmp_path, safe_serialization=True)
    ours = mbk.import_checkpoint(tmp_path, head="auto")
    assert ours.architecture == "pretrainer"
    inputs = random_inputs(cfg.vocab_size, batch_size=2, seq_len=10)
    with torch.no_grad():
        out = ref(**{k: torch.tensor(v, dtype=torch.long) for k, v in inputs.items()})
    got = run_encoder(ours, inputs)
    assert_close_relative(got["mlm_logits"], out.prediction_logits.numpy())
    assert_close_relative(got["nsp_logits"], out.seq_relationship_logits.numpy())


def test_teacher_layout_is_reported_not_guessed(tmp_path):
    """IB-BERT (q/k/v from the block input) cannot run in Hugging Face MobileBERT (parity-notes.md):
    its query/key are sized for the intra width. Importing such a file must fail with every misfit named."""
    ref = save_reference(tmp_path, "mobilebert", key_query_shared_bottleneck=False, use_bottleneck_attention=False)
    with pytest.raises(RuntimeError):
        reference_outputs(ref, random_inputs(99, seq_len=4))  # the reference itself cannot run it
    with pytest.raises(mbk.CheckpointError) as info:
        mbk.import_checkpoint(tmp_path)
    text = str(info.value)
    assert "4 misshaped" in text
    assert "misshaped transformer_layer_0/attention/query/kernel: expected shape [48, 24], got [24, 24]" in text
