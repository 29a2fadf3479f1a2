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
            assert_close_relative(out[name], value)
        results.append((inputs, out))
    batch, seq, pad = padded
    inputs = random_inputs(vocab_size, batch_size=batch, seq_len=seq, pad_last=pad)
    assert_close_relative(run_encoder(ours, inputs)["sequence_output"],
                          reference_outputs(ref, inputs)["sequence_output"], mask=inputs["attention_mask"])
    return results
