"""The errors of a lost cluster peer, as a training loop catches and names them.

A collective step of a ``tf.distribute`` run raises one of :data:`PEER_LOST` when another worker died or was
preempted; ``mbk distill`` and ``mbk finetune`` turn it into one line naming the task and ``--resume``. The
flag that turns Ctrl-C and SIGTERM into a checkpointed stop is ``utils/interrupt.py``'s ``InterruptFlag``
(shared with the recovery of ``mbk substitute``, which cannot import ``training/``).
"""

from mobilebert_kit.backend import tf

PEER_LOST = (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError,
             tf.errors.CancelledError)


def peer_lost_line(err):
    """The line of a lost-peer error (one of :data:`PEER_LOST`) that names the task, shortened for one line.

    Example:
        >>> peer_lost_line(RuntimeError("collective failed\\n  task /job:worker/task:1 is gone"))
        'task /job:worker/task:1 is gone'
    """
    return next((line.strip() for line in str(err).splitlines() if "task" in line), type(err).__name__)[:160]
