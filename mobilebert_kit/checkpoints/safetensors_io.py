"""A strict safetensors reader: validates every offset before touching data.

Written here rather than delegated so that a truncated or corrupt file gives a
message naming the file and the problem, and so that bfloat16/float16 tensors
load as float32 without torch. Pickled checkpoints are refused outright.
"""

import json
import struct
from pathlib import Path

import numpy as np

from mobilebert_kit.errors import CheckpointError

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": None,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
}
_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
_MAX_HEADER = 100 * 1024 * 1024


def refuse_pickle(path):
    """Raises a CheckpointError for pickle-based checkpoint files."""
    path = Path(path)
    raise CheckpointError(
        f"refusing to load {path.name}: it is a pickle-based PyTorch checkpoint, and unpickling can run "
        "arbitrary code; convert it to safetensors first (in Python with transformers: "
        "`AutoModel.from_pretrained(DIR).save_pretrained(OUT, safe_serialization=True)`)"
    )


def read_safetensors(path):
    """Reads every tensor of a ``.safetensors`` file into float32/int numpy arrays.

    Raises:
        CheckpointError: missing, truncated or corrupt file.
    """
    path = Path(path)
    if path.suffix in PICKLE_SUFFIXES:
        refuse_pickle(path)
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist; pass the directory holding model.safetensors")
    data = path.read_bytes()
    bad = f"{path} is not a valid safetensors file"
    if len(data) < 8:
        raise CheckpointError(f"{bad} (only {len(data)} bytes: truncated); re-download or re-convert it")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > min(_MAX_HEADER, len(data) - 8):
        raise CheckpointError(f"{bad} (header length {header_len} exceeds the file: truncated or corrupt); re-download or re-convert it")
    try:
        header = json.loads(data[8 : 8 + header_len])
    except (ValueError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{bad} (header is not JSON: {err}); re-download or re-convert it") from err
    if not isinstance(header, dict):
        raise CheckpointError(f"{bad} (header is not a JSON object); re-download or re-convert it")
    body = memoryview(data)[8 + header_len :]
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = info["dtype"], [int(d) for d in info["shape"]], info["data_offsets"]
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{bad} (entry {name!r} is malformed); re-download or re-convert it") from err
        if dtype not in _SIZES:
            raise CheckpointError(f"{path}: tensor {name} has unsupported dtype {dtype}")
        count = int(np.prod(shape)) if shape else 1
        if not (0 <= start <= end <= len(body)) or end - start != count * _SIZES[dtype]:
            raise CheckpointError(
                f"{bad} (tensor {name} needs bytes {start}..{end} of {len(body)}: truncated or corrupt); "
                "re-download or re-convert it"
            )
        raw = body[start:end]
        if dtype == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=np.dtype(_DTYPES[dtype]).newbyteorder("<"))
        array = array.reshape(shape)
        if array.dtype in (np.float16, np.float64):
            array = array.astype(np.float32)
        arrays[name] = array
    return arrays


def read_safetensors_dir(directory):
    """Reads ``model.safetensors`` or a sharded ``model.safetensors.index.json`` in ``directory``."""
    directory = Path(directory)
    single = directory / "model.safetensors"
    index = directory / "model.safetensors.index.json"
    if single.is_file():
        return read_safetensors(single)
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError) as err:
            raise CheckpointError(f"{index} is not a valid safetensors index ({err})") from err
        arrays = {}
        for shard in shards:
            arrays.update(read_safetensors(directory / shard))
        return arrays
    pickles = sorted(p.name for p in directory.iterdir() if p.suffix in PICKLE_SUFFIXES) if directory.is_dir() else []
    if pickles:
        refuse_pickle(directory / pickles[0])
    raise CheckpointError(f"{directory} has no model.safetensors; a Hugging Face checkpoint directory needs one")
