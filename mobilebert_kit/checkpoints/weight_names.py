"""Maps our weight paths to the names of Hugging Face and original TF1 checkpoints.

Our paths follow the layer names (``transformer_layer_3/ffn_1/intermediate/kernel``).
Both reference formats name the same tensors by scope; they differ in
separators, a few scope names and kernel layout (PyTorch stores ``[out, in]``).
One table of scope renames serves both dialects (parity-notes.md lists them).

The architecture variants reuse the BERT names wherever the reference does
(NEZHA is BERT without ``position_embeddings``; ConvBERT's query/key/value,
output and FFN scopes are BERT's). ConvBERT adds the span-convolution scopes
and ELECTRA's top-level ``embeddings_project``; its convolution weights are
stored in PyTorch ``Conv1d`` layouts, so the second element of
:func:`reference_name`'s answer is a *layout* (see :func:`to_ours`), which for
every dense kernel is simply ``True`` (transpose) or ``False``.
"""

import re

_LEAF = {
    # ours: (hf leaf, transpose for hf, tf1 leaf)
    "kernel": ("weight", True, "kernel"),
    "bias": ("bias", False, "bias"),
    "gamma": ("weight", False, "gamma"),
    "beta": ("bias", False, "beta"),
}


# Layouts of reference tensors that are not plain [out, in] dense kernels.
DEPTHWISE_CONV1D = "depthwise_conv1d"  # torch Conv1d(groups=C) weight [C, 1, k] -> Keras depthwise [k, C, 1]
POINTWISE_CONV1D = "pointwise_conv1d"  # torch Conv1d(k=1) weight [out, in, 1] -> Keras pointwise [1, in, out]
COLUMN_BIAS = "column_bias"  # Hugging Face SeparableConv1D bias [out, 1] -> [out]

# ConvBERT span-convolution sublayers (Hugging Face ``ConvBertSelfAttention`` attribute names).
_SPAN_CONV_HF = {
    "attention/span_conv/key_conv": ["attention", "self", "key_conv_attn_layer"],
    "attention/span_conv/conv_kernel": ["attention", "self", "conv_kernel_layer"],
    "attention/span_conv/conv_value": ["attention", "self", "conv_out_layer"],
}
_SPAN_CONV_LEAVES = {
    "depthwise_kernel": ("depthwise.weight", DEPTHWISE_CONV1D),
    "pointwise_kernel": ("pointwise.weight", POINTWISE_CONV1D),
    "bias": ("bias", COLUMN_BIAS),
}


def to_ours(array, layout):
    """Converts a reference tensor to our layout: ``layout`` is from :func:`reference_name`.

    ``True`` transposes 2-D kernels (PyTorch ``[out, in]``); grouped kernels
    ``[g, in/g, out/g]`` and everything else pass unchanged with ``True`` or
    ``False``; the convolution layouts permute or reshape. A tensor of the
    wrong rank passes unchanged, so the caller reports it as misshaped.
    """
    if layout is True:
        return array.T if array.ndim == 2 else array
    if layout == DEPTHWISE_CONV1D and array.ndim == 3:
        return array.transpose(2, 0, 1)
    if layout == POINTWISE_CONV1D and array.ndim == 3:
        return array.transpose(2, 1, 0)
    if layout == COLUMN_BIAS:
        return array.reshape(-1)
    return array


def _block_scopes(rest, num_ffn, norm):
    """Reference scope (list of parts) for a path inside one TransformerBlock."""
    layer, _, leaf = rest.rpartition("/")
    sub, _, inner = layer.partition("/")
    renames = {
        "bottleneck_input/dense": ["bottleneck", "input", "dense"],
        "bottleneck_input/norm": ["bottleneck", "input", norm],
        "bottleneck_attention/dense": ["bottleneck", "attention", "dense"],
        "bottleneck_attention/norm": ["bottleneck", "attention", norm],
        "attention/query": ["attention", "self", "query"],
        "attention/key": ["attention", "self", "key"],
        "attention/value": ["attention", "self", "value"],
        "attention_output/dense": ["attention", "output", "dense"],
        "attention_output/norm": ["attention", "output", norm],
        "output_bottleneck/dense": ["output", "bottleneck", "dense"],
        "output_bottleneck/norm": ["output", "bottleneck", norm],
        # The pre-norm block (ModernBERT): its norms before attention and FFN, the fused projection, and the
        # attention output as a plain dense; the family renames these to its own scopes.
        "attention_norm": ["attention_norm"],
        "ffn_norm": ["ffn_norm"],
        "attention/qkv": ["attention", "self", "qkv"],
        "attention_output": ["attention", "output", "dense"],
    }
    if layer in renames:
        return renames[layer], leaf
    match = re.fullmatch(r"ffn_(\d+)", sub)
    if match:
        index = int(match.group(1))
        # The last FFN is the block's own "intermediate"/"output"; earlier ones are "ffn_layer_i".
        prefix = [] if index == num_ffn - 1 else ["ffn_layer", str(index)]
        parts = {"intermediate": ["intermediate", "dense"], "output": ["output", "dense"], "norm": ["output", norm]}
        if inner in parts:
            return prefix + parts[inner], leaf
    return None, leaf


_RELATIVE_ATTENTION_BIAS = re.compile(r"transformer_layer_\d+/attention/relative_attention_bias/embeddings")
# DeBERTa's one relative table and its norm (encoder.rel_embeddings, encoder.LayerNorm), a copy in every block.
_REL_EMBEDDINGS = re.compile(r"transformer_layer_\d+/attention/rel_embeddings/(embeddings|norm/gamma|norm/beta)")
_REL_EMBEDDINGS_HF = {"embeddings": "encoder.rel_embeddings.weight", "norm/gamma": "encoder.LayerNorm.weight",
                      "norm/beta": "encoder.LayerNorm.bias"}


# Our scopes outside the blocks and heads -> the reference's ("LayerNorm": the dialect's norm name).
_TOP_SCOPES = {"embeddings/embedding_transformation": ["embeddings", "embedding_transformation"],
               "embeddings/norm": ["embeddings", "LayerNorm"], "pooler": ["pooler", "dense"],
               "pooler_norm": ["pooler", "norm"],
               "final_norm": ["final_norm"]}  # a pre-norm encoder's norm after the last block (ModernBERT's name)


def reference_name(path, dialect, config):
    """Returns ``(name, layout)`` of our weight ``path`` in ``dialect``, or None if unmapped.

    ``layout`` is ``True`` (a PyTorch ``[out, in]`` kernel: transpose), ``False``
    or one of the convolution layouts; :func:`to_ours` applies it. ``path`` is relative to the encoder
    (``embeddings/norm/gamma``) or a head's (``mlm/...``, ``classifier/...``); ``dialect`` ``"hf"`` (dots,
    ``ffn.i``, ``[out, in]`` kernels) or ``"tf1"``; ``config`` the encoder's (its FFN count and norm type).
    """
    norm = "FakeLayerNorm" if dialect == "tf1" and config["normalization_type"] == "no_norm" else "LayerNorm"
    layer, _, leaf = path.rpartition("/")
    hf_leaf, transpose, tf_leaf = _LEAF.get(leaf, (leaf, False, leaf))
    scopes = None
    after_norm = config.get("embedding_projection", "before_norm") == "after_norm"
    if path.startswith("transformer_layer_") and "/attention/span_conv/" in path:
        return _span_conv_name(path, dialect)
    if _RELATIVE_ATTENTION_BIAS.fullmatch(path):
        # One table in the checkpoint (MPNet's encoder.relative_attention_bias, added in every layer); each of our
        # blocks holds a copy, which the importer fills from it (Family.shared_weights).
        return ("encoder.relative_attention_bias.weight", False) if dialect == "hf" else None
    match = _REL_EMBEDDINGS.fullmatch(path)
    if match:
        # DeBERTa-v2: every block's copy reads the one table and norm (Family.shared_weights).
        return (_REL_EMBEDDINGS_HF[match.group(1)], False) if dialect == "hf" else None
    if layer == "embeddings/embedding_transformation" and after_norm:
        # ELECTRA/ConvBERT: a top-level ``embeddings_project`` after the embedding norm.
        return (f"embeddings_project.{hf_leaf}", transpose) if dialect == "hf" else None
    if path in ("embeddings/word_embeddings", "embeddings/position_embeddings", "embeddings/token_type_embeddings"):
        scopes, hf_leaf, tf_leaf, transpose = ["embeddings", leaf], "weight", None, False
    elif layer in _TOP_SCOPES:
        scopes = [norm if scope == "LayerNorm" else scope for scope in _TOP_SCOPES[layer]]
    elif path.startswith("transformer_layer_"):
        index, _, rest = path[len("transformer_layer_"):].partition("/")
        block, _ = _block_scopes(rest, config["num_feedforward_networks"], norm)
        if block is not None:
            scopes = ["encoder", "layer", index, *block]
    if scopes is None:
        return _head_name(path, dialect, config)
    if dialect == "hf":
        name = ".".join(_hf_join(scopes) + ([hf_leaf] if hf_leaf else []))
        return name, transpose
    name = "bert/" + "/".join(_tf1_join(scopes) + ([tf_leaf] if tf_leaf else []))
    return name, False


def _span_conv_name(path, dialect):
    """Hugging Face names of a ConvBERT span-convolution weight (no TF1 dialect: none was published)."""
    index, _, rest = path[len("transformer_layer_"):].partition("/")
    layer, _, leaf = rest.rpartition("/")
    if dialect != "hf" or layer not in _SPAN_CONV_HF:
        return None
    scopes = ["encoder", "layer", index, *_SPAN_CONV_HF[layer]]
    if layer.endswith("key_conv"):
        if leaf not in _SPAN_CONV_LEAVES:
            return None
        name, layout = _SPAN_CONV_LEAVES[leaf]
        return ".".join(scopes + [name]), layout
    hf_leaf, transpose, _ = _LEAF.get(leaf, (leaf, False, leaf))
    return ".".join(scopes + [hf_leaf]), transpose


def _hf_join(scopes):
    # "ffn_layer", "2" -> "ffn.2"; "layer", "3" stays "layer.3"
    return ["ffn" if s == "ffn_layer" else s for s in scopes]


def _tf1_join(scopes):
    # "layer", "3" -> "layer_3"; "ffn_layer", "2" -> "ffn_layer_2"
    out = []
    for s in scopes:
        if out and out[-1] in ("layer", "ffn_layer"):
            out[-1] += f"_{s}"
        else:
            out.append(s)
    return out


def _head_name(path, dialect, config):
    """Names of the task heads' weights."""
    layer, _, leaf = path.rpartition("/")
    hf_leaf, transpose, tf_leaf = _LEAF.get(leaf, (leaf, False, leaf))
    table = {
        "mlm/transform": ["cls", "predictions", "transform", "dense"],
        "mlm/transform_norm": ["cls", "predictions", "transform", "LayerNorm"],
        "nsp": ["cls", "seq_relationship"],
        "classifier": ["classifier"],
        "qa_outputs": ["qa_outputs"],
    }
    if path == "mlm/output_bias":
        return ("cls.predictions.bias", False) if dialect == "hf" else ("cls/predictions/output_bias", False)
    if path == "mlm/extra_output_weights":
        # HF keeps it as nn.Linear(vocab -> hidden - embedding): weight [H-E, V]; ours and TF1 are [V, H-E].
        return ("cls.predictions.dense.weight", True) if dialect == "hf" else ("cls/predictions/extra_output_weights", False)
    if layer not in table:
        return None
    if dialect == "tf1" and layer == "nsp":
        # TF1 BERT stores the NSP layer as output_weights [2, H] / output_bias.
        return ("cls/seq_relationship/output_weights", True) if leaf == "kernel" else ("cls/seq_relationship/output_bias", False)
    if dialect == "hf":
        return ".".join(table[layer] + [hf_leaf]), transpose
    return "/".join(table[layer] + [tf_leaf]), False
