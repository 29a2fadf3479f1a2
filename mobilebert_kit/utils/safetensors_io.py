"""Safetensors checkpoints read with the ``safetensors`` package, behind a strict header check.

The package decodes the tensors (``safetensors.deserialize``); what it does not do is say, in one line
naming the file, what is wrong with a truncated or corrupt one, so the header is validated first:
the 8-byte header length, checked against the file size; the header, parsed by the one bounded JSON
reader and validated entry by entry (dtype, shape, offsets, no duplicates); the offsets, which must tile
the data region exactly (the package refuses overlaps and gaps too, as ``InvalidOffset``). A 3 GB file
that never finished downloading fails on its first 8 bytes. The file is read once into memory, never
mapped: a file truncated while it is read fails in one line instead of a SIGBUS. bfloat16 (through
``ml_dtypes``), float16 and float64 load as float32 without torch. Pickled checkpoints are refused outright.
"""

import math
import os
import re
import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import safetensors
from safetensors.numpy import save_file

from mobilebert_kit.errors import CheckpointError, is_int
from mobilebert_kit.utils.structured import load_json

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
# name: (numpy dtype read from the file, bytes per element).
_DTYPES = {
    "F64": (np.float64, 8), "F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (ml_dtypes.bfloat16, 2),
    "I64": (np.int64, 8), "I32": (np.int32, 4), "I16": (np.int16, 2), "I8": (np.int8, 1), "U8": (np.uint8, 1),
    "BOOL": (np.bool_, 1),
}
# The dtypes a weight may have; the others hold ids, masks or counters (HF's I64 position_ids buffer).
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
# numpy dtype -> name, for the dtypes read_safetensors returns unconverted (every one but F16, BF16 and F64).
_NAMES = {np.dtype(numpy_dtype): name for name, (numpy_dtype, _) in _DTYPES.items()}
# The official library's limit (safetensors/src/tensor.rs: MAX_HEADER_SIZE = 100_000_000).
_MAX_HEADER = 100_000_000
# No BERT-family tensor has more than 4 dimensions; a header claiming 1,000 is corrupt, not a model.
_MAX_RANK = 8


def refuse_pickle(path):
    """Raises a CheckpointError for pickle-based checkpoint files."""
    path = Path(path)
    raise CheckpointError(
        f"refusing to load {path.name}: it is a pickle-based PyTorch checkpoint, and unpickling can run "
        "arbitrary code; convert it to safetensors first (in Python with transformers: "
        "`AutoModel.from_pretrained(DIR).save_pretrained(OUT, safe_serialization=True)`)"
    )


def safetensors_dtype(dtype):
    """The safetensors name (``I32``) of a numpy ``dtype`` that :func:`read_safetensors` returned, for messages.

    Example:
        >>> safetensors_dtype(np.dtype(np.int32))
        'I32'
    """
    return _NAMES.get(np.dtype(dtype), str(dtype))


def read_header(path):
    """Reads and validates the header of the ``.safetensors`` file ``path`` without reading any tensor.

    Returns ``(entries, data_start)``: ``entries`` maps each tensor name to ``(dtype, shape, start, end)``, with
    offsets relative to the data region that begins at byte ``data_start``; the entries tile that region
    exactly. A missing, truncated or corrupt file is a one-line CheckpointError naming it.
    """
    path = Path(path)
    bad = f"{path} is not a valid safetensors file"
    redo = "re-download or re-convert it"
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise CheckpointError(f"{bad} (only {len(prefix)} bytes: truncated); {redo}")
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len > min(_MAX_HEADER, size - 8):
                raise CheckpointError(
                    f"{bad} (header length {header_len} exceeds the file's {size} bytes or the {_MAX_HEADER}-byte "
                    f"limit: truncated or corrupt); {redo}"
                )
            raw = handle.read(header_len)
    except OSError as err:
        raise CheckpointError(f"cannot read {path} ({err.strerror or err}); check the file and its permissions") from err
    header = load_json(raw, f"the header of {path}", max_bytes=_MAX_HEADER, expect=dict, error=CheckpointError,
                       fix=redo)
    data_start, data_len = 8 + header_len, size - 8 - header_len
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError(f"{bad} (__metadata__ must map names to strings); {redo}")
    entries = {}
    for name, info in header.items():
        where = f"{bad} (tensor {name!r}"
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise CheckpointError(f"{where} must have exactly dtype, shape and data_offsets); {redo}")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str) or dtype not in _DTYPES:
            raise CheckpointError(f"{where} has dtype {dtype!r}; supported: {', '.join(_DTYPES)}); {redo}")
        if not isinstance(shape, list) or len(shape) > _MAX_RANK or not all(is_int(d) and d >= 0 for d in shape):
            raise CheckpointError(f"{where} has shape {shape!r}: expected at most {_MAX_RANK} non-negative integers); {redo}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(is_int(o) for o in offsets)):
            raise CheckpointError(f"{where} has data_offsets {offsets!r}: expected [start, end] integers); {redo}")
        start, end = offsets
        count = math.prod(shape)  # Python ints: a product of huge dimensions cannot wrap around as numpy's would
        if not 0 <= start <= end <= data_len or end - start != count * _DTYPES[dtype][1]:
            raise CheckpointError(
                f"{where} needs bytes {start}..{end} of {data_len} for shape {shape} {dtype}: truncated or corrupt); {redo}"
            )
        entries[name] = (dtype, shape, start, end)
    expected = 0
    for name, (_, _, start, end) in sorted(entries.items(), key=lambda item: (item[1][2], item[1][3])):
        if start != expected:
            problem = "overlaps the tensor before it" if start < expected else f"leaves bytes {expected}..{start} unused"
            raise CheckpointError(f"{bad} (tensor {name!r} {problem}); {redo}")
        expected = end
    if expected != data_len:
        raise CheckpointError(f"{bad} (the tensors use {expected} of its {data_len} data bytes); {redo}")
    return entries, data_start


def read_safetensors(path):
    """Reads every tensor of a ``.safetensors`` file into float32/int numpy arrays.

    The header is validated whole (:func:`read_header`) before any tensor byte is read; the tensors are
    then decoded by the ``safetensors`` package from the file's bytes, read once. Returns tensor name -> numpy
    array (float16/bfloat16/float64 as float32); a missing, pickled, truncated or corrupt file is a
    CheckpointError.
    """
    path = Path(path)
    if path.suffix in PICKLE_SUFFIXES:
        refuse_pickle(path)
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist; pass the directory holding model.safetensors")
    entries, data_start = read_header(path)
    try:
        data = path.read_bytes()
        # The file changed between the header check and this read (truncated, replaced): decode nothing stale.
        if len(data) != data_start + sum(end - start for _, _, start, end in entries.values()):
            raise CheckpointError(f"{path} changed while it was read; read it again once nothing writes to it")
        tensors = safetensors.deserialize(data)
    except OSError as err:
        raise CheckpointError(f"cannot read {path} ({err.strerror or err}); check the file and its permissions") from err
    except safetensors.SafetensorError as err:
        raise CheckpointError(f"{path} is not a valid safetensors file ({err}); re-download or re-convert it") from err
    arrays = {}
    for name, tensor in tensors:
        array = np.frombuffer(tensor["data"], dtype=np.dtype(_DTYPES[tensor["dtype"]][0]).newbyteorder("<"))
        array = array.reshape(tensor["shape"])
        arrays[name] = array.astype(np.float32) if array.dtype.name in ("float16", "float64", "bfloat16") else array
    return arrays


def read_safetensors_dir(directory):
    """Reads ``model.safetensors`` or a sharded ``model.safetensors.index.json`` in ``directory``."""
    directory = Path(directory)
    single = directory / "model.safetensors"
    index = directory / "model.safetensors.index.json"
    if single.is_file():
        return read_safetensors(single)
    if index.is_file():
        return _read_sharded(directory, index)
    pickles = sorted(p.name for p in directory.iterdir() if p.suffix in PICKLE_SUFFIXES) if directory.is_dir() else []
    if pickles:
        refuse_pickle(directory / pickles[0])
    if os.path.lexists(single):  # a directory, FIFO or device in its place
        raise CheckpointError(f"{single} is not a regular file; replace it with the checkpoint's model.safetensors")
    raise CheckpointError(f"{directory} has no model.safetensors; a Hugging Face checkpoint directory needs one")


def _read_sharded(directory, index):
    """Reads the shards a ``model.safetensors.index.json`` names, checking the index against them."""
    bad = f"{index} is not a valid safetensors index"
    meta = load_json(index, "the safetensors index", expect=dict, error=CheckpointError, fix="re-download the checkpoint")
    weight_map = meta.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{bad} (it needs a non-empty weight_map object); re-download the checkpoint")
    for name, shard in weight_map.items():
        # A shard is a file next to the index: a path would read files outside the checkpoint.
        if not isinstance(shard, str) or Path(shard).name != shard or shard in (".", "..") or not shard.endswith(".safetensors"):
            raise CheckpointError(f"{bad} (tensor {name!r} maps to {shard!r}, not a .safetensors file name in {directory}); "
                                  "re-download the checkpoint")
    arrays, owner = {}, {}
    for shard in sorted(set(weight_map.values())):
        for name, array in read_safetensors(directory / shard).items():
            if name in owner:
                raise CheckpointError(f"{bad} (tensor {name!r} is in both {owner[name]} and {shard}); re-download the checkpoint")
            owner[name] = shard
            arrays[name] = array
    wrong = [name for name, shard in weight_map.items() if owner.get(name) != shard]
    if wrong:
        name = wrong[0]
        found = f"is in {owner[name]}" if name in owner else "is in no shard"
        raise CheckpointError(f"{bad} ({len(wrong)} tensor(s) not where it says: {name!r} {found}, "
                              f"the index says {weight_map[name]}); re-download the checkpoint")
    return arrays


def write_safetensors(path, arrays, metadata=None):
    """Writes ``arrays`` to the safetensors file ``path``; a refused write raises ``OSError`` with its errno.

    The ``safetensors`` writer reports a full disk or a file-size limit as ``SafetensorError("... I/O error:
    File too large (os error 27)")``, which no caller recognises as a write error; turned into the
    ``OSError`` it stands for, the atomic writers report it as they report any refused write
    (``utils.atomic.write_error``).

    Args:
        path (str | Path): the file to write.
        arrays (dict[str, numpy.ndarray]): tensors by name.
        metadata (dict[str, str] | None): the header's ``__metadata__``.

    Example:
        >>> write_safetensors("/tmp/w.safetensors", {"w": np.zeros(2, np.float32)})
    """
    try:
        save_file(arrays, str(path), metadata=metadata)
    except Exception as err:  # SafetensorError is not importable by a stable name
        code = re.search(r"\(os error (\d+)\)", str(err))
        if code is None:
            raise
        number = int(code.group(1))
        raise OSError(number, os.strerror(number), str(path)) from err
