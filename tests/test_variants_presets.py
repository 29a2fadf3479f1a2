"""Full-size variant presets: parameter counts (built, never run) against the papers and references.

- ConvBERT (Jiang et al., 2020, Tables 3-4: 14M / 17M / 106M, integer millions):
  our counts equal Hugging Face ``ConvBertModel`` built from the same config.
  Base is within 2% of the paper (-0.3%). Medium-small (17.48M) is +2.8%: it
  rounds to the paper's 17M. Small (13.14M) is -6.1% from the paper's "14M";
  the paper's own figure disagrees with its released config (Hugging Face
  gives the same 13.14M) and with the independent count in Chang et al.
  (2021), Table 7: 13.1M at their 30004-word vocabulary, which we match to 0.2%.
- Composite attention (Chang et al., 2021, Tables 1-2, two decimals): the
  figures count the pre-training model, i.e. the encoder without pooler plus
  an ELECTRA-style MLM head (dense hidden -> embedding, LayerNorm, output bias;
  decoder tied to the embeddings). Every row (no convolution, fixed, dynamic,
  composite, fixed depthwise, depthwise + composite, absolute positions)
  matches to the printed 0.01M.
- NEZHA (Wei et al., 2019) gives no counts: nezha-base must equal BERT-base
  (Chinese vocabulary 21128) minus the position table, which is Hugging Face
  ``NezhaModel``'s count.

Builds over ~10 s are marked slow; per-row composite checks build 1- and
2-layer models and extrapolate (identical layers), which is exact.
"""

import gc

import pytest

import mobilebert_kit as mbk
from mobilebert_kit.models.presets import PRESETS


def _count(preset, **overrides):
    encoder = mbk.build(preset, **overrides)
    count = mbk.count_params(encoder)
    del encoder
    gc.collect()
    return count


def _count_by_layers(preset, **overrides):
    """Parameters of the preset's depth from 1- and 2-layer builds (blocks are identical)."""
    one = _count(preset, num_layers=1, **overrides)
    two = _count(preset, num_layers=2, **overrides)
    return one + (PRESETS[preset]["config"]["num_layers"] - 1) * (two - one)


def _hf_convbert_count(config):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    hf = transformers.ConvBertConfig(
        vocab_size=config["vocab_size"], hidden_size=config["hidden_size"], embedding_size=config["embedding_size"],
        num_hidden_layers=config["num_layers"], num_attention_heads=config["num_heads"],
        intermediate_size=config["intermediate_size"], head_ratio=config["head_ratio"],
        conv_kernel_size=config["conv_kernel_size"], num_groups=config["num_groups"],
        max_position_embeddings=config["max_position_embeddings"], type_vocab_size=config["type_vocab_size"],
    )
    return sum(p.numel() for p in transformers.ConvBertModel(hf).parameters())


@pytest.mark.parametrize("preset", ["convbert-small", "convbert-medium-small", "convbert-base"])
def test_convbert_presets_match_reference_and_paper(preset):
    count = _count_by_layers(preset)
    assert count == _hf_convbert_count(PRESETS[preset]["config"])
    paper = PRESETS[preset]["paper_params"]
    if preset == "convbert-base":
        assert abs(count - paper) / paper <= 0.02
    elif preset == "convbert-medium-small":
        assert round(count / 1e6) == paper / 1e6  # 17.48M -> "17M"
    else:
        # The paper's "14M" is not reproducible from its config; Chang et al. (2021) Table 7 count 13.1M
        # at a 30004-word vocabulary.
        assert abs(_count_by_layers(preset, vocab_size=30004) - 13.1e6) / 13.1e6 <= 0.02


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["convbert-small", "convbert-medium-small", "convbert-base"])
def test_convbert_presets_build_at_full_depth(preset):
    assert _count(preset) == _hf_convbert_count(PRESETS[preset]["config"])


def _electra_mlm_head(config):
    h, e, v = config["hidden_size"], config["embedding_size"], config["vocab_size"]
    return h * e + e + 2 * e + v


# (preset, Encoder overrides, Table 1/2 figure in millions); three small rows run by default.
SLOW = pytest.mark.slow
COMPOSITE_ROWS = [
    ("composite-bert-small", dict(attention_type="self_attention"), 13.41),  # no convolution
    ("composite-bert-small", dict(), 13.43),  # composite, Eq. 6
    ("composite-bert-small", dict(relative_attention_variant="fixed_depthwise"), 13.47),
    pytest.param("composite-bert-small", dict(attention_type="self_attention", position_embedding_type="absolute",
                                              max_position_embeddings=128), 13.43, marks=SLOW),  # default BERT-small
    pytest.param("composite-bert-small", dict(relative_attention_variant="fixed"), 13.42, marks=SLOW),
    pytest.param("composite-bert-small", dict(relative_attention_variant="dynamic"), 13.43, marks=SLOW),
    pytest.param("composite-bert-small", dict(relative_attention_variant="composite_depthwise"), 13.48, marks=SLOW),
    pytest.param("composite-bert-base", dict(attention_type="self_attention", position_embedding_type="absolute",
                                             max_position_embeddings=128), 108.82, marks=SLOW),
    pytest.param("composite-bert-base", dict(relative_attention_variant="fixed"), 108.73, marks=SLOW),
    pytest.param("composite-bert-base", dict(relative_attention_variant="dynamic"), 108.74, marks=SLOW),
    pytest.param("composite-bert-base", dict(), 108.74, marks=SLOW),
]


@pytest.mark.parametrize("preset,overrides,table", COMPOSITE_ROWS)
def test_composite_presets_match_table_1(preset, overrides, table):
    config = dict(PRESETS[preset]["config"], **overrides)
    encoder_only = _count_by_layers(preset, classifier_activation=False, **overrides)
    assert round((encoder_only + _electra_mlm_head(config)) / 1e6, 2) == table


def test_composite_small_preset_builds_at_full_depth():
    count = _count("composite-bert-small", classifier_activation=False)
    assert count == _count_by_layers("composite-bert-small", classifier_activation=False)
    assert abs(count - 13.4e6) / 13.4e6 <= 0.01  # the "~13.4M" without the MLM head


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["nezha-base", "nezha-large"])
def test_nezha_presets_are_bert_without_position_table(preset):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from transformers.models.deprecated.nezha.configuration_nezha import NezhaConfig
    from transformers.models.deprecated.nezha.modeling_nezha import NezhaModel

    config = PRESETS[preset]["config"]
    count = _count(preset)
    assert count == _count(preset, position_embedding_type="absolute") - 512 * config["hidden_size"]
    reference = NezhaModel(NezhaConfig(
        vocab_size=config["vocab_size"], hidden_size=config["hidden_size"], num_hidden_layers=config["num_layers"],
        num_attention_heads=config["num_heads"], intermediate_size=config["intermediate_size"],
    ))
    assert count == sum(p.numel() for p in reference.parameters())
