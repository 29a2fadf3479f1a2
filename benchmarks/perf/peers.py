"""The two exports a user would otherwise ship, built here the way their own docs build them.

(a) TF Model Garden ``official.nlp.modeling.networks.MobileBERTEncoder``
    (PyPI ``tf-models-official``) with random weights, exported with
    ``tf.lite.TFLiteConverter`` in float32, dynamic-range int8, full int8 with
    float inputs/outputs (ops without an int8 kernel stay float: the default
    ``TFLITE_BUILTINS`` op set) and float16 weights. Its mask input stays the
    encoder's default int32, as a user gets it.
(b) Hugging Face ``MobileBertModel`` (transformers) exported with
    ``torch.onnx.export`` (opset 17, TorchScript exporter, dynamic batch and
    sequence axes as optimum exports it), run in ONNX Runtime in float32 and
    after ``onnxruntime.quantization.quantize_dynamic`` (int8 weights).

Both get the architecture of our preset (the official student configuration
for ``mobilebert``), mapped field by field below. Install the peers with
``benchmarks/perf/setup_peers.sh``; a missing peer raises :class:`PeerUnavailable`
and the harness reports it as skipped.
"""

import contextlib
import os
import warnings

import numpy as np


class PeerUnavailable(RuntimeError):
    """A peer's package is not installed (run benchmarks/perf/setup_peers.sh)."""


def model_garden_kwargs(config):
    """Our Encoder config -> ``MobileBERTEncoder`` keyword arguments (same architecture)."""
    if not config.get("trigram_input", False) or not config.get("use_bottleneck", False):
        raise PeerUnavailable("Model Garden's MobileBERTEncoder is only the bottleneck + trigram MobileBERT family")
    return dict(
        word_vocab_size=config["vocab_size"],
        word_embed_size=config["embedding_size"],
        type_vocab_size=config["type_vocab_size"],
        max_sequence_length=config["max_position_embeddings"],
        num_blocks=config["num_layers"],
        hidden_size=config["hidden_size"],
        num_attention_heads=config["num_heads"],
        intermediate_size=config["intermediate_size"],
        intermediate_act_fn={"gelu": "gelu", "relu": "relu"}[config["hidden_act"]],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        intra_bottleneck_size=config["intra_bottleneck_size"],
        use_bottleneck_attention=config.get("use_bottleneck_attention", False),
        key_query_shared_bottleneck=config["key_query_shared_bottleneck"],
        num_feedforward_networks=config["num_feedforward_networks"],
        normalization_type=config["normalization_type"],
        classifier_activation=config["classifier_activation"],
    )


def hf_kwargs(config):
    """Our Encoder config -> ``transformers.MobileBertConfig`` keyword arguments."""
    return dict(
        vocab_size=config["vocab_size"],
        hidden_size=config["hidden_size"],
        num_hidden_layers=config["num_layers"],
        num_attention_heads=config["num_heads"],
        intermediate_size=config["intermediate_size"],
        hidden_act=config["hidden_act"],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=config["max_position_embeddings"],
        type_vocab_size=config["type_vocab_size"],
        embedding_size=config["embedding_size"],
        trigram_input=config["trigram_input"],
        use_bottleneck=config["use_bottleneck"],
        intra_bottleneck_size=config["intra_bottleneck_size"],
        use_bottleneck_attention=config.get("use_bottleneck_attention", False),
        key_query_shared_bottleneck=config["key_query_shared_bottleneck"],
        num_feedforward_networks=config["num_feedforward_networks"],
        normalization_type=config["normalization_type"],
        classifier_activation=config["classifier_activation"],
    )


def calibration_rows(vocab_size, seq_len, count):
    """The full-int8 calibration inputs, shared by the peer and our export (same seeds)."""
    from benchmarks.perf.runners import realistic_inputs

    return [realistic_inputs(vocab_size, seq_len, seed=1000 + i) for i in range(count)]


def calibration_npz(path, vocab_size, seq_len, count):
    """Writes :func:`calibration_rows` as the ``.npz`` that ``mbk export --calibration`` reads, once; returns ``path``."""
    if not os.path.isfile(path):
        rows = calibration_rows(vocab_size, seq_len, count)
        arrays = {k: np.concatenate([r[k] for r in rows]).astype(np.int32) for k in rows[0]}
        with open(path + ".tmp", "wb") as f:
            np.savez(f, **arrays)
        os.replace(path + ".tmp", path)
    return path


def model_garden_available():
    try:
        import gin  # noqa: F401  (the one extra import official.nlp.modeling needs)
        from official.nlp.modeling.networks import mobile_bert_encoder  # noqa: F401
    except ImportError as err:
        return f"tf-models-official not importable ({err}); run benchmarks/perf/setup_peers.sh"
    return None


def _model_garden_function(config, seq_len, seed):
    from mobilebert_kit.backend import keras, tf

    reason = model_garden_available()
    if reason:
        raise PeerUnavailable(reason)
    from official.nlp.modeling.networks.mobile_bert_encoder import MobileBERTEncoder

    keras.utils.set_random_seed(seed)
    encoder = MobileBERTEncoder(**model_garden_kwargs(config))
    specs = [tf.TensorSpec([1, seq_len], tf.int32, name=n) for n in ("input_word_ids", "input_mask", "input_type_ids")]
    from benchmarks.perf.ours import trained_like_vectors

    for var in encoder.weights:  # as ours.source_for: no all-zero/all-one vectors for the converter to fold
        if len(var.shape) == 1:
            var.assign(trained_like_vectors(var.numpy(), var.name))

    @tf.function(input_signature=specs)
    def serve(input_word_ids, input_mask, input_type_ids):
        out = encoder([input_word_ids, input_mask, input_type_ids], training=False)
        return {"sequence_output": out["sequence_output"], "pooled_output": out["pooled_output"]}

    return encoder, serve


def export_model_garden(config, seq_len, precisions, out_dir, calibration_count=16, seed=0):
    """Exports Model Garden's encoder to ``{out_dir}/mg_{precision}_s{seq_len}.tflite``.

    Args:
        precisions: subset of ``float32``, ``dynamic-int8``, ``int8``, ``float16``.
        calibration_count: representative inputs for full int8 (latency does
            not depend on the ranges, only the op set does).

    Returns:
        dict precision -> path.
    """
    from mobilebert_kit.backend import tf

    encoder, serve = _model_garden_function(config, seq_len, seed)
    concrete = serve.get_concrete_function()
    paths = {}
    for precision in precisions:
        converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], encoder)
        if precision != "float32":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if precision == "float16":
            converter.target_spec.supported_types = [tf.float16]
        if precision == "int8":

            def representative():
                for x in calibration_rows(config["vocab_size"], seq_len, calibration_count):
                    yield {
                        "input_word_ids": x["input_ids"].astype(np.int32),
                        "input_mask": x["attention_mask"].astype(np.int32),
                        "input_type_ids": x["token_type_ids"].astype(np.int32),
                    }

            converter.representative_dataset = representative
        path = os.path.join(out_dir, f"mg_{precision}_s{seq_len}.tflite")
        data = converter.convert()
        write_file(path, data)
        paths[precision] = path
    return paths


def hf_available():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as err:
        return f"torch/transformers not importable ({err}); pip install -e '.[dev]'"
    return None


def hf_model(config, seed=0, attn_implementation=None):
    """``transformers.MobileBertModel`` with our preset's architecture and trained-like vectors (eval mode).

    Every PyTorch peer (ONNX, ExecuTorch, litert-torch) starts from this model, so
    they differ only in how they export and run it.

    Args:
        config: our Encoder config (mapped by :func:`hf_kwargs`).
        seed: ``torch.manual_seed`` for the random matrices.
        attn_implementation: transformers' attention code (``eager``, ``sdpa``);
            None keeps transformers' default.
    """
    reason = hf_available()
    if reason:
        raise PeerUnavailable(reason)
    import torch
    from transformers import MobileBertConfig, MobileBertModel

    from benchmarks.perf.ours import trained_like_vectors

    torch.manual_seed(seed)
    extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
    model = MobileBertModel(MobileBertConfig(**hf_kwargs(config), **extra)).eval()
    with torch.no_grad():  # as ours.source_for: trained-like biases, betas and gammas
        for name, param in model.named_parameters():
            if param.dim() == 1:
                param.copy_(torch.from_numpy(trained_like_vectors(param.numpy(), name)))
    return model


def export_hugging_face(config, precisions, out_dir, trace_seq_len=16, seed=0):
    """Exports ``MobileBertModel`` to ONNX (dynamic sequence axis) and quantizes it dynamically.

    Returns:
        dict precision -> path, precisions among ``float32`` and ``dynamic-int8``.
    """
    reason = hf_available()
    if reason:
        raise PeerUnavailable(reason)
    import torch

    with one_torch_thread():
        model = hf_model(config, seed=seed)
        from benchmarks.perf.runners import realistic_inputs

        x = realistic_inputs(config["vocab_size"], trace_seq_len)
        args = tuple(torch.from_numpy(x[n]) for n in ("input_ids", "attention_mask", "token_type_ids"))
        names = ["input_ids", "attention_mask", "token_type_ids"]
        float_path = os.path.join(out_dir, "hf_float32.onnx")
        tmp = float_path + ".tmp.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # dynamo=False: the TorchScript exporter; the dynamo one needs onnxscript, which
            # is not installed here, and optimum (what HF users run) uses the TorchScript path.
            torch.onnx.export(
                model,
                args,
                tmp,
                input_names=names,
                output_names=["last_hidden_state", "pooler_output"],
                opset_version=17,
                dynamic_axes={n: {0: "batch", 1: "sequence"} for n in names},
                do_constant_folding=True,
                dynamo=False,
            )
        os.replace(tmp, float_path)
    paths = {}
    if "float32" in precisions:
        paths["float32"] = float_path
    if "dynamic-int8" in precisions:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        int8_path = os.path.join(out_dir, "hf_dynamic-int8.onnx")
        quantize_dynamic(float_path, int8_path + ".tmp.onnx", weight_type=QuantType.QInt8)
        os.replace(int8_path + ".tmp.onnx", int8_path)
        paths["dynamic-int8"] = int8_path
    return paths


@contextlib.contextmanager
def one_torch_thread():
    """PyTorch on one thread inside the block (exports and calibration as on the timing core); restored after."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def write_file(path, data):
    """Writes ``data`` to ``path`` through a temporary file (no half-written export is ever timed); returns ``path``."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return path
