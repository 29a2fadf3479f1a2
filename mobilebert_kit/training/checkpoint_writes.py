"""A checkpoint that cannot be written (disk full, permissions) as a one-line error that says how to go on.

TensorFlow reports a full disk during ``CheckpointManager.save`` as a multi-line
``ResourceExhaustedError`` naming an internal op, and leaves the half-written
``ckpt-N_temp`` directory behind. Training runs wrap every checkpoint write
(``mbk distill``, ``mbk finetune``) in :func:`checkpoint_writes`, so the user
reads what happened and that ``--resume`` continues from the last complete
checkpoint, which the failed write did not touch.
"""

import contextlib
import errno
from pathlib import Path

from mobilebert_kit.backend import tf
from mobilebert_kit.errors import MbkError, first_line
from mobilebert_kit.utils.atomic import remove_path

# What a checkpoint write raises when the file system refuses it (atomic writes raise OSError subclasses).
# TensorFlow maps EFBIG (a file-size limit) to OutOfRangeError, which Keras' fit takes for the end of the
# data: raised from a callback, it would silently cut the epoch short, so it is caught here as well.
_WRITE_ERRORS = (tf.errors.OutOfRangeError, tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError, tf.errors.FailedPreconditionError,
                 tf.errors.UnknownError, tf.errors.InternalError, OSError)


def _reason(err):
    text = str(err)
    code = getattr(err, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT) or "No space left" in text or "disk full" in text:
        return "the disk is full"
    if code in (errno.EACCES, errno.EPERM, errno.EROFS) or any(
            word in text for word in ("Permission denied", "permission denied", "Read-only file system")):
        return "permission denied or read-only file system"
    if code == errno.EFBIG or "File too large" in text:
        return "the file size limit, ulimit -f, is reached"
    return first_line(err)[:200]


@contextlib.contextmanager
def checkpoint_writes(directory):
    """Runs a checkpoint write; a refused one becomes :class:`MbkError` and its partial files are removed.

    Args:
        directory (str | Path): the checkpoint directory (named in the message, swept of ``*_temp`` leftovers).

    Raises:
        MbkError: ``cannot write a checkpoint to DIR (the disk is full); free space ... and --resume``.

    Example:
        >>> with checkpoint_writes(run_dir / "checkpoints"):  # doctest: +SKIP
        ...     manager.save(checkpoint_number=step)
    """
    try:
        yield
    except _WRITE_ERRORS as err:
        with contextlib.suppress(OSError):
            for leftover in Path(directory).glob("*_temp*"):
                remove_path(leftover, ignore_errors=True)
        raise MbkError(
            f"cannot write a checkpoint to {directory} ({_reason(err)}); free space or fix the directory, then "
            "continue with the same command and --resume: the run goes on from its last complete checkpoint"
        ) from err
