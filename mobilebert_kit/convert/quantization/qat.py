"""Quantization-aware training (tensorflow-model-optimization) for our layers, then int8 export.

tfmot wraps each top-level layer of a functional model and asks its
``QuantizeConfig`` which weights to fake-quantize and which outputs to
fake-quantize. Our top-level layers are composites (``TokenEmbedding``,
``TransformerBlock``), so the block configs are assembled from one config per
sublayer kind (the ``*QuantizeConfig`` classes below, each saying what it
quantizes), found by name; every config fake-quantizes its layer's output, so
the converter gets the range (NoNorm's MUL and ADD included).

Kernels use per-tensor symmetric 8-bit fake quantization (as tfmot's own
Dense config), outputs moving-average asymmetric 8-bit ranges. Ops inside a
block without a learned range (attention scores, softmax) are calibrated by
the converter from the same calibration data, so the exported model is int8
end to end where kernels exist; the export report lists what stays float.

The fine-tuning is self-distillation: the fake-quantized graph learns to
reproduce the float graph's outputs (MSE on every output) on the calibration
inputs; no labels are needed. ``steps=0`` only collects ranges.
"""

import functools

import numpy as np

from mobilebert_kit.backend import keras, tf
from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.convert.prepare.substitution import patched_classes
from mobilebert_kit.convert.quantization.modes import quantization_mode
from mobilebert_kit.errors import first_line
from mobilebert_kit.layers.feed_forward import FeedForward
from mobilebert_kit.layers.multi_head_attention import MultiHeadAttention
from mobilebert_kit.layers.no_norm import NoNorm
from mobilebert_kit.layers.projection_norm import ProjectionNorm
from mobilebert_kit.layers.token_dense import TokenDense
from mobilebert_kit.layers.token_embedding import TokenEmbedding
from mobilebert_kit.layers.transformer_block import TransformerBlock


def _tfmot():
    # Imported where used: 3.3 s on top of TensorFlow (2-core machine), paid only by QAT exports.
    import tensorflow_model_optimization as tfmot

    return tfmot


def _kernel_quantizer():
    q = _tfmot().quantization.keras.quantizers
    # Per-tensor: a per-axis fake quant on a Dense kernel ([in, out]) reaches the
    # TFLite converter through a TRANSPOSE it rejects ("mismatched quantized axes");
    # tfmot's own Dense config is per-tensor too.
    return q.LastValueQuantizer(num_bits=8, per_axis=False, symmetric=True, narrow_range=True)


@functools.cache
def _output_quantizer_class():
    """The output quantizer class, built on tfmot's Quantizer base once tfmot is imported."""
    base = _tfmot().quantization.keras.quantizers.Quantizer

    class DataRangeQuantizer(base):
        """Asymmetric 8-bit fake quant whose range starts at the first batch's min/max.

        tfmot's MovingAverageQuantizer starts at [-6, 6] and moves with decay
        0.999, so a short fine-tune (or none) keeps [-6, 6]: on tiny-mobilebert,
        whose activations are ~0.03, that left an SNR of 5.9 dB. Here the first
        training batch sets the range and later ones move it with decay 0.9.
        """

        decay = 0.9

        def build(self, tensor_shape, name, layer):
            def scalar(suffix, value):
                return layer.add_weight(f"{name}_{suffix}", shape=(), trainable=False,
                                        initializer=keras.initializers.Constant(value))

            return {"min_var": scalar("min", -6.0), "max_var": scalar("max", 6.0), "seen": scalar("seen", 0.0)}

        def __call__(self, inputs, training, weights, **kwargs):
            low, high, seen = weights["min_var"], weights["max_var"], weights["seen"]
            if training:
                batch_low = tf.minimum(tf.reduce_min(inputs), 0.0)
                batch_high = tf.maximum(tf.reduce_max(inputs), 0.0)
                keep = tf.where(seen > 0, self.decay, 0.0)
                low.assign(keep * low + (1.0 - keep) * batch_low)
                high.assign(keep * high + (1.0 - keep) * batch_high)
                seen.assign(1.0)
            return tf.quantization.fake_quant_with_min_max_vars(inputs, low, high, num_bits=8, narrow_range=False)

        def get_config(self):
            return {}

    return DataRangeQuantizer


class _SublayerConfig:
    """Base of the per-sublayer configs: fake-quantize the kernels of named Dense sublayers."""

    dense_names = ()
    quantize_output = True

    def denses(self, layer):
        """The Dense sublayers ``dense_names`` of ``layer`` that exist (found by name)."""
        return [sub for sub in (getattr(layer, name, None) for name in self.dense_names) if sub is not None]

    def get_weights_and_quantizers(self, layer):
        return [(d.kernel, _kernel_quantizer()) for d in self.denses(layer)]

    def set_quantize_weights(self, layer, quantize_weights):
        for dense, weight in zip(self.denses(layer), quantize_weights):
            dense.kernel = weight

    def get_activations_and_quantizers(self, layer):
        return []

    def set_quantize_activations(self, layer, quantize_activations):
        return None

    def get_output_quantizers(self, layer):
        return [_output_quantizer_class()()] if self.quantize_output else []

    def get_config(self):
        return {}


class BottleneckQuantizeConfig(_SublayerConfig):
    """ProjectionNorm (MobileBERT's bottlenecks and the attention output projection)."""

    dense_names = ("dense",)


class AttentionQuantizeConfig(_SublayerConfig):
    """MultiHeadAttention: query, key and value kernels (the output projection is a ProjectionNorm)."""

    dense_names = ("query", "key", "value")


class FeedForwardQuantizeConfig(_SublayerConfig):
    """FeedForward: intermediate and output kernels."""

    dense_names = ("intermediate", "output_dense")


class NoNormQuantizeConfig(_SublayerConfig):
    """NoNorm: no kernels; the output range is learned."""


class TrigramEmbeddingQuantizeConfig(_SublayerConfig):
    """TokenEmbedding: the embedding projection (trigram or factorized) and the word table."""

    dense_names = ("embedding_transformation",)

    def get_weights_and_quantizers(self, layer):
        return [(layer.word_embeddings, _kernel_quantizer())] + super().get_weights_and_quantizers(layer)

    def set_quantize_weights(self, layer, quantize_weights):
        layer.word_embeddings = quantize_weights[0]
        super().set_quantize_weights(layer, quantize_weights[1:])


class TokenDenseQuantizeConfig(_SublayerConfig):
    """TokenDense at the top level (a task head's token and span logits): its own kernel, its output, as tfmot's
    registry does for a Dense (which it knows by its exact class, not a subclass)."""

    def get_weights_and_quantizers(self, layer):
        return [(layer.kernel, _kernel_quantizer())]

    def set_quantize_weights(self, layer, quantize_weights):
        layer.kernel = quantize_weights[0]


class TransformerBlockQuantizeConfig(_SublayerConfig):
    """TransformerBlock: the weights of every sublayer (by name), the block output."""

    def _parts(self, layer):
        parts = []
        for name in ("bottleneck_input", "bottleneck_attention"):
            sub = getattr(layer, name, None)
            if sub is not None:
                parts.append((sub, BottleneckQuantizeConfig()))
        parts.append((layer.attention, AttentionQuantizeConfig()))
        parts.append((layer.attention_output, BottleneckQuantizeConfig()))
        parts += [(ffn, FeedForwardQuantizeConfig()) for ffn in layer.ffns]
        if layer.output_bottleneck is not None:
            parts.append((layer.output_bottleneck, BottleneckQuantizeConfig()))
        return parts

    def get_weights_and_quantizers(self, layer):
        return [pair for sub, config in self._parts(layer) for pair in config.get_weights_and_quantizers(sub)]

    def set_quantize_weights(self, layer, quantize_weights):
        index = 0
        for sub, config in self._parts(layer):
            n = len(config.get_weights_and_quantizers(sub))
            config.set_quantize_weights(sub, quantize_weights[index:index + n])
            index += n


def _registered(cls):
    """``cls`` as a real tfmot QuantizeConfig subclass (tfmot is imported lazily)."""
    return type(cls.__name__, (cls, _tfmot().quantization.keras.QuantizeConfig), {})


# By exact class: a subclass (TokenDense is a Dense) computes something else.
_CONFIGS = {
    TransformerBlock: TransformerBlockQuantizeConfig, TokenEmbedding: TrigramEmbeddingQuantizeConfig,
    ProjectionNorm: BottleneckQuantizeConfig, MultiHeadAttention: AttentionQuantizeConfig,
    FeedForward: FeedForwardQuantizeConfig, NoNorm: NoNormQuantizeConfig, TokenDense: TokenDenseQuantizeConfig,
}


def _config_for(layer):
    config = _CONFIGS.get(type(layer))
    return None if config is None else _registered(config)()


def _scope():
    """tfmot's scope naming our layers and their configs (every one of :data:`_CONFIGS`, keys and values)."""
    objects = {c.__name__: _registered(c) for c in _CONFIGS.values()}
    objects.update({c.__name__: c for c in _CONFIGS})
    return _tfmot().quantization.keras.quantize_scope(objects)


# The ``compute_output_shape`` TokenEmbedding and TransformerBlock get while tfmot wraps them: tfmot builds an
# output quantizer from it, which Keras cannot infer for these layers. The shapes are simple (ids [B, S] ->
# [B, S, hidden]; a block keeps its input shape).
_OUTPUT_SHAPES = {
    TokenEmbedding: lambda self, shape: tf.TensorShape(shape).concatenate([self.hidden_size]),
    TransformerBlock: lambda self, shape: tf.TensorShape(shape),
}


def annotate(graph):
    """Clones ``graph`` with our layers annotated (Dense layers use tfmot's default registry)."""
    tfmot = _tfmot()
    qk = tfmot.quantization.keras

    def annotate_layer(layer):
        config = _config_for(layer)
        if config is not None:
            return qk.quantize_annotate_layer(layer, quantize_config=config)
        if isinstance(layer, keras.layers.Dense):
            return qk.quantize_annotate_layer(layer)
        return layer

    with _scope():
        return keras.models.clone_model(graph, clone_function=annotate_layer)


def quantization_aware_graph(graph, calibration, steps=100, learning_rate=1e-5, batch_size=8, seed=0):
    """Returns the fake-quantized copy of the float export ``graph`` (the teacher), fine-tuned with Adam for
    ``steps`` self-distillation steps (0: only collect ranges) to match ``graph`` on the ``calibration`` rows.
    """
    quantization_mode("qat").check_calibration(calibration)
    tfmot = _tfmot()
    annotated = annotate(graph)
    annotated.set_weights(graph.get_weights())
    try:
        with _scope(), patched_classes("compute_output_shape", _OUTPUT_SHAPES):
            qat = tfmot.quantization.keras.quantize_apply(annotated)
    except (ValueError, TypeError, RuntimeError) as err:
        raise ExportError(f"quantization-aware wrapping failed: {first_line(err)}") from err
    rows = {k: np.asarray(calibration.arrays[k]).astype(dtype) for k, dtype in graph.input_dtypes.items()}
    batch_size = graph.inputs[0].shape[0] or batch_size
    rng = np.random.default_rng(seed)
    names = list(graph.output_order)

    def sample():
        index = rng.choice(calibration.count, size=batch_size, replace=calibration.count < batch_size)
        return {k: tf.constant(v[index]) for k, v in rows.items()}

    # Ranges: a pass over the calibration rows in training mode updates the moving averages.
    for start in range(0, calibration.count, batch_size):
        index = np.arange(start, start + batch_size) % calibration.count
        qat({k: tf.constant(v[index]) for k, v in rows.items()}, training=True)
    if steps:
        optimizer = keras.optimizers.Adam(learning_rate)

        @tf.function
        def step(batch):
            target = graph(batch, training=False)
            with tf.GradientTape() as tape:
                out = qat(batch, training=True)
                loss = tf.add_n([tf.reduce_mean(tf.square(out[n] - target[n])) for n in names])
            grads = tape.gradient(loss, qat.trainable_variables)
            optimizer.apply_gradients([(g, v) for g, v in zip(grads, qat.trainable_variables) if g is not None])
            return loss

        for _ in range(int(steps)):
            step(sample())
    qat.output_order = names
    qat.mask_dtype = graph.mask_dtype
    qat.input_dtypes = graph.input_dtypes
    return qat


def with_layer_outputs(qat, layer_names):
    """``qat`` with the outputs of the named layers added, sharing its trained weights and ranges.

    The per-layer drift probe of a QAT export is cut from the very graph that
    was fine-tuned and converted, not fine-tuned again: a second
    ``quantization_aware_graph`` on a hidden-state graph paid QAT twice and,
    trained on a loss over every hidden state, described another model than
    the artifact. tfmot's wrapper of each source layer (``embeddings``, ``transformer_layer_{i}``) is found
    by the name of the layer it wraps; the probe's ``output_order`` lists ``qat``'s outputs, then the layers'.
    """
    by_name = {getattr(layer, "layer", layer).name: layer for layer in qat.layers}
    missing = [name for name in layer_names if name not in by_name]
    if missing:
        raise ExportError(f"the quantization-aware graph has no layer {missing[0]}; cannot probe its drift")
    outputs = {name: qat.output[name] for name in qat.output_order}
    outputs.update((name, by_name[name].output) for name in layer_names)
    probe = keras.Model(inputs=qat.input, outputs=outputs, name=f"{qat.name}_probe")
    probe.output_order = list(outputs)
    probe.mask_dtype = qat.mask_dtype
    probe.input_dtypes = qat.input_dtypes
    return probe
