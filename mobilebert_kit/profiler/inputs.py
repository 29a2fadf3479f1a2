"""Realistic inputs for timing an encoder: what a tokenizer would produce.

A sentence pair (random int32 ids would fall outside the vocabulary, and a random mask is not a mask):
``input_ids`` drawn uniformly from ``[1, vocab_size)`` (padding 0), ``attention_mask`` 1 over the real tokens
then 0, ``token_type_ids`` 0 for the first sentence and 1 for the second (0 throughout where the input's ``segments``,
the rows of its lookup table, is 1: RoBERTa). By default the pair fills the whole
sequence, as in the paper's latency tables.

Example:
    >>> feeds = make_feeds(info.inputs, seq_len=128, vocab_size=30522)  # doctest: +SKIP
"""

import re

import numpy as np

from mobilebert_kit.profiler.errors import ProfilerError

# The most values one input may take (64 MiB of int64): a timing input is a few batches of tokens.
MAX_FEED_VALUES = 1 << 23
_NUMPY_TYPES = {"int32": np.int32, "int64": np.int64, "float32": np.float32, "float16": np.float16, "int8": np.int8, "uint8": np.uint8}


def feed_shape(spec, seq_len):
    """An input's shape with open axes at 1 and the last (sequence) axis at ``seq_len``."""
    shape = [1 if d is None or d < 0 else int(d) for d in spec["shape"]] or [1]
    if len(shape) >= 2:
        shape[-1] = seq_len
    return shape


def make_feeds(inputs, seq_len, vocab_size, *, fill=1.0, seed=0):
    """Returns ``{input name: array}`` for ``inputs`` (``ModelInfo.inputs``) at ``seq_len``: ids below ``vocab_size``,
    ``fill`` the fraction of real tokens, ``seed`` the same ids for every run and runtime. Raises ProfilerError for
    an input of an unsupported dtype or shape, or a bad ``fill``."""
    if not 0.0 < fill <= 1.0:
        raise ProfilerError(f"fill must be in (0, 1], got {fill}")
    if vocab_size < 2:
        raise ProfilerError(f"vocabulary size must be at least 2, got {vocab_size}")
    rng = np.random.default_rng(seed)
    length = max(1, int(round(seq_len * fill)))
    first = max(1, length // 2)
    feeds = {}
    for spec in inputs:
        dtype = _NUMPY_TYPES.get(spec["dtype"])
        if dtype is None:
            raise ProfilerError(f"input {spec['name']!r} has dtype {spec['dtype']}; the profiler feeds int32/int64/float inputs only")
        role = spec.get("role")
        if role and len(spec["shape"]) != 2:
            raise ProfilerError(f"input {spec['name']!r} has shape {list(spec['shape'])}; the profiler feeds token "
                                "inputs of shape [batch, seq] only (mbk export writes them)")
        shape = feed_shape(spec, seq_len)
        count = int(np.prod(shape, dtype=np.float64))
        if count > MAX_FEED_VALUES:  # a static batch read from the file decides the feed's size
            raise ProfilerError(f"input {spec['name']!r} of shape {shape} needs {count:,} values, more than the "
                                f"profiler's {MAX_FEED_VALUES:,}; export the model with batch 1")
        values = np.zeros(shape, dtype=np.int64)
        if role == "input_ids":
            values[..., :length] = rng.integers(1, vocab_size, size=shape[:-1] + [length])
        elif role == "attention_mask":
            values[..., :length] = 1
        elif role == "token_type_ids" and spec.get("segments", 2) > 1:
            values[..., first:length] = 1
        feeds[spec["name"]] = values.astype(dtype)
    return feeds


def benchmark_input_flags(inputs, seq_len, vocab_size):
    """Returns ``(flags, {flag name: bytes of a value file})``: benchmark_model's input flags for the same inputs,
    the ranges of docs/profiler.md ("Inputs"); a float mask's value file of ones is for the caller to push."""
    names, shapes, ranges, value_files = [], [], [], {}
    for spec in inputs:
        # The tool splits these flags on ':' and ','; it matches inputs by
        # position and only warns when names differ, so a safe name is used.
        name = spec.get("role") or re.sub(r"[^A-Za-z0-9_]", "_", spec["name"]) or "input"
        names.append(name)
        shape = feed_shape(spec, seq_len)
        shapes.append(",".join(str(d) for d in shape))
        if spec["dtype"] in ("int32", "int64", "int8", "uint8"):
            low, high = {"input_ids": (1, vocab_size - 1), "attention_mask": (1, 1),
                         "token_type_ids": (0, min(1, spec.get("segments", 2) - 1))}.get(spec.get("role"), (0, 0))
            ranges.append(f"{name},{low},{high}")
        elif spec.get("role") == "attention_mask":
            dtype = _NUMPY_TYPES.get(spec["dtype"], np.float32)
            value_files[name] = np.ones(int(np.prod(shape)), dtype=dtype).tobytes()
    flags = [f"--input_layer={','.join(names)}", f"--input_layer_shape={':'.join(shapes)}"]
    if ranges:
        flags.append(f"--input_layer_value_range={':'.join(ranges)}")
    return flags, value_files
