"""Distillation steps per second: today's step, XLA, bfloat16, and the same step written in PyTorch, one run.

Teacher: the real all-MiniLM-L6-v2. Student: the MobileBERT-style student of
``distillation_ablation.py`` (6 layers, hidden 384, 12 heads, bottleneck 96,
4 stacked FFNs). One end-to-end layer-transfer step (Eq. 7 on all 6 layers:
feature map, mean, variance, attention KL; weights 100/5000/5/1) on the same
batch for every candidate:

- ``ours float32`` (today's step), ``ours float32 + XLA`` (``jit_compile``),
  ``ours bfloat16`` (``mixed_bfloat16``), ``ours bfloat16 + XLA``, each with LAMB
  (the default) and the best of them with AdamW;
- ``... + teacher cache``: the step reading the frozen teacher's outputs from
  ``TeacherCache`` (``mbk distill --teacher-cache``) instead of running the
  teacher; the lookup and copy of each batch's rows are inside the timed step,
  and the one-time build (one teacher pass over the data) is reported beside it
  with the number of steps after which it has paid for itself; float32 and
  bfloat16, with and without XLA (XLA's CPU backend does not use bf16
  instructions, oneDNN's eager kernels do);
- ``PyTorch`` (the peer a user would otherwise write): transformers ``BertModel``
  teacher (the same checkpoint, eager attention so that it returns attention
  probabilities) and ``MobileBertModel`` student of the same shape, the same four
  losses, ``torch.optim.AdamW`` (PyTorch has no LAMB), embeddings frozen as ours.

Each candidate is warmed up (tracing, XLA compilation), then rounds alternate
between candidates, ``--steps`` steps each; medians over rounds and ratios to
today's step and to PyTorch measured in the same round. Both frameworks use
every core of the machine.

Usage:
    python benchmarks/distillation_throughput.py --rounds 5 --steps 10 --append-results [--without bfloat16]
"""

import os
import platform
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from step_rounds import alternate, command_line, emit, median, step_parser  # noqa: E402

WEIGHTS = {"attention": 1.0, "feature_map": 100.0, "mean": 5000.0, "variance": 5.0}


def ours(teacher_dir, work, batch_size, precision, jit_compile, optimizer="lamb", cache=False, fresh=False):
    """``(step, batch, distiller)``: our end-to-end transfer step for one configuration, the batch it trains on.

    ``cache``: the step reads a teacher cache, built first (from scratch with ``fresh``, so that its cost is timed).
    """
    from rich.console import Console

    from mobilebert_kit.training.distill_config import DistillConfig
    from mobilebert_kit.training.distiller import Distiller
    from mobilebert_kit.training.stages import plan_stages

    config = DistillConfig(schedule="end_to_end", layer_steps=10, batch_size=batch_size, log_every=10**6,
                           precision=precision, jit_compile=jit_compile, optimizer=optimizer,
                           teacher_cache="on" if cache else "off")
    distiller = Distiller(str(teacher_dir), str(work / "student_init"), str(work / "data_train"),
                          work / "throughput_run", config, console=Console(file=open(os.devnull, "w"))).prepare()
    batch = next(distiller.iterator)
    (stage,) = plan_stages(config, 6, embeddings_from_teacher=True)
    if cache:
        directory = work / f"teacher_cache_{precision}"
        if fresh:
            shutil.rmtree(directory, ignore_errors=True)
        distiller.prepare_teacher_cache(directory=directory)  # the steps built after it read the cache
    step, _ = distiller.stage_step(stage)
    if cache:
        return (lambda b: step(distiller.teacher_cache.attach(b, stage.layers))), batch, distiller
    return step, batch, distiller


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
    parser = step_parser(__doc__.splitlines()[0], steps=10)
    parser.add_argument("--without", default="", metavar="WORD,...",
                        help="leave out our candidates whose name holds one of these words (e.g. bfloat16): fewer "
                        "models in one process")
    args = parser.parse_args(argv)
    without = [w for w in args.without.split(",") if w]
    command = command_line("distillation_throughput.py", argv)

    from distillation_ablation import prepare

    teacher_dir, _ = prepare(args.work, args.seq_len, 10)
    candidates, batch, build = {}, None, None
    for name, precision, jit, optimizer, cache in (
        ("ours float32 (today)", "float32", "off", "lamb", False),
        ("ours float32 + XLA", "float32", "on", "lamb", False),
        ("ours bfloat16", "mixed_bfloat16", "off", "lamb", False),
        ("ours bfloat16 + XLA", "mixed_bfloat16", "on", "lamb", False),
        ("ours float32 + XLA, AdamW", "float32", "on", "adamw", False),
        ("ours bfloat16 + XLA, AdamW", "mixed_bfloat16", "on", "adamw", False),
        ("ours float32 + teacher cache", "float32", "off", "lamb", True),
        ("ours float32 + XLA + teacher cache", "float32", "on", "lamb", True),
        ("ours float32 + XLA + teacher cache, AdamW", "float32", "on", "adamw", True),
        ("ours bfloat16 + teacher cache", "mixed_bfloat16", "off", "lamb", True),
        ("ours bfloat16 + XLA + teacher cache", "mixed_bfloat16", "on", "lamb", True),
    ):
        if any(word in name for word in without) and name != "ours float32 (today)":
            continue
        begin = time.perf_counter()
        step, this_batch, distiller = ours(teacher_dir, args.work, args.batch_size, precision, jit, optimizer, cache,
                                           fresh=cache and build is None)
        if cache and build is None:  # the first cached candidate built it (later ones reuse the file)
            build = (time.perf_counter() - begin, int(distiller.data_meta["num_examples"]))
        batch = batch if batch is not None else this_batch  # every candidate trains on the first batch
        candidates[name] = (lambda f: lambda: f(batch))(step)
    today, peer = "ours float32 (today)", "PyTorch eager (BertModel -> MobileBertModel, AdamW)"
    candidates[peer] = pytorch_peer(teacher_dir, batch)
    rates, ratios = alternate(candidates, args.rounds, args.steps, baselines=(today, peer))

    lines = [
        "",
        "## Distillation throughput: XLA, bfloat16 and the PyTorch peer (`benchmarks/distillation_throughput.py`)",
        "",
        f"Teacher all-MiniLM-L6-v2, MobileBERT-style student of `distillation_ablation.py`; one end-to-end "
        f"transfer step (Eq. 7 on 6 layers) on batch {args.batch_size} x {args.seq_len} tokens; "
        f"{os.cpu_count()} cores ({platform.machine()}), load {os.getloadavg()[0]:.1f} at the end, "
        f"{time.strftime('%Y-%m-%d')}; {args.rounds} rounds x {args.steps} steps, alternating; medians. "
        f"Command: `{command}`",
        "",
        "| step | steps/s | x today's step | x PyTorch peer |",
        "|---|---|---|---|",
    ]
    for n in candidates:
        lines.append(f"| {n} | {median(rates[n]):.2f} | **{median(ratios[today][n]):.2f}** | "
                     f"{median(ratios[peer][n]):.2f} |")
    if build is not None and {"ours float32 + XLA", "ours float32 + XLA + teacher cache"} <= set(rates):
        lines += ["", amortized(build, rates, args.batch_size)]
    emit("\n".join(lines) + "\n", args.append_results)


def amortized(build, rates, batch_size):
    """The cache's one-time cost, and the number of steps after which it has paid for itself.

    The build runs the teacher once per example (its time here includes building the models, so it is an upper
    bound); each cached step saves ``1/live - 1/cached`` seconds against the live-teacher step with the same
    settings.
    """
    seconds, rows = build
    cached = median(rates["ours float32 + XLA + teacher cache"])
    live = median(rates["ours float32 + XLA"])
    saved = 1.0 / live - 1.0 / cached
    pays = (f"pays for itself after {seconds / saved:.0f} steps ({seconds / saved * batch_size / rows:.1f} passes "
            f"over the data at batch {batch_size})") if saved > 0 else "never pays for itself here"
    return (f"Teacher cache build: {seconds:.0f} s for {rows} examples ({1000 * seconds / rows:.1f} ms each, models "
            f"built included); each step then saves {1000 * saved:.0f} ms against float32 + XLA, so the cache {pays}.")


if __name__ == "__main__":
    main()
