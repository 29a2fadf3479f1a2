"""The Hugging Face families ``import_checkpoint`` reads: one frozen record per ``model_type``.

A family is data, not a branch (:class:`Family`: state-dict prefix, config defaults and names, the Encoder
options it makes, weight renames from BERT's names, shared layers, heads, tokenizer classes); the importer reads
the record and has no ``if model_type ==``. What each family changes from BERT, and why ALBERT's shared layers
are imported as one copy per block: docs/architectures.md, "Imported families". DistilBERT's renames apply in
the order listed; MPNet's relative-position bias table and DeBERTa-v2's relative table and norm are read by
every block (``shared_weights``); ModernBERT is the pre-norm layout of the same Encoder.

Families mbk cannot build are refused by ``model_type`` with the reason (:data:`REFUSED`).

TensorFlow-free: ``checkpoint_format`` and ``sources/`` import the importer (and so this module) without
loading TensorFlow.
"""

import re
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Callable, Mapping

from mobilebert_kit.errors import CheckpointError, is_int

HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                  "gelu_fast": "gelu_tanh", "relu": "relu", "relu6": "relu6"}

# Encoder option -> the name Hugging Face and TF1 configs give it, where they differ (for messages).
CONFIG_NAMES = MappingProxyType({
    "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads", "hidden_dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob", "layer_norm_epsilon": "layer_norm_eps",
})
_COMMON_OPTIONS = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size", "hidden_dropout",
                   "attention_dropout", "max_position_embeddings", "type_vocab_size", "initializer_range")


def common_fields(c, act, names=CONFIG_NAMES):
    """The Encoder options every family has, read from ``c`` under the family's field ``names``.

    Values pass through unconverted: int("12") or bool("false") would accept
    what the file got wrong; Encoder's ``CONFIG_FIELDS`` table checks each one's
    type, finiteness and range. ``c``: the checkpoint's config over the family's defaults; ``act``: our
    ``hidden_act`` name.

    Example:
        >>> common_fields({"vocab_size": 9, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
        ...                "intermediate_size": 16, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
        ...                "max_position_embeddings": 8, "type_vocab_size": 2, "initializer_range": 0.02},
        ...               "gelu")["num_layers"]
        1
    """
    config = {ours: c[names.get(ours, ours)] for ours in _COMMON_OPTIONS}
    config["hidden_act"] = act
    return config


def _or_hidden(c, key):
    """``c[key]``, or the hidden size where the file leaves it unset; a 0 stays a 0, for the range check to refuse."""
    return c["hidden_size"] if c[key] is None else c[key]


def mobilebert_fields(c):
    """MobileBERT's own Encoder options (bottlenecks, trigram input, stacked FFNs), shared with the TF1 path.

    Example:
        >>> mobilebert_fields({**HF_MOBILEBERT_DEFAULTS, "hidden_size": 512})["intra_bottleneck_size"]
        128
    """
    return dict({key: c[key] for key in _MOBILEBERT_OPTIONS}, embedding_size=_or_hidden(c, "embedding_size"),
                intra_bottleneck_size=_or_hidden(c, "intra_bottleneck_size"))


# MobileBERT's Encoder options that its configs name as the Encoder does.
_MOBILEBERT_OPTIONS = ("trigram_input", "use_bottleneck", "use_bottleneck_attention", "key_query_shared_bottleneck",
                       "num_feedforward_networks", "normalization_type", "classifier_activation")


def _absolute_only(c):
    """BERT's ``position_embedding_type``: only the learned absolute table is built here."""
    kind = c.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise CheckpointError(f"{c.get('model_type')} position_embedding_type {kind!r} is not supported; only "
                              "'absolute' (mbk builds no relative_key attention): import an absolute-position checkpoint")
    return {}


def _padding_offset(c):
    """RoBERTa numbers positions from ``pad_token_id + 1`` (``create_position_ids_from_input_ids``)."""
    pad = c["pad_token_id"]
    if not is_int(pad) or pad < 0:
        raise CheckpointError(f"config.json: pad_token_id must be a non-negative integer, got {str(pad)[:40]}; "
                              "RoBERTa's positions start at pad_token_id + 1: fix the config")
    return pad + 1


@dataclass(frozen=True)
class HeadLayout:
    """How one of our heads reads a family's task-model weights.

    Args:
        renames (tuple[tuple[str, str], ...]): ``(checkpoint prefix, the BERT-layout prefix it stands for)``,
            applied to the checkpoint's names before import (RoBERTa's ``classifier.dense`` is our pooler).
        encoder_options (Mapping[str, object]): Encoder options the head needs over the family's (DistilBERT's
            ``pre_classifier`` + ReLU is our pooler with ``pooler_activation="relu"``).
        config_options (Callable[[dict], dict] | None): Encoder options the head reads from the checkpoint's
            config over the family's defaults (ConvBERT's classification head activates with ``hidden_act``).

    Example:
        >>> HeadLayout(encoder_options={"pooler_activation": "relu"}).encoder_options["pooler_activation"]
        'relu'
    """

    renames: tuple = ()
    encoder_options: Mapping = field(default_factory=lambda: MappingProxyType({}))
    config_options: Callable[[dict], dict] | None = None

    def options(self, c):
        """The Encoder options of this head for the checkpoint's config ``c`` (over the family's defaults).

        Example:
            >>> layout = FAMILIES["convbert"].head("sequence_classifier")
            >>> layout.options({"hidden_act": "gelu_new"})["pooler_activation"]
            'gelu_tanh'
        """
        return {**self.encoder_options, **(self.config_options(c) if self.config_options else {})}


FITS = HeadLayout()
_BERT_LAYER = re.compile(r"encoder\.layer\.(\d+)\.")


@dataclass(frozen=True)
class Family:
    """One Hugging Face encoder family: everything the importer needs to know about its checkpoints.

    Args:
        model_type (str): ``config.json``'s ``model_type``.
        prefix (str): the base model's prefix in a task model's state dict (``"bert."``).
        defaults (Mapping): transformers' config defaults, under the file's field names.
        encoder_fields (Callable[[dict], dict]): the family's own Encoder options from the config over its
            defaults (normalization, pooler, attention, embedding projection, token types ...).
        config_names (Mapping[str, str]): Encoder option -> the config's field name, where they differ.
        activation_field (str): the config field naming the activation.
        position_offset (Callable[[dict], int]): the first position row from the config (RoBERTa:
            ``pad_token_id + 1``); 0 for the others.
        weight_renames (tuple[tuple[str, str], ...]): ``(BERT name fragment, this family's)`` applied in order
            to the Hugging Face name of each of our weights.
        head_prefixes (tuple[str, ...]): prefixes of task-head weights the encoder leaves (skipped, reported).
        heads (Mapping[str, HeadLayout]): our head name -> how it reads this family's task weights
            (absent: BERT's names fit).
        class_prefix (str): transformers' class names of the family start with it (``XLMRoberta`` in
            ``XLMRobertaForSequenceClassification``): a config's ``architectures`` naming another family's is a
            contradiction.
        tokenizer_classes (tuple[str, ...]): the tokenizer classes this family's checkpoints are published
            with (each also in its ``...Fast`` form; many BERT-derived families use ``BertTokenizer``). A
            ``tokenizer_class`` that some family lists and this one does not contradicts ``model_type``.
        unused_keys (Callable[[dict], tuple]): checkpoint weights the reference builds but never uses, for an
            Encoder config.
        layer_scope (Callable[[int, dict], str] | None): the checkpoint scope of our block ``i`` from the
            config, where it is not BERT's ``encoder.layer.{i}.``; with ``shared_layers`` several blocks
            read one scope (ALBERT's layer groups).
        shared_layers (bool): blocks share the checkpoint's weights, each of ours holding a copy.
        shared_weights (tuple[str, ...]): checkpoint tensors that several of our weights read, one copy per
            block (MPNet's ``encoder.relative_attention_bias.weight``).

    Example:
        >>> FAMILIES["roberta"].position_offset({"pad_token_id": 1})
        2
    """

    model_type: str
    prefix: str
    defaults: Mapping
    encoder_fields: Callable[[dict], dict]
    config_names: Mapping = field(default_factory=lambda: CONFIG_NAMES)
    activation_field: str = "hidden_act"
    position_offset: Callable[[dict], int] = lambda c: 0
    weight_renames: tuple = ()
    head_prefixes: tuple = ()
    heads: Mapping = field(default_factory=lambda: MappingProxyType({}))
    tokenizer_classes: tuple = ()
    class_prefix: str = ""
    unused_keys: Callable[[dict], tuple] = lambda config: ()
    layer_scope: Callable[[int, dict], str] | None = None
    shared_layers: bool = False
    shared_weights: tuple = ()

    def hf_name(self, name, hf_config):
        """This family's name for the BERT-layout Hugging Face ``name`` of one of our weights; ``hf_config``:
        the checkpoint's config over the family's defaults (for ``layer_scope``).

        Example:
            >>> FAMILIES["distilbert"].hf_name("encoder.layer.0.attention.self.query.weight", {})
            'transformer.layer.0.attention.q_lin.weight'
        """
        match = _BERT_LAYER.match(name)
        if match and self.layer_scope is not None:
            name = self.layer_scope(int(match.group(1)), hf_config) + name[match.end():]
        for bert, ours in self.weight_renames:
            name = name.replace(bert, ours)
        return name

    def head(self, name):
        """The :class:`HeadLayout` of our head ``name`` for this family (BERT's names when it lists none)."""
        return self.heads.get(name, FITS)

    def accepts_tokenizer(self, tokenizer_class):
        """Whether this family's checkpoints come with ``tokenizer_class`` (its ``...Fast`` form included).

        Example:
            >>> FAMILIES["distilbert"].accepts_tokenizer("BertTokenizerFast")
            True
        """
        return tokenizer_class_base(tokenizer_class) in self.tokenizer_classes


def tokenizer_class_base(name):
    """``name`` without transformers' ``Fast`` suffix: both classes read the same vocabulary.

    Example:
        >>> tokenizer_class_base("XLMRobertaTokenizerFast")
        'XLMRobertaTokenizer'
    """
    return name[:-len("Fast")] if isinstance(name, str) and name.endswith("TokenizerFast") else name


HF_MOBILEBERT_DEFAULTS = MappingProxyType(dict(
    vocab_size=30522, hidden_size=512, num_hidden_layers=24, num_attention_heads=4, intermediate_size=512,
    hidden_act="relu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.1, max_position_embeddings=512,
    type_vocab_size=2, initializer_range=0.02, layer_norm_eps=1e-12, embedding_size=128, trigram_input=True,
    use_bottleneck=True, intra_bottleneck_size=128, use_bottleneck_attention=False, key_query_shared_bottleneck=True,
    num_feedforward_networks=4, normalization_type="no_norm", classifier_activation=True,
))
# BERT-base's config defaults, which most families' configs share (those without position_embedding_type
# leave it out: the families that have none).
_BERT_BASE = dict(
    vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
    hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=512,
    type_vocab_size=2, initializer_range=0.02, layer_norm_eps=1e-12,
)
_HF_BERT_DEFAULTS = MappingProxyType(dict(_BERT_BASE, position_embedding_type="absolute"))
# transformers ConvBertConfig defaults (models/convbert/configuration_convbert.py).
_HF_CONVBERT_DEFAULTS = MappingProxyType(dict(_BERT_BASE, embedding_size=768, head_ratio=2, conv_kernel_size=9,
                                              num_groups=1))
# transformers NezhaConfig defaults (models/deprecated/nezha/configuration_nezha.py).
_HF_NEZHA_DEFAULTS = MappingProxyType(dict(_BERT_BASE, vocab_size=21128, max_relative_position=64))
# transformers DistilBertConfig defaults; it has no token types.
_HF_DISTILBERT_DEFAULTS = MappingProxyType(dict(
    vocab_size=30522, max_position_embeddings=512, n_layers=6, n_heads=12, dim=768, hidden_dim=3072, dropout=0.1,
    attention_dropout=0.1, activation="gelu", initializer_range=0.02, type_vocab_size=0, layer_norm_eps=1e-12,
))
# DistilBERT builds every LayerNorm with eps=1e-12 and reads no config field for it: a config.json carrying
# layer_norm_eps (DistilBertConfig keeps any keyword it is given) was imported with that value (0.5: outputs off
# by 0.36 of 2.5), so the family's Encoder options set the constant over the common field.
DISTILBERT_LAYER_NORM_EPS = 1e-12
# transformers ElectraConfig defaults (the small discriminator).
_HF_ELECTRA_DEFAULTS = MappingProxyType(dict(_HF_BERT_DEFAULTS, embedding_size=128, hidden_size=256,
                                             num_attention_heads=4, intermediate_size=1024))
# transformers AlbertConfig defaults (ALBERT-xxlarge's sizes).
_HF_ALBERT_DEFAULTS = MappingProxyType(dict(
    _HF_BERT_DEFAULTS, vocab_size=30000, embedding_size=128, hidden_size=4096, num_hidden_groups=1,
    num_attention_heads=64, intermediate_size=16384, inner_group_num=1, hidden_act="gelu_new", hidden_dropout_prob=0,
    attention_probs_dropout_prob=0,
))
# transformers RobertaConfig / XLMRobertaConfig defaults: BERT's with pad_token_id 1.
_HF_ROBERTA_DEFAULTS = MappingProxyType({**_HF_BERT_DEFAULTS, "pad_token_id": 1})
# transformers MPNetConfig defaults (models/mpnet/configuration_mpnet.py); MPNet has no token types.
_HF_MPNET_DEFAULTS = MappingProxyType(dict(_BERT_BASE, vocab_size=30527, relative_attention_num_buckets=32,
                                          pad_token_id=1, type_vocab_size=0))

# transformers DebertaV2Config defaults, and those of the fields it reads with getattr (models/deberta_v2/).
_HF_DEBERTA_V2_DEFAULTS = MappingProxyType(dict(
    vocab_size=128100, hidden_size=1536, num_hidden_layers=24, num_attention_heads=24, intermediate_size=6144,
    hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=512,
    type_vocab_size=0, initializer_range=0.02, layer_norm_eps=1e-7, relative_attention=False,
    max_relative_positions=-1, pad_token_id=0, position_biased_input=True, pos_att_type=None,
    pooler_hidden_act="gelu", position_buckets=-1, share_att_key=False, norm_rel_ebd="none", conv_kernel_size=0,
))

# transformers ModernBertConfig defaults (models/modernbert/configuration_modernbert.py); no token types.
_HF_MODERNBERT_DEFAULTS = MappingProxyType(dict(
    vocab_size=50368, hidden_size=768, intermediate_size=1152, num_hidden_layers=22, num_attention_heads=12,
    hidden_activation="gelu", max_position_embeddings=8192, initializer_range=0.02, norm_eps=1e-5, norm_bias=False,
    pad_token_id=50283, global_rope_theta=160000.0, attention_bias=False, attention_dropout=0.0,
    global_attn_every_n_layers=3, local_attention=128, local_rope_theta=10000.0, embedding_dropout=0.0,
    mlp_bias=False, mlp_dropout=0.0, classifier_pooling="cls", classifier_dropout=0.0, classifier_bias=False,
    classifier_activation="gelu", type_vocab_size=0, rope_scaling=None,
))

_BERT_LAYOUT = dict(normalization_type="layer_norm", classifier_activation=True)
# DistilBERT's block: BERT's scopes under other names (transformers models/distilbert/modeling_distilbert.py).
# Order matters: the attention output's dense and norm before the FFN's.
_DISTILBERT_RENAMES = (
    ("encoder.layer.", "transformer.layer."),
    (".attention.self.query.", ".attention.q_lin."),
    (".attention.self.key.", ".attention.k_lin."),
    (".attention.self.value.", ".attention.v_lin."),
    (".attention.output.dense.", ".attention.out_lin."),
    (".attention.output.LayerNorm.", ".sa_layer_norm."),
    (".intermediate.dense.", ".ffn.lin1."),
    (".output.dense.", ".ffn.lin2."),
    (".output.LayerNorm.", ".output_layer_norm."),
)
# ALBERT's layer (transformers models/albert/modeling_albert.py): BERT's post-LN block with flat scope names.
_ALBERT_RENAMES = (
    ("embeddings_project.", "encoder.embedding_hidden_mapping_in."),
    ("pooler.dense.", "pooler."),
    (".attention.self.", ".attention."),
    (".attention.output.dense.", ".attention.dense."),
    (".attention.output.LayerNorm.", ".attention.LayerNorm."),
    (".intermediate.dense.", ".ffn."),
    (".output.dense.", ".ffn_output."),
    (".output.LayerNorm.", ".full_layer_layer_norm."),
)
# MPNet's block (transformers models/mpnet/modeling_mpnet.py): BERT's post-LN block with the attention's
# projections under attention.attn and its norm one scope up. The FFN's names are BERT's.
_MPNET_RENAMES = (
    (".attention.self.query.", ".attention.attn.q."),
    (".attention.self.key.", ".attention.attn.k."),
    (".attention.self.value.", ".attention.attn.v."),
    (".attention.output.dense.", ".attention.attn.o."),
    (".attention.output.LayerNorm.", ".attention.LayerNorm."),
)
# The classification heads of RoBERTa, XLM-R and MPNet (dense + tanh, then out_proj) and of ELECTRA (dense + GELU,
# then out_proj) are our pooler and classifier under other names; their task models are built without the base
# model's pooler (add_pooling_layer=False), so the head's dense is the only pooler there is.
_CLASSIFICATION_HEAD_RENAMES = (("classifier.dense.", "pooler.dense."), ("classifier.out_proj.", "classifier."))
_ROBERTA_HEADS = MappingProxyType({
    "sequence_classifier": HeadLayout(renames=_CLASSIFICATION_HEAD_RENAMES,
                                      encoder_options=MappingProxyType({"classifier_activation": True})),
})
# Tokenizer classes (the ...Fast forms implied). Most BERT-derived families are published with BERT's WordPiece
# tokenizer too, and some RoBERTa checkpoints (klue/roberta-*) with it; RoBERTa and XLM-R share one architecture,
# so either's tokenizer with the other's model_type imports the same model.
_BERT_TOKENIZERS = ("BertTokenizer",)
_ROBERTA_TOKENIZERS = ("RobertaTokenizer", "XLMRobertaTokenizer") + _BERT_TOKENIZERS


def _mobilebert_encoder(c):
    # Hugging Face builds these two LayerNorms without passing layer_norm_eps (torch default 1e-5).
    return dict(mobilebert_fields(c), layer_norm_epsilon_overrides={"embeddings": 1e-5, "final_ffn": 1e-5})


def _mobilebert_unused(config):
    # Hugging Face MobileBERT creates embedding_transformation even when its forward skips it.
    if not config["trigram_input"] and config["embedding_size"] == config["hidden_size"]:
        return ("embeddings.embedding_transformation.weight", "embeddings.embedding_transformation.bias")
    return ()


def _albert_group(i, c):
    """Our block ``i``: ALBERT's step ``i // inner_group_num`` runs layer group ``int(step / (num_hidden_layers /
    num_hidden_groups))``, whose ``inner_group_num`` layers run in turn; the block reads layer ``i % inner_group_num``.

    Example:
        >>> _albert_group(3, {"num_hidden_layers": 2, "num_hidden_groups": 2, "inner_group_num": 2})
        'encoder.albert_layer_groups.1.albert_layers.1.'
    """
    step, inner = divmod(i, c["inner_group_num"])
    # transformers' own float expression (AlbertTransformer.forward), so every group boundary falls where it does there.
    group = int(step / (c["num_hidden_layers"] / c["num_hidden_groups"]))
    return f"encoder.albert_layer_groups.{group}.albert_layers.{inner}."


def _albert_encoder(c):
    groups, inner, layers = c["num_hidden_groups"], c["inner_group_num"], c["num_hidden_layers"]
    if not is_int(inner) or inner < 1:
        raise CheckpointError(f"config.json: inner_group_num must be a positive integer, got {str(inner)[:40]}; "
                              "fix the config")
    if not is_int(groups) or not isinstance(layers, int) or not 1 <= groups <= layers:
        raise CheckpointError(f"config.json: num_hidden_groups must be an integer from 1 to num_hidden_layers "
                              f"({layers}), got {str(groups)[:40]}; fix the config")
    if c["embedding_size"] == c["hidden_size"]:
        raise CheckpointError("config.json: ALBERT with embedding_size == hidden_size still projects "
                              "(embedding_hidden_mapping_in), which mbk's encoder builds only between different "
                              "widths; not supported")
    # Each of the num_hidden_layers steps runs its group's inner_group_num layers: that many blocks of ours.
    return dict(_absolute_only(c), **_BERT_LAYOUT, embedding_size=c["embedding_size"], num_layers=layers * inner,
                embedding_projection="after_norm")  # encoder.embedding_hidden_mapping_in after the LayerNorm


def _electra_layout(c):
    return dict(
        normalization_type="layer_norm",
        classifier_activation=False,  # no pooler: pooled_output is the first token
        embedding_size=c["embedding_size"],
        embedding_projection="after_norm",  # ELECTRA's embeddings_project after the embedding LayerNorm
    )


# transformers computes MPNet's buckets with relative_position_bucket's default num_buckets=32 whatever the
# config says (MPNetEncoder.compute_position_bias), and its embeddings number positions from padding_idx 1 + 1
# whatever pad_token_id says (MPNetEmbeddings.padding_idx = 1).
MPNET_BUCKETS = 32
MPNET_POSITION_OFFSET = 2


def _mpnet_encoder(c):
    buckets = c["relative_attention_num_buckets"]
    if buckets != MPNET_BUCKETS:
        raise CheckpointError(f"config.json: relative_attention_num_buckets {str(buckets)[:40]} differs from the "
                              f"{MPNET_BUCKETS} buckets transformers' MPNet computes whatever the config says; set it "
                              f"to {MPNET_BUCKETS} (every published MPNet)")
    return dict(_BERT_LAYOUT, attention_bias="relative_buckets", relative_attention_num_buckets=MPNET_BUCKETS)


# DeBERTa-v2's attention projections (transformers DisentangledSelfAttention); everything else has BERT's names.
_DEBERTA_V2_RENAMES = (
    (".attention.self.query.", ".attention.self.query_proj."),
    (".attention.self.key.", ".attention.self.key_proj."),
    (".attention.self.value.", ".attention.self.value_proj."),
)
_DEBERTA_V3 = "every DeBERTa-v3 checkpoint"
_POOLER_ACTIVATIONS = {"tanh": "tanh", **HF_ACTIVATIONS}


def _refuse(condition, message):
    if condition:
        raise CheckpointError(f"config.json: {message}")


def _deberta_terms(value):
    """``pos_att_type`` (a list, or the older ``"p2c|c2p"`` string) as the Encoder's ``disentangled_terms``."""
    terms = [t.strip().lower() for t in value.split("|")] if isinstance(value, str) else value
    _refuse(not isinstance(terms, list) or not terms or not all(t in ("c2p", "p2c") for t in terms),
            f"pos_att_type {str(value)[:40]!r} is not a non-empty list of 'c2p' and 'p2c'; mbk builds DeBERTa-v2's "
            f"content-to-position and position-to-content terms only (['p2c', 'c2p'] in {_DEBERTA_V3})")
    return "_".join(t for t in ("c2p", "p2c") if t in terms)


def _deberta_v2_encoder(c):
    """DeBERTa-v2/v3: disentangled attention over one relative table, word embeddings only (v3), ContextPooler."""
    hidden, heads = c["hidden_size"], c["num_attention_heads"]
    _refuse(c["relative_attention"] is not True, "relative_attention is not true: mbk builds DeBERTa-v2 with its "
            f"disentangled relative attention ({_DEBERTA_V3}); import a checkpoint trained with it")
    _refuse(c["share_att_key"] is not True, "share_att_key is not true: mbk projects DeBERTa's positions with each "
            f"layer's own query and key ({_DEBERTA_V3}), not with separate pos_key_proj / pos_query_proj")
    kernel = c["conv_kernel_size"]
    _refuse(not isinstance(kernel, int) or kernel != 0, f"conv_kernel_size {str(kernel)[:20]} adds DeBERTa-v2-xlarge's "
            "convolution after the first layer, which mbk's encoder does not build; import a checkpoint without it "
            f"(conv_kernel_size 0, {_DEBERTA_V3}) or export this one with optimum (optimum-cli export onnx)")
    for key in ("embedding_size", "attention_head_size", "pooler_hidden_size"):
        expected = hidden // heads if key == "attention_head_size" and isinstance(hidden, int) and \
            isinstance(heads, int) and heads > 0 else hidden
        _refuse(c.get(key, expected) != expected, f"{key} {str(c.get(key))[:20]} differs from {expected}, which "
                f"mbk's DeBERTa-v2 needs ({_DEBERTA_V3}); import a checkpoint where it does not")
    act = c["pooler_hidden_act"]
    _refuse(not isinstance(act, str) or act not in _POOLER_ACTIVATIONS, f"unsupported pooler_hidden_act "
            f"{str(act)[:40]!r}; supported: {', '.join(_POOLER_ACTIVATIONS)}")
    norms = c["norm_rel_ebd"]
    _refuse(not isinstance(norms, str), f"norm_rel_ebd must be a string ('layer_norm' or 'none'), got "
            f"{str(norms)[:40]}; fix the config")
    buckets, longest = c["position_buckets"], c["max_relative_positions"]
    if is_int(longest) and longest < 1:
        longest = c["max_position_embeddings"]  # transformers: -1 means max_position_embeddings
    if is_int(buckets) and buckets < 0:
        buckets = 0  # -1: no buckets
    return dict(
        normalization_type="layer_norm",
        classifier_activation=False,  # DebertaV2Model has no pooler; the classifier's ContextPooler turns it on
        pooler_activation=_POOLER_ACTIVATIONS[act],
        position_embedding_type="absolute" if c["position_biased_input"] else "none",
        attention_bias="disentangled",
        position_buckets=buckets,
        max_relative_positions=longest,
        disentangled_terms=_deberta_terms(c["pos_att_type"]),
        relative_embedding_norm="layer_norm" in [x.strip() for x in norms.lower().split("|")],
    )


# ModernBERT's weights (transformers models/modernbert/modeling_modernbert.py) under the BERT-layout names
# weight_names.py gives the pre-norm block's scopes. Order matters: the attention's output dense before the FFN's.
_MODERNBERT_RENAMES = (
    ("embeddings.word_embeddings.", "embeddings.tok_embeddings."),
    ("embeddings.LayerNorm.", "embeddings.norm."),
    ("encoder.layer.", "layers."),
    (".attention_norm.", ".attn_norm."),
    (".attention.self.qkv.", ".attn.Wqkv."),
    (".attention.output.dense.", ".attn.Wo."),
    (".ffn_norm.", ".mlp_norm."),
    (".intermediate.dense.", ".mlp.Wi."),
    (".output.dense.", ".mlp.Wo."),
)
_MODERNBERT_NAMES = MappingProxyType({
    "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads", "hidden_dropout": "mlp_dropout",
    "attention_dropout": "attention_dropout", "layer_norm_epsilon": "norm_eps", "rotary_theta": "global_rope_theta",
    "local_rotary_theta": "local_rope_theta", "local_attention_window": "local_attention",
    "global_attention_every_n_layers": "global_attn_every_n_layers", "attention_use_bias": "attention_bias",
    "feed_forward_use_bias": "mlp_bias", "norm_use_bias": "norm_bias", "pooler_use_bias": "classifier_bias",
})
_MODERNBERT_POOLING = {"cls": "first_token", "mean": "mean"}
# ModernBertForSequenceClassification: pooling -> head (dense + act + norm) -> dropout -> classifier; its
# ...ForTokenClassification and ...ForQuestionAnswering run the head on every token (our pooler with
# pooler_input "every_token"), the span head's classifier being our qa_outputs.
_MODERNBERT_HEAD_RENAMES = (("head.dense.", "pooler.dense."), ("head.norm.", "pooler.norm."))
_MODERNBERT_TOKEN_HEAD = MappingProxyType({"classifier_activation": True, "pooler_input": "every_token"})


def _modernbert_encoder(c):
    if c.get("rope_scaling") not in (None, {}):
        raise CheckpointError(f"config.json: rope_scaling {str(c['rope_scaling'])[:60]} stretches ModernBERT's "
                              "rotary positions, which mbk builds unscaled; import a checkpoint without rope_scaling")
    pooling, act = c["classifier_pooling"], c["classifier_activation"]
    if not isinstance(pooling, str) or pooling not in _MODERNBERT_POOLING:
        raise CheckpointError(f"config.json: classifier_pooling {str(pooling)[:40]!r} is not one of cls, mean "
                              "(transformers' two); fix the config")
    if not isinstance(act, str) or act not in HF_ACTIVATIONS:
        raise CheckpointError(f"unsupported classifier_activation {str(act)[:40]!r} in config.json; supported: "
                              f"{', '.join(HF_ACTIVATIONS)}")
    return dict(
        normalization_type="layer_norm",
        classifier_activation=False,  # the base model has no pooler; the sequence classifier's head is one
        block_layout="pre_norm", feed_forward_type="gated", position_embedding_type="rotary", fused_qkv=True,
        rotary_theta=c["global_rope_theta"], local_rotary_theta=c["local_rope_theta"],
        local_attention_window=c["local_attention"], global_attention_every_n_layers=c["global_attn_every_n_layers"],
        attention_use_bias=c["attention_bias"], feed_forward_use_bias=c["mlp_bias"], norm_use_bias=c["norm_bias"],
        pooler_input=_MODERNBERT_POOLING[pooling], pooler_activation=HF_ACTIVATIONS[act],
        pooler_use_bias=c["classifier_bias"], pooler_norm=True,
    )


_ROBERTA = Family(
    "roberta", "roberta.", _HF_ROBERTA_DEFAULTS, lambda c: dict(_absolute_only(c), **_BERT_LAYOUT),
    position_offset=_padding_offset, head_prefixes=("lm_head.",), heads=_ROBERTA_HEADS,
    tokenizer_classes=_ROBERTA_TOKENIZERS, class_prefix="Roberta",
)
_FAMILIES = (
    Family("mobilebert", "mobilebert.", HF_MOBILEBERT_DEFAULTS, _mobilebert_encoder, unused_keys=_mobilebert_unused,
           tokenizer_classes=("MobileBertTokenizer",) + _BERT_TOKENIZERS, class_prefix="MobileBert"),
    # paraphrase-multilingual-MiniLM: a BertModel trained with XLM-R's SentencePiece tokenizer (positions from 0;
    # a relabelled XLM-R is told by its zero padding row, its position table or its architectures instead).
    Family("bert", "bert.", _HF_BERT_DEFAULTS, lambda c: dict(_absolute_only(c), **_BERT_LAYOUT),
           tokenizer_classes=_BERT_TOKENIZERS + ("XLMRobertaTokenizer",), class_prefix="Bert"),
    Family("convbert", "convbert.", _HF_CONVBERT_DEFAULTS, lambda c: dict(
        _electra_layout(c), attention_type="convbert_mixed", head_ratio=c["head_ratio"],
        conv_kernel_size=c["conv_kernel_size"], num_groups=c["num_groups"]),
        # ConvBertClassificationHead: first token -> dense -> ACT2FN[hidden_act] -> out_proj (ELECTRA's names). The
        # checkpoint's classifier.out_proj was skipped as a head weight and the encoder exported in its place.
        heads=MappingProxyType({"sequence_classifier": HeadLayout(
            renames=_CLASSIFICATION_HEAD_RENAMES, encoder_options=MappingProxyType({"classifier_activation": True}),
            config_options=lambda c: {"pooler_activation": HF_ACTIVATIONS[c["hidden_act"]]})}),
        tokenizer_classes=("ConvBertTokenizer",) + _BERT_TOKENIZERS, class_prefix="ConvBert"),
    Family("nezha", "nezha.", _HF_NEZHA_DEFAULTS, lambda c: dict(
        _BERT_LAYOUT, position_embedding_type="relative_functional",
        max_relative_position=c["max_relative_position"]), tokenizer_classes=_BERT_TOKENIZERS, class_prefix="Nezha"),
    Family(
        "distilbert", "distilbert.", _HF_DISTILBERT_DEFAULTS,
        lambda c: dict(normalization_type="layer_norm", classifier_activation=False,  # no pooler
                       layer_norm_epsilon=DISTILBERT_LAYER_NORM_EPS),
        config_names=MappingProxyType({
            "hidden_size": "dim", "num_layers": "n_layers", "num_heads": "n_heads", "intermediate_size": "hidden_dim",
            "hidden_dropout": "dropout", "attention_dropout": "attention_dropout",
            "layer_norm_epsilon": "layer_norm_eps"}),
        activation_field="activation",
        weight_renames=_DISTILBERT_RENAMES,
        head_prefixes=("pre_classifier.", "vocab_transform.", "vocab_layer_norm.", "vocab_projector."),
        # DistilBertForSequenceClassification: first token -> pre_classifier -> ReLU -> classifier.
        heads=MappingProxyType({"sequence_classifier": HeadLayout(
            renames=(("pre_classifier.", "pooler.dense."),),
            encoder_options=MappingProxyType({"classifier_activation": True, "pooler_activation": "relu"}))}),
        tokenizer_classes=("DistilBertTokenizer",) + _BERT_TOKENIZERS, class_prefix="DistilBert",
    ),
    Family(
        "electra", "electra.", _HF_ELECTRA_DEFAULTS, lambda c: dict(_absolute_only(c), **_electra_layout(c)),
        head_prefixes=("discriminator_predictions.", "generator_predictions.", "generator_lm_head."),
        # ElectraClassificationHead: first token -> dense -> get_activation("gelu") (exact erf GELU) -> out_proj.
        heads=MappingProxyType({"sequence_classifier": HeadLayout(
            renames=_CLASSIFICATION_HEAD_RENAMES,
            encoder_options=MappingProxyType({"classifier_activation": True, "pooler_activation": "gelu"}))}),
        tokenizer_classes=("ElectraTokenizer",) + _BERT_TOKENIZERS, class_prefix="Electra",
    ),
    Family(
        "albert", "albert.", _HF_ALBERT_DEFAULTS, _albert_encoder,
        weight_renames=_ALBERT_RENAMES, layer_scope=_albert_group, shared_layers=True,
        head_prefixes=("predictions.", "sop_classifier."), tokenizer_classes=("AlbertTokenizer",),
        class_prefix="Albert",
    ),
    _ROBERTA,
    replace(_ROBERTA, model_type="xlm-roberta", class_prefix="XLMRoberta"),  # one architecture
    Family(
        "mpnet", "mpnet.", _HF_MPNET_DEFAULTS, _mpnet_encoder,
        position_offset=lambda c: MPNET_POSITION_OFFSET, weight_renames=_MPNET_RENAMES,
        head_prefixes=("lm_head.",), heads=_ROBERTA_HEADS, tokenizer_classes=("MPNetTokenizer",), class_prefix="MPNet",
        shared_weights=("encoder.relative_attention_bias.weight",),
    ),
    Family(
        "deberta-v2", "deberta.", _HF_DEBERTA_V2_DEFAULTS, _deberta_v2_encoder,
        # pooler.: the sequence classifier's ContextPooler, a head weight when the encoder is imported alone
        # (mbk finetune starts from the encoder of a fine-tuned classifier).
        weight_renames=_DEBERTA_V2_RENAMES, head_prefixes=("lm_predictions.", "pooler."),
        # DebertaV2ForSequenceClassification: ContextPooler (first token -> pooler.dense -> pooler_hidden_act) is
        # our pooler under BERT's names; the token and QA heads are BERT's.
        heads=MappingProxyType({"sequence_classifier": HeadLayout(
            encoder_options=MappingProxyType({"classifier_activation": True}))}),
        tokenizer_classes=("DebertaV2Tokenizer",), class_prefix="DebertaV2",
        shared_weights=("encoder.rel_embeddings.weight", "encoder.LayerNorm.weight", "encoder.LayerNorm.bias"),
    ),
    Family(
        "modernbert", "model.", _HF_MODERNBERT_DEFAULTS, _modernbert_encoder, config_names=_MODERNBERT_NAMES,
        activation_field="hidden_activation", weight_renames=_MODERNBERT_RENAMES, head_prefixes=("head.", "decoder."),
        heads=MappingProxyType({
            "sequence_classifier": HeadLayout(renames=_MODERNBERT_HEAD_RENAMES,
                                              encoder_options=MappingProxyType({"classifier_activation": True})),
            "token_classifier": HeadLayout(renames=_MODERNBERT_HEAD_RENAMES, encoder_options=_MODERNBERT_TOKEN_HEAD),
            "span_question_answerer": HeadLayout(renames=_MODERNBERT_HEAD_RENAMES + (("classifier.", "qa_outputs."),),
                                                 encoder_options=_MODERNBERT_TOKEN_HEAD),
        }),
        class_prefix="ModernBert",
    ),
)
FAMILIES = MappingProxyType({family.model_type: family for family in _FAMILIES})
_CLASS_KINDS = ("Model", "For", "PreTrained")  # what follows the family's prefix in transformers' class names


def family_of_class(name):
    """The ``model_type`` whose transformers classes ``name`` is one of (the longest prefix wins), else None.

    Example:
        >>> family_of_class("XLMRobertaForSequenceClassification"), family_of_class("BertModel")
        ('xlm-roberta', 'bert')
    """
    found = [f for f in _FAMILIES if f.class_prefix and name.startswith(f.class_prefix)
             and name[len(f.class_prefix):].startswith(_CLASS_KINDS)]
    return max(found, key=lambda f: len(f.class_prefix)).model_type if found else None
# Hugging Face model_types mbk recognises and cannot build: model_type -> why, and what to do instead.
# DeBERTa (v1) projects its positions with its own pos_proj / pos_q_proj and a byte-level BPE tokenizer.
_DEBERTA = ("DeBERTa (v1) uses disentangled attention with its own position projections (pos_proj, pos_q_proj), "
            "which mbk's encoder does not build (it builds DeBERTa-v2/v3: model_type 'deberta-v2'); export it with "
            "optimum (optimum-cli export onnx) or import a checkpoint of a supported family")
REFUSED = MappingProxyType({"deberta": _DEBERTA})


def family_of(model_type):
    """The :class:`Family` record of a ``config.json``'s ``model_type``; one-line CheckpointError otherwise.

    Example:
        >>> family_of("electra").prefix
        'electra.'
    """
    if model_type is None:
        raise CheckpointError(no_model_type("config.json"))
    if isinstance(model_type, str) and model_type in REFUSED:
        raise CheckpointError(f"model_type {model_type!r} is not supported: {REFUSED[model_type]}")
    if model_type not in FAMILIES:
        raise CheckpointError(f"unsupported Hugging Face model_type {model_type!r}; supported: {', '.join(FAMILIES)}")
    return FAMILIES[model_type]


def no_model_type(config_file):
    """The one line for a Hugging Face config without ``model_type``, listing the supported ones.

    Example:
        >>> no_model_type("config.json").startswith("config.json has no model_type")
        True
    """
    return (f"{config_file} has no model_type, which tells the architecture; add \"model_type\": \"bert\" "
            f"(or the checkpoint's own type: {', '.join(FAMILIES)})")
