"""Issue 15 experiment: also migrate the block-output stream of a substituted (BERT-layout) NoNorm model.

``migrate_nonorm_scales`` keeps the stream between blocks in its units, because it
is the hidden states distillation reads. A file exports only the last block's
output, so for export the stream between blocks may move too: block ``k``'s
input ``x_k`` (written by ``embeddings/norm`` or block ``k-1``'s last NoNorm,
read by block ``k``'s query/key/value, added to by ``attention_output/dense``,
closed by ``attention_output/norm``) is stored as ``x_k / c_k`` with ``c_k``
chosen by the same ``balance`` rule. Outputs are unchanged (max difference
printed, float32 rounding).

Superseded: ``migrate_nonorm_scales`` with a data policy (``balance``, the default of
``mbk substitute``) now moves this stream itself, with the embedding sum and the ReLU
FFN units (convert/prepare/scale_migration.py, "With data"). Kept to reproduce its row in
benchmarks/RESULTS.md (the 600-step substituted MiniLM, before that change).

Usage:
  PYTHONPATH=$PWD nice python benchmarks/experiments/nonorm_stream_migration.py SUBSTITUTED_MIGRATED_DIR OUT_DIR [CALIBRATION.txt]
  (CALIBRATION.txt: the recovery text, default /tmp/q15/recover.txt as benchmarks/nonorm_int8.py uses)
  then: python benchmarks/nonorm_int8.py OUT_DIR
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402

from mobilebert_kit.convert.prepare import scale_migration  # noqa: E402
from mobilebert_kit.convert.plan.input_set import InputSet  # noqa: E402
from mobilebert_kit.convert.prepare.rebuild import rebuild, weight_arrays  # noqa: E402
from mobilebert_kit.convert.prepare.substitution import recorded_batches  # noqa: E402
from mobilebert_kit.data.vocab import copy_tokenizer_files  # noqa: E402
from mobilebert_kit.layers.no_norm import NoNorm  # noqa: E402
from mobilebert_kit.models.api import save  # noqa: E402
from mobilebert_kit.sources.model_source import ModelSource  # noqa: E402

SEQ = 64


def sublayer(model, path):
    parts = path.split("/")
    layer = model.get_layer(parts[0])
    for part in parts[1:]:
        layer = layer.ffns[int(part[4:])] if part.startswith("ffn_") else getattr(layer, part)
    return layer


def stream_spreads(model, writers, closers, arrays):
    """Per block input, the largest |value| per channel of the stream, the attention sum and the attention output."""
    spread = [0.0] * len(writers)
    layers = [sublayer(model, p) for p in writers + closers]
    count = len(writers)
    for records, keep in recorded_batches(model, NoNorm, layers, arrays):
        for k in range(count):
            (_, y), = records[id(layers[k])]
            (z, _), = records[id(layers[count + k])]
            y, z = y[keep].astype(np.float64), z[keep].astype(np.float64)
            for values in (y, z, z - y):
                spread[k] = np.maximum(spread[k], np.abs(values).max(0))
    return spread


def main():
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    calibration = Path(sys.argv[3] if len(sys.argv) > 3 else "/tmp/q15/recover.txt")
    source = ModelSource.load(str(src))
    model = source.model
    config = model.config
    if config["normalization_type"] != "no_norm" or config["use_bottleneck"] or config["num_feedforward_networks"] != 1:
        raise SystemExit("a substituted BERT-layout NoNorm model is needed (one FFN, no bottleneck)")
    layers = config["num_layers"]
    writers = ["embeddings/norm"] + [f"transformer_layer_{k - 1}/ffn_0/norm" for k in range(1, layers)]
    closers = [f"transformer_layer_{k}/attention_output/norm" for k in range(layers)]
    inputs = InputSet.from_file(calibration, SEQ, source.tokenizer, count=256)
    arrays = {k: np.asarray(v) for k, v in inputs.arrays.items()}
    spreads = stream_spreads(model, writers, closers, arrays)
    original = weight_arrays(model)
    weights = {k: v.astype(np.float64) for k, v in original.items()}
    for k in range(layers):
        block = f"transformer_layer_{k}/"
        readers = [f"{block}attention/{name}" for name in ("query", "key", "value")]
        adder = f"{block}attention_output/dense"
        writer_gamma, closer_gamma = weights[f"{writers[k]}/gamma"], weights[f"{closers[k]}/gamma"]
        rows = np.max([np.abs(weights[f"{r}/kernel"]).max(1) for r in readers], axis=0)
        c = scale_migration._safe(scale_migration._balance_scale(writer_gamma, np.ones_like(writer_gamma), spreads[k],
                                                                 rows, closer_gamma))
        weights[f"{writers[k]}/gamma"] = writer_gamma / c
        weights[f"{writers[k]}/beta"] = weights[f"{writers[k]}/beta"] / c
        weights[f"{closers[k]}/gamma"] = closer_gamma * c
        for reader in readers:
            weights[f"{reader}/kernel"] = weights[f"{reader}/kernel"] * c[:, None]
        weights[f"{adder}/kernel"] = weights[f"{adder}/kernel"] / c[None, :]
        weights[f"{adder}/bias"] = weights[f"{adder}/bias"] / c
        print(f"block {k} input: c in [{c.min():.3f}, {c.max():.3f}]")
    moved = rebuild(model, arrays={k: v.astype(original[k].dtype) for k, v in weights.items()})
    rows = {k: v[:8] for k, v in arrays.items()}
    diff = np.abs(np.asarray(moved(rows, training=False)["sequence_output"])
                  - np.asarray(model(rows, training=False)["sequence_output"])).max()
    print(f"sequence_output max difference after the move: {diff:.2e}")
    save(moved, dst)
    copy_tokenizer_files(src, dst)


if __name__ == "__main__":
    main()
