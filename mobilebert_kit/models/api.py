"""The model API: ``build``, ``save``, ``load``, ``count_params`` and named weights.

Saved-model format (a directory):

- ``config.json``: ``{"format": "mobilebert-kit", "format_version": 1,
  "architecture": "encoder" | head name, "encoder": {...}, "head": {...}}``
- ``model.safetensors``: every weight, keyed by its stable path
  (``transformer_layer_3/attention/query/kernel``); no pickles.
"""

import json
import os
from pathlib import Path

import numpy as np

from mobilebert_kit.backend import keras
from mobilebert_kit.errors import CheckpointError, ConfigError, MbkError, first_line, is_int
from mobilebert_kit.models.encoder import _CONFIG_KEYS, Encoder, check_fields
from mobilebert_kit.models.heads import HEADS
from mobilebert_kit.models.presets import preset_config
from mobilebert_kit.utils.atomic import UNCHECKED, atomic_dir
from mobilebert_kit.utils.output_check import OutputKind
from mobilebert_kit.utils.safetensors_io import read_safetensors, write_safetensors
from mobilebert_kit.utils.structured import load_json

FORMAT = "mobilebert-kit"
FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
# The output kind of a saved model (its marker lets a later save replace it; utils.output_check).
SAVED_MODEL = OutputKind("model", True, "a saved model directory")


def build(preset, **overrides):
    """Builds an encoder from a preset name (or a dict of Encoder arguments).

    Args:
        preset: a name from ``mbk presets`` or a dict of Encoder keyword arguments.
        **overrides: Encoder keyword arguments that replace the preset's.

    Returns:
        A built :class:`~mobilebert_kit.models.encoder.Encoder`.

    Example:
        >>> encoder = build("tiny-mobilebert", num_layers=3)
    """
    if not isinstance(preset, (dict, str)):
        raise ConfigError(f"a preset is a name (mbk presets lists them) or a dict of Encoder options, not "
                          f"{type(preset).__name__}")
    config = dict(preset) if isinstance(preset, dict) else preset_config(preset)
    unknown = sorted((set(config) | set(overrides)) - set(_CONFIG_KEYS))  # a dict's keys too, not only overrides
    if unknown:
        raise ConfigError(f"unknown option(s) {', '.join(unknown)}; valid options: {', '.join(_CONFIG_KEYS)}")
    config.update(overrides)
    return Encoder(**config)


def check_path_argument(value, what):
    """Raises ConfigError unless ``value`` is a path (str or os.PathLike); ``None`` or bytes were a raw TypeError."""
    if not isinstance(value, (str, os.PathLike)) or isinstance(value, bytes):
        raise ConfigError(f"expected {what} as a str or pathlib.Path, got {type(value).__name__}")


def max_positions(config):
    """The longest input an encoder takes: ``max_position_embeddings`` (less RoBERTa's ``position_offset``).

    An absolute position table has that many rows. Relative positions (NEZHA's functional ones, composite
    attention, DeBERTa's disentangled attention) gather their tables through index vectors built for that
    many tokens (``TransformerBlock``'s ``max_length``). Rotary positions (ModernBERT) need no table, but the
    checkpoint was trained to that length and its tokenizer truncates there. An open-length TFLite file cuts a
    longer text to it (``PositionClip``), which is also what lets the converter calibrate it (see
    ``PositionClip``); an export asked for more is refused in one line.
    """
    # RoBERTa's first token reads row pad_token_id + 1: the rows before it are never reached.
    return config["max_position_embeddings"] - config.get("position_offset", 0)


def default_seq_len(config, default=128):
    """``default`` tokens, or the encoder's positions when it has fewer (``tiny-bert``: 64)."""
    positions = max_positions(config)
    return min(default, positions) if positions else default


def check_positions(config, seq_len, option="--seq-len"):
    """Raises ConfigError when ``seq_len`` tokens do not fit an encoder's positions (:func:`max_positions`).

    Keras would otherwise fail deep inside the embedding's gather with a multi-line message. ``seq_len`` None:
    nothing to check; ``option``: the option the user set, named in the message.
    """
    limit = max_positions(config)
    if seq_len is not None and limit is not None and seq_len > limit:
        raise ConfigError(f"{option} {seq_len} exceeds the model's {limit} positions; use at most {limit}")


def named_weights(model, prefix=""):
    """Returns ``{path: variable}`` for every weight, keyed by stable layer names.

    Nested models contribute ``<model name>/<path>``; a weight shared by two
    layers (the tied MLM embedding) appears once, under its owner.
    """
    out, seen = {}, set()
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            for path, var in named_weights(layer, prefix + layer.name + "/").items():
                if id(var) not in seen:
                    seen.add(id(var))
                    out[path] = var
            continue
        for var in layer.weights:
            if id(var) in seen:
                continue
            seen.add(id(var))
            name = var.name.split(":")[0]
            marker = layer.name + "/"
            rel = name[name.index(marker):] if marker in name else f"{layer.name}/{name.rsplit('/', 1)[-1]}"
            path = prefix + rel
            if path in out:
                raise RuntimeError(f"two weights share the path {path}; give the layers distinct names")
            out[path] = var
    return out


def count_params(model):
    """Number of scalar parameters (each shared weight counted once)."""
    return int(sum(np.prod(v.shape) for v in named_weights(model).values()))


def check_finite_weights(arrays, source, error=CheckpointError, fix="re-export or re-train the checkpoint"):
    """Refuses NaN or Inf in any floating-point weight, naming the tensors, in one line.

    A single ``inf`` row of an embedding table passes validation on inputs
    that never use that token and then returns NaN on it in the user's app
    (issue 12), so every weight is checked, not only what the outputs reach. ``arrays``: name -> numpy array
    or variable; ``source`` names what holds them, ``error`` is the MbkError subclass raised, ``fix`` what the
    user should do.
    """
    bad = []
    for name, value in arrays.items():
        array = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
        if array.dtype.kind != "f":
            continue
        finite = np.isfinite(array)
        if not finite.all():
            nan = int(np.isnan(array).sum())
            bad.append(f"{name} ({nan} NaN, {int(array.size - finite.sum()) - nan} Inf)")
    if bad:
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise error(f"{source} has non-finite weights in {len(bad)} tensor(s): {shown}; {fix}")


def refuse_misfit(source, missing, unexpected, targets, arrays):
    """Raises the one CheckpointError for weights from ``source`` that do not fit a model (``mbk.load``, checkpoint
    import), if any: the counts in its message; each line of ``missing``, each tensor of ``unexpected`` (name ->
    array, that no weight reads) and each of ``arrays`` whose shape is not its ``targets`` variable's in its details.
    """
    misshaped = [f"misshaped {p}: expected shape {list(var.shape)}, got {list(np.shape(arrays[p]))}"
                 for p, var in targets.items() if p in arrays and tuple(var.shape) != tuple(np.shape(arrays[p]))]
    if not (missing or unexpected or misshaped):
        return
    raise CheckpointError(
        f"{source} does not fit the model: {len(missing)} missing, {len(unexpected)} unexpected, "
        f"{len(misshaped)} misshaped variable(s); check that the config matches the checkpoint",
        list(missing) + [f"unexpected {name} (shape {list(np.shape(array))})" for name, array in unexpected.items()]
        + misshaped,
    )


def assign_weights(model, arrays, source="checkpoint", allow_missing=(), check_finite=True):
    """Assigns ``{path: array}`` to ``model`` by name; reports every mismatch in one error.

    Args:
        model: the model to fill.
        arrays: mapping of weight path to numpy array.
        source: what the arrays came from, for the message.
        allow_missing: paths that may stay at their initial values.
        check_finite: refuse NaN/Inf weights (the importer checks them itself,
            under the checkpoint's own names, and passes False).

    Raises:
        CheckpointError: listing missing, unexpected and misshaped weights, or
        naming the tensors that hold NaN/Inf.
    """
    targets = named_weights(model)
    missing = [f"missing {p} (expected shape {list(var.shape)})" for p, var in targets.items()
               if p not in arrays and p not in allow_missing]
    refuse_misfit(source, missing, {p: array for p, array in arrays.items() if p not in targets}, targets, arrays)
    if check_finite:
        check_finite_weights(arrays, source)
    for path, var in targets.items():
        if path in arrays:
            var.assign(np.asarray(arrays[path], dtype=var.dtype.as_numpy_dtype))


def save(model, directory, *, overwrite=False, sources=(), extra=None, unchanged_since=UNCHECKED):
    """Saves an encoder or task model to ``directory`` (config JSON + safetensors).

    The directory appears only when complete: it is written under a temporary
    name and renamed. It may replace only a model saved before (or an empty
    directory); anything else is refused unless ``overwrite`` (``utils.atomic``).

    Args:
        model: an Encoder or a task model.
        directory: the output directory.
        overwrite: replace a directory or file that is not a saved model.
        sources: paths the model came from; the output may not be, contain or lie inside one.
        extra (Callable[[Path], object] | None): writes what travels beside the weights (tokenizer files,
            labels) into the directory before it appears, so the model never appears without them.
        unchanged_since: ``utils.atomic.file_signature(directory)`` when the caller checked it, before its work:
            a directory another command wrote since is refused, not replaced (``utils.atomic.atomic_dir``).

    Example:
        >>> save(build("tiny-bert"), "runs/tiny")  # doctest: +SKIP
    """
    if isinstance(model, Encoder):
        meta = {"architecture": "encoder", "encoder": model.config, "head": {}}
    elif getattr(model, "architecture", None) in HEADS:
        meta = {"architecture": model.architecture, **model.config}
    else:
        raise ConfigError(f"cannot save {type(model).__name__}: expected an Encoder or a task model")
    meta["encoder"] = {k: v for k, v in meta["encoder"].items() if k != "dtype"}
    arrays = {path: np.ascontiguousarray(var.numpy()) for path, var in named_weights(model).items()}
    with atomic_dir(directory, SAVED_MODEL, overwrite=overwrite, sources=sources,
                    unchanged_since=unchanged_since) as tmp:
        write_safetensors(tmp / WEIGHTS_FILE, arrays, metadata={"format": FORMAT})
        (tmp / CONFIG_FILE).write_text(
            json.dumps({"format": FORMAT, "format_version": FORMAT_VERSION, **meta}, indent=2, sort_keys=True) + "\n"
        )
        if extra is not None:
            extra(tmp)
    return Path(directory)


def is_saved_model(directory):
    """True if ``directory`` holds a model saved by :func:`save`."""
    config = Path(directory) / CONFIG_FILE
    if not config.is_file():
        return False
    try:
        return load_json(config, "the model config", expect=dict, error=CheckpointError).get("format") == FORMAT
    except CheckpointError:
        return False


def load(directory, **overrides):
    """Loads a model saved by :func:`save`; outputs are identical to the saved model's.

    Args:
        directory: the saved-model directory.
        **overrides: Encoder options that change outputs but not weights
            (``output_hidden_states``, ``attention_mask_value``, ...).
    """
    check_path_argument(directory, "a saved-model directory")
    check_fields(overrides)  # a bad keyword is the caller's, not the saved config's (it was blamed on the file)
    directory = Path(directory)
    config_path = directory / CONFIG_FILE
    if not config_path.is_file():
        raise CheckpointError(f"{directory} is not a saved model: {CONFIG_FILE} is missing; save one with `mbk import`")
    meta = load_json(config_path, "the model config", expect=dict, error=CheckpointError, fix="re-save the model")
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{config_path} is not a mobilebert-kit config; import it with `mbk import` first")
    version = meta.get("format_version", 0)
    if not is_int(version):
        raise CheckpointError(f"{config_path}: format_version must be an integer, got {version!r}; re-save the model")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"{directory} was saved by a newer mobilebert-kit (format {version}); upgrade")
    architecture = meta.get("architecture", "encoder")
    if not isinstance(architecture, str) or architecture not in ("encoder", *HEADS):
        raise CheckpointError(f"{config_path}: unknown architecture {architecture!r}; valid: encoder, {', '.join(HEADS)}")
    if not isinstance(meta.get("encoder"), dict) or not isinstance(meta.get("head", {}), dict):
        raise CheckpointError(f"{config_path}: 'encoder' (and 'head', if present) must be JSON objects; re-save the model")
    try:
        check_fields(meta.get("head", {}))  # num_labels: 1e9 would allocate a [hidden, 1e9] classifier
        encoder = build(dict(meta["encoder"]), **overrides)
        model = encoder if architecture == "encoder" else HEADS[architecture](encoder, **meta.get("head", {}))
    except ConfigError as err:  # Encoder's field table refused a value: say which file holds it
        raise CheckpointError(f"{config_path}: {err}") from err
    except MbkError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as err:
        # A hand-edited or corrupted config: Keras refuses the values in its own words.
        first = first_line(err)
        raise CheckpointError(f"{config_path} holds an invalid model config ({first}); re-save the model") from err
    arrays = read_safetensors(directory / WEIGHTS_FILE)
    assign_weights(model, arrays, source=str(directory / WEIGHTS_FILE))
    return model
