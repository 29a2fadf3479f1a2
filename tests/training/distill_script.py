"""Runs a tiny distillation in a fresh process (resume and multi-replica tests).

Usage: python -m tests.training.distill_script INPUTS OUT MODE [signal STEP]
MODE: "run" | "resume" | "worker" | "worker-resume"; optional "INT 2" / "KILL 10"
sends that signal to this process after global step STEP. "worker" runs under
``--strategy multi_worker`` (TF_CONFIG names the cluster). "replicas" runs the
default strategy and a MirroredStrategy over two logical CPUs and prints both
histories as JSON.
"""

import json
import os
import signal
import sys
from pathlib import Path


def resume_config():
    from mobilebert_kit.training.distill_config import DistillConfig

    return DistillConfig(schedule="progressive", layer_steps=3, pd_steps=0, batch_size=4, checkpoint_every=2,
                         log_every=1, shuffle_buffer=16, learning_rate=5e-3)


def run(inputs, out, resume=False, on_step_end=None, config=None, strategy=None):
    from rich.console import Console

    from mobilebert_kit.training.distiller import Distiller

    console = Console(file=open(os.devnull, "w"))
    distiller = Distiller(str(inputs / "teacher"), str(inputs / "student"), str(inputs / "data"), out,
                          config or resume_config(), strategy=strategy, console=console, on_step_end=on_step_end)
    return distiller.run(resume=resume)


def replicas(inputs, out):
    from mobilebert_kit.backend import tf
    from mobilebert_kit.training.distill_config import DistillConfig

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    # Pre-training distillation: its three normalisers (tokens, masked predictions,
    # examples) differ between the replicas' halves of a batch.
    config = DistillConfig(schedule="none", pd_steps=2, batch_size=4, log_every=1, shuffle_buffer=16,
                           learning_rate=5e-3)
    results = {}
    for name, strategy in (
        ("default", tf.distribute.get_strategy()),
        ("mirrored", tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")])),
    ):
        losses = []
        run(inputs, out / name, config=config, strategy=strategy,
            on_step_end=lambda stage, step, g, metrics: losses.append(metrics))
        results[name] = {"losses": losses, "replicas": strategy.num_replicas_in_sync}
    print("RESULT " + json.dumps(results))


def main(argv):
    inputs, out, mode = Path(argv[0]), Path(argv[1]), argv[2]
    if mode == "replicas":
        return replicas(inputs, out)
    sig, at = (getattr(signal, "SIG" + argv[3]), int(argv[4])) if len(argv) > 4 else (None, None)

    def on_step_end(stage, step, global_step, metrics):
        if sig is not None and global_step == at:
            os.kill(os.getpid(), sig)

    strategy = None
    if mode.startswith("worker"):
        from mobilebert_kit.training.strategies import make_strategy

        strategy = make_strategy("multi_worker")  # first: before TensorFlow runs anything
    run(inputs, out, resume=mode.endswith("resume"), on_step_end=on_step_end, strategy=strategy)


if __name__ == "__main__":
    main(sys.argv[1:])
