"""Tiny tokenizers of each kind users' checkpoints ship, saved by transformers' own fast tokenizer classes.

Nothing downloads: each was trained by the ``tokenizers`` library on the
package's sample sentences and is kept in ``tests/fixtures/tokenizers/``
(training is not reproducible across processes: the library's hash maps break
ties differently in each, and one vocabulary gave a tiny MPNet whose dynamic
int8 file failed validation; :func:`regenerate` rewrites them), and wrapped in
the family's transformers class (``XLMRobertaTokenizerFast``, ``AlbertTokenizerFast``,
``RobertaTokenizerFast``, ``MPNetTokenizerFast``, ``DebertaV2TokenizerFast``), whose ``save_pretrained``
writes the files a real checkpoint directory has (``tokenizer.json``,
``tokenizer_config.json``, ``special_tokens_map.json``). The families' special
tokens and ids are the real ones' (XLM-R: ``<s> <pad> </s> <unk>`` at 0-3,
``<mask>`` last; RoBERTa the same; ALBERT ``<pad> <unk> [CLS] [SEP] [MASK]``;
MPNet ``<s> <pad> </s> <unk>`` before a BERT vocabulary holding its own
``[CLS]``... and ``<mask>`` last; DeBERTa-v3 ``[PAD] [CLS] [SEP] [UNK]`` at 0-3,
``[MASK]`` last, cased, its pairs ``[CLS] A [SEP] B [SEP]`` with segments 0/1).

Example:
    >>> vocab_size = save_tokenizer("xlm-roberta", tmp_path)  # doctest: +SKIP
"""

from pathlib import Path

from mobilebert_kit.convert.plan.sample_text import CALIBRATION_SENTENCES, SENTENCES

TEXT = list(SENTENCES) + list(CALIBRATION_SENTENCES)
UNIGRAM_SIZE = 300
BPE_SIZE = 400


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tokenizers"
_FIXTURE_FILES = {"xlm-roberta": "xlm-roberta.json", "albert": "albert.json", "roberta": "roberta.json",
                  "wordpiece": "wordpiece-vocab.txt", "deberta-v2": "deberta-v2.json"}


def regenerate():
    """Trains the kept tokenizers again and rewrites ``tests/fixtures/tokenizers/`` (a maintainer's step)."""
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for kind, name in _FIXTURE_FILES.items():
        if kind == "wordpiece":
            (FIXTURES / name).write_text("\n".join(_wordpiece_vocab()) + "\n", encoding="utf-8")
        else:
            _trained(kind).save(str(FIXTURES / name))


def _kept(kind):
    """The kept tokenizer of ``kind`` (a ``tokenizers.Tokenizer``, or the WordPiece vocabulary's lines)."""
    from tokenizers import Tokenizer

    path = FIXTURES / _FIXTURE_FILES[kind]
    if kind == "wordpiece":
        return path.read_text(encoding="utf-8").splitlines()
    return Tokenizer.from_file(str(path))


def _trained(kind):
    """A freshly trained tokenizer of ``kind`` with its post-processor (what :func:`regenerate` keeps)."""
    from tokenizers import ByteLevelBPETokenizer, processors

    if kind == "xlm-roberta":
        tok = _unigram(["<s>", "<pad>", "</s>", "<unk>"])
        tok.add_special_tokens(["<mask>"])
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
        return tok
    if kind == "deberta-v2":  # DeBERTa-v3's spm.model as its tokenizer.json: cased Unigram, BERT-named specials
        tok = _unigram(["[PAD]", "[CLS]", "[SEP]", "[UNK]"], unk="[UNK]")
        tok.add_special_tokens(["[MASK]"])
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
            special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
        return tok
    if kind == "albert":
        tok = _unigram(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"], lowercase=True)
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
            special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
        return tok
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(TEXT, vocab_size=BPE_SIZE, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                            show_progress=False)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return tok._tokenizer


def _unigram(specials, lowercase=False, unk="<unk>"):
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, trainers
    from tokenizers.models import Unigram

    tok = Tokenizer(Unigram())
    steps = [normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else [])
    steps.append(normalizers.Replace(" {2,}", " "))
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.train_from_iterator(TEXT, trainers.UnigramTrainer(
        vocab_size=UNIGRAM_SIZE, special_tokens=list(specials), unk_token=unk, show_progress=False))
    return tok


def _wordpiece_vocab():
    from tokenizers import BertWordPieceTokenizer

    tok = BertWordPieceTokenizer(lowercase=True)
    tok.train_from_iterator(TEXT, vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                            show_progress=False)
    return [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]


def save_tokenizer(family, directory):
    """Writes ``family``'s tiny tokenizer files into ``directory``; returns its vocabulary size.

    Args:
        family (str): ``"xlm-roberta"``, ``"albert"``, ``"roberta"``, ``"mpnet"``, ``"deberta-v2"``, ``"modernbert"`` (RoBERTa's
            byte-level BPE as ``PreTrainedTokenizerFast``), or a BERT WordPiece family
            (``"bert"``, ``"distilbert"``, ``"electra"``).
        directory (str | os.PathLike): the checkpoint directory.
    """
    import transformers

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if family == "xlm-roberta":
        fast = transformers.XLMRobertaTokenizerFast(tokenizer_object=_kept(family), bos_token="<s>", eos_token="</s>",
                                                    sep_token="</s>", cls_token="<s>", unk_token="<unk>",
                                                    pad_token="<pad>", mask_token="<mask>")
    elif family == "albert":
        fast = transformers.AlbertTokenizerFast(tokenizer_object=_kept(family), do_lower_case=True, unk_token="<unk>",
                                                pad_token="<pad>", cls_token="[CLS]", sep_token="[SEP]",
                                                mask_token="[MASK]", bos_token="[CLS]", eos_token="[SEP]")
    elif family == "deberta-v2":
        fast = transformers.DebertaV2TokenizerFast(tokenizer_object=_kept(family), do_lower_case=False,
                                                   unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                                   sep_token="[SEP]", mask_token="[MASK]", bos_token="[CLS]",
                                                   eos_token="[SEP]")
    elif family == "roberta":
        fast = transformers.RobertaTokenizerFast(tokenizer_object=_kept(family), bos_token="<s>", eos_token="</s>",
                                                 sep_token="</s>", cls_token="<s>", unk_token="<unk>",
                                                 pad_token="<pad>", mask_token="<mask>")
    elif family == "modernbert":
        # ModernBERT checkpoints ship a byte-level BPE tokenizer.json under the generic PreTrainedTokenizerFast,
        # its special tokens added by a TemplateProcessing ("[CLS] $A [SEP]", pairs "[CLS] $A [SEP] $B [SEP]").
        from tokenizers import processors

        kept = _kept("roberta")
        kept.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1", special_tokens=[("<s>", 0), ("</s>", 2)])
        fast = transformers.PreTrainedTokenizerFast(tokenizer_object=kept, bos_token="<s>",
                                                    eos_token="</s>", sep_token="</s>", cls_token="<s>",
                                                    unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                                                    model_input_names=["input_ids", "attention_mask"])
    elif family in ("distilbert", "electra", "bert"):
        (directory / "vocab.txt").write_text("\n".join(_kept("wordpiece")) + "\n", encoding="utf-8")
        cls = {"distilbert": transformers.DistilBertTokenizerFast, "electra": transformers.ElectraTokenizerFast,
               "bert": transformers.BertTokenizerFast}[family]
        fast = cls(vocab_file=str(directory / "vocab.txt"), do_lower_case=True)
    elif family == "mpnet":
        vocab = ["<s>", "<pad>", "</s>", "<unk>"] + _kept("wordpiece") + ["<mask>"]
        (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        fast = transformers.MPNetTokenizerFast(vocab_file=str(directory / "vocab.txt"), do_lower_case=True)
    else:
        raise ValueError(f"no tiny tokenizer for {family}")
    fast.save_pretrained(directory)
    return len(fast)



# Tiny random-weight task models of each family, sized to their tokenizer (``save_tokenizer``).
_TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
POSITIONS = 64
# DeBERTa-v3's layout at tiny size: 8 position buckets (distances past 4 fall in log buckets within 64 tokens).
TINY_DEBERTA_V3 = dict(type_vocab_size=0, relative_attention=True, position_buckets=8, max_relative_positions=-1,
                       pos_att_type=["p2c", "c2p"], share_att_key=True, norm_rel_ebd="layer_norm",
                       position_biased_input=False, pad_token_id=0)
LABELS = ("negative", "neutral", "positive")


def _config(family, vocab_size):
    import transformers

    if family == "distilbert":
        return transformers.DistilBertConfig(vocab_size=vocab_size, dim=32, n_layers=2, n_heads=4, hidden_dim=37,
                                             max_position_embeddings=POSITIONS, dropout=0.0, attention_dropout=0.0)
    if family == "modernbert":
        # Three layers, the middle one local with a 4-token window (+-2), so 12-token inputs reach past it;
        # the eager attention is the padded path the export computes.
        return transformers.ModernBertConfig(
            vocab_size=vocab_size, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=POSITIONS, global_attn_every_n_layers=2, local_attention=4, pad_token_id=1,
            bos_token_id=0, eos_token_id=2, cls_token_id=0, sep_token_id=2, attn_implementation="eager")
    offset = {"roberta": 2, "xlm-roberta": 2, "mpnet": 2}.get(family, 0)  # RoBERTa-style tables: pad + 1 more rows
    common = dict(_TINY, vocab_size=vocab_size, max_position_embeddings=POSITIONS + offset)
    return {
        "roberta": lambda: transformers.RobertaConfig(**common, type_vocab_size=1, pad_token_id=1),
        "xlm-roberta": lambda: transformers.XLMRobertaConfig(**common, type_vocab_size=1, pad_token_id=1),
        "mpnet": lambda: transformers.MPNetConfig(**common, pad_token_id=1),
        "albert": lambda: transformers.AlbertConfig(**common, embedding_size=16, pad_token_id=0),
        "electra": lambda: transformers.ElectraConfig(**common, embedding_size=16),
        "bert": lambda: transformers.BertConfig(**common),
        "deberta-v2": lambda: transformers.DebertaV2Config(**common, **TINY_DEBERTA_V3),
    }[family]()


def save_checkpoint(family, directory, head="classification", seed=0, **config_changes):
    """A tiny ``family`` checkpoint as users download them: ``config.json``, ``model.safetensors`` (weights far
    from init), the family's tokenizer files; ``head`` ``"classification"`` (labels :data:`LABELS`),
    ``"token_classification"`` (the same labels per token), ``"question_answering"`` or ``None``;
    ``config_changes`` set on the tiny config (ModernBERT's ``classifier_pooling="mean"``).

    Returns:
        the PyTorch model (eval mode), the reference the tests compare with.
    """
    import transformers

    from tests.parity_helpers import save_reference

    vocab_size = save_tokenizer(family, directory)
    config = _config(family, vocab_size)
    for key, value in config_changes.items():
        setattr(config, key, value)
    if head in ("classification", "token_classification"):
        config.num_labels = len(LABELS)
        config.id2label = dict(enumerate(LABELS))
        config.label2id = {label: i for i, label in enumerate(LABELS)}
        auto = {"classification": transformers.AutoModelForSequenceClassification,
                "token_classification": transformers.AutoModelForTokenClassification}[head]
        model = auto.from_config(config)
    elif head == "question_answering":
        model = transformers.AutoModelForQuestionAnswering.from_config(config)
    else:
        model = transformers.AutoModel.from_config(config)
    return save_reference(model, directory, seed=seed)


def save_sentence_encoder(family, directory, tokenizer_family=None, seed=0):
    """A tiny sentence-transformers checkpoint (Transformer -> mean Pooling -> Normalize) saved by the installed
    sentence-transformers: ``family``'s encoder with ``tokenizer_family``'s tokenizer (default its own; a
    ``bert`` with XLM-R's is paraphrase-multilingual-MiniLM's layout). Returns the SentenceTransformer.
    """
    import shutil

    import transformers
    from sentence_transformers import SentenceTransformer, models

    from tests.parity_helpers import randomize

    directory = Path(directory)
    hf = directory.parent / f"{directory.name}-hf"
    vocab_size = save_tokenizer(tokenizer_family or family, hf)
    config = _config(family, vocab_size)
    randomize(transformers.AutoModel.from_config(config), seed).save_pretrained(hf, safe_serialization=True)
    word = models.Transformer(str(hf), max_seq_length=POSITIONS)
    pooling = models.Pooling(word.get_word_embedding_dimension(), "mean")
    model = SentenceTransformer(modules=[word, pooling, models.Normalize()], device="cpu")
    model.save(str(directory))
    shutil.rmtree(hf)
    return model


__all__ = ["save_tokenizer", "save_checkpoint", "save_sentence_encoder", "regenerate", "TEXT", "LABELS",
           "POSITIONS", "TINY_DEBERTA_V3"]
