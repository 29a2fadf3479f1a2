"""The on-device peers of 2026: ExecuTorch and litert-torch, each built the way its own docs build MobileBERT.

Both start from the same PyTorch model as the ONNX peer (``peers.hf_model``:
Hugging Face ``MobileBertModel`` with our preset's architecture and
trained-like vectors), wrapped so that it takes the three BERT inputs and
returns ``(last_hidden_state, pooler_output)``.

- **ExecuTorch** (``executorch``), as its MobileBERT example does it
  (``examples/xnnpack``): ``torch.export``, then
  ``to_edge_transform_and_lower`` with the ``XnnpackPartitioner``; int8 is the
  XNNPACK quantizer's 8-bit dynamic per-channel configuration through PT2E
  (``prepare_pt2e`` / calibrate / ``convert_pt2e``). Run by ExecuTorch's
  Python runtime (``.pte``), its thread pool reset to one thread: it defaults
  to two even in a process pinned to one core. The attention code is
  transformers' default for MobileBERT: ``eager`` in transformers 4.57 (it
  has no ``sdpa`` MobileBERT); transformers 5's ``sdpa`` leaves ``where``/``eq``
  ops outside XNNPACK (``shared/reference/performance-notes.md``).
- **litert-torch** (formerly ai-edge-torch): ``litert_torch.convert`` to
  ``.tflite``; int8 is its ``full_dynamic_recipe()`` (8-bit per-channel
  weights, dynamic activations, through ai-edge-quantizer). Run by LiteRT like
  our own files.

Install: ``bash benchmarks/perf/setup_peers.sh --edge`` (a separate venv is
wise: ``executorch`` needs torch at run time without declaring it). A
missing package raises :class:`peers.PeerUnavailable`, reported as a skip.
"""

import os
import warnings

import numpy as np

from benchmarks.perf.peers import PeerUnavailable, hf_model, one_torch_thread, write_file

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# Per family: the precisions it builds, and the attention implementations it is built with.
EXECUTORCH_PRECISIONS = ("float32", "dynamic-int8")
LITERT_TORCH_PRECISIONS = ("float32", "dynamic-int8")


def executorch_available():
    try:
        import executorch.exir  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner  # noqa: F401
    except ImportError as err:
        return f"executorch not importable ({err}); run benchmarks/perf/setup_peers.sh --edge"
    return None


def litert_torch_available():
    try:
        import litert_torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as err:
        return f"litert-torch not importable ({err}); run benchmarks/perf/setup_peers.sh --edge"
    return None


def _wrapped(config, attention, seed=0):
    """``hf_model`` behind a module whose forward takes the three inputs and returns a tuple."""
    import torch

    model = hf_model(config, seed=seed, attn_implementation=attention)

    class Encoder(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state, out.pooler_output

    return Encoder(model).eval()


def _sample(config, seq_len, seed=0, dtype=np.int64):
    import torch

    from benchmarks.perf.runners import realistic_inputs

    x = realistic_inputs(config["vocab_size"], seq_len, seed=seed)
    return tuple(torch.from_numpy(x[n].astype(dtype)) for n in INPUT_NAMES)


def export_executorch(config, seq_len, precisions, out_dir, attention=None, calibration_count=8, seed=0):
    """Exports the model to ``{out_dir}/et_{precision}_s{seq_len}.pte``.

    Args:
        config: our Encoder config (``peers.hf_kwargs`` maps it).
        seq_len: the static sequence length (the example exports a static shape).
        precisions: subset of :data:`EXECUTORCH_PRECISIONS`.
        attention: transformers' attention code; None keeps its default, as the example does.
        calibration_count: PT2E calibration inputs for int8.

    Returns:
        dict precision -> path.
    """
    reason = executorch_available()
    if reason:
        raise PeerUnavailable(reason)
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    _check_offered(precisions, EXECUTORCH_PRECISIONS, "ExecuTorch")
    paths = {}
    with one_torch_thread():
        sample = _sample(config, seq_len)
        for precision in precisions:
            model = _wrapped(config, attention, seed)
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                if precision == "dynamic-int8":
                    model = _pt2e_dynamic_int8(model, sample, config, seq_len, calibration_count)
                program = torch.export.export(model, sample, strict=False)
                lowered = to_edge_transform_and_lower(
                    program, partitioner=[XnnpackPartitioner()],
                    compile_config=EdgeCompileConfig(_check_ir_validity=False),
                ).to_executorch()
            paths[precision] = write_file(os.path.join(out_dir, f"et_{precision}_s{seq_len}.pte"), lowered.buffer)
    return paths


def _pt2e_dynamic_int8(model, sample, config, seq_len, calibration_count):
    """The XNNPACK quantizer's 8-bit dynamic per-channel configuration, as the example applies it."""
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    try:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    except ImportError:  # older releases kept PT2E in torch
        from torch.ao.quantization.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer()
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    graph = torch.export.export(model, sample, strict=False).module()
    prepared = prepare_pt2e(graph, quantizer)
    for i in range(max(1, calibration_count)):
        prepared(*_sample(config, seq_len, seed=1000 + i))
    return convert_pt2e(prepared)


def export_litert_torch(config, seq_len, precisions, out_dir, seed=0):
    """Exports the model with ``litert_torch.convert`` to ``{out_dir}/lt_{precision}_s{seq_len}.tflite``.

    Args:
        precisions: subset of :data:`LITERT_TORCH_PRECISIONS`; ``dynamic-int8``
            is its ``full_dynamic_recipe()``.

    Returns:
        dict precision -> path.
    """
    reason = litert_torch_available()
    if reason:
        raise PeerUnavailable(reason)
    import litert_torch
    from litert_torch.generative.quantize import quant_recipes

    _check_offered(precisions, LITERT_TORCH_PRECISIONS, "litert-torch")
    paths = {}
    with one_torch_thread():
        # int32 ids, as litert-torch's own examples feed them (TFLite has no int64 GATHER in XNNPACK).
        sample = dict(zip(INPUT_NAMES, _sample(config, seq_len, dtype=np.int32)))
        for precision in precisions:
            quant = quant_recipes.full_dynamic_recipe() if precision == "dynamic-int8" else None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                edge = litert_torch.convert(_wrapped(config, None, seed), sample_kwargs=sample, quant_config=quant)
            path = os.path.join(out_dir, f"lt_{precision}_s{seq_len}.tflite")
            tmp = path + ".tmp.tflite"
            edge.export(tmp)
            os.replace(tmp, path)
            paths[precision] = path
    return paths


def _check_offered(precisions, offered, peer):
    unknown = [p for p in precisions if p not in offered]
    if unknown:
        raise PeerUnavailable(f"the {peer} peer builds {', '.join(offered)}, not {', '.join(unknown)}")
