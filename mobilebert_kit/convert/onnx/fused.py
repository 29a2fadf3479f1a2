"""Encoder blocks written as ONNX Runtime's fused CPU kernels, from what the Keras layers compute.

tf2onnx lowers each :class:`~mobilebert_kit.layers.transformer_block.TransformerBlock` to ~40 elementwise,
reshape and transpose nodes, none of which ORT's fusions recognise (issue 45). This pass replaces every
qualifying block of the converted graph with the block's own computation, written from its Keras weights:

- attention: ``com.microsoft`` ``Attention`` where q, k and v read one tensor (BERT: the packed
  ``[hidden, 3 x width]`` projection inside the kernel), else ``MultiHeadAttention`` on the projected q, k
  and v (MobileBERT: q and k read the shared bottleneck, v the block input); the biases in the kernel, the
  padding mask as its 2-D mask, ``mask_filter_value`` the layer's score of padded keys;
- residual + LayerNorm: the bias and residual Adds and the standard ``LayerNormalization`` (ORT's
  ``SkipLayerNormalization`` was slower on CPU: ``_BlockWriter.dense`` has the numbers);
- the FFN activation: ``BiasGelu`` (exact GELU) / ``FastGelu`` (tanh) with the bias, or ReLU;
- NoNorm (``x * gamma + beta``): folded into the dense weights before it (``W * gamma``,
  ``b * gamma + beta``); after a residual the residual is scaled (``r * gamma``) and added;
- blocks with NoNorm or ReLU (MobileBERT) run on token rows (``[tokens, width]``, a Reshape in and out) so
  that each bias-adding product is one ``Gemm`` (ORT fuses a following ReLU into it); ``quantize_dynamic``
  takes MatMul, not Gemm, and would make ``Attention`` a ``QAttention`` with one activation scale per
  tensor, so :func:`dynamic_form` gives it ``MatMul`` + ``Add`` and ``MatMul`` + ``Split`` +
  ``MultiHeadAttention`` (the row scales then reach every weight product), and spells LayerNorm out (ORT
  would fuse it with the residual into its slow ``SkipLayerNormalization``).

Measured (seq 128, one core, CPU time; benchmarks/RESULTS.md, issue 45): ``mobilebert`` float32 0.92-0.96x
the optimum-style peer (tf2onnx's graph: 0.98-1.02x); the MatMuls alone are ~0.8x the peer's time, so float32
cannot go much below that by fusing. all-MiniLM-L6-v2: float32 0.95x and dynamic int8 0.96x tf2onnx's graph.
MobileBERT's value reads another tensor than its query and key, which ``Attention``'s one input cannot express.

A block qualifies when its attention class declares ``onnx_fused`` itself (the plain scaled dot product;
its subclasses add position terms ORT has no kernel for: NEZHA, MPNet, DeBERTa, rotary, ConvBERT's span
convolution, composite attention) and it is a post-norm block with dense FFNs and additive masking. Other
blocks keep tf2onnx's nodes. The block's boundary in the tf2onnx graph is found from the Keras layer path
(``transformer_layer_{i}/``, as ``keep_float_layers`` matches nodes) and the data flow: its one input that
depends on ``input_ids`` (the hidden state), and the next block's (or the heads') read of its output.
Nodes keep the layer paths in their names (``.../transformer_layer_0/ffn_0/intermediate/MatMul_fused``), so
``keep_float_layers`` still finds them.
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from mobilebert_kit.convert.onnx.graph import drop_dead_nodes, drop_unused_initializers, onnx_opset, refill

MS = "com.microsoft"
_GELU = {"gelu": "BiasGelu", "gelu_tanh": "FastGelu"}
_ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "relu6")


def qualifies(block, opset=17):
    """Whether :func:`fuse_blocks` writes ``block`` (a TransformerBlock) as fused kernels in a graph of ``opset``
    (LayerNormalization is an ONNX op from opset 17: a LayerNorm block of an older opset keeps tf2onnx's nodes)."""
    from mobilebert_kit.layers.feed_forward import FeedForward
    from mobilebert_kit.layers.transformer_block import TransformerBlock

    attention = getattr(block, "attention", None)
    return (
        type(block) is TransformerBlock
        and vars(type(attention)).get("onnx_fused", False)  # declared by the class itself: subclasses add terms
        and block.block_layout == "post_norm"
        and block.num_groups == 1
        and block.hidden_act in _ACTIVATIONS
        and attention.mask_mode == "add"
        and attention.use_bias
        and attention.qkv is None
        and all(type(ffn) is FeedForward for ffn in block.ffns)
        and block.compute_dtype == "float32"
        and (opset >= 17 or not any(type(m).__name__ == "LayerNormalization" for m in block.submodules))
    )


def fuse_blocks(model, graph, gemm=True):
    """Replaces the qualifying blocks of ``model`` (tf2onnx's float conversion of the Keras export ``graph``,
    before any other pass) in place; returns how many (0: the graph is left as it was)."""
    blocks = _blocks(graph)
    opset = onnx_opset(model)
    if not blocks or not any(qualifies(b, opset) for b in blocks):
        return 0
    g = model.graph
    inputs = {i.name for i in g.input}
    if "attention_mask" not in inputs or "input_ids" not in inputs:
        return 0
    producer = {o: n for n in g.node for o in n.output}
    initializers = {i.name for i in g.initializer}
    ids_dependent = _dependents(g, "input_ids")
    scopes = []
    for block in blocks:
        scope = f"{block.name}/"
        members = [n for n in g.node if scope in n.name]
        outs = {o for n in members for o in n.output}
        hidden = {i for n in members for i in n.input if i and i not in outs and i not in initializers
                  and i in ids_dependent}
        if len(hidden) != 1:
            return 0  # not the boundary this pass knows: leave tf2onnx's graph alone
        prefix = members[0].name.split(scope)[0] + block.name
        scopes.append((block, prefix, hidden.pop(), outs))
    # Each block's output is the next block's input; the last one's is what the heads read.
    outputs = [scopes[i + 1][2] for i in range(len(scopes) - 1)]
    last_outs = scopes[-1][3]
    member_names = {n.name for _, prefix, _, _ in scopes for n in g.node if n.name.startswith(prefix + "/")}
    read_outside = {i for n in g.node if n.name not in member_names for i in n.input} | {o.name for o in g.output}
    last = [o for o in last_outs if o in read_outside and o in ids_dependent]
    if len(last) != 1:
        return 0
    outputs.append(last[0])
    if any(out not in outs for out, (_, _, _, outs) in zip(outputs, scopes)):
        return 0
    nodes, weights = [], []
    mask = "fused/key_padding_mask"
    nodes.append(helper.make_node("Cast", ["attention_mask"], [mask], to=TensorProto.INT32, name="fused/mask_cast"))
    fused, shapes = 0, {}
    for (block, prefix, x, _), out in zip(scopes, outputs):
        if not qualifies(block, opset):
            continue
        # The fused block writes the tensor the old one wrote (the next block, the heads or a probe output read
        # it); the old producer's copy is renamed, read by nothing, and dropped with the nodes before it.
        old = producer[out]
        old.output[list(old.output).index(out)] = f"{out}/unfused"
        _BlockWriter(prefix, nodes, weights, gemm, shapes).block(block, x, out, mask)
        fused += 1
    g.node.extend(nodes)
    g.initializer.extend(weights)
    _toposort(g)
    drop_dead_nodes(g)
    drop_unused_initializers(g)
    if not any(o.domain == MS for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS, 1))
    return fused


def dynamic_form(model, spell_layer_norm=True):
    """A copy of ``model`` whose fused blocks take the forms ``quantize_dynamic`` (and the int4 ``MatMulNBits``
    quantizer) quantize; ``model`` if none. ``spell_layer_norm``: False keeps ``LayerNormalization`` (the int4
    quantizer raises the opset afterwards, and ReduceMean's axes move from attribute to input at 18).

    - ``Gemm`` -> ``MatMul`` + ``Add``: the quantizer leaves a Gemm float; ORT fuses the pair into
      ``DynamicQuantizeMatMul`` with the bias.
    - ``Attention`` -> ``MatMul`` on the packed weight, ``Split``, ``MultiHeadAttention``: the quantizer would
      make it ``QAttention``, one activation scale per tensor and none of the row scales the mode keeps.
    - ``LayerNormalization`` -> its mean / variance ops: in the quantized graph ORT fuses the residual Add and
      the LayerNormalization into ``SkipLayerNormalization``, whose CPU kernel made all-MiniLM-L6-v2's dynamic
      file 1.15x tf2onnx's graph's time (0.94x with the ops spelled out; CPU time, 128 tokens).

    tf2onnx's own nodes (a pooler's Gemm, a classifier) stay as they were.
    """
    init = {i.name for i in model.graph.initializer}
    shapes = {i.name: list(i.dims) for i in model.graph.initializer}
    forms = ("Gemm", "Attention", "LayerNormalization") if spell_layer_norm else ("Gemm", "Attention")

    def ours(node):
        return (node.op_type in forms and node.name.endswith(f"/{node.op_type.replace('Normalization', 'Norm')}_fused")
                and node.input[1] in init)

    if not any(ours(n) for n in model.graph.node):
        return model
    copy = type(model)()
    copy.CopyFrom(model)
    opset = onnx_opset(copy)
    nodes, extra = [], []
    for node in copy.graph.node:
        if not ours(node):
            nodes.append(node)
            continue
        base = node.name[:-len(node.name.rsplit("/", 1)[1])]
        product = f"{base}MatMul_fused:0"
        if node.op_type == "Gemm":  # written by _BlockWriter.biased: no transposes, alpha = beta = 1
            nodes += [helper.make_node("MatMul", node.input[:2], [product], name=f"{base}MatMul_fused"),
                      helper.make_node("Add", [product, node.input[2]], [node.output[0]], name=f"{base}BiasAdd_fused")]
        elif node.op_type == "Attention":
            width = shapes[node.input[1]][1] // 3
            split = f"{base}qkv_split_fused"
            extra.append(numpy_helper.from_array(np.array([width] * 3, np.int64), split))
            qkv = [f"{base}{n}_fused:0" for n in ("query", "key", "value")]
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            nodes += [helper.make_node("MatMul", node.input[:2], [product], name=f"{base}qkv/MatMul_fused"),
                      helper.make_node("Split", [product, split], qkv, axis=-1, name=f"{base}qkv/Split_fused"),
                      helper.make_node("MultiHeadAttention", qkv + list(node.input[2:4]), [node.output[0]],
                                       name=f"{base}MultiHeadAttention_fused", domain=MS, **attrs)]
        else:
            nodes += _layer_norm_ops(node, base, opset, extra)
    refill(copy.graph.node, nodes)
    copy.graph.initializer.extend(extra)
    return copy


def _layer_norm_ops(node, base, opset, initializers):
    """``LayerNormalization(x, gamma, beta)`` over the last axis as ReduceMean, Sub, Mul, Sqrt, Div ops."""
    x, gamma, beta = node.input
    epsilon = next(helper.get_attribute_value(a) for a in node.attribute if a.name == "epsilon")
    t = lambda s: f"{base}norm_{s}_fused"  # noqa: E731
    initializers.append(numpy_helper.from_array(np.array(epsilon, np.float32), t("epsilon")))
    reduce = {"axes": [-1]}
    if opset >= 18:  # ReduceMean takes its axes as an input from opset 18
        initializers.append(numpy_helper.from_array(np.array([-1], np.int64), t("axes")))
        reduce = {}

    def mean(source, out):
        return helper.make_node("ReduceMean", [source] + ([t("axes")] if not reduce else []), [out], name=out,
                                keepdims=1, **reduce)

    return [mean(x, t("mean")),
            helper.make_node("Sub", [x, t("mean")], [t("centred")], name=t("centred")),
            helper.make_node("Mul", [t("centred"), t("centred")], [t("square")], name=t("square")),
            mean(t("square"), t("variance")),
            helper.make_node("Add", [t("variance"), t("epsilon")], [t("shifted")], name=t("shifted")),
            helper.make_node("Sqrt", [t("shifted")], [t("deviation")], name=t("deviation")),
            helper.make_node("Div", [t("centred"), t("deviation")], [t("normal")], name=t("normal")),
            helper.make_node("Mul", [t("normal"), gamma], [t("scaled")], name=t("scaled")),
            helper.make_node("Add", [t("scaled"), beta], [node.output[0]], name=f"{base}LayerNorm_fused")]


def _blocks(graph):
    """The export graph's ``transformer_layer_{i}`` blocks, in order."""
    names = {layer.name for layer in graph.layers}
    blocks = []
    while f"transformer_layer_{len(blocks)}" in names:
        blocks.append(graph.get_layer(f"transformer_layer_{len(blocks)}"))
    return blocks


def _dependents(graph, source):
    """Names of the tensors computed (directly or not) from ``source``."""
    found = {source}
    for node in graph.node:  # tf2onnx writes nodes in topological order
        if any(i in found for i in node.input):
            found.update(node.output)
    return found


class _BlockWriter:
    """Appends one block's fused nodes and weights."""

    def __init__(self, prefix, nodes, weights, gemm=False, shapes=None):
        self.prefix, self.nodes, self.weights = prefix, nodes, weights
        self.gemm = gemm  # token rows flattened to [tokens, width] and bias-adding products as Gemm
        self.shapes = {} if shapes is None else shapes  # width -> the [batch, seq, width] shape tensor

    def to_rows(self, x, width, name):
        """``[batch, seq, width]`` -> ``[tokens, width]`` (a Reshape: no copy)."""
        return self.node("Reshape", [x, self.shape_const(width)], f"{name}/to_rows")

    def shape_const(self, width):
        key = ("rows", width)
        if key not in self.shapes:
            name = f"fused/rows_{width}"
            self.weights.append(numpy_helper.from_array(np.array([-1, width], np.int64), name))
            self.shapes[key] = name
        return self.shapes[key]

    def to_tokens(self, x, width, name):
        """``[tokens, width]`` -> ``[batch, seq, width]``, the batch and length read from the mask once."""
        if width not in self.shapes:
            base = "fused/mask_shape"
            if "mask_shape" not in self.shapes:
                self.shapes["mask_shape"] = base
                self.nodes.append(helper.make_node("Shape", ["attention_mask"], [base], name=base))
            tail = f"fused/width_{width}"
            self.weights.append(numpy_helper.from_array(np.array([width], np.int64), tail))
            self.nodes.append(helper.make_node("Concat", [base, tail], [f"fused/shape_{width}"], axis=0,
                                               name=f"fused/shape_{width}"))
            self.shapes[width] = f"fused/shape_{width}"
        return self.node("Reshape", [x, self.shapes[width]], f"{name}/to_tokens")

    def const(self, name, value, dtype=np.float32):
        full = f"{self.prefix}/{name}_fused"
        self.weights.append(numpy_helper.from_array(np.asarray(value, dtype), full))
        return full

    def node(self, op, inputs, name, domain=None, **attrs):
        full = f"{self.prefix}/{name}_fused"  # apart from tf2onnx's names; the layer path still matches
        self.nodes.append(helper.make_node(op, inputs, [full + ":0"], name=full, domain=domain, **attrs))
        return full + ":0"

    def dense(self, x, layer, name, norm=None, residual=None, activation=None):
        """``norm(x @ W + b [+ residual])`` with the activation, written fused."""
        kernel, bias = _arrays(layer.kernel, layer.bias)
        kind = None if norm is None else type(norm).__name__
        if kind == "NoNorm":  # linear: gamma and beta fold into the kernel and bias; a residual is scaled
            gamma, beta = _arrays(norm.gamma, norm.beta)
            out = self.biased(x, kernel * gamma[None, :], bias * gamma + beta, name)
            if residual is None:
                return out
            # A unit gamma (what --fold-nonorm leaves inside a block) needs no Mul: 120 of the mobilebert
            # preset's 145, each a pass over [tokens, 128] that ORT runs as its own kernel.
            scaled = residual if np.all(gamma == 1.0) else self.node(
                "Mul", [residual, self.const(f"{name}/gamma", gamma)], f"{name}/ResidualScale")
            return self.node("Add", [out, scaled], f"{name}/ResidualAdd")
        if kind == "LayerNormalization":
            # LayerNormalization after the bias and residual Adds, not ORT's SkipLayerNormalization: with it,
            # all-MiniLM-L6-v2 float32 took 1.07x tf2onnx's graph's time, with these 0.93x (CPU time, 128 tokens).
            gamma, beta = _arrays(norm.gamma, norm.beta)
            out = self.biased(x, kernel, bias, name)
            if residual is not None:
                out = self.node("Add", [out, residual], f"{name}/ResidualAdd")
            affine = [self.const(f"{name}/gamma", gamma), self.const(f"{name}/beta", beta)]
            return self.node("LayerNormalization", [out] + affine, f"{name}/LayerNorm", axis=-1,
                             epsilon=float(norm.epsilon))
        if norm is not None:
            raise ValueError(f"no fused form of {kind}")
        if activation in _GELU:
            product = self.node("MatMul", [x, self.const(f"{name}/kernel", kernel)], f"{name}/MatMul")
            return self.node(_GELU[activation], [product, self.const(f"{name}/bias", bias)],
                             f"{name}/{_GELU[activation]}", domain=MS)
        out = self.biased(x, kernel, bias, name)
        if activation == "relu":
            return self.node("Relu", [out], f"{name}/Relu")
        if activation == "relu6":
            return self.node("Clip", [out, self.const(f"{name}/zero", 0.0), self.const(f"{name}/six", 6.0)],
                             f"{name}/Relu6")
        return out

    def biased(self, x, kernel, bias, name):
        """``x @ kernel + bias``: one Gemm on token rows, else MatMul and Add."""
        if self.gemm:
            return self.node("Gemm", [x, self.const(f"{name}/kernel", kernel), self.const(f"{name}/bias", bias)],
                             f"{name}/Gemm")
        product = self.node("MatMul", [x, self.const(f"{name}/kernel", kernel)], f"{name}/MatMul")
        return self.node("Add", [product, self.const(f"{name}/bias", bias)], f"{name}/BiasAdd")

    def attention(self, attention, query, key, value, mask):
        """The context ``[batch, seq, width]`` of ``attention`` (a MultiHeadAttention layer)."""
        arrays = {n: _arrays(getattr(attention, n).kernel, getattr(attention, n).bias)
                  for n in ("query", "key", "value")}
        bias = self.const("attention/qkv_bias", np.concatenate([arrays[n][1] for n in ("query", "key", "value")]))
        packed = np.concatenate([arrays[n][0] for n in ("query", "key", "value")], axis=1) \
            if query == key == value else None
        if packed is not None and not self.gemm:
            # One kernel for the packed projection and the attention: 0.97x MultiHeadAttention's time on
            # all-MiniLM-L6-v2 at 128 tokens (CPU time, one core). dynamic_form() splits it for quantize_dynamic.
            return self.node("Attention", [query, self.const("attention/qkv/kernel", packed), bias, mask],
                             "attention/Attention", domain=MS, num_heads=int(attention.num_heads),
                             mask_filter_value=float(attention.mask_value))
        if packed is not None:
            qkv = self.node("MatMul", [query, self.const("attention/qkv/kernel", packed)], "attention/qkv/MatMul")
            width = arrays["query"][0].shape[1]
            split = self.const("attention/qkv/split", [width, width, arrays["value"][0].shape[1]], np.int64)
            names = [f"{self.prefix}/attention/{n}_fused:0" for n in ("query", "key", "value")]
            self.nodes.append(helper.make_node("Split", [qkv, split], names, axis=-1,
                                               name=f"{self.prefix}/attention/qkv/Split_fused"))
            q, k, v = names
        else:
            q, k, v = (self.node("MatMul", [source, self.const(f"attention/{n}/kernel", arrays[n][0])],
                                 f"attention/{n}/MatMul")
                       for n, source in (("query", query), ("key", key), ("value", value)))
        if self.gemm:
            q, k, v = (self.to_tokens(t, arrays[n][0].shape[1], f"attention/{n}")
                       for t, n in zip((q, k, v), ("query", "key", "value")))
        context = self.node("MultiHeadAttention", [q, k, v, bias, mask], "attention/MultiHeadAttention", domain=MS,
                            num_heads=int(attention.num_heads), mask_filter_value=float(attention.mask_value))
        if self.gemm:
            context = self.to_rows(context, arrays["value"][0].shape[1], "attention/context")
        return context

    def block(self, block, x, y, mask):
        """Appends ``block`` (TransformerBlock.call, post-norm) reading ``x``, writing ``y``."""
        # Token rows pay two Reshapes a block and three around the attention: only where some product takes
        # the Gemm form (NoNorm, ReLU); LayerNorm + GELU blocks keep 3-D tensors for Attention and BiasGelu.
        self.gemm = self.gemm and (block.normalization_type == "no_norm" or block.hidden_act not in _GELU)
        if self.gemm:
            x = self.to_rows(x, block.hidden_size, "input")
        layer_input = query = value = x
        if block.use_bottleneck:
            layer_input = self.dense(x, block.bottleneck_input.dense, "bottleneck_input",
                                     norm=block.bottleneck_input.norm)
            if block.use_bottleneck_attention:
                query = value = layer_input
            elif block.bottleneck_attention is not None:
                query = self.dense(x, block.bottleneck_attention.dense, "bottleneck_attention",
                                   norm=block.bottleneck_attention.norm)
        context = self.attention(block.attention, query, query, value, mask)
        h = self.dense(context, block.attention_output.dense, "attention_output", norm=block.attention_output.norm,
                       residual=layer_input)
        for index, ffn in enumerate(block.ffns):
            inner = self.dense(h, ffn.intermediate, f"ffn_{index}/intermediate", activation=ffn.hidden_act)
            h = self.dense(inner, ffn.output_dense, f"ffn_{index}/output", norm=ffn.norm, residual=h)
        if block.output_bottleneck is not None:
            h = self.dense(h, block.output_bottleneck.dense, "output_bottleneck", norm=block.output_bottleneck.norm,
                           residual=x)
        if self.gemm:
            h = self.to_tokens(h, block.hidden_size, "output")
        self.nodes.append(helper.make_node("Identity", [h], [y], name=f"{self.prefix}/output"))


def _arrays(*variables):
    return [np.asarray(v.numpy(), np.float32) for v in variables]


def _toposort(graph):
    produced = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    pending, ordered = list(graph.node), []
    while pending:
        rest = []
        for node in pending:
            if all(i in produced for i in node.input):
                ordered.append(node)
                produced.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(pending):
            ordered += rest  # a cycle or a missing input: the checker names it
            break
        pending = rest
    refill(graph.node, ordered)
