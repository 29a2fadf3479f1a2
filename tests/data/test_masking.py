"""Masking statistics (80/10/10 at the configured rate) and whole-word grouping (## and jieba)."""

import random

import numpy as np
import pytest

from mobilebert_kit.data.masking import group_words, mask_tokens, word_starts


def test_wordpiece_word_starts_and_groups():
    tokens = ["[CLS]", "una", "##ffa", "##ble", "cat", "[SEP]", "##s", "dog"]
    starts = word_starts(tokens, [(0, 0)] * len(tokens), "", "wordpiece")
    assert starts == [True, True, False, False, True, True, False, True]
    maskable = [t not in ("[CLS]", "[SEP]") for t in tokens]
    # A continuation right after a special token still starts a group of its own.
    assert group_words(starts, maskable) == [[1, 2, 3], [4], [6], [7]]
    assert word_starts(tokens, [(0, 0)] * len(tokens), "", "none") == [True] * len(tokens)


def test_jieba_groups_chinese_words():
    pytest.importorskip("jieba")
    text = "我爱北京天安门"
    tokens = list(text)
    offsets = [(i, i + 1) for i in range(len(text))]
    # jieba: 我 | 爱 | 北京 | 天安门
    assert word_starts(tokens, offsets, text, "jieba") == [True, True, True, False, True, False, False]
    # Mixed text: English pieces follow the ## rule.
    text = "我爱unaffable"
    tokens = ["我", "爱", "una", "##ffa", "##ble"]
    offsets = [(0, 1), (1, 2), (2, 5), (5, 8), (8, 11)]
    assert word_starts(tokens, offsets, text, "jieba") == [True, True, True, False, False]


def test_masking_statistics_follow_80_10_10():
    rng = random.Random(0)
    n, mask_id = 200, 1
    ids = list(range(10, 10 + n))
    starts, maskable = [True] * n, [i not in (0, n - 1) for i in range(n)]
    random_ids = list(range(1000, 2000))
    chosen = masked = kept = replaced = 0
    for _ in range(300):
        corrupted, positions, labels = mask_tokens(ids, starts, maskable, rng, mask_id, random_ids,
                                                   masked_lm_prob=0.15, max_predictions=100)
        assert 0 not in positions and n - 1 not in positions
        assert labels == [ids[p] for p in positions] and positions == sorted(set(positions))
        untouched = set(range(n)) - set(positions)
        assert all(corrupted[i] == ids[i] for i in untouched)
        chosen += len(positions)
        for p in positions:
            masked += corrupted[p] == mask_id
            kept += corrupted[p] == ids[p]
            replaced += corrupted[p] in random_ids
    assert chosen == 300 * round(198 * 0.15)  # the budget is exact when words are single tokens
    assert masked / chosen == pytest.approx(0.8, abs=0.015)
    assert kept / chosen == pytest.approx(0.1, abs=0.012)
    assert replaced / chosen == pytest.approx(0.1, abs=0.012)
    # max_predictions caps the budget
    _, positions, _ = mask_tokens(ids, starts, maskable, rng, mask_id, random_ids, 0.5, max_predictions=7)
    assert len(positions) == 7


def test_whole_word_masking_takes_words_whole():
    rng = random.Random(1)
    n = 120
    starts = [i % 3 == 1 for i in range(n)]  # words of 3 pieces starting at 1, 4, 7, ...
    maskable = [0 < i < n - 1 for i in range(n)]
    groups = group_words(starts, maskable)
    group_of = {i: tuple(g) for g in groups for i in g}
    counts = []
    for _ in range(200):
        _, positions, _ = mask_tokens(list(range(n)), starts, maskable, rng, 0, [5], 0.15, 40)
        picked = set(positions)
        for p in positions:
            assert set(group_of[p]) <= picked, "a word was split"
        counts.append(len(positions))
    # ~15% of 118 tokens, in whole words of 3: 18 exactly when the budget is a multiple of 3.
    assert np.mean(counts) == pytest.approx(18, abs=1.0)
