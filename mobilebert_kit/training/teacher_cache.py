"""TeacherCache: the frozen teacher's layer outputs for every example of the data, computed once.

Why, what it costs and what it saves, why it is keyed by each example's content (a digest of its three input
rows) and stored in float32: docs/distillation.md, "The teacher cache".

Layout (``DIR``, normally ``OUT/teacher_cache``)::

    cache.json          what was cached (layers, shapes, identity) and how many rows are done
    keys.bin            16-byte digest of each row's inputs
    hidden_{l}.bin      [rows, seq, hidden] float32, layer l's output
    attention_{l}.bin   [rows, heads, seq, seq] float32, layer l's attention probabilities

Files are appended with plain writes, never through a writable memory map: a full
disk then raises ``ENOSPC`` (a one-line error) instead of killing the process with
SIGBUS. ``cache.json`` advances only after the rows it counts are flushed, so a
build interrupted at any point resumes from its last counted row.
"""

import errno
import functools
import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from mobilebert_kit.errors import ConfigError, DataError, MbkError, TrainingError
from mobilebert_kit.models.encoder import INPUT_NAMES
from mobilebert_kit.utils.atomic import OutputError, remove_path, write_text
from mobilebert_kit.utils.limits import Limit, within
from mobilebert_kit.utils.structured import load_json

CACHE_FILE = "cache.json"
KEY_BYTES = 16
FLUSH_EVERY = 8  # batches between progress records: a resumed build repeats at most this many


def hidden_key(layer):
    """The batch key of layer ``layer``'s cached hidden states."""
    return f"teacher_hidden_{layer}"


def attention_key(layer):
    """The batch key of layer ``layer``'s cached attention probabilities."""
    return f"teacher_attention_{layer}"


def row_digests(batch):
    """``[rows]`` 16-byte digests of each row's ``input_ids``, ``token_type_ids`` and ``attention_mask``."""
    parts = [np.ascontiguousarray(np.asarray(batch[name]), dtype=np.int32) for name in INPUT_NAMES]
    return [hashlib.blake2b(b"".join(p[i].tobytes() for p in parts), digest_size=KEY_BYTES).digest()
            for i in range(parts[0].shape[0])]


def cache_bytes(rows, seq_len, hidden, heads, layers):
    """Bytes a cache of ``rows`` examples and ``layers`` layers takes on disk."""
    per_layer = seq_len * hidden + heads * seq_len * seq_len
    return rows * (KEY_BYTES + 4 * per_layer * len(layers))


def free_bytes(path):
    """Free bytes on the file system that holds ``path`` (or its nearest existing parent)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


# A layer-transfer step without the cache runs the teacher up to the stage's top layer; building
# runs it once per example up to the top cached layer. The cache is built when the run would
# otherwise pay at least this many times the build's teacher work, and it fits in half the free disk.
MIN_REUSE = 2.0
MAX_SHARE_OF_FREE_DISK = 0.5


def decide(mode, stages, rows, batch_size, size, free):
    """``(use, why)``: whether a run caches its teacher, and the reason, for the plan it prints.

    ``mode`` is ``DistillConfig.teacher_cache``, ``stages`` the layer-transfer stages still to run, ``size``
    the cache's bytes and ``free`` the free bytes where it would go; ``"on"`` when it does not fit is a
    ConfigError.

    Example:
        >>> from mobilebert_kit.training.stages import Stage
        >>> decide("auto", [Stage("layer_0", "layer_transfer", 100, (0,))], 50, 4, 10, 10**9)[0]
        True
    """
    gib = f"{size / 2**30:.2f} GiB"
    if mode == "off" or not stages:
        return False, "off" if mode == "off" else "no layer-transfer stage left"
    top = max(max(stage.layers) for stage in stages) + 1
    live = sum(stage.steps * batch_size * (max(stage.layers) + 1) for stage in stages)
    reuse = live / max(1, rows * top)
    if mode == "on":
        if size > free:
            raise ConfigError(f"the teacher cache needs {gib} but the disk of --out has {free / 2**30:.2f} GiB free; "
                              "free space there or run with --teacher-cache off")
        return True, f"on ({gib}; each example's teacher outputs are needed {reuse:.1f}x over the run)"
    if reuse < MIN_REUSE:
        return False, (f"off: each example's teacher outputs are needed {reuse:.1f}x over the run; the cache pays "
                       f"from {MIN_REUSE:g}x (--teacher-cache on forces it)")
    if size > MAX_SHARE_OF_FREE_DISK * free:
        return False, f"off: it would take {gib}, more than half the {free / 2**30:.2f} GiB free"
    return True, f"on ({gib}; saves {1 - 1 / reuse:.0%} of the teacher's forward passes)"


class TeacherCache:
    """Reads the complete teacher cache in ``directory`` (else TrainingError); :meth:`build` writes one.

    Example:
        >>> cache = TeacherCache("runs/mb/teacher_cache")  # doctest: +SKIP
        >>> cache.attach(batch, (0,))["teacher_hidden_0"].shape  # doctest: +SKIP
        (32, 128, 512)

    Reference: Sun et al., 2020, MobileBERT, Sec. 3.3 (the teacher is frozen during knowledge transfer).
    """

    def __init__(self, directory):
        self.directory = Path(directory)
        self.meta = _read_meta(self.directory)
        if not self.meta or not self.meta["complete"] or _short_files(self.directory, self.meta):
            raise TrainingError(f"{self.directory} holds no complete teacher cache; delete it or run with --teacher-cache off")
        rows, seq, hidden, heads = (self.meta[k] for k in ("rows", "seq_len", "hidden", "heads"))
        keys = np.fromfile(self.directory / "keys.bin", dtype=np.uint8, count=rows * KEY_BYTES).reshape(rows, KEY_BYTES)
        self.index = {bytes(k): i for i, k in enumerate(keys)}
        self.hidden, self.attention = {}, {}
        for layer in self.meta["layers"]:
            self.hidden[layer] = np.memmap(self.directory / f"hidden_{layer}.bin", np.float32, "r",
                                           shape=(rows, seq, hidden))
            self.attention[layer] = np.memmap(self.directory / f"attention_{layer}.bin", np.float32, "r",
                                              shape=(rows, heads, seq, seq))

    def attach(self, batch, layers):
        """``batch`` with the teacher's cached outputs of ``layers`` added (:func:`hidden_key`, :func:`attention_key`).

        A row not in the cache (the data changed since it was built) is a TrainingError."""
        digests = row_digests({name: np.asarray(batch[name]) for name in INPUT_NAMES})
        try:
            rows = np.array([self.index[d] for d in digests])
        except KeyError:
            raise TrainingError(f"an example of the data is not in the teacher cache {self.directory} (the data changed "
                                "since it was built); delete that directory to rebuild it, or run with --teacher-cache off") from None
        order = np.argsort(rows, kind="stable")  # read the memory maps forwards
        inverse = np.argsort(order)  # the inverse permutation: back to the batch's row order
        out = dict(batch)
        for layer in layers:
            out[hidden_key(layer)] = np.asarray(self.hidden[layer][rows[order]])[inverse]
            out[attention_key(layer)] = np.asarray(self.attention[layer][rows[order]])[inverse]
        return out

    @classmethod
    def build(cls, directory, outputs, batches, rows, layers, identity, progress=None):
        """Writes the cache in ``directory`` (or finishes an interrupted build) and returns it.

        A cache of another ``identity`` (what makes it valid: teacher, data, shapes) there is replaced.
        ``outputs(inputs)`` gives ``{"hidden_states": [...], "attention_probs": [...]}``, one entry per layer of
        ``layers`` (``distill_step.transfer_model`` of the teacher); ``batches(skip)`` yields the data's batches
        in a fixed order, once, the first ``skip`` left out; ``progress(rows_done)`` follows every batch. A full
        disk or an unwritable directory is a one-line TrainingError; data of other than ``rows`` records a
        DataError.
        """
        directory = Path(directory)
        meta = _read_meta(directory)
        wanted = {"identity": identity, "layers": list(layers)}
        if meta and not directory.is_symlink() and {k: meta[k] for k in wanted} == wanted \
                and not _short_files(directory, meta):
            if meta["complete"]:
                return cls(directory)
        else:  # another teacher's, unreadable, or files cut short: start again
            remove_path(directory)
            meta = dict(wanted, rows_done=0, batches_done=0, complete=False)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            meta = _append_rows(directory, meta, outputs, batches, layers, progress)
        except (OSError, OutputError) as err:  # OutputError: atomic_file's own report of a failed write
            # Give the space back (the cache is ours and is rebuilt when asked for again).
            remove_path(directory, ignore_errors=True)
            full = not isinstance(err, OSError) or err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
            why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            fix = "free space there" if full else f"make {directory.parent} writable"
            raise TrainingError(f"cannot write the teacher cache {directory} ({why}); it was removed; {fix} or run with "
                                "--teacher-cache off") from None
        if meta["rows_done"] != rows:
            raise DataError(f"the teacher cache {directory} got {meta['rows_done']} rows but the data lists {rows}; "
                            "re-create the data with `mbk pretraining-data`")
        _write_meta(directory, dict(meta, complete=True))
        return cls(directory)


def _append_rows(directory, meta, outputs, batches, layers, progress):
    """Appends the batches after ``meta``'s last counted one; returns the final record (not yet complete)."""
    files = {}
    try:
        for name in _names(layers):  # drop rows written after the last record: they are written again
            f = open(directory / name, "ab")
            f.truncate(_row_bytes(meta, name) * meta["rows_done"])
            files[name] = f
        pending = 0
        for batch in batches(meta["batches_done"]):
            inputs = {name: batch[name] for name in INPUT_NAMES}
            result = outputs(inputs)
            files["keys.bin"].write(b"".join(row_digests(inputs)))
            for i, layer in enumerate(layers):
                hidden = np.asarray(result["hidden_states"][i], dtype=np.float32)
                attention = np.asarray(result["attention_probs"][i], dtype=np.float32)
                meta.setdefault("shapes", {"hidden": list(hidden.shape[1:]), "attention": list(attention.shape[1:])})
                files[f"hidden_{layer}.bin"].write(np.ascontiguousarray(hidden).tobytes())
                files[f"attention_{layer}.bin"].write(np.ascontiguousarray(attention).tobytes())
            meta["rows_done"] += int(np.asarray(inputs["input_ids"]).shape[0])
            meta["batches_done"] += 1
            pending += 1
            if progress is not None:
                progress(meta["rows_done"])
            if pending == FLUSH_EVERY:
                _flush(files, directory, meta)
                pending = 0
        _flush(files, directory, meta)
    finally:
        for f in files.values():
            f.close()
    if "shapes" not in meta:
        raise DataError(f"the data holds no records to cache in {directory}; re-create the data with "
                        "`mbk pretraining-data`")
    seq, hidden = meta["shapes"]["hidden"]
    meta.update(seq_len=seq, hidden=hidden, heads=meta["shapes"]["attention"][0], rows=meta["rows_done"])
    return meta


def _names(layers):
    return ["keys.bin"] + [f"{kind}_{layer}.bin" for layer in layers for kind in ("hidden", "attention")]


def _short_files(directory, meta):
    """Whether a file holds fewer bytes than the rows ``meta`` counts (then the cache cannot be trusted)."""
    for name in _names(meta["layers"]):
        path = Path(directory) / name
        need = _row_bytes(meta, name) * meta["rows_done"]
        if need and (not path.is_file() or path.stat().st_size < need):
            return True
        if (path.exists() or path.is_symlink()) and (path.is_symlink() or not path.is_file()):
            return True  # a link or a special file (a FIFO would block the append) is not ours
    return False


def _row_bytes(meta, name):
    if name == "keys.bin":
        return KEY_BYTES
    if "shapes" not in meta:
        return 0
    shape = meta["shapes"]["hidden" if name.startswith("hidden") else "attention"]
    return 4 * int(np.prod(shape))


def _flush(files, directory, meta):
    for f in files.values():
        f.flush()
        os.fsync(f.fileno())
    _write_meta(directory, meta)


def _write_meta(directory, meta):
    write_text(directory / CACHE_FILE, json.dumps(meta, indent=1) + "\n")


_count = functools.partial(within, Limit(int, 0, (1 << 40) - 1))  # rows, layers, shapes of a cache record


def _read_meta(directory):
    """The cache record, or None when there is none or it is not one this module wrote (then it is rebuilt)."""
    try:  # the shared reader: bounded, depth-limited, never opens a FIFO or device
        meta = load_json(Path(directory) / CACHE_FILE, CACHE_FILE, expect=dict, error=MbkError)
    except MbkError:
        return None
    if not isinstance(meta.get("identity"), dict):
        return None
    layers = meta.get("layers")
    if not isinstance(layers, list) or not all(_count(v) for v in layers) or not isinstance(meta.get("complete"), bool):
        return None
    if not all(_count(meta.get(k)) for k in ("rows_done", "batches_done")):
        return None
    shapes = meta.get("shapes")
    if shapes is not None and not (isinstance(shapes, dict) and
                                   all(isinstance(shapes.get(k), list) and all(_count(v) and v for v in shapes[k])
                                       for k in ("hidden", "attention"))
                                   and len(shapes["hidden"]) == 2 and len(shapes["attention"]) == 3):
        return None
    if meta["rows_done"] and shapes is None:
        return None
    if meta["complete"] and not all(_count(meta.get(k)) and meta[k] for k in ("rows", "seq_len", "hidden", "heads")):
        return None
    return meta
