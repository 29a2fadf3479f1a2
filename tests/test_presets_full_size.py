"""Full-size presets: parameter counts (built, never run) and FLOPs against the MobileBERT paper.

Table 2 gives parameters; Tables 3-5 give #FLOPS at sequence length 128.
"""

import gc

import pytest

# Full-size models (about 70 s together): the slow tier, as the developers' guide puts full-size runs.
pytestmark = pytest.mark.slow

import mobilebert_kit as mbk

# preset: (paper params, paper FLOPs at 128)
PAPER = {
    "ib-bert-large": (293e6, 75.8e9),
    "bert-base": (109e6, 22.5e9),
    "bert-large": (334e6, 79.2e9),
    "bert-small-star": (25.3e6, 5.8e9),
}


@pytest.mark.parametrize(
    "preset",
    [pytest.param(p, marks=pytest.mark.slow) if PAPER[p][0] > 2e8 else p for p in PAPER],
)
def test_parameter_counts_and_flops_match_paper(preset):
    encoder = mbk.build(preset)
    params, flops = PAPER[preset]
    assert abs(mbk.count_params(encoder) - params) / params <= 0.01
    assert abs(mbk.count_flops(encoder, seq_len=128) - flops) / flops <= 0.05
    del encoder
    gc.collect()


def test_mobilebert_official_config_against_paper_table2():
    """The official student config (shared q/k bottleneck) has 24.58M parameters and 5.39 GFLOPs.

    Table 2's 25.3M and Table 3's 5.7B are reproduced by the same block when
    query and key are projected from the 512-d block input (as in IB-BERT):
    25.36M (+0.2%) and 5.59 GFLOPs (-2%). The paper's figures describe that
    layout; the released checkpoint and every public port use the shared
    bottleneck, which the `mobilebert` preset follows so that imported
    checkpoints and latency comparisons are like for like.
    """
    official = mbk.build("mobilebert")
    # Hand count: H=512 inter, I=128 intra, F=512 FFN, E=128 embedding, V=30522, 24 layers, 4 FFNs.
    H, I, F, E, V, L, S = 512, 128, 512, 128, 30522, 24, 128
    embeddings = V * E + (3 * E * H + H) + 512 * H + 2 * H + 2 * H
    block = (
        2 * (H * I + I + 2 * I)  # bottleneck_input, bottleneck_attention (dense + NoNorm)
        + 2 * (I * I + I) + (H * I + I)  # query, key from 128-d; value from 512-d
        + (I * I + I + 2 * I)  # attention_output
        + 4 * (I * F + F + F * I + I + 2 * I)  # 4 stacked FFNs
        + (I * H + H + 2 * H)  # output_bottleneck
    )
    assert mbk.count_params(official) == embeddings + L * block  # = 24,581,888
    macs = S * 3 * E * H + L * (S * (4 * H * I + 3 * I * I + 4 * 2 * I * F) + 2 * S * S * I)
    assert mbk.count_flops(official, seq_len=S) == 2 * macs  # = 5.385 G
    paper_layout = mbk.build("mobilebert", key_query_shared_bottleneck=False)
    assert abs(mbk.count_params(paper_layout) - 25.3e6) / 25.3e6 <= 0.01
    assert abs(mbk.count_flops(paper_layout, seq_len=128) - 5.7e9) / 5.7e9 <= 0.05
