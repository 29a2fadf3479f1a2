"""Steps per second of distillation relative to a plain student forward+backward plus a teacher forward.

Same process, same batch, same models (the all-MiniLM-L6-v2 teacher and the
MobileBERT-style student of ``distillation_ablation.py``). Timed steps:

- ``reference``: teacher forward + student forward and backward with a trivial
  loss (MSE of the last hidden states); gradients of the transformer blocks
  (the variables distillation trains; embeddings are frozen) computed, not applied;
- ``reference + LAMB``: the same, then a LAMB update of all student variables;
- ``end_to_end``: one distillation step on all 6 layers (Eq. 7 on every layer, LAMB);
- ``progressive layer_k``: one step of the stage of layer k (blocks above k are
  not computed; only block k trains, lower layers frozen).

Each is warmed up (tracing), then timed for ``--steps`` steps; rounds alternate
between them and the median over rounds is reported, with the ratio to the
reference measured in the same round.

Usage:
    python benchmarks/distillation_speed.py --rounds 5 --steps 20 --append-results
"""

import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from step_rounds import alternate, command_line, emit, median, step_parser  # noqa: E402


def main(argv=None):
    args = step_parser(__doc__.splitlines()[0], steps=20).parse_args(argv)
    command = command_line("distillation_speed.py", argv)

    import os

    from distillation_ablation import prepare
    from rich.console import Console

    from mobilebert_kit.backend import tf
    from mobilebert_kit.training.distill_config import DistillConfig
    from mobilebert_kit.training.distiller import Distiller
    from mobilebert_kit.training.lamb import Lamb
    from mobilebert_kit.training.stages import plan_stages

    teacher_dir, _ = prepare(args.work, args.seq_len, 10)
    config = DistillConfig(schedule="end_to_end", layer_steps=10, batch_size=args.batch_size, log_every=10**6)
    distiller = Distiller(str(teacher_dir), str(args.work / "student_init"), str(args.work / "data_train"),
                          args.work / "speed_run", config, console=Console(file=open(os.devnull, "w"))).prepare()
    batch = next(distiller.iterator)
    teacher, student = distiller.teacher_encoder, distiller.student_encoder
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    (e2e,) = plan_stages(config, 6, embeddings_from_teacher=True)
    step, variables = distiller.stage_step(e2e)
    # The reference differentiates the same variables the distillation trains: the blocks
    # (the embeddings are copied from the teacher and frozen during transfer).
    lamb = Lamb(learning_rate=1e-4)
    lamb.build(variables)

    def reference_step(apply):
        @tf.function
        def step():
            target = teacher(inputs, training=False)["sequence_output"]
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(student(inputs, training=True)["sequence_output"] - target))
            grads = tape.gradient(loss, variables)
            if apply:
                lamb.apply_gradients(zip(grads, variables))
                return loss
            return loss, grads

        return step

    candidates = {"reference": reference_step(False), "reference + LAMB": reference_step(True)}
    candidates["end_to_end (6 layers)"] = lambda: step(batch)
    progressive = plan_stages(DistillConfig(layer_steps=10), 6, embeddings_from_teacher=True)
    for layer in (0, 5):
        fn, _ = distiller.stage_step(progressive[layer])
        candidates[f"progressive layer_{layer}"] = (lambda f: lambda: f(batch))(fn)

    rates, ratios = alternate(candidates, args.rounds, args.steps, baselines=("reference",))
    ratios = ratios["reference"]

    lines = [
        "",
        "## Distillation speed vs plain forward/backward (`benchmarks/distillation_speed.py`)",
        "",
        f"Teacher all-MiniLM-L6-v2, MobileBERT-style student of `distillation_ablation.py`; batch {args.batch_size} "
        f"x {args.seq_len} tokens, float32, one process on {os.cpu_count()} CPU core(s) "
        f"({platform.machine()}, {platform.node()}, {time.strftime('%Y-%m-%d')}); {args.rounds} rounds x "
        f"{args.steps} steps, alternating; medians. Command: `{command}`",
        "",
        "| step | steps/s (median) | ratio to reference (median of per-round ratios) | min - max ratio |",
        "|---|---|---|---|",
    ]
    for name in candidates:
        lines.append(f"| {name} | {median(rates[name]):.2f} | **{median(ratios[name]):.3f}** | "
                     f"{min(ratios[name]):.3f} - {max(ratios[name]):.3f} |")
    emit("\n".join(lines) + "\n", args.append_results)


if __name__ == "__main__":
    main()
