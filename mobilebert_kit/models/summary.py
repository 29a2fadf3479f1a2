"""Model summaries for the CLI: parameters by component and FLOPs at a sequence length."""

import hashlib
import json
import os
from pathlib import Path

import numpy as np

import mobilebert_kit
from mobilebert_kit.models.api import named_weights
from mobilebert_kit.errors import MbkError
from mobilebert_kit.models.flops import count_flops
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


def preset_param_counts(names, progress=None):
    """Parameter counts of presets, built once and cached by config hash.

    Building a full-size preset takes seconds, so counts are cached per
    config (and package version) under ``~/.cache/mobilebert-kit``; a changed
    preset gets a new hash and is rebuilt.
    """
    from mobilebert_kit.models.api import build, count_params
    from mobilebert_kit.models.presets import preset_config
    from mobilebert_kit.utils.atomic import atomic_file

    cache_path = _cache_file()
    try:
        cache = load_json(cache_path, "the preset cache", expect=dict)
    except MbkError:  # missing, corrupt or hand-edited (`null` crashed `mbk presets`): rebuilt and rewritten
        cache = {}
    # Only counts are kept: any other value would reach the table as a count.
    cache = {k: v for k, v in cache.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
    counts, dirty = {}, False
    for name in names:
        config = preset_config(name)
        key = hashlib.sha256(
            json.dumps([mobilebert_kit.__version__, config], sort_keys=True).encode()
        ).hexdigest()[:16]
        if key not in cache:
            cache[key] = count_params(build(config))
            dirty = True
        counts[name] = cache[key]
        if progress:
            progress(name)
    if dirty:
        try:
            with atomic_file(cache_path, "w") as handle:
                json.dump(cache, handle)
        except Exception:  # noqa: BLE001  (a read-only home must not break the listing)
            pass
    return counts
