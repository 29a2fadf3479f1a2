"""Runs ``mbk finetune ARGS`` in this process and sends itself a signal after a given step (resume tests).

Usage: python -m tests.training.finetune_script SIGNAL STEP ARGS...
e.g. ``KILL 5 --model tiny-bert ...`` SIGKILLs this process after optimizer step 5, as a preempted worker
dies. The command is the real CLI; only the step hook is added.
"""

import os
import signal
import sys


def main(argv):
    sig, at = getattr(signal, "SIG" + argv[0]), int(argv[1])
    from mobilebert_kit.cli.main import main as mbk
    from mobilebert_kit.training import fine_tuner

    original = fine_tuner.FineTuner.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.on_step_end = lambda step: step == at and os.kill(os.getpid(), sig)

    fine_tuner.FineTuner.__init__ = init
    return mbk(["finetune", *argv[2:]])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
