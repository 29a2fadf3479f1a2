"""Distillation steps per second: today's step, XLA, bfloat16, and the same step written in PyTorch, one run.

Teacher: the real all-MiniLM-L6-v2. Student: the MobileBERT-style student of
``distillation_ablation.py`` (6 layers, hidden 384, 12 heads, bottleneck 96,
4 stacked FFNs). One end-to-end layer-transfer step (Eq. 7 on all 6 layers:
feature map, mean, variance, attention KL; weights 100/5000/5/1) on the same
batch for every candidate:

- ``ours float32`` (today's step), ``ours float32 + XLA`` (``jit_compile``),
  ``ours bfloat16`` (``mixed_bfloat16``), ``ours bfloat16 + XLA``, each with LAMB
  (the default) and the best of them with AdamW;
- ``PyTorch`` (the peer a user would otherwise write): transformers ``BertModel``
  teacher (the same checkpoint, eager attention so that it returns attention
  probabilities) and ``MobileBertModel`` student of the same shape, the same four
  losses, ``torch.optim.AdamW`` (PyTorch has no LAMB), embeddings frozen as ours.

Each candidate is warmed up (tracing, XLA compilation), then rounds alternate
between candidates, ``--steps`` steps each; medians over rounds and ratios to
today's step and to PyTorch measured in the same round. Both frameworks use
every core of the machine.

Usage:
    python benchmarks/distillation_throughput.py --rounds 5 --steps 10 --append-results
"""

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

WEIGHTS = {"attention": 1.0, "feature_map": 100.0, "mean": 5000.0, "variance": 5.0}


def ours(teacher_dir, work, batch_size, precision, jit_compile, optimizer="lamb"):
    """``(step, batch)``: our end-to-end transfer step for one configuration, and the batch it trains on."""
    from rich.console import Console

    from mobilebert_kit.training.distill_config import DistillConfig
    from mobilebert_kit.training.distiller import Distiller
    from mobilebert_kit.training.stages import plan_stages

    config = DistillConfig(schedule="end_to_end", layer_steps=10, batch_size=batch_size, log_every=10**6,
                           precision=precision, jit_compile=jit_compile, optimizer=optimizer)
    distiller = Distiller(str(teacher_dir), str(work / "student_init"), str(work / "data_train"),
                          work / "throughput_run", config, console=Console(file=open(os.devnull, "w"))).prepare()
    batch = next(distiller.iterator)
    (stage,) = plan_stages(config, 6, embeddings_from_teacher=True)
    step, _ = distiller.stage_step(stage)
    return step, batch


def pytorch_peer(teacher_dir, batch, learning_rate=1e-4):
    """The same step in PyTorch: BertModel teacher, MobileBertModel student, Eq. 7 losses, AdamW."""
    import numpy as np
    import torch
    from distillation_ablation import STUDENT
    from transformers import BertModel, MobileBertConfig, MobileBertModel

    torch.manual_seed(0)
    teacher = BertModel.from_pretrained(str(teacher_dir), attn_implementation="eager").eval()
    s = STUDENT
    student = MobileBertModel(MobileBertConfig(
        vocab_size=s["vocab_size"], hidden_size=s["hidden_size"], num_hidden_layers=s["num_layers"],
        num_attention_heads=s["num_heads"], intermediate_size=s["intermediate_size"],
        intra_bottleneck_size=s["intra_bottleneck_size"], use_bottleneck=True,
        key_query_shared_bottleneck=s["key_query_shared_bottleneck"],
        num_feedforward_networks=s["num_feedforward_networks"], normalization_type="layer_norm",
        hidden_act="gelu", trigram_input=False, embedding_size=s["embedding_size"],
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=512,
    ), add_pooling_layer=False).train()
    for p in student.embeddings.parameters():
        p.requires_grad_(False)
    params = [p for p in student.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=learning_rate, weight_decay=0.01)
    inputs = {k: torch.from_numpy(np.asarray(batch[k]).astype(np.int64))
              for k in ("input_ids", "attention_mask", "token_type_ids")}
    mask = inputs["attention_mask"].float()
    tokens = mask.sum().clamp(min=1.0)

    def masked(per_token):
        return (per_token * mask).sum() / tokens

    def ln(x):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], eps=1e-6)

    def step():
        with torch.no_grad():
            t = teacher(**inputs, output_hidden_states=True, output_attentions=True)
        out = student(**inputs, output_hidden_states=True, output_attentions=True)
        total = 0.0
        for layer in range(s["num_layers"]):
            th, sh = t.hidden_states[layer + 1], out.hidden_states[layer + 1]
            tp, sp = t.attentions[layer], out.attentions[layer]
            fm = masked(((ln(th) - ln(sh)) ** 2).mean(-1))
            mean = masked((th.mean(-1) - sh.mean(-1)) ** 2)
            var = masked((th.var(-1, unbiased=False) - sh.var(-1, unbiased=False)).abs())
            kl = torch.xlogy(tp, tp) - torch.xlogy(tp, sp.clamp(min=1e-30))
            att = masked(kl.sum(-1).mean(1))
            total = total + WEIGHTS["feature_map"] * fm + WEIGHTS["mean"] * mean + WEIGHTS["variance"] * var + \
                WEIGHTS["attention"] * att
        loss = total / s["num_layers"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        return loss.detach()

    return step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--work", type=Path, default=Path("/tmp/mbk-bench/distillation_ablation"))
    parser.add_argument("--append-results", action="store_true")
    args = parser.parse_args(argv)
    command = "python benchmarks/distillation_throughput.py " + " ".join(argv if argv is not None else sys.argv[1:])

    from distillation_ablation import prepare

    from mobilebert_kit.backend import tf

    teacher_dir, _ = prepare(args.work, args.seq_len, 10)
    candidates, batch = {}, None
    for name, precision, jit, optimizer in (
        ("ours float32 (today)", "float32", "off", "lamb"),
        ("ours float32 + XLA", "float32", "on", "lamb"),
        ("ours bfloat16", "mixed_bfloat16", "off", "lamb"),
        ("ours bfloat16 + XLA", "mixed_bfloat16", "on", "lamb"),
        ("ours float32 + XLA, AdamW", "float32", "on", "adamw"),
        ("ours bfloat16 + XLA, AdamW", "mixed_bfloat16", "on", "adamw"),
    ):
        step, this_batch = ours(teacher_dir, args.work, args.batch_size, precision, jit, optimizer)
        batch = batch if batch is not None else this_batch  # every candidate trains on the first batch
        candidates[name] = (lambda f: lambda: f(batch))(step)
    torch_step = pytorch_peer(teacher_dir, batch)
    candidates["PyTorch eager (BertModel -> MobileBertModel, AdamW)"] = torch_step

    def finish(value):
        for v in tf.nest.flatten(value) if not hasattr(value, "item") else [value]:
            (v.item() if hasattr(v, "item") else v.numpy())

    def timed(fn, steps):
        finish(fn())
        start = time.perf_counter()
        for _ in range(steps):
            out = fn()
        finish(out)
        return steps / (time.perf_counter() - start)

    for name, fn in candidates.items():
        t0 = time.perf_counter()
        timed(fn, 1)
        print(f"warmed up {name} ({time.perf_counter() - t0:.1f} s)", flush=True)
    today, peer = "ours float32 (today)", "PyTorch eager (BertModel -> MobileBertModel, AdamW)"
    rates = {n: [] for n in candidates}
    vs_today = {n: [] for n in candidates}
    vs_peer = {n: [] for n in candidates}
    for r in range(args.rounds):
        this = {n: timed(fn, args.steps) for n, fn in candidates.items()}
        for n, v in this.items():
            rates[n].append(v)
            vs_today[n].append(v / this[today])
            vs_peer[n].append(v / this[peer])
        print(f"round {r + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in this.items()), flush=True)

    load = os.getloadavg()[0]
    lines = [
        "",
        "## Distillation throughput: XLA, bfloat16 and the PyTorch peer (`benchmarks/distillation_throughput.py`)",
        "",
        f"Teacher all-MiniLM-L6-v2, MobileBERT-style student of `distillation_ablation.py`; one end-to-end "
        f"transfer step (Eq. 7 on 6 layers) on batch {args.batch_size} x {args.seq_len} tokens; "
        f"{os.cpu_count()} cores ({platform.machine()}), load {load:.1f} at the end, {time.strftime('%Y-%m-%d')}; "
        f"{args.rounds} rounds x {args.steps} steps, alternating; medians. Command: `{command}`",
        "",
        "| step | steps/s | x today's step | x PyTorch peer |",
        "|---|---|---|---|",
    ]
    for n in candidates:
        lines.append(f"| {n} | {statistics.median(rates[n]):.2f} | **{statistics.median(vs_today[n]):.2f}** | "
                     f"{statistics.median(vs_peer[n]):.2f} |")
    section = "\n".join(lines) + "\n"
    print(section)
    if args.append_results:
        with open(REPO / "benchmarks" / "RESULTS.md", "a") as handle:
            handle.write(section)


if __name__ == "__main__":
    main()
