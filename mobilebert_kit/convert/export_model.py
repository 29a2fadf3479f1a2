"""The graph that gets exported: named inputs, the export task's outputs in a fixed order.

Export capability as data: ``OUTPUTS`` says which *canonical* outputs each
architecture computes (the encoder's first output is ``sequence_output``);
the export task (:mod:`mobilebert_kit.convert.plan.export_tasks`) picks some of
them, plus the derived ones of :data:`DERIVED` (``sentence_embedding``:
pooling and normalization; ``probabilities``: softmax), and names them per
format. :func:`task_outputs` is the one computation of the derived values:
the export graph applies it to Keras tensors, validation to the Keras source's
own outputs, so validation still compares the file with the *source*.

The export graph is a plain functional Keras model that calls the source
model's own sublayers, found by name (``embeddings``, ``transformer_layer_{i}``,
``pooler`` and the heads' ``mlm``, ``nsp``, ``classifier``, ``qa_outputs``), so
it shares the source's weights. An integer attention mask is cast to float32
once, at the input: each attention layer's own cast is then a no-op, so the file
holds one CAST instead of one per layer.
"""

import weakref

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.convert.plan.export_options import MASK_DTYPES
from mobilebert_kit.convert.plan.export_tasks import POOLINGS, export_task
from mobilebert_kit.convert.prepare.rebuild import architecture_of, encoder_of, rebuild
from mobilebert_kit.convert.prepare.scale_migration import migrate_nonorm_scales, unmigratable
from mobilebert_kit.errors import ConfigError, check_choice
from mobilebert_kit.layers.position_clip import PositionClip
from mobilebert_kit.models.api import check_positions, max_positions
from mobilebert_kit.models.encoder import INPUT_NAMES, encoder_outputs

OUTPUTS = {
    "encoder": ("sequence_output", "pooled_output"),
    "pretrainer": ("mlm_logits", "nsp_logits", "sequence_output", "pooled_output"),
    "sequence_classifier": ("logits",),
    "span_question_answerer": ("start_logits", "end_logits"),
    "token_classifier": ("logits",),
}
# Canonical outputs whose argmax is the prediction (validation reports argmax agreement).
LOGIT_OUTPUTS = frozenset({"mlm_logits", "nsp_logits", "logits", "probabilities", "start_logits", "end_logits"})
# Canonical outputs that are one vector per token ([batch, seq, ...]): padded positions are not compared.
TOKEN_OUTPUTS = frozenset({"sequence_output", "mlm_logits", "start_logits", "end_logits"})
# Floor of the real-token count in mean pooling and of the squared norm in normalization: an all-padding
# row pools to zeros instead of 0/0 (sentence-transformers clamps the count at 1e-9 too).
_POOL_EPSILON = 1e-9
_NORM_EPSILON = 1e-12
# Score added at padded keys in the exported graph. -1e4 (BERT) stretches the
# int8 range of the masked scores to ~1e4 (a 40-unit quantization step);
# -120 still gives padded keys exp(-120) ~ 1e-52 weight, exactly 0 in float32,
# so outputs at real tokens are unchanged. Only used with mask mode "add".
DEFAULT_MASK_VALUE = -120.0


def task_names(model, task=None, fmt="tflite", hidden_states=False):
    """``((exported name, canonical name), ...)`` of ``model``'s export of ``task`` in ``fmt``, in export order.

    ``task`` None: the architecture's canonical outputs under their own names (files whose metadata names no
    task); ``hidden_states`` appends the per-layer probe outputs.
    """
    if task is None:
        pairs = tuple((name, name) for name in OUTPUTS[architecture_of(model)])
    else:
        pairs = tuple(export_task(task).outputs[fmt])
    if hidden_states:
        pairs += tuple((name, name) for name in hidden_state_names(model))
    return pairs


def output_names(model, task=None, fmt="tflite", hidden_states=False):
    """The exported output names of ``model``, in export order (see :func:`task_names`)."""
    return [name for name, _ in task_names(model, task, fmt, hidden_states)]


def hidden_state_names(model):
    """Names of the per-layer probe outputs: ``embeddings``, ``transformer_layer_{i}``."""
    layers = encoder_of(model).config["num_layers"]
    return ["embeddings"] + [f"transformer_layer_{i}" for i in range(layers)]


def token_outputs(model, task=None, fmt="tflite"):
    """Exported names of the outputs that hold one value per token (compared at real tokens only)."""
    token = set(TOKEN_OUTPUTS) | set(hidden_state_names(model))
    if architecture_of(model) == "token_classifier":
        token.add("logits")
    return {name for name, canonical in task_names(model, task, fmt, hidden_states=True) if canonical in token}


def logit_outputs(model, task=None, fmt="tflite"):
    """``{exported name: how its answer is read}`` of the outputs whose answers validation compares: True, the
    argmax; a number, a multi-label output's cut (each label is answered by its side of it: sigmoid 0.5, logit 0);
    ``"scores"``, a regressor's values (each target compared over the rows, as :func:`compare` says).
    """
    if task == "regression":  # its values are the answer: an argmax over 2 targets "changed" 19% of int8's rows
        return {name: "scores" for name, _ in task_names(model, task, fmt)}
    if task == "multi_label_classification":  # its argmax is no answer: it refused files whose labels all held
        return {name: 0.5 if canonical == "label_probabilities" else 0.0
                for name, canonical in task_names(model, task, fmt)}
    return {name: True for name, canonical in task_names(model, task, fmt) if canonical in LOGIT_OUTPUTS}


def sentence_embedding(sequence_output, attention_mask, pooling, normalize):
    """One vector per row: mean over real tokens (or the first token), L2-normalized when asked.

    ``[batch, seq, hidden]`` and a ``[batch, seq]`` 1/0 mask -> ``[batch, hidden]``, on Keras tensors (the
    export graph) and eager ones (validation's reference) alike; an all-padding row gives zeros, never NaN.

    Example:
        >>> sentence_embedding(tf.ones([1, 3, 4]), tf.constant([[1, 1, 0]]), "mean", True).shape
        TensorShape([1, 4])
    """
    check_choice("pooling", pooling, POOLINGS)
    if pooling == "cls":
        vector = sequence_output[:, 0, :]
    else:
        # expand_dims, not [:, :, tf.newaxis]: one op at an open length, where the slice added a STRIDED_SLICE.
        mask = tf.expand_dims(tf.cast(attention_mask, sequence_output.dtype), -1)
        count = tf.maximum(tf.reduce_sum(mask, axis=1), _POOL_EPSILON)
        vector = tf.reduce_sum(sequence_output * mask, axis=1) / count
    if normalize:
        vector = tf.math.l2_normalize(vector, axis=-1, epsilon=_NORM_EPSILON)
    return vector


# Canonical outputs computed from others: name -> function(values, mask, pooling, normalize).
DERIVED = {
    "sentence_embedding": lambda values, mask, pooling, normalize: sentence_embedding(
        values["sequence_output"], mask, pooling, normalize),
    "probabilities": lambda values, mask, pooling, normalize: tf.nn.softmax(values["logits"], axis=-1),
    # A multi-label classifier's labels are independent: one sigmoid each (transformers' BCEWithLogitsLoss).
    "label_probabilities": lambda values, mask, pooling, normalize: tf.math.sigmoid(values["logits"]),
}


def task_outputs(values, attention_mask, pairs, pooling=None, normalize=False):
    """``{exported name: value}`` for ``pairs`` (:func:`task_names`), from the model's canonical ``values``
    (tensors or arrays: the module doc says who calls it).
    """
    return {exported: values[canonical] if canonical in values else
            DERIVED[canonical](values, attention_mask, pooling, normalize) for exported, canonical in pairs}


def _encoder_forward(encoder, input_ids, attention_mask, token_type_ids):
    """Encoder.call spelled out with the encoder's sublayers, found by name."""
    config = encoder.config
    # token_type_ids by keyword: a keyword tensor survives Keras model cloning (QAT) intact.
    x = encoder.get_layer("embeddings")(input_ids, token_type_ids=token_type_ids)
    hidden = [x]
    for i in range(config["num_layers"]):
        x = encoder.get_layer(f"transformer_layer_{i}")(x, attention_mask=attention_mask)
        hidden.append(x)
    x, pooled = encoder_outputs(encoder.get_layer, config, x, attention_mask)  # final norm, pooler: as Encoder
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
    seq_len=None,
    mask_dtype="float32",
    attention_mask_value=DEFAULT_MASK_VALUE,
    hidden_states=False,
    for_qat=False,
    task=None,
    fmt="tflite",
    pooling=None,
    normalize=False,
    ids_dtype="int32",
    input_names=None,
    clip_to_positions=False,
):
    """The functional Keras model converted to TFLite / ONNX, sharing ``model``'s weights (:func:`plan_graph`
    reads each argument from the plan). None for ``batch_size`` / ``seq_len`` is a dynamic axis.

    ``attention_mask_value`` (None: the model's) rebuilds the model only in mask mode ``"add"``: in ``"mul_add"``
    the value reaches real tokens' softmax and is part of the trained model. ``for_qat`` passes the token
    inputs through Identity layers, so that tensorflow-model-optimization (which fake-quantizes model inputs
    feeding quantized layers) leaves them alone. ``clip_to_positions`` keeps, on an open sequence, at most the
    position table's length of tokens, the first ones and the last (as a truncating tokenizer cuts a text):
    MediaPipe and the Task Library feed the whole text, which would otherwise fail in the position gather.
    The model's ``output_order`` and ``input_dtypes`` record its outputs and inputs.
    """
    check_choice("mask_dtype", mask_dtype, MASK_DTYPES)
    check_choice("ids_dtype", ids_dtype, ("int32", "int64"))
    architecture = architecture_of(model)
    config = encoder_of(model).config
    check_positions(config, seq_len)
    if (
        attention_mask_value is not None
        and config["attention_mask_mode"] == "add"
        and float(attention_mask_value) != float(config["attention_mask_value"])
    ):
        model = rebuild(model, attention_mask_value=float(attention_mask_value))
    encoder = encoder_of(model)
    pairs = task_names(model, task, fmt)
    if task is not None and architecture not in export_task(task).architectures:
        raise ConfigError(f"task {task} does not export a {architecture}")  # ExportOptions.resolve says more
    shape = (batch_size, seq_len)
    input_names = tuple(input_names or INPUT_NAMES)
    dtypes = {name: {"attention_mask": mask_dtype}.get(name, ids_dtype) for name in input_names}
    inputs = {name: keras.Input(batch_shape=shape, dtype=dtypes[name], name=name) for name in input_names}
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    # A graph without token types (ONNX of RoBERTa-like families) reads type 0, as transformers does then.
    types = inputs["token_type_ids"] if "token_type_ids" in inputs else keras.layers.Lambda(
        tf.zeros_like, name="token_type_ids_zero")(ids)
    if mask_dtype != "float32":
        mask = tf.cast(mask, tf.float32)  # once here, not once per attention layer (see the module docstring)
    positions = max_positions(config)
    if clip_to_positions and seq_len is None and positions:
        clip = PositionClip(positions, name="clip_to_positions")
        ids, mask, types = clip([ids, mask, types])  # one index for the three inputs
    if for_qat:
        ids = keras.layers.Identity(name="input_ids_passthrough")(ids)
        types = keras.layers.Identity(name="token_type_ids_passthrough")(types)
    encoded, hidden = _encoder_forward(encoder, ids, mask, types)
    outputs = _head_forward(model, architecture, encoded)
    outputs = task_outputs({**encoded, **outputs}, mask, pairs, pooling, normalize)
    if hidden_states:
        outputs.update(zip(hidden_state_names(model), hidden))
    graph = keras.Model(inputs=inputs, outputs=outputs, name=f"{model.name}_export")
    graph.output_order = list(outputs)
    graph.mask_dtype = mask_dtype
    graph.input_dtypes = dtypes
    return graph


def plan_graph(model, plan, hidden_states=False, for_qat=False):
    """The export graph of an :class:`~mobilebert_kit.convert.plan.export_plan.ExportPlan`: the one place its arguments
    are read from the plan, for the artifact and the drift probe alike.
    """
    if plan.options.fold_nonorm and not for_qat:  # QAT trains the model it is given: nothing to fold into yet
        # The per-layer hidden states the drift probe reads are the block outputs, which the stream fold stores
        # in other units: the probe's graph folds inside the blocks only (scale_migration module doc). Whether a
        # file folds the stream is its mode's record's (QuantizationMode.stream_fold: ONNX's static QDQ lost with it).
        model = _folded(model, plan, stream=not hidden_states and plan.format in plan.mode.stream_fold)
    return build_export_model(model, plan.batch_size, plan.static_seq_len, plan.mask_dtype,
                              plan.options.attention_mask_value, hidden_states=hidden_states, for_qat=for_qat,
                              task=plan.task, fmt=plan.format, pooling=plan.pooling, normalize=bool(plan.normalize),
                              ids_dtype=plan.ids_dtype, input_names=plan.input_names,
                              clip_to_positions=plan.clips_in_graph)


def _folded(model, plan, stream=True):
    """``model`` with each block's NoNorms folded into its dense layers (``--fold-nonorm``); outputs unchanged.

    ``stream``: the MobileBERT stream between blocks too (the NoNorm writing each block's output but the last).

    The same model object gets the same folded copy: the artifact and the drift probe both ask for it.
    (A weak-keyed module cache, not an attribute: Keras would track a model set on a model as a sublayer,
    and the copy is dropped with its source instead of living as long as the process.)
    """
    folded = _FOLDED.setdefault(model, {})
    if stream in folded:
        return folded[stream]
    why = unmigratable(encoder_of(model).config)
    if why:
        raise ConfigError(f"{plan.name_of('fold_nonorm')}: {why}")
    folded[stream], _report = migrate_nonorm_scales(model, "unit", stream=stream)
    return folded[stream]


_FOLDED = weakref.WeakKeyDictionary()


def serving_function(graph):
    """A ``tf.function`` with keyword inputs named like the model inputs; returns the output dict."""
    by_name = {t.name.split(":")[0]: t for t in graph.inputs}
    names = [n for n in INPUT_NAMES if n in by_name]  # export order, whichever of the three the graph takes
    specs = [tf.TensorSpec(by_name[n].shape, by_name[n].dtype, name=n) for n in names]

    @tf.function(input_signature=specs)
    def serve(*tensors):
        return graph(dict(zip(names, tensors)), training=False)

    return serve
