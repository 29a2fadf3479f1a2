"""Shared helpers of the Hugging Face parity tests: a random PyTorch reference, its outputs, the comparison.

Each parity test is a few calls: build a ``transformers`` model, give it
weights far from init (:func:`randomize`), save it as safetensors
(:func:`save_reference`), import it, and :func:`assert_parity`. Criterion
(issue 2): max |ours - ref| <= 1e-4 * max |ref| on unpadded inputs; padded
batches agree on the real tokens. torch is imported inside the helpers, so
importing this module costs nothing where the tests are skipped.
"""

from tests.helpers import assert_close_relative, random_inputs, run_encoder


def randomize(model, seed=0):
    """Gives a PyTorch ``model`` weights far from init and puts it in eval mode; returns it.

    Init-scale weights (std 0.02, zero biases) hide transposition and scaling bugs:
    matrices get std 0.3, vectors 0.5, LayerNorm gammas 1 + that.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * (0.3 if param.ndim > 1 else 0.5))
            if name.endswith("LayerNorm.weight"):
                param.add_(1.0)
    return model.eval()


def save_reference(model, directory, seed=0):
    """:func:`randomize` ``model``, then ``save_pretrained`` it as safetensors in ``directory``; returns it."""
    randomize(model, seed)
    model.save_pretrained(directory, safe_serialization=True)
    return model


def reference_forward(model, inputs):
    """Runs a PyTorch ``model`` on the int32 input dict ``inputs`` without gradients; returns its output."""
    import torch

    with torch.no_grad():
        return model(**{k: torch.tensor(v, dtype=torch.long) for k, v in inputs.items()})


def reference_outputs(model, inputs):
    """``{"sequence_output"[, "pooled_output"]}`` of a Hugging Face base model (no pooler: no pooled_output)."""
    out = reference_forward(model, inputs)
    outputs = {"sequence_output": out.last_hidden_state.numpy()}
    if getattr(out, "pooler_output", None) is not None:
        outputs["pooled_output"] = out.pooler_output.numpy()
    return outputs


def _pooler_dense(ref):
    """The reference pooler's dense layer (None: no pooler, or one without an activation)."""
    return getattr(getattr(ref, "pooler", None), "dense", None)


def _assert_pooler_parity(ours, ref, out, inputs):
    """The pooler agrees before its tanh (issue-2 criterion), and our graph applies tanh to it.

    Comparing the tanh outputs at 1e-4 of their scale (1.0 when saturated) is no criterion when the
    pooler's input is large: with weights far from init and no normalization it reaches ~5e4, and
    float32 rounding of it (relative 3e-9, measured on an AVX2 CPU whose GEMM summation order differs
    from AVX-512's) moves an unsaturated tanh value by 1.6e-4. Before the tanh the criterion holds
    with the same 1e-4 relative bound, and a wrong pooler weight or activation still fails.
    """
    import numpy as np
    import torch

    reference_first = reference_forward(ref, inputs).last_hidden_state[:, 0]
    with torch.no_grad():
        reference_pre = _pooler_dense(ref)(reference_first).numpy()
    kernel, bias = ours.get_layer("pooler").get_weights()
    our_pre = out["sequence_output"][:, 0].astype(np.float64) @ kernel + bias
    assert_close_relative(our_pre, reference_pre)
    # Our float32 graph's tanh input differs from this float64 recomputation by rounding of its
    # summands (~8 ulps of max |pre|), which tanh damps by its slope sech^2 at each value.
    slack = 1e-5 + (1 - np.tanh(our_pre) ** 2) * 8 * np.finfo(np.float32).eps * np.abs(our_pre).max()
    assert np.all(np.abs(out["pooled_output"] - np.tanh(our_pre)) <= slack), "the pooler does not apply tanh"


def assert_parity(ours, ref, shapes, vocab_size=99, padded=(3, 12, 5), seed=lambda batch, seq: seq):
    """Our encoder agrees with the reference on every shape, and on a padded batch at the real tokens.

    Args:
        ours: the imported Keras encoder.
        ref: the PyTorch reference model.
        shapes: ``(batch, seq)`` pairs of unpadded inputs; every reference output is compared.
        vocab_size: ids are drawn below it.
        padded: ``(batch, seq, pad_last)`` of the padded batch (its sequence output is compared).
        seed: ``seed(batch, seq)`` of each unpadded batch.

    Returns:
        list of ``(inputs, our_outputs)``, one per shape, for test-specific checks.
    """
    results = []
    for batch, seq in shapes:
        inputs = random_inputs(vocab_size, batch_size=batch, seq_len=seq, seed=seed(batch, seq))
        expected = reference_outputs(ref, inputs)
        out = run_encoder(ours, inputs)
        for name, value in expected.items():
            if name == "pooled_output" and _pooler_dense(ref) is not None:
                _assert_pooler_parity(ours, ref, out, inputs)
            else:
                assert_close_relative(out[name], value)
        results.append((inputs, out))
    batch, seq, pad = padded
    inputs = random_inputs(vocab_size, batch_size=batch, seq_len=seq, pad_last=pad)
    assert_close_relative(run_encoder(ours, inputs)["sequence_output"],
                          reference_outputs(ref, inputs)["sequence_output"], mask=inputs["attention_mask"])
    return results
