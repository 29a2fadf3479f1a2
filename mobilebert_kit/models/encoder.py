"""Encoder: the one encoder family behind BERT, IB-BERT and MobileBERT."""

import dataclasses
import inspect
import math
import re

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.errors import ConfigError, check_choice, is_int
from mobilebert_kit.layers.activations import ACTIVATIONS
from mobilebert_kit.layers.composite_attention import RELATIVE_ATTENTION_VARIANTS
from mobilebert_kit.layers.disentangled_attention import DISENTANGLED_TERMS
from mobilebert_kit.layers.multi_head_attention import MASK_MODES
from mobilebert_kit.layers.normalization import NORMALIZATIONS, make_norm
from mobilebert_kit.layers.token_embedding import EMBEDDING_PROJECTIONS, TokenEmbedding
from mobilebert_kit.layers.token_embedding import POSITION_EMBEDDING_TYPES as EMBEDDING_POSITION_TYPES
from mobilebert_kit.layers.transformer_block import (
    ATTENTION_BIASES,
    ATTENTION_TYPES,
    BLOCK_LAYOUTS,
    BLOCK_OPTIONS,
    BlockOptions,
    FEED_FORWARD_TYPES,
    RELATIVE_POSITION_EMBEDDING_TYPES,
    TransformerBlock,
)

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
EPSILON_OVERRIDE_KEYS = ("embeddings", "final_ffn")
# "absolute" | "none" live in the embeddings; "relative_functional" (NEZHA) inside every attention layer.
POSITION_EMBEDDING_TYPES = EMBEDDING_POSITION_TYPES + RELATIVE_POSITION_EMBEDDING_TYPES
# The pooler's activation: BERT's tanh, or the task head it stands for (DistilBERT's pre_classifier + ReLU,
# ELECTRA's classification head dense + GELU); the names of layers/activations.py besides tanh.
POOLER_ACTIVATIONS = ("tanh",) + tuple(ACTIVATIONS)
# What the pooler reads: the first token (BERT's [CLS]), the mean over real tokens (ModernBERT's
# classifier_pooling "mean"), or every token (ModernBERT's token and span heads: the sequence output is then the
# pooler's, and the pooled output its first token).
POOLER_INPUTS = ("first_token", "mean", "every_token")
# Floor of the real-token count in mean pooling: an all-padding row pools to zeros, never 0/0.
_POOL_EPSILON = 1e-9


@keras.utils.register_keras_serializable(package="mobilebert_kit")
class Encoder(keras.Model):
    """A BERT-family encoder: embeddings, ``num_layers`` TransformerBlocks, pooler.

    Covers every option of the official MobileBERT code (Sun et al., 2020,
    Table 2 and Sec. 4): plain BERT is the configuration without bottleneck and
    trigram input; IB-BERT adds the inverted bottleneck; MobileBERT adds the
    shared query/key bottleneck, stacked FFNs, NoNorm and ReLU.

    The attention and position variants of three later papers are options of
    the same family and combine with all of the above (docs/architectures.md):
    ConvBERT (Jiang et al., 2020: ``attention_type="convbert_mixed"``,
    ``head_ratio``, ``conv_kernel_size``, ``num_groups``,
    ``embedding_projection="after_norm"``), NEZHA (Wei et al., 2019:
    ``position_embedding_type="relative_functional"``,
    ``max_relative_position``) and composite attention (Chang et al., 2021:
    ``attention_type="composite"``, ``relative_window``,
    ``relative_attention_variant``).

    Inputs: a dict of int32 ``[batch, seq]`` tensors ``input_ids``,
    ``attention_mask`` (1 real token, 0 padding) and ``token_type_ids``.
    Outputs: a dict with ``sequence_output`` ``[batch, seq, hidden_size]`` and
    ``pooled_output`` ``[batch, hidden_size]``; plus ``hidden_states`` (the
    embedding output and every block's output) with ``output_hidden_states``
    and ``attention_probs`` (``[batch, heads, seq, seq]`` per block) with
    ``output_attentions``. Those flags change outputs only, never weights.

    Sublayers: ``embeddings`` (TokenEmbedding), ``transformer_layer_{i}``
    (TransformerBlock), ``pooler`` (only with ``classifier_activation``), ``pooler_norm`` (with
    ``pooler_norm``) and ``final_norm`` (with ``block_layout="pre_norm"``).

    Args:
        vocab_size: word-piece vocabulary size.
        hidden_size: inter-block width (feature-map size).
        num_layers: number of blocks.
        num_heads: attention heads.
        intermediate_size: FFN hidden width.
        trigram_input: trigram concatenation before the embedding projection.
        embedding_size: width of the word embedding table (defaults to ``hidden_size``).
        classifier_activation: pooled output is ``pooler_activation(dense(h[:, 0]))``; else ``h[:, 0]``.
        pooler_activation: the pooler's activation: ``"tanh"`` (BERT, default) or one of
            ``hidden_act``'s names (``"relu"``: DistilBERT's classification head; ``"gelu"``: ELECTRA's).
        layer_norm_epsilon_overrides: per-role epsilon, keys ``"embeddings"`` and
            ``"final_ffn"`` (Hugging Face MobileBERT builds those with 1e-5).
        max_position_embeddings: rows of the absolute position table.
        type_vocab_size: token types.
        embedding_projection: where the ``embedding_size -> hidden_size`` projection
            sits: ``"before_norm"`` (default, MobileBERT) or ``"after_norm"``
            (ELECTRA/ConvBERT: embedding-wide position/type tables and norm).
            Relative tables (NEZHA, composite) are built for
            ``max_position_embeddings``, the longest sequence the model accepts.
        position_offset: first row of the absolute position table (default 0);
            RoBERTa and XLM-R number positions from ``pad_token_id + 1``, so 2.
            Inputs take at most ``max_position_embeddings - position_offset`` tokens.
        local_rotary_theta: RoPE base of the local (sliding-window) layers (None: ``rotary_theta``).
        local_attention_window: 0 (default: every layer global) or the width of the local layers'
            sliding window: a query sees keys at ``|i - j| <= window // 2`` (ModernBERT's ``local_attention``).
        global_attention_every_n_layers: with a window, layer ``i`` is global when ``i % n == 0`` (default 1).
        pooler_input: ``"first_token"`` (default) or ``"mean"`` over real tokens (ModernBERT's
            ``classifier_pooling``); the pooled output is this vector when there is no pooler. ``"every_token"``:
            the pooler runs on every token and the sequence output is its output (ModernBERT's token and span
            heads run its prediction head on every token); the pooled output is then its first token.
        pooler_use_bias: the pooler's dense has a bias (default; ModernBERT's ``classifier_bias``).
        pooler_norm: a LayerNorm after the pooler's activation (ModernBERT's prediction head), with
            ``classifier_activation``.
        output_hidden_states: also return every block's output.
        output_attentions: also return every block's attention probabilities.
        dtype: layer dtype or mixed-precision policy name.
        name: model name.
        **block_options: the other :class:`~mobilebert_kit.layers.transformer_block.TransformerBlock` options,
            keyword only (the fields of :class:`~mobilebert_kit.layers.transformer_block.BlockOptions`, described
            in the block's Args), passed to every block; the encoder sets ``final_ffn_layer_norm_epsilon``,
            ``attention_window``, ``input_norm`` and ``max_length`` per layer. The defaults are the block's, with
            BERT-base's 0.1 ``hidden_dropout`` and ``attention_dropout``. In the encoder ``hidden_dropout`` also
            drops out of the embeddings; ``position_embedding_type`` ``"absolute"`` (a learned table) and
            ``"none"`` act in the embeddings, the relative ones in attention; ``block_layout="pre_norm"`` adds a
            ``final_norm`` after the last block (layer 0 has no attention norm, the embedding norm being right
            before it); MPNet's and DeBERTa's relative tables are copied into every layer.

    Example:
        >>> encoder = Encoder(vocab_size=100, hidden_size=32, num_layers=2, num_heads=2,
        ...                   intermediate_size=64)
        >>> out = encoder(encoder.dummy_inputs(batch_size=2, seq_len=5))
        >>> out["sequence_output"].shape, out["pooled_output"].shape
        (TensorShape([2, 5, 32]), TensorShape([2, 32]))
    """

    def __init__(
        self,
        vocab_size=30522,
        hidden_size=768,
        num_layers=12,
        num_heads=12,
        intermediate_size=3072,
        *,
        trigram_input=False,
        embedding_size=None,
        classifier_activation=True,
        pooler_activation="tanh",
        layer_norm_epsilon_overrides=None,
        max_position_embeddings=512,
        type_vocab_size=2,
        embedding_projection="before_norm",
        position_offset=0,
        local_rotary_theta=None,
        local_attention_window=0,
        global_attention_every_n_layers=1,
        pooler_input="first_token",
        pooler_use_bias=True,
        pooler_norm=False,
        output_hidden_states=False,
        output_attentions=False,
        dtype=None,
        name="encoder",
        **kwargs,
    ):
        config = {k: v for k, v in locals().items() if k in _OWN_KEYS}
        config.update({key: kwargs.pop(key, default) for key, default in BLOCK_DEFAULTS.items()})
        _check_identity(name, dtype, layer_norm_epsilon_overrides)
        epsilon = config["layer_norm_epsilon"]
        norm_type = config["normalization_type"]
        # None means "as wide as the hidden size"; 0 is a wrong value, refused by _validate, not the default.
        config["embedding_size"] = hidden_size if embedding_size is None else embedding_size
        config["layer_norm_epsilon_overrides"] = dict(layer_norm_epsilon_overrides or {})
        _validate(config)
        eps = config["layer_norm_epsilon_overrides"]

        # === Layers ===
        embeddings = TokenEmbedding(
            vocab_size=vocab_size,
            embedding_size=config["embedding_size"],
            hidden_size=hidden_size,
            max_position_embeddings=max_position_embeddings,
            type_vocab_size=type_vocab_size,
            trigram_input=trigram_input,
            position_embedding_type="absolute" if config["position_embedding_type"] == "absolute" else "none",
            embedding_projection=embedding_projection,
            position_offset=position_offset,
            norm_use_bias=config["norm_use_bias"],
            normalization_type=norm_type,
            layer_norm_epsilon=eps.get("embeddings", epsilon),
            dropout=config["hidden_dropout"],
            initializer_range=config["initializer_range"],
            name="embeddings",
            dtype=dtype,
        )
        # The block options go to every block as they are; the others are set per layer.
        block_options = {k: config[k] for k in BLOCK_OPTIONS if k in config}
        blocks = [
            TransformerBlock(**{**block_options, **_layer_options(config, i)},
                             final_ffn_layer_norm_epsilon=eps.get("final_ffn"),
                             max_length=max_position_embeddings, name=f"transformer_layer_{i}", dtype=dtype)
            for i in range(num_layers)
        ]
        layers = {}
        if config["block_layout"] == "pre_norm":
            layers["final_norm"] = make_norm(norm_type, epsilon, name="final_norm", dtype=dtype,
                                             center=config["norm_use_bias"])
        if classifier_activation:
            layers["pooler"] = keras.layers.Dense(
                hidden_size,
                # "tanh" by name keeps BERT's graph as it was; the others are layers/activations.py's functions.
                activation="tanh" if pooler_activation == "tanh" else ACTIVATIONS[pooler_activation],
                use_bias=pooler_use_bias,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=config["initializer_range"]),
                name="pooler",
                dtype=dtype,
            )
            if pooler_norm:
                layers["pooler_norm"] = make_norm(norm_type, epsilon, name="pooler_norm", dtype=dtype,
                                                  center=config["norm_use_bias"])

        # === Functional model ===
        inputs = {n: keras.Input(shape=(None,), dtype="int32", name=n) for n in INPUT_NAMES}
        x = embeddings(inputs["input_ids"], inputs["token_type_ids"])
        hidden_states, attention_probs = [x], []
        for block in blocks:
            x, probs = block(x, attention_mask=inputs["attention_mask"], return_attention_scores=True)
            hidden_states.append(x)
            attention_probs.append(probs)
        sequence_output, pooled_output = encoder_outputs(layers.__getitem__, config, x, inputs["attention_mask"])
        outputs = {"sequence_output": sequence_output, "pooled_output": pooled_output}
        if output_hidden_states:
            outputs["hidden_states"] = hidden_states
        if output_attentions:
            outputs["attention_probs"] = attention_probs
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)

        # === Config ===
        self._encoder_config = config

    @property
    def config(self):
        """A copy of the constructor arguments (the model's whole configuration)."""
        return dict(self._encoder_config, layer_norm_epsilon_overrides=dict(self._encoder_config["layer_norm_epsilon_overrides"]))

    @property
    def embedding_table(self):
        """The word embedding variable ``[vocab_size, embedding_size]`` (MLM heads tie to it)."""
        return self.get_layer("embeddings").word_embeddings

    @property
    def blocks(self):
        """The TransformerBlocks in order, found by name."""
        return [self.get_layer(f"transformer_layer_{i}") for i in range(self._encoder_config["num_layers"])]

    def dummy_inputs(self, batch_size=1, seq_len=8, seed=0):
        """Realistic int32 inputs: ids within the vocabulary, a full mask, segments 0/1."""
        rng = tf.random.Generator.from_seed(seed)
        vocab = self._encoder_config["vocab_size"]
        ids = rng.uniform([batch_size, seq_len], minval=0, maxval=vocab, dtype=tf.int32)
        types = tf.cast(tf.range(seq_len) >= seq_len // 2, tf.int32)
        types = tf.tile(types[tf.newaxis], [batch_size, 1])
        if self._encoder_config["type_vocab_size"] < 2:
            types = tf.zeros_like(types)
        return {
            "input_ids": ids,
            "attention_mask": tf.ones([batch_size, seq_len], tf.int32),
            "token_type_ids": types,
        }

    def get_config(self):
        return self.config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


def _layer_options(config, index):
    """The block options that differ by layer: a local layer's window and RoPE base, layer 0's attention norm."""
    window, every = config["local_attention_window"], config["global_attention_every_n_layers"]
    local = bool(window) and index % every != 0
    local_theta = config["local_rotary_theta"]
    return dict(
        attention_window=window if local else 0,
        rotary_theta=(config["rotary_theta"] if local_theta is None else local_theta) if local
        else config["rotary_theta"],
        input_norm=not (config["block_layout"] == "pre_norm" and index == 0),
    )


def pool(sequence_output, attention_mask, pooler_input="first_token"):
    """The pooler's input: the first token's vector, or the mean over real tokens (``attention_mask`` 1).

    Example:
        >>> pool(tf.ones([1, 3, 4]), tf.constant([[1, 1, 0]]), "mean").shape
        TensorShape([1, 4])
    """
    if pooler_input == "mean":
        mask = tf.expand_dims(tf.cast(attention_mask, sequence_output.dtype), -1)
        count = tf.maximum(tf.reduce_sum(mask, axis=1), _POOL_EPSILON)  # a Python float: no captured constant
        return tf.reduce_sum(sequence_output * mask, axis=1) / count
    return sequence_output[:, 0, :]


def encoder_outputs(get_layer, config, x, attention_mask):
    """``(sequence_output, pooled_output)`` from the last block's output ``x``: the final norm of a pre-norm
    encoder, then the pooler (its input, dense and norm as ``config`` says).

    The one computation behind :class:`Encoder` and the export graph (``convert/export_model.py``), which
    finds the same layers by name with ``get_layer``.
    """
    if config.get("block_layout", "post_norm") == "pre_norm":
        x = get_layer("final_norm")(x)
    every_token = config.get("pooler_input") == "every_token"
    pooled = x if every_token else pool(x, attention_mask, config.get("pooler_input", "first_token"))
    if config["classifier_activation"]:
        pooled = get_layer("pooler")(pooled)
        if config.get("pooler_norm"):
            pooled = get_layer("pooler_norm")(pooled)
    if every_token:
        return pooled, pool(pooled, attention_mask)
    return x, pooled


_SIGNATURE = inspect.signature(Encoder.__init__)
_OWN_KEYS = tuple(p for p in _SIGNATURE.parameters if p not in ("self", "kwargs"))
# The block options an Encoder takes besides its own, with its defaults: every BlockOptions field but those of
# its signature and those set per layer.
_PER_LAYER = ("final_ffn_layer_norm_epsilon", "attention_window", "input_norm", "max_length")
BLOCK_DEFAULTS = {
    **{f.name: f.default for f in dataclasses.fields(BlockOptions) if f.name not in _OWN_KEYS + _PER_LAYER},
    "hidden_dropout": 0.1,
    "attention_dropout": 0.1,
}
# Encoder's signature names every option, its own and the block's (keyword-only), for help() and introspection.
Encoder.__init__.__signature__ = _SIGNATURE.replace(parameters=[
    *(p for p in _SIGNATURE.parameters.values() if p.kind != p.VAR_KEYWORD),
    *(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=value) for key, value in BLOCK_DEFAULTS.items()),
    _SIGNATURE.parameters["kwargs"],  # Keras' own keywords
])
_CONFIG_KEYS = _OWN_KEYS + tuple(BLOCK_DEFAULTS)
_DEFAULTS = {**{key: p.default for key, p in _SIGNATURE.parameters.items() if key in _OWN_KEYS}, **BLOCK_DEFAULTS}


# Every numeric and boolean Encoder option: (kind, lowest, highest), checked for type, finiteness and range
# once, in Encoder.__init__ (so build, load and import all pass here) and by the importer with the
# checkpoint's own field names. The upper bounds are far above any published BERT-family model (the largest
# vocabularies are ~250k, mT5/XLM-R; the widest is 12,288) and far below what makes Keras build for hours or
# allocate terabytes: `num_hidden_layers: 1e9` and `hidden_size: 1e9` did both (issue 12).
_INT, _FLOAT, _BOOL = "integer", "number", "boolean"
_IS_KIND = {_INT: is_int, _FLOAT: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            _BOOL: lambda v: isinstance(v, bool)}
CONFIG_FIELDS = {
    "vocab_size": (_INT, 1, 1_000_000),
    "hidden_size": (_INT, 1, 16_384),
    "num_layers": (_INT, 1, 256),
    "num_heads": (_INT, 1, 1_024),
    "intermediate_size": (_INT, 1, 65_536),
    "intra_bottleneck_size": (_INT, 1, 16_384),  # may also be None (no bottleneck)
    "num_feedforward_networks": (_INT, 1, 64),
    "embedding_size": (_INT, 1, 16_384),
    "max_position_embeddings": (_INT, 1, 131_072),
    "position_offset": (_INT, 0, 131_071),  # below max_position_embeddings: checked in _validate
    "type_vocab_size": (_INT, 0, 1_024),  # 0: no token-type table
    "head_ratio": (_INT, 1, 1_024),
    "conv_kernel_size": (_INT, 1, 1_023),
    "num_groups": (_INT, 1, 1_024),
    "max_relative_position": (_INT, 1, 131_072),
    "relative_window": (_INT, 1, 4_096),
    "relative_attention_num_buckets": (_INT, 4, 1_024),  # T5 bucketing: num_buckets // 4 exact buckets
    "position_buckets": (_INT, 0, 65_536),  # DeBERTa: 0 (none) or at least 4, checked by DisentangledAttention
    "max_relative_positions": (_INT, 1, 131_072),
    "relative_embedding_norm": (_BOOL, None, None),
    "rotary_theta": (_FLOAT, 1.0, 1e12),
    "local_rotary_theta": (_FLOAT, 1.0, 1e12),  # may also be None (the global base)
    "local_attention_window": (_INT, 0, 131_072),  # 0: no local layers
    "global_attention_every_n_layers": (_INT, 1, 256),
    # > 0: an epsilon of 0 divides by zero on a constant row (NaN); NaN itself made every output NaN.
    "layer_norm_epsilon": (_FLOAT, 1e-30, 1.0),
    "hidden_dropout": (_FLOAT, 0.0, 0.99),
    "attention_dropout": (_FLOAT, 0.0, 0.99),
    "initializer_range": (_FLOAT, 0.0, 10.0),
    # Hugging Face masks with float32's lowest value; anything below it overflows to -inf in float32.
    "attention_mask_value": (_FLOAT, -3.4028234663852886e38, 0.0),
    "use_bottleneck": (_BOOL, None, None),
    "use_bottleneck_attention": (_BOOL, None, None),
    "key_query_shared_bottleneck": (_BOOL, None, None),
    "trigram_input": (_BOOL, None, None),
    "classifier_activation": (_BOOL, None, None),
    "output_hidden_states": (_BOOL, None, None),
    "output_attentions": (_BOOL, None, None),
    "attention_use_bias": (_BOOL, None, None),
    "feed_forward_use_bias": (_BOOL, None, None),
    "norm_use_bias": (_BOOL, None, None),
    "fused_qkv": (_BOOL, None, None),
    "pooler_use_bias": (_BOOL, None, None),
    "pooler_norm": (_BOOL, None, None),
    # Task-head options (models/heads.py), stored in a saved model's "head" object.
    "num_labels": (_INT, 1, 1_000_000),
    "dropout": (_FLOAT, 0.0, 0.99),
}
OPTIONAL_FIELDS = ("intra_bottleneck_size", "local_rotary_theta")
# 1e9 parameters are 4 GB of float32 weights, plus as much again while Keras initialises them; BERT-large
# has 3.4e8. A config above this is refused before building, from the closed-form estimate below.
MAX_PARAMETERS = 1_000_000_000


def check_value(key, value, names=None):
    """Checks one Encoder option ``key`` against :data:`CONFIG_FIELDS`; returns ``value`` or raises a one-line
    ConfigError, naming the option as ``names`` maps it (option -> the name the user wrote, ``{"num_layers":
    "num_hidden_layers"}`` for a Hugging Face config.json).
    """
    kind, low, high = CONFIG_FIELDS[key]
    label = (names or {}).get(key, key)
    if value is None and key in OPTIONAL_FIELDS:
        return value
    if not _IS_KIND[kind](value):
        raise ConfigError(f"{label} must be a{'n' if kind == _INT else ''} {kind}, got {value!r}; fix the config")
    if kind == _BOOL:
        return value
    if kind == _FLOAT and not math.isfinite(value):
        raise ConfigError(f"{label} must be a finite number, got {value!r}; fix the config")
    if not low <= value <= high:
        raise ConfigError(f"{label} must be between {low:g} and {high:g}, got {value!r}; fix the config")
    return value


def check_fields(config, names=None):
    """Checks every option of ``config`` that :data:`CONFIG_FIELDS` lists (and the epsilon overrides)."""
    for key, value in config.items():
        if key in CONFIG_FIELDS:
            check_value(key, value, names)
    overrides = config.get("layer_norm_epsilon_overrides") or {}
    if not isinstance(overrides, dict):
        raise ConfigError(f"layer_norm_epsilon_overrides must be a mapping, got {overrides!r}")
    for key, value in overrides.items():
        check_value("layer_norm_epsilon", value, {"layer_norm_epsilon": f"layer_norm_epsilon_overrides[{key!r}]"})


def estimate_parameters(config):
    """Closed-form parameter count of an Encoder config, without building it (biases and norms left out).

    Counts the matrices that dominate every variant: embedding tables and
    projection, per block the attention projections (with bottlenecks), the
    stacked FFNs and ConvBERT's convolution kernels, and the pooler. On every
    preset it is within 15% of :func:`~mobilebert_kit.models.api.count_params`
    (bert-base: 109.4M estimated, 109M in the paper), close enough for a limit
    meant to stop configs that are orders of magnitude too large. ``config``: already checked by
    :func:`check_fields`.

    Example:
        >>> estimate_parameters(dict(vocab_size=100, hidden_size=32, num_layers=2, intermediate_size=64))
        37056
    """
    c = {**_DEFAULTS, **{k: v for k, v in config.items() if v is not None}}
    hidden = c["hidden_size"]
    emb = c.get("embedding_size") or hidden
    table_width = emb if c["embedding_projection"] == "after_norm" else hidden
    embeddings = c["vocab_size"] * emb + (c["max_position_embeddings"] + c["type_vocab_size"]) * table_width
    if emb != hidden or c["trigram_input"]:
        embeddings += emb * (3 if c["trigram_input"] else 1) * hidden
    inner = c["intra_bottleneck_size"] if c["use_bottleneck"] and c.get("intra_bottleneck_size") else hidden
    attention = 4 * inner * inner + (2 * hidden * inner if c["use_bottleneck"] else 0)
    if c["attention_type"] == "convbert_mixed":
        attention += inner * c["conv_kernel_size"] * 2
    ffn = c["num_feedforward_networks"] * 2 * inner * c["intermediate_size"] // c["num_groups"]
    if c["feed_forward_type"] == "gated":
        ffn = ffn * 3 // 2  # the gate doubles the first projection
    if c["attention_bias"] == "relative_buckets":
        attention += c["relative_attention_num_buckets"] * c["num_heads"]  # each block's copy of the table
    if c["attention_bias"] == "disentangled":  # each block's copy of DeBERTa's relative table
        span = c["position_buckets"] if c["position_buckets"] > 0 else c["max_relative_positions"]
        attention += 2 * span * inner
    pooler = hidden * hidden if c["classifier_activation"] else 0
    return int(embeddings + c["num_layers"] * (attention + ffn) + pooler)


def check_size(config, limit=MAX_PARAMETERS):
    """Refuses, before building, a config whose estimated parameter count is over ``limit``."""
    estimate = estimate_parameters(config)
    if estimate > limit:
        raise ConfigError(
            f"this config has about {estimate:.2g} parameters ({4 * estimate / 1e9:.3g} GB in float32), "
            f"{estimate / limit:.3g}x the {limit:.0e} that mbk builds; reduce num_layers, hidden_size, "
            "intermediate_size or vocab_size"
        )


# A model name is the first segment of every weight's and op's name: TensorFlow's scopes take these
# characters only ("enc oder" passed the config checks and failed in tracing, an internal error).
_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-]{0,127}")
# The dtype policies an encoder is built with (float32; float64 for exactness checks; the mixed-precision
# policies of training).
DTYPES = (None, "float32", "float64", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")


def _check_identity(name, dtype, epsilon_overrides):
    """The options Keras itself consumes: a name TensorFlow's scopes take, a known dtype policy, a mapping of
    epsilons (each was a raw TypeError or ValueError, or a crash later in tracing)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"name must be letters, digits, '.', '_' or '-' (at most 128, not starting with '_' or "
                          f"'-'), got {str(name)[:80]!r}; fix the config")
    if isinstance(dtype, str) or dtype is None:
        if dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(str(d) for d in DTYPES)}, got {dtype[:40]!r}; "
                              "fix the config")
    elif not hasattr(dtype, "compute_dtype"):  # a keras mixed_precision Policy passes
        raise ConfigError(f"dtype must be a dtype policy name, got {type(dtype).__name__}; fix the config")
    if epsilon_overrides is not None and not isinstance(epsilon_overrides, dict):
        raise ConfigError(f"layer_norm_epsilon_overrides must be a mapping, got {str(epsilon_overrides)[:80]}; "
                          "fix the config")


def _validate(config):
    check_choice("normalization_type", config["normalization_type"], tuple(NORMALIZATIONS))
    check_choice("hidden_act", config["hidden_act"], tuple(ACTIVATIONS))
    check_choice("position_embedding_type", config["position_embedding_type"], POSITION_EMBEDDING_TYPES)
    check_choice("attention_mask_mode", config["attention_mask_mode"], MASK_MODES)
    check_choice("attention_type", config["attention_type"], ATTENTION_TYPES)
    check_choice("relative_attention_variant", config["relative_attention_variant"], tuple(RELATIVE_ATTENTION_VARIANTS))
    check_choice("embedding_projection", config["embedding_projection"], EMBEDDING_PROJECTIONS)
    check_choice("pooler_activation", config["pooler_activation"], POOLER_ACTIVATIONS)
    check_choice("attention_bias", config["attention_bias"], ATTENTION_BIASES)
    check_choice("disentangled_terms", config["disentangled_terms"], tuple(DISENTANGLED_TERMS))
    check_choice("block_layout", config["block_layout"], BLOCK_LAYOUTS)
    check_choice("feed_forward_type", config["feed_forward_type"], FEED_FORWARD_TYPES)
    check_choice("pooler_input", config["pooler_input"], POOLER_INPUTS)
    for key in config["layer_norm_epsilon_overrides"]:
        check_choice("layer_norm_epsilon_overrides key", key, EPSILON_OVERRIDE_KEYS)
    check_fields(config)
    check_size(config)
    if config["use_bottleneck"] and not config["intra_bottleneck_size"]:
        raise ConfigError("use_bottleneck=True needs intra_bottleneck_size (the intra-block width)")
    if config["position_embedding_type"] == "relative_functional" and config["attention_type"] != "self_attention":
        raise ConfigError(
            f"position_embedding_type='relative_functional' (NEZHA) applies to attention_type='self_attention', "
            f"not {config['attention_type']!r}; use position_embedding_type='none' or 'absolute' with it"
        )
    if config["attention_bias"] != "none" and (config["attention_type"] != "self_attention"
                                               or config["position_embedding_type"] == "relative_functional"):
        raise ConfigError(
            f"attention_bias={config['attention_bias']!r} (MPNet, DeBERTa) applies to attention_type='self_attention' with "
            f"absolute or no positions, not {config['attention_type']!r} / {config['position_embedding_type']!r}; "
            "use attention_bias='none' with them"
        )
    _validate_modern_options(config)
    if config["position_offset"] >= config["max_position_embeddings"]:
        raise ConfigError(
            f"position_offset={config['position_offset']} leaves no row of the {config['max_position_embeddings']}-row "
            "position table; it must be below max_position_embeddings (RoBERTa: pad_token_id + 1)"
        )
    if config["conv_kernel_size"] % 2 == 0:
        raise ConfigError(f"conv_kernel_size must be odd (centred kernel), got {config['conv_kernel_size']}")
    groups = config["num_groups"]
    widths = {"intermediate_size": config["intermediate_size"],
              "intra_bottleneck_size" if config["use_bottleneck"] else "hidden_size":
              config["intra_bottleneck_size"] if config["use_bottleneck"] else config["hidden_size"]}
    for key, width in widths.items():
        if width % groups:
            raise ConfigError(f"num_groups={groups} must divide {key}={width} (grouped linear FFN, ConvBERT Eq. 7)")


def _validate_modern_options(config):
    """The ModernBERT options combine with the layouts that build them, and are refused elsewhere in one line."""
    pre_norm = config["block_layout"] == "pre_norm"
    if pre_norm and (config["use_bottleneck"] or config["num_feedforward_networks"] != 1 or config["num_groups"] != 1
                     or config["attention_type"] != "self_attention"):
        raise ConfigError("block_layout='pre_norm' (ModernBERT) builds self-attention and one feed-forward network "
                          "without bottleneck or groups; set use_bottleneck=False, num_feedforward_networks=1, "
                          "num_groups=1, attention_type='self_attention'")
    if not pre_norm:
        named = [key for key, value in (("feed_forward_type='gated'", config["feed_forward_type"] == "gated"),
                                        ("attention_use_bias=False", not config["attention_use_bias"]),
                                        ("feed_forward_use_bias=False", not config["feed_forward_use_bias"]),
                                        ("norm_use_bias=False", not config["norm_use_bias"])) if value]
        if named:
            raise ConfigError(f"{', '.join(named)} applies to block_layout='pre_norm' (ModernBERT) only; set "
                              "block_layout='pre_norm' or leave the default")
    if (config["fused_qkv"] or config["position_embedding_type"] == "rotary") and (
            config["attention_type"] != "self_attention" or config["attention_bias"] != "none"):
        raise ConfigError("fused_qkv and position_embedding_type='rotary' apply to attention_type='self_attention' "
                          f"without attention_bias, not {config['attention_type']!r} / {config['attention_bias']!r}")
    if config["local_attention_window"] and config["position_embedding_type"] != "rotary":
        raise ConfigError("local_attention_window applies to position_embedding_type='rotary' (ModernBERT's local "
                          "layers); set it to 0 or use rotary positions")
    if config["position_embedding_type"] == "rotary" and (config["hidden_size"] // config["num_heads"]) % 2:
        raise ConfigError(f"rotary positions rotate pairs of features: the head width hidden_size / num_heads "
                          f"({config['hidden_size']} / {config['num_heads']}) must be even")
