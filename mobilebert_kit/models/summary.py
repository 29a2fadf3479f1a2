"""Model summaries for the CLI: parameters by component and FLOPs at a sequence length."""

import hashlib
import json
import os
from pathlib import Path

import numpy as np

import mobilebert_kit
from mobilebert_kit.errors import MbkError, is_int
from mobilebert_kit.models.api import build, count_params, named_weights
from mobilebert_kit.models.flops import count_flops
from mobilebert_kit.models.presets import preset_config
from mobilebert_kit.utils.atomic import atomic_file
from mobilebert_kit.utils.structured import load_json


def params_by_component(model):
    """Returns ``{component: parameter count}`` grouped by top-level layer name.

    Blocks are summed into one ``transformer_layers`` entry.
    """
    groups = {}
    for path, var in named_weights(model).items():
        parts = path.split("/")
        top = parts[1] if parts[0] == "encoder" and len(parts) > 1 else parts[0]
        key = "transformer_layers" if top.startswith("transformer_layer_") else top
        groups[key] = groups.get(key, 0) + int(np.prod(var.shape))
    return groups


def summarize(model, seq_len=128):
    """A JSON-able summary: config, total and per-component parameters, FLOPs at ``seq_len``."""
    encoder = getattr(model, "encoder", model)
    groups = params_by_component(model)
    return {
        "architecture": getattr(model, "architecture", None) or "encoder",
        "config": encoder.config,
        "params": int(sum(groups.values())),
        "params_by_component": groups,
        "seq_len": seq_len,
        "flops": count_flops(model, seq_len=seq_len),
    }


def _cache_file():
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return root / "mobilebert-kit" / "preset-params.json"


def _read_cache(path):
    """The cached ``{key: count}`` entries that are well formed; anything else counts as absent.

    A cache is our own file but not trusted: a ``null``, a list, a truncated write or a hand edit
    must mean "count again", never a crash of ``mbk presets`` (issue 12).
    """
    try:
        data = load_json(path, "the preset cache", expect=dict)
    except MbkError:
        return {}
    return {k: v for k, v in data.items() if is_int(v) and v >= 0}


def count_config_params(config):
    """Exact parameter count of an encoder config, without building all of its layers.

    Every transformer block of an encoder has the same arguments (only its name differs), so the
    count is linear in ``num_layers``: the embeddings and pooler, plus one block per layer. Building
    the 1- and 2-layer encoders measures both, which is exact and takes seconds where building
    a full-size preset takes up to a minute (the Keras functional graph, not the weights, is the
    cost: 49 s for ``mobilebert``'s 24 layers on a 2-core machine).

    Args:
        config (dict): Encoder keyword arguments (``preset_config(name)``).

    Returns:
        int: the parameter count of ``build(config)``.

    Example:
        >>> count_config_params(preset_config("tiny-bert")) == count_params(build("tiny-bert"))  # doctest: +SKIP
        True
    """
    layers = int(config["num_layers"])
    if layers <= 2:
        return count_params(build(config))
    one = count_params(build(dict(config, num_layers=1)))
    two = count_params(build(dict(config, num_layers=2)))
    return one + (layers - 1) * (two - one)


def preset_param_counts(names, progress=None):
    """Parameter counts of presets, counted once and cached by config hash.

    Counts are cached per config (and package version) under ``~/.cache/mobilebert-kit``; a
    changed preset gets a new hash and is counted again. ``progress(name, index, total)`` is called before
    counting each of the ``total`` presets not cached. Returns ``{name: parameter count}``.
    """
    cache_path = _cache_file()
    cache = _read_cache(cache_path)
    configs = {name: preset_config(name) for name in names}
    keys = {
        name: hashlib.sha256(json.dumps([mobilebert_kit.__version__, config], sort_keys=True).encode()).hexdigest()[:16]
        for name, config in configs.items()
    }
    missing = [name for name in names if keys[name] not in cache]
    for index, name in enumerate(missing):
        if progress:
            progress(name, index, len(missing))
        cache[keys[name]] = count_config_params(configs[name])
    if missing:
        try:
            with atomic_file(cache_path, "w") as handle:
                json.dump(cache, handle)
        except Exception:  # noqa: BLE001  (a read-only home must not break the listing)
            pass
    return {name: cache[keys[name]] for name in names}
