"""Error types for user-facing failures.

Every error a user can cause (bad file, bad option, missing device) is an
``MbkError``; the command line prints its message as one line and exits
non-zero, without a traceback. Messages name what is wrong and what to do.

The subclasses here say what is wrong, so a caller can tell the failures apart:
``ConfigError`` (an option or configuration), ``CheckpointError`` (a checkpoint
that cannot be read or does not fit), ``TrainingError`` (a training run that
cannot start, continue or finish), ``DataError`` (training or evaluation
data that cannot be read or used) and ``EmulationError`` (a foreign-architecture
runtime, run under QEMU, that cannot be built or run). Others live beside the code that raises
them (``artifacts/errors.py``, ``convert/errors.py``, ``profiler/errors.py``).
All five exit with ``MbkError.exit_code`` (2).
"""


def first_line(err):
    """The first line of ``err``'s message, or its type's name when the message is empty.

    Third-party errors (TensorFlow, tf2onnx, ONNX Runtime, safetensors) run over
    many lines; a one-line error quotes only this part of them.

    Example:
        >>> first_line(ValueError("bad shape\\n  at layer 3"))
        'bad shape'
        >>> first_line(KeyError())
        'KeyError'
    """
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


class MbkError(Exception):
    """Base class of errors caused by user input or environment, not by a bug."""

    exit_code = 2


class ConfigError(MbkError, ValueError):
    """An unknown preset, option value or inconsistent configuration."""


class CheckpointError(MbkError):
    """A checkpoint that cannot be read or does not fit the model.

    Args:
        message: one-line summary.
        details: optional list of lines (one per variable) appended to the message.
    """

    MAX_DETAILS = 50  # lines listed; a file of 200,000 stray tensors printed 200,001 lines (7.7 MB)

    def __init__(self, message, details=None):
        details = list(details or [])
        if len(details) > self.MAX_DETAILS:
            details = details[: self.MAX_DETAILS - 1] + [f"... and {len(details) - self.MAX_DETAILS + 1:,} more"]
        self.details = details
        text = message
        if self.details:
            text += "\n" + "\n".join(f"  - {d}" for d in self.details)
        super().__init__(text)


class TrainingError(MbkError):
    """A training run that cannot start, continue or finish.

    Nothing to resume, a run started with other options, a checkpoint of the run
    that cannot be written or read, a cluster or device that cannot be reached,
    a loss that became NaN, a teacher cache that cannot be built or used.
    """


class DataError(MbkError):
    """Training or evaluation data that cannot be read or used.

    A missing or malformed table, SQuAD or CoNLL file, pre-training record
    shard or corpus, a vocabulary or tokenizer that does not fit, labels the
    task cannot use.
    """


class EmulationError(MbkError):
    """A foreign-architecture runtime (``--arch arm64``: QEMU, an emulated Python, the runtime's wheel) that
    cannot be built into the cache or cannot run a file: a download that failed, a missing host tool, a
    crash or timeout of the emulated run.
    """


def check_choice(name, value, choices):
    """Returns ``value`` if it is one of ``choices``, else raises ConfigError listing them.

    Args:
        name: the option's keyword, used in the message.
        value: the value given.
        choices: the fixed set of valid values.
    """
    if value not in choices:
        valid = ", ".join(repr(c) for c in choices)
        raise ConfigError(f"unknown {name} {value!r}; valid values: {valid}")
    return value


def is_int(value):
    """Whether ``value`` is an int and not a bool (to ``isinstance``, True is the int 1)."""
    return isinstance(value, int) and not isinstance(value, bool)
