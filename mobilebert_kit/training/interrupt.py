"""Stopping a training run without losing a step: SIGINT as a flag, and the errors of a lost cluster peer.

``mbk distill`` and ``mbk finetune`` check :class:`InterruptFlag` between steps: the first Ctrl-C lets the
current step finish, the loop checkpoints it and stops, and ``--resume`` continues from there. A second
Ctrl-C interrupts at once (the last periodic checkpoint is then the resume point).
"""

import signal

from mobilebert_kit.backend import tf

# What a collective step raises when another worker of the cluster died or was preempted.
PEER_LOST = (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError,
             tf.errors.CancelledError)


def peer_lost_line(err):
    """The line of a lost-peer error that names the task, shortened for a one-line message."""
    return next((line.strip() for line in str(err).splitlines() if "task" in line), type(err).__name__)[:160]


class InterruptFlag:
    """Turns the first SIGINT into a flag checked between steps; a second one interrupts at once.

    A context manager; outside the main thread (where signals cannot be caught) it leaves SIGINT alone.

    Example:
        >>> with InterruptFlag() as interrupt:  # doctest: +SKIP
        ...     for step in range(steps):
        ...         train(step)
        ...         if interrupt.raised:
        ...             save(); raise KeyboardInterrupt
    """

    def __init__(self):
        self.raised = False
        self._previous = None

    def __enter__(self):
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: leave SIGINT alone
            self._previous = None
        return self

    def _handle(self, signum, frame):
        if self.raised:
            raise KeyboardInterrupt
        self.raised = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False
