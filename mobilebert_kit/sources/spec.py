"""What a model spec names, decided once and without loading TensorFlow.

A spec is a preset name, a dict of Encoder arguments, a model object, or a
path: a directory saved by ``mbk.save``, a Hugging Face directory or
``.safetensors`` file, or an original TF1 checkpoint (prefix, ``.index`` file
or directory). An existing path wins over a preset of the same name: a
directory the user made is what they mean. The checkpoint formats are told
apart by :func:`mobilebert_kit.checkpoints.importer.checkpoint_format`, the
one TF1 detection.

Callers that take only some kinds say so with ``accept`` (a teacher must be
trained, so it takes no preset); the refusal names the kinds they take.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from mobilebert_kit.checkpoints.importer import checkpoint_format
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.models.presets import PRESETS

# kind: how describe() and refusals name it. Presets and configs have random weights.
KINDS = {
    "preset": "preset",
    "config": "Encoder config",
    "saved": "saved model",
    "hf": "Hugging Face checkpoint",
    "tf1": "TF1 checkpoint",
    "model": "model",
}


@dataclass(frozen=True)
class SourceSpec:
    """A classified spec: its ``kind`` (one of ``KINDS``), the ``name`` the user passed, its ``location``
    (the preset name, the config dict, the model object, the checkpoint directory or the TF1 prefix) and
    the ``directory`` holding the vocabulary and labels (None for presets, configs and model objects).

    Example:
        >>> classify("tiny-bert")
        SourceSpec(kind='preset', name='tiny-bert', location='tiny-bert', directory=None)
    """

    kind: str
    name: str
    location: object
    directory: Path = None


def locate(spec):
    """``"path"`` when ``spec`` names an existing path or TF1 prefix, ``"preset"`` when a preset, else None.

    A path wins over a preset of the same name (module docstring). Nothing is read: what the path holds is
    :func:`classify`'s question. Commands that word the refusal in their own flag (``mbk pipeline --source``)
    call this; the rest call :func:`classify`.

    Example:
        >>> locate("tiny-bert")
        'preset'
    """
    if Path(spec).exists() or Path(f"{spec}.index").exists():
        return "path"
    return "preset" if str(spec) in PRESETS else None


def classify(spec, accept=tuple(KINDS), what="model"):
    """Classifies ``spec`` without loading it: a :class:`SourceSpec` of one of the kinds in ``accept``.

    ``what`` names the spec in messages (``"model"``, ``"teacher"``, ``"--source"``). Neither a path nor a
    preset, or a kind not accepted, is a ConfigError; a path that is no checkpoint a CheckpointError."""
    if isinstance(spec, dict):
        found = SourceSpec("config", "config", spec)
    elif not isinstance(spec, (str, os.PathLike)):
        found = SourceSpec("model", getattr(spec, "name", "model"), spec)
    elif (where := locate(spec)) == "path":
        kind, location = checkpoint_format(spec)
        directory = location if kind != "tf1" else Path(location).parent
        found = SourceSpec(kind, str(spec), location, Path(directory))
    elif where == "preset":
        found = SourceSpec("preset", str(spec), str(spec))
    else:
        raise ConfigError(
            f"{what} {spec} is neither an existing path nor a preset (not a directory or a preset name); "
            f"valid presets: {', '.join(PRESETS)} (mbk presets lists them)"
        )
    if found.kind not in accept:
        names = [KINDS[k] for k in accept]
        choices = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        raise ConfigError(f"{what} {found.name} is a {KINDS[found.kind]}; pass a {choices}")
    return found
