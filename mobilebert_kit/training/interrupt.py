"""Stopping a training run without losing a step: SIGINT and SIGTERM as a flag, and the errors of a lost peer.

``mbk distill`` and ``mbk finetune`` check :class:`InterruptFlag` between steps: the first Ctrl-C (SIGINT) or
SIGTERM lets the current step finish, the loop checkpoints it and stops, and ``--resume`` continues from
there. SIGTERM is what a scheduler, a container runtime or ``timeout`` sends before SIGKILL, so a preempted
run keeps its last step too. A second signal interrupts at once (the last periodic checkpoint is then the
resume point).
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
    """Turns the first SIGINT or SIGTERM into a flag checked between steps; a second one interrupts at once.

    A context manager; outside the main thread (where signals cannot be caught) it leaves the handlers alone.

    Example:
        >>> with InterruptFlag() as interrupt:  # doctest: +SKIP
        ...     for step in range(steps):
        ...         train(step)
        ...         if interrupt.raised:
        ...             save(); raise KeyboardInterrupt
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.raised = False
        self._previous = {}

    def __enter__(self):
        for signum in self.SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: leave the signals alone
                break
        return self

    def _handle(self, signum, frame):
        if self.raised:
            raise KeyboardInterrupt
        self.raised = True

    def __exit__(self, *exc):
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}
        return False
