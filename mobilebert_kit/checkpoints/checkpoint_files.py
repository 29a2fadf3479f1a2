"""The checkpoints of resumable runs on disk: writes that fail as one line, and the newest checkpoint that can be read.

TensorFlow reports a full disk during ``CheckpointManager.save`` as a multi-line error and leaves ``ckpt-N_temp``
behind: every checkpoint write of a resumable run (``mbk distill``, ``mbk finetune``, the recovery of ``mbk
substitute``) goes through :func:`checkpoint_writes`. TensorFlow ignores a garbled ``checkpoint`` state file or a
missing ``.index`` (the run silently starts over) and fails deep inside a restore on a truncated data file:
:func:`newest_readable_checkpoint` reads every tensor of each ``ckpt-N.index``, newest first, so a damaged newest
checkpoint costs the steps since the one before (runs keep at least two), not the run. The faults and their
messages: docs/reliability.md, rows 168 and 170.

Here, in ``checkpoints/``, below ``training/`` and ``convert/``, because both write such checkpoints (``convert/``
may not import ``training/``).
"""

import contextlib
import errno
import re
from pathlib import Path

from mobilebert_kit.backend import tf
from mobilebert_kit.errors import TrainingError, first_line
from mobilebert_kit.utils.atomic import remove_path

# What a checkpoint write raises when the file system refuses it (atomic writes raise OSError subclasses).
# TensorFlow maps EFBIG (a file-size limit) to OutOfRangeError, which Keras' fit takes for the end of the
# data: raised from a callback, it would silently cut the epoch short, so it is caught here as well.
_WRITE_ERRORS = (tf.errors.OutOfRangeError, tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError,
                 tf.errors.FailedPreconditionError, tf.errors.UnknownError, tf.errors.InternalError, OSError)


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
    """Runs a checkpoint write; a refused one becomes a one-line :class:`TrainingError` naming ``directory``
    (``cannot write a checkpoint to DIR (the disk is full); ...``), whose ``*_temp`` leftovers are removed.

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
        raise TrainingError(
            f"cannot write a checkpoint to {directory} ({_reason(err)}); free space or fix the directory, then "
            "continue with the same command and --resume: the run goes on from its last complete checkpoint"
        ) from err


def newest_readable_checkpoint(directory, skipped=None):
    """The path prefix of the newest ``ckpt-N`` in the ``CheckpointManager`` directory ``directory`` whose every
    tensor can be read, or None when it holds no checkpoint; TrainingError when it holds some and none reads.
    ``skipped`` receives ``"ckpt-N (why)"`` for each newer checkpoint that could not be read.

    Example:
        >>> newest_readable_checkpoint("/tmp/no-such-mbk-run/checkpoints") is None
        True
    """
    found = []
    with contextlib.suppress(OSError):
        for index in Path(directory).iterdir():
            match = re.fullmatch(r"ckpt-(\d{1,18})\.index", index.name)
            if match and index.is_file() and not index.is_symlink():
                found.append((int(match.group(1)), str(index)[:-len(".index")]))
    reasons = [] if skipped is None else skipped
    for _, prefix in sorted(found, reverse=True):
        try:
            reader = tf.train.load_checkpoint(prefix)
            for name, dtype in reader.get_variable_to_dtype_map().items():
                if dtype != tf.variant:  # a data iterator's state has no numpy value; the tensors beside it are read
                    reader.get_tensor(name)
            return prefix
        except Exception as err:  # noqa: BLE001  (whatever a damaged file raises, it is not a checkpoint to use)
            reasons.append(f"{Path(prefix).name} ({first_line(err)[:160]})")
    if reasons:
        raise TrainingError(f"no checkpoint in {directory} can be read ({'; '.join(reasons[:2])}); start the run over "
                            "with --overwrite")
    return None
