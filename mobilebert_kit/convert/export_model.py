"""The graph that gets exported: named int/float inputs, named outputs in a fixed order.

Export capability as data: ``OUTPUTS`` says which outputs each architecture
exports, in which order (the encoder's first output is ``sequence_output``),
and which of them are logits whose argmax validation compares.

The export graph is a plain functional Keras model that calls the source
model's own sublayers, found by name (``embeddings``, ``transformer_layer_{i}``,
``pooler`` and the heads' ``mlm``, ``nsp``, ``classifier``, ``qa_outputs``), so
it shares the source's weights. Rebuilding it from the sublayers instead of
calling the source model lets the attention mask enter as float32: a Keras
functional model casts every input to its ``keras.Input`` dtype (int32 for the
mask), and that int32 input plus CAST is what integer quantization handles
badly (shared/reference/parity-notes.md; performance-notes.md counts a CAST
per model and 24 float mask ADDs in the Model Garden full-int8 export).
Validation always compares the exported file with the *source* model, so any
difference between this graph and the source shows up there.
"""

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.convert.rebuild import architecture_of, encoder_of, rebuild
from mobilebert_kit.errors import ConfigError, check_choice
from mobilebert_kit.models.encoder import INPUT_NAMES

OUTPUTS = {
    "encoder": ("sequence_output", "pooled_output"),
    "pretrainer": ("mlm_logits", "nsp_logits", "sequence_output", "pooled_output"),
    "sequence_classifier": ("logits",),
    "span_question_answerer": ("start_logits", "end_logits"),
    "token_classifier": ("logits",),
}
# Outputs whose argmax is the prediction (validation reports argmax agreement).
LOGIT_OUTPUTS = frozenset({"mlm_logits", "nsp_logits", "logits", "start_logits", "end_logits"})
# Outputs that are one vector per token ([batch, seq, ...]): padded positions are not compared.
TOKEN_OUTPUTS = frozenset({"sequence_output", "mlm_logits", "start_logits", "end_logits"})
MASK_DTYPES = ("float32", "int32")
# Score added at padded keys in the exported graph. -1e4 (BERT) stretches the
# int8 range of the masked scores to ~1e4 (a 40-unit quantization step);
# -120 still gives padded keys exp(-120) ~ 1e-52 weight, exactly 0 in float32,
# so outputs at real tokens are unchanged. Only used with mask mode "add".
DEFAULT_MASK_VALUE = -120.0


def output_names(model, hidden_states=False):
    """The exported output names of ``model``, in export order."""
    names = list(OUTPUTS[architecture_of(model)])
    if hidden_states:
        names += hidden_state_names(model)
    return names


def hidden_state_names(model):
    """Names of the per-layer probe outputs: ``embeddings``, ``transformer_layer_{i}``."""
    layers = encoder_of(model).config["num_layers"]
    return ["embeddings"] + [f"transformer_layer_{i}" for i in range(layers)]


def token_outputs(model):
    """Output names that hold one value per token (compared at real tokens only)."""
    names = {n for n in OUTPUTS[architecture_of(model)] if n in TOKEN_OUTPUTS}
    if architecture_of(model) == "token_classifier":
        names.add("logits")
    return names | set(hidden_state_names(model))


def _encoder_forward(encoder, input_ids, attention_mask, token_type_ids):
    """Encoder.call spelled out with the encoder's sublayers, found by name."""
    config = encoder.config
    # token_type_ids by keyword: a keyword tensor survives Keras model cloning (QAT) intact.
    x = encoder.get_layer("embeddings")(input_ids, token_type_ids=token_type_ids)
    hidden = [x]
    for i in range(config["num_layers"]):
        x = encoder.get_layer(f"transformer_layer_{i}")(x, attention_mask=attention_mask)
        hidden.append(x)
    first_token = x[:, 0, :]
    pooled = encoder.get_layer("pooler")(first_token) if config["classifier_activation"] else first_token
    return {"sequence_output": x, "pooled_output": pooled}, hidden


def _head_forward(model, architecture, encoded):
    seq, pooled = encoded["sequence_output"], encoded["pooled_output"]
    if architecture == "encoder":
        return dict(encoded)
    if architecture == "pretrainer":
        return {
            "mlm_logits": model.get_layer("mlm")(seq),
            "nsp_logits": model.get_layer("nsp")(pooled),
            **encoded,
        }
    if architecture == "sequence_classifier":
        return {"logits": model.get_layer("classifier")(pooled)}
    if architecture == "token_classifier":
        return {"logits": model.get_layer("classifier")(seq)}
    if architecture == "span_question_answerer":
        logits = model.get_layer("qa_outputs")(seq)  # (B, S, 2)
        return {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}
    raise AssertionError(f"no export outputs declared for {architecture}")  # OUTPUTS covers HEADS


def build_export_model(
    model,
    batch_size=1,
    seq_len=128,
    mask_dtype="float32",
    attention_mask_value=DEFAULT_MASK_VALUE,
    hidden_states=False,
    for_qat=False,
):
    """Returns the functional Keras model that is converted to TFLite / ONNX.

    Args:
        model: an Encoder or task model (weights are shared, not copied, unless
            ``attention_mask_value`` differs from the model's).
        batch_size: static batch dimension, or None for a dynamic one.
        seq_len: static sequence length, or None for a dynamic one.
        mask_dtype: ``"float32"`` (1.0 real token, 0.0 padding; no CAST in the
            graph) or ``"int32"`` (the source model's own input type).
        attention_mask_value: score of padded keys; None keeps the model's.
            Ignored for mask mode ``"mul_add"``, where the value also reaches
            real tokens' softmax and so is part of the trained model.
        hidden_states: also output every layer's hidden state (the per-layer
            drift probe), named ``embeddings`` and ``transformer_layer_{i}``.
        for_qat: pass the int32 inputs through Identity layers, so that
            tensorflow-model-optimization (which fake-quantizes model inputs
            feeding quantized layers) leaves the token ids alone.

    Returns:
        A ``keras.Model`` with inputs ``input_ids``, ``attention_mask``,
        ``token_type_ids`` and a dict of outputs named by :func:`output_names`.

    Example:
        >>> graph = build_export_model(mbk.build("tiny-bert"), seq_len=16)  # doctest: +SKIP
    """
    check_choice("mask_dtype", mask_dtype, MASK_DTYPES)
    architecture = architecture_of(model)
    config = encoder_of(model).config
    limit = config["max_position_embeddings"]
    if seq_len is not None and config.get("position_embedding_type") == "absolute" and seq_len > limit:
        # Keras would fail deep inside the embedding's gather with a multi-line message.
        raise ConfigError(f"--seq-len {seq_len} exceeds the model's {limit} positions; use at most {limit}")
    if (
        attention_mask_value is not None
        and config["attention_mask_mode"] == "add"
        and float(attention_mask_value) != float(config["attention_mask_value"])
    ):
        model = rebuild(model, attention_mask_value=float(attention_mask_value))
    encoder = encoder_of(model)
    shape = (batch_size, seq_len)
    inputs = {
        name: keras.Input(
            batch_shape=shape, dtype=mask_dtype if name == "attention_mask" else "int32", name=name
        )
        for name in INPUT_NAMES
    }
    ids, types = inputs["input_ids"], inputs["token_type_ids"]
    if for_qat:
        ids = keras.layers.Identity(name="input_ids_passthrough")(ids)
        types = keras.layers.Identity(name="token_type_ids_passthrough")(types)
    encoded, hidden = _encoder_forward(encoder, ids, inputs["attention_mask"], types)
    outputs = _head_forward(model, architecture, encoded)
    outputs = {name: outputs[name] for name in OUTPUTS[architecture]}
    if hidden_states:
        outputs.update(zip(hidden_state_names(model), hidden))
    graph = keras.Model(inputs=inputs, outputs=outputs, name=f"{model.name}_export")
    graph.output_order = list(outputs)
    graph.mask_dtype = mask_dtype
    return graph


def serving_function(graph):
    """A ``tf.function`` with keyword inputs named like the model inputs; returns the output dict."""
    by_name = {t.name.split(":")[0]: t for t in graph.inputs}
    specs = [tf.TensorSpec(by_name[n].shape, by_name[n].dtype, name=n) for n in INPUT_NAMES]

    @tf.function(input_signature=specs)
    def serve(input_ids, attention_mask, token_type_ids):
        return graph(
            {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids},
            training=False,
        )

    return serve
