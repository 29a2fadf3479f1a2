"""Masked-LM example masking: BERT's 80/10/10 rule, per token or per whole word.

Whole word masking (WWM) selects all the word pieces of a word together
(Cui et al., 2019; used by NEZHA, Sec. 2.3). Words are:

- ``"wordpiece"``: a token and its ``##`` continuations (English; Google's
  ``--do_whole_word_mask``);
- ``"jieba"``: the same for non-CJK text, and for Chinese the words of the
  ``jieba`` segmenter (BERT splits every CJK character into its own token, so
  word boundaries must come from a segmenter: NEZHA used jieba);
- ``"none"``: every token on its own (original BERT).

As in Google's code, once a word is chosen each of its tokens independently
becomes ``[MASK]`` (80%), stays (10%) or becomes a random token (10%).
"""

from mobilebert_kit.errors import DataError, check_choice

WHOLE_WORD_MODES = ("none", "wordpiece", "jieba")


def _is_cjk(char):
    """The CJK Unified Ideograph blocks BERT splits into single characters (BasicTokenizer._is_chinese_char)."""
    cp = ord(char)
    return (
        0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F
    )


def _jieba_spans(text):
    try:
        import jieba
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise DataError("Chinese whole word masking needs the jieba segmenter: pip install jieba") from err
    jieba.setLogLevel(60)  # its "Building prefix dict" chatter goes to stderr otherwise
    return [(start, end) for _, start, end in jieba.tokenize(text)]


def word_starts(tokens, offsets, text, mode):
    """For each token of ``text`` (its ``(start, end)`` character ``offsets``), True if it starts a word (a
    masking unit) in whole-word ``mode``.

    Example:
        >>> word_starts(["una", "##ffa", "##ble"], [(0, 3), (3, 6), (6, 9)], "unaffable", "wordpiece")
        [True, False, False]
    """
    check_choice("whole_word", mode, WHOLE_WORD_MODES)
    if mode == "none":
        return [True] * len(tokens)
    starts = [not t.startswith("##") for t in tokens]
    if mode == "jieba" and any(_is_cjk(ch) for ch in text):
        begins = {s for s, _ in _jieba_spans(text)}
        for i, (start, end) in enumerate(offsets):
            piece = text[start:end]
            if len(piece) == 1 and _is_cjk(piece):
                # A CJK character continues a word unless a jieba word begins at it.
                starts[i] = start in begins
        if starts:
            starts[0] = True
    return starts


def group_words(starts, maskable):
    """Index groups (words) of the maskable positions; a group starts where ``starts`` is True."""
    groups = []
    for i, (start, ok) in enumerate(zip(starts, maskable)):
        if not ok:
            continue
        if start or not groups or groups[-1][-1] != i - 1:
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def mask_tokens(ids, starts, maskable, rng, mask_id, random_ids, masked_lm_prob=0.15, max_predictions=20):
    """Chooses words to predict and corrupts their tokens with the 80/10/10 rule.

    ``starts`` marks each word's first token (:func:`word_starts`), ``maskable`` is False for special tokens,
    ``rng`` (a ``random.Random``) is the only source of randomness, ``random_ids`` are the replacement ids (no
    special tokens). Returns ``(corrupted_ids, positions, labels)``, positions ascending."""
    groups = group_words(starts, maskable)
    rng.shuffle(groups)
    budget = min(max_predictions, max(1, int(round(sum(maskable) * masked_lm_prob))))
    chosen = []
    for group in groups:
        if len(chosen) >= budget:
            break
        if len(chosen) + len(group) > budget:
            continue  # Google's rule: skip a word that would overshoot, try a shorter one
        chosen.extend(group)
    corrupted = list(ids)
    for i in chosen:
        draw = rng.random()
        if draw < 0.8:
            corrupted[i] = mask_id
        elif draw < 0.9:
            pass  # keep the original token
        else:
            corrupted[i] = random_ids[rng.randrange(len(random_ids))]
    positions = sorted(chosen)
    return corrupted, positions, [ids[i] for i in positions]
