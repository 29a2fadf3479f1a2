"""The errors of a lost cluster peer, as a training loop catches and names them.

A collective step of a ``tf.distribute`` run raises one of :data:`PEER_LOST` when another worker died or was
preempted; ``mbk distill`` and ``mbk finetune`` turn it into one line naming the task and ``--resume``. The
flag that turns Ctrl-C and SIGTERM into a checkpointed stop is ``utils/interrupt.py``'s ``InterruptFlag``
(shared with the recovery of ``mbk substitute``, which cannot import ``training/``).
"""

from mobilebert_kit.backend import tf
from mobilebert_kit.errors import TrainingError

PEER_LOST = (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError,
             tf.errors.CancelledError)


def peer_lost_error(worker, where, err, resumes_from="its last checkpoint"):
    """The one-line TrainingError of ``worker`` stopped at ``where`` by ``err`` (one of :data:`PEER_LOST`): the
    error's line that names the lost task, shortened, and the instruction to resume.

    Example:
        >>> error = peer_lost_error("worker 0", "step 5", RuntimeError("failed\\n  task /job:worker/task:1 is gone"))
        >>> str(error).split(";")[0]
        'worker 0: the cluster lost a worker at step 5 (task /job:worker/task:1 is gone)'
    """
    line = next((line.strip() for line in str(err).splitlines() if "task" in line), type(err).__name__)[:160]
    return TrainingError(f"{worker}: the cluster lost a worker at {where} ({line}); start every worker again with "
                         f"the same command and --resume: the run continues from {resumes_from}")
