"""Issue 15 diagnosis: which tensors of a substituted (BERT-layout, NoNorm + ReLU) model lose cosine in full int8.

A numpy forward pass of the model with fake int8 on chosen tensor groups, the way a full-int8 TFLite file stores
them: activations per tensor, asymmetric, ranges from calibration rows (padding included, as the converter sees
them); kernels per output channel, symmetric; NoNorm constants and embedding tables per tensor. Prints, for each
group int8 alone and for every group but that one, the mean sentence-embedding cosine (mean pooling at real tokens)
to the ORIGINAL float MiniLM and to the model's own float output, on the held-out text of
``benchmarks/nonorm_int8_data.py``. Softmax and the mask add stay float, as in the exported file.

It matched the exported file within 0.002-0.006 of cosine on the 600-step substituted MiniLM
(benchmarks/RESULTS.md, issue 15), which is what made it usable to choose the migrations.

Usage:
  PYTHONPATH=$PWD python benchmarks/experiments/nonorm_int8_groups.py SUBSTITUTED_DIR [--rows 300] [--data-dir /tmp/q15]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for nonorm_int8
from nonorm_int8 import SEQ, held_out  # noqa: E402

GROUPS = ("emb_table", "emb_sum", "norm_mul", "norm_out", "weights", "q", "k", "v", "scores", "probs", "ctx",
          "attn_out", "sum1", "inter", "ffn_out", "sum2")


class FakeInt8:
    """Records per-tensor ranges (``calibrate``) or rounds the enabled groups to int8 with them."""

    def __init__(self, enabled=(), ranges=None):
        self.enabled = set(enabled)
        self.calibrate = ranges is None
        self.ranges = {} if ranges is None else ranges

    def __call__(self, group, name, x):
        if self.calibrate:
            lo, hi = self.ranges.get(name, (np.inf, -np.inf))
            self.ranges[name] = (min(lo, float(x.min())), max(hi, float(x.max())))
            return x
        if group not in self.enabled:
            return x
        return _round(x, *self.ranges[name])

    def on(self, group):
        return not self.calibrate and group in self.enabled


def _round(x, lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi == lo:
        return x
    scale = (hi - lo) / 255
    zero = np.round(-lo / scale)
    return (np.clip(np.round(x / scale) + zero, 0, 255) - zero) * scale


def _kernel(w, on):
    if not on:
        return w
    step = np.maximum(np.abs(w).max(axis=0, keepdims=True), 1e-12) / 127
    return np.round(w / step) * step


def _constant(v, on):
    return _round(v, float(v.min()), float(v.max())) if on else v


def forward(weights, arrays, q, layers, heads):
    """``sequence_output`` of a BERT-layout NoNorm + ReLU encoder (mask value -10000, absolute positions)."""
    ids, mask, types = arrays["input_ids"], arrays["attention_mask"], arrays["token_type_ids"]
    batch, seq = ids.shape
    table = q.on("emb_table")
    x = (_constant(weights["embeddings/word_embeddings"], table)[ids]
         + _constant(weights["embeddings/position_embeddings"], table)[:seq][None]
         + _constant(weights["embeddings/token_type_embeddings"], table)[types])
    x = q("emb_sum", "emb_sum", x)

    def norm(path, z, tag):
        t = q("norm_mul", tag + "m", z * _constant(weights[path + "/gamma"], q.on("norm_mul")))
        return q("norm_out", tag, t + _constant(weights[path + "/beta"], q.on("norm_mul")))

    def dense(path, h):
        return h @ _kernel(weights[path + "/kernel"], q.on("weights")) + weights[path + "/bias"]

    x = norm("embeddings/norm", x, "x0")
    additive = (1.0 - mask[:, None, None, :]) * -10000.0
    size = x.shape[-1] // heads

    def split(t):
        return t.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)

    for layer in range(layers):
        p = f"transformer_layer_{layer}/"
        query = q("q", f"q{layer}", dense(p + "attention/query", x) / np.sqrt(size))
        key = q("k", f"k{layer}", dense(p + "attention/key", x))
        value = q("v", f"v{layer}", dense(p + "attention/value", x))
        scores = q("scores", f"s{layer}", split(query) @ split(key).transpose(0, 1, 3, 2)) + additive
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs = q("probs", f"p{layer}", probs / probs.sum(-1, keepdims=True))
        context = (probs @ split(value)).transpose(0, 2, 1, 3).reshape(batch, seq, heads * size)
        a = q("attn_out", f"a{layer}", dense(p + "attention_output/dense", q("ctx", f"c{layer}", context)))
        h = norm(p + "attention_output/norm", q("sum1", f"z{layer}", a + x), f"h{layer}")
        inner = q("inter", f"i{layer}", np.maximum(dense(p + "ffn_0/intermediate", h), 0))
        out = q("ffn_out", f"o{layer}", dense(p + "ffn_0/output", inner))
        x = norm(p + "ffn_0/norm", q("sum2", f"y{layer}", out + h), f"x{layer + 1}")
    return x


def embeddings(weights, arrays, q, config, rows=50):
    parts = []
    for start in range(0, len(arrays["input_ids"]), rows):
        batch = {k: v[start:start + rows] for k, v in arrays.items()}
        tokens = forward(weights, batch, q, config["num_layers"], config["num_heads"])
        w = batch["attention_mask"][..., None].astype(np.float32)
        pooled = (tokens * w).sum(1) / np.maximum(w.sum(1), 1)
        parts.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
    return np.concatenate(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("substituted")
    parser.add_argument("--data-dir", default="/tmp/q15")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--calibration-rows", type=int, default=200)
    args = parser.parse_args()
    from safetensors.numpy import load_file

    from mobilebert_kit.convert.plan.input_set import InputSet
    from mobilebert_kit.sources.model_source import ModelSource

    data = Path(args.data_dir)
    source = ModelSource.load(args.substituted)
    config = source.model.config
    if config["normalization_type"] != "no_norm" or config["hidden_act"] != "relu" or config["use_bottleneck"] \
            or config["num_feedforward_networks"] != 1:
        sys.exit("a substituted BERT-layout NoNorm + ReLU model is needed (mbk substitute --norm no_norm --act relu)")
    arrays, _, reference, own = held_out(data / "heldout.txt", args.rows, args.substituted)
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    calibration = {k: np.asarray(v) for k, v in InputSet.from_file(
        data / "recover.txt", SEQ, source.tokenizer, count=args.calibration_rows).arrays.items()}
    weights = {k: v.astype(np.float32) for k, v in load_file(f"{args.substituted}/model.safetensors").items()}
    recorder = FakeInt8()
    embeddings(weights, calibration, recorder, config)

    def score(enabled):
        e = embeddings(weights, arrays, FakeInt8(enabled, recorder.ranges), config)
        return (e * reference).sum(1).mean(), (e * own).sum(1).mean()

    print("| int8 groups | to original | to own float |\n|---|---|---|")
    for label, enabled in [("none", ()), ("all", GROUPS)]:
        print("| {} | {:.4f} | {:.4f} |".format(label, *score(enabled)))
    for group in GROUPS:
        print("| only {} | {:.4f} | {:.4f} |".format(group, *score([group])))
        print("| all but {} | {:.4f} | {:.4f} |".format(group, *score([g for g in GROUPS if g != group])), flush=True)


if __name__ == "__main__":
    main()
