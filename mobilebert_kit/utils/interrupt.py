"""Stopping a long loop without losing a step: SIGINT, SIGTERM and SIGHUP as a flag checked between steps.

``mbk distill``, ``mbk finetune`` and the recovery of ``mbk substitute`` check :class:`InterruptFlag` between
steps: the first Ctrl-C (SIGINT) or SIGTERM lets the current step finish, the loop checkpoints it and stops,
and ``--resume`` continues from there. SIGTERM is what a scheduler, a container runtime or ``timeout`` sends
before SIGKILL, so a preempted run keeps its last step too; SIGHUP is what a closed terminal or a dropped
ssh session sends (its default action left the ``.partial`` output and the scratch directory behind). A
second signal interrupts at once (the last periodic checkpoint is then the resume point).

Here, below ``training/`` and ``convert/``, because both loops use it (``convert/`` may not import
``training/``: tests/test_layering.py). Standard library only.
"""

import signal


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

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

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
        _give_back(self._previous)
        self._previous = {}
        return False


class TerminateAsInterrupt:
    """Makes SIGTERM and SIGHUP stop the command the way Ctrl-C does (``KeyboardInterrupt``), for the whole
    command.

    SIGTERM's default action ends the process at once: a command outside a training loop (``mbk
    pretraining-data``, an export) then left its hidden ``.partial`` output behind and printed nothing.
    As ``KeyboardInterrupt`` it unwinds: temporary outputs are removed, and ``mbk`` prints ``interrupted``.
    SIGHUP (the terminal closed) likewise, unless the command was started to ignore it (``nohup``).
    An :class:`InterruptFlag` inside takes the signal over for its loop and gives it back. Main thread only.

    Example:
        >>> with TerminateAsInterrupt():  # doctest: +SKIP
        ...     run_command()
    """

    # Whether a SIGINT or SIGTERM reached the command: a KeyboardInterrupt raised inside a C extension's import
    # (onnxruntime's) comes back as another error ("ImportError: initialization failed"), which mbk then reports as
    # the interrupt it was, not as an internal error.
    received = False

    def __enter__(self):
        TerminateAsInterrupt.received = False
        self._previous = {}
        # SIGINT only while Python's own handler is set; SIGHUP not under nohup, which sets SIG_IGN.
        for signum, only_over in ((signal.SIGTERM, None), (signal.SIGINT, signal.default_int_handler),
                                  (signal.SIGHUP, signal.SIG_DFL)):
            if only_over is None or signal.getsignal(signum) is only_over:
                try:
                    self._previous[signum] = signal.signal(signum, self._handle)
                except ValueError:  # not the main thread
                    break
        return self

    @staticmethod
    def _handle(signum, frame):
        TerminateAsInterrupt.received = True
        raise KeyboardInterrupt

    def __exit__(self, *exc):
        _give_back(self._previous)
        return False


def _give_back(previous):
    """Puts back the handlers ``{signum: handler}`` that ``signal.signal`` returned. Python reports a handler
    installed outside it (an embedding program's) as ``None``, which it cannot put back: the default action
    stands in, rather than leaving a finished command's handler to swallow or misreport a later signal."""
    for signum, handler in previous.items():
        signal.signal(signum, signal.SIG_DFL if handler is None else handler)
