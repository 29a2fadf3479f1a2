"""Paper configurations as presets: each a plain dict of Encoder keyword arguments.

Parameter counts in ``paper_params`` are Table 2 / Table 5 of the MobileBERT
paper (Sun et al., 2020); tests build every preset and compare.
"""

from mobilebert_kit.errors import ConfigError

_MOBILEBERT = dict(
    vocab_size=30522,
    hidden_size=512,
    num_layers=24,
    num_heads=4,
    intermediate_size=512,
    intra_bottleneck_size=128,
    use_bottleneck=True,
    key_query_shared_bottleneck=True,
    num_feedforward_networks=4,
    normalization_type="no_norm",
    hidden_act="relu",
    trigram_input=True,
    embedding_size=128,
    classifier_activation=False,
    max_position_embeddings=512,
    type_vocab_size=2,
    hidden_dropout=0.0,
    attention_dropout=0.1,
)

_BERT = dict(
    vocab_size=30522,
    normalization_type="layer_norm",
    hidden_act="gelu",
    classifier_activation=True,
    max_position_embeddings=512,
    type_vocab_size=2,
    hidden_dropout=0.1,
    attention_dropout=0.1,
)

PRESETS = {
    "mobilebert": dict(
        config=dict(_MOBILEBERT),
        description="MobileBERT student, official uncased_L-24_H-128_B-512_A-4_F-4_OPT (NoNorm, ReLU)",
        paper_params=25.3e6,
    ),
    "mobilebert-no-opt": dict(
        config=dict(_MOBILEBERT, normalization_type="layer_norm", hidden_act="gelu"),
        description="MobileBERT w/o OPT: LayerNorm and GELU (paper Tables 3 and 6)",
        paper_params=25.3e6,
    ),
    "mobilebert-tiny": dict(
        config=dict(
            _MOBILEBERT,
            key_query_shared_bottleneck=False,
            use_bottleneck_attention=True,
            num_feedforward_networks=2,
        ),
        description="MobileBERT-tiny, official uncased_L-24_H-128_B-512_A-4_F-2_tiny_OPT",
        paper_params=None,
    ),
    "ib-bert-large": dict(
        config=dict(
            _BERT,
            hidden_size=512,
            num_layers=24,
            num_heads=4,
            intermediate_size=4096,
            intra_bottleneck_size=1024,
            use_bottleneck=True,
            trigram_input=True,
            embedding_size=128,
        ),
        description="IB-BERT-large teacher, official uncased_L-24_H-1024_B-512_A-4",
        paper_params=293e6,
    ),
    "bert-base": dict(
        config=dict(_BERT, hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072),
        description="BERT-base (Devlin et al., 2019)",
        paper_params=109e6,
    ),
    "bert-large": dict(
        config=dict(_BERT, hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096),
        description="BERT-large (Devlin et al., 2019)",
        paper_params=334e6,
    ),
    "bert-small-star": dict(
        config=dict(
            _BERT, hidden_size=384, num_layers=12, num_heads=12, intermediate_size=1536, embedding_size=128,
        ),
        description="BERT-small* baseline of the MobileBERT paper (Table 2): factorized 128-d embeddings",
        paper_params=25.3e6,
    ),
    # Tiny presets keep every code path of their full-size twin at test speed.
    "tiny-mobilebert": dict(
        config=dict(
            _MOBILEBERT,
            vocab_size=512,
            hidden_size=64,
            num_layers=2,
            num_heads=2,
            intermediate_size=64,
            intra_bottleneck_size=32,
            num_feedforward_networks=2,
            embedding_size=16,
            max_position_embeddings=64,
        ),
        description="test size: MobileBERT code paths (bottleneck, shared q/k, stacked FFN, trigram, NoNorm)",
        paper_params=None,
    ),
    "tiny-ib-bert": dict(
        config=dict(
            _BERT,
            vocab_size=512,
            hidden_size=64,
            num_layers=2,
            num_heads=2,
            intermediate_size=256,
            intra_bottleneck_size=128,
            use_bottleneck=True,
            trigram_input=True,
            embedding_size=16,
            max_position_embeddings=64,
        ),
        description="test size: IB-BERT teacher matching tiny-mobilebert's feature map, layers and heads",
        paper_params=None,
    ),
    "tiny-bert": dict(
        config=dict(
            _BERT, vocab_size=512, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
            max_position_embeddings=64,
        ),
        description="test size: plain BERT",
        paper_params=None,
    ),
}


def list_presets():
    """Returns the preset names in definition order."""
    return list(PRESETS)


def preset_config(name):
    """Returns a copy of the Encoder keyword arguments of preset ``name``."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; valid presets: {', '.join(PRESETS)}")
    return dict(PRESETS[name]["config"])
