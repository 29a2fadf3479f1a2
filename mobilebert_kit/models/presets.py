"""Paper configurations as presets: each a plain dict of Encoder keyword arguments.

Parameter counts in ``paper_params`` are Table 2 / Table 5 of the MobileBERT
paper (Sun et al., 2020), Table 3 of ConvBERT (Jiang et al., 2020) and Table 1
of "Convolutions and Self-Attention" (Chang et al., 2021); tests build every
preset and compare (docs/architectures.md explains each comparison).
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

# ELECTRA-style encoders (ConvBERT, the composite-attention BERTs): embedding-wide
# position/type tables and LayerNorm, then ``embeddings_project`` to the hidden size.
_CONVBERT = dict(
    _BERT,
    attention_type="convbert_mixed",
    head_ratio=2,
    conv_kernel_size=9,
    num_groups=1,
    embedding_projection="after_norm",
    classifier_activation=False,  # the reference ConvBertModel has no pooler
)

# NEZHA: BERT without absolute positions, functional relative positions in every attention layer.
_NEZHA = dict(
    _BERT,
    vocab_size=21128,
    position_embedding_type="relative_functional",
    max_relative_position=64,  # hard-coded in NEZHA-TensorFlow modeling.py
    hidden_act="gelu_tanh",  # the TF reference's gelu; Hugging Face's port uses exact gelu
)

# Composite attention BERTs (Chang et al., 2021, Table 4): SentencePiece vocabulary of 30004,
# no absolute position embeddings, kernel 17.
_COMPOSITE = dict(
    _BERT,
    vocab_size=30004,
    attention_type="composite",
    relative_attention_variant="composite",
    relative_window=8,
    position_embedding_type="none",
    embedding_projection="after_norm",
)

def _preset(config, description, paper_params=None):
    return dict(config=config, description=description, paper_params=paper_params)


# The tiny presets' shared sizes: a 512-word vocabulary, two layers, 64 positions.
_TINY = dict(vocab_size=512, num_layers=2, max_position_embeddings=64)

PRESETS = {
    "mobilebert": _preset(
        dict(_MOBILEBERT),
        "MobileBERT student, official uncased_L-24_H-128_B-512_A-4_F-4_OPT (NoNorm, ReLU)",
        25.3e6,
    ),
    "mobilebert-no-opt": _preset(
        dict(_MOBILEBERT, normalization_type="layer_norm", hidden_act="gelu"),
        "MobileBERT w/o OPT: LayerNorm and GELU (paper Tables 3 and 6)",
        25.3e6,
    ),
    "mobilebert-tiny": _preset(
        dict(_MOBILEBERT, key_query_shared_bottleneck=False, use_bottleneck_attention=True, num_feedforward_networks=2),
        "MobileBERT-tiny, official uncased_L-24_H-128_B-512_A-4_F-2_tiny_OPT",
    ),
    "ib-bert-large": _preset(
        dict(
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
        "IB-BERT-large teacher, official uncased_L-24_H-1024_B-512_A-4",
        293e6,
    ),
    "bert-base": _preset(
        dict(_BERT, hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072),
        "BERT-base (Devlin et al., 2019)",
        109e6,
    ),
    "bert-large": _preset(
        dict(_BERT, hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096),
        "BERT-large (Devlin et al., 2019)",
        334e6,
    ),
    "bert-small-star": _preset(
        dict(
            _BERT, hidden_size=384, num_layers=12, num_heads=12, intermediate_size=1536, embedding_size=128,
            # Trained with the MobileBERT code and settings, so no pooler, like the student:
            # 25.45M parameters (+0.6% vs Table 2); with a pooler it would be 25.60M (+1.2%).
            classifier_activation=False,
        ),
        "BERT-small* baseline of the MobileBERT paper (Table 2): factorized 128-d embeddings",
        25.3e6,
    ),
    "convbert-small": _preset(
        dict(_CONVBERT, hidden_size=256, embedding_size=128, num_layers=12, num_heads=4, intermediate_size=1024),
        "ConvBERT-small (Jiang et al., 2020): mixed attention, head ratio 2, kernel 9",
        14e6,
    ),
    "convbert-medium-small": _preset(
        dict(
            _CONVBERT, hidden_size=384, embedding_size=128, num_layers=12, num_heads=8, intermediate_size=1536,
            num_groups=2,
        ),
        "ConvBERT-medium-small: mixed attention, grouped linear FFN with 2 groups",
        17e6,
    ),
    "convbert-base": _preset(
        dict(_CONVBERT, hidden_size=768, embedding_size=768, num_layers=12, num_heads=12, intermediate_size=3072),
        "ConvBERT-base: mixed attention, head ratio 2, kernel 9",
        106e6,
    ),
    "nezha-base": _preset(
        dict(_NEZHA, hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072),
        "NEZHA-base (Wei et al., 2019): functional relative positions, K=64",
    ),
    "nezha-large": _preset(
        dict(_NEZHA, hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096),
        "NEZHA-large: functional relative positions, K=64",
    ),
    "composite-bert-small": _preset(
        dict(_COMPOSITE, hidden_size=256, embedding_size=128, num_layers=12, num_heads=4, intermediate_size=1024),
        "BERT-small with composite attention (Chang et al., 2021, Eq. 6), no absolute positions",
        13.43e6,  # Table 1, counted with the pre-training MLM head
    ),
    "composite-bert-base": _preset(
        dict(_COMPOSITE, hidden_size=768, embedding_size=768, num_layers=12, num_heads=12, intermediate_size=3072),
        "BERT-base with composite attention (Chang et al., 2021, Eq. 6), no absolute positions",
        108.74e6,  # Table 1, counted with the pre-training MLM head
    ),
    # Tiny presets keep every code path of their full-size twin at test speed.
    "tiny-mobilebert": _preset(
        dict(
            _MOBILEBERT,
            **_TINY,
            hidden_size=64,
            num_heads=2,
            intermediate_size=64,
            intra_bottleneck_size=32,
            num_feedforward_networks=2,
            embedding_size=16,
        ),
        "test size: MobileBERT code paths (bottleneck, shared q/k, stacked FFN, trigram, NoNorm)",
    ),
    "tiny-ib-bert": _preset(
        dict(
            _BERT,
            **_TINY,
            hidden_size=64,
            num_heads=2,
            intermediate_size=256,
            intra_bottleneck_size=128,
            use_bottleneck=True,
            trigram_input=True,
            embedding_size=16,
        ),
        "test size: IB-BERT teacher matching tiny-mobilebert's feature map, layers and heads",
    ),
    "tiny-bert": _preset(
        dict(_BERT, **_TINY, hidden_size=32, num_heads=2, intermediate_size=64),
        "test size: plain BERT",
    ),
    "tiny-convbert": _preset(
        dict(_CONVBERT, **_TINY, hidden_size=64, embedding_size=32, num_heads=4, intermediate_size=128),
        "test size: ConvBERT code paths (mixed attention, span convolution, ELECTRA embeddings)",
    ),
    "tiny-nezha": _preset(
        dict(_NEZHA, **_TINY, hidden_size=32, num_heads=2, intermediate_size=64, max_relative_position=4),
        "test size: NEZHA functional relative positions (K=4, so short inputs are clipped)",
    ),
    "tiny-composite": _preset(
        dict(_COMPOSITE, **_TINY, hidden_size=64, embedding_size=32, num_heads=2, intermediate_size=128,
             relative_window=4),
        "test size: composite attention (window 4, so short inputs reach the clamped edges)",
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
