"""The sentence pooling a sentence-transformers checkpoint declares: ``modules.json``, ``1_Pooling``, ``Normalize``.

A sentence-transformers model is a pipeline of modules listed in
``modules.json``: the Transformer (the encoder we import), a ``Pooling``
module whose ``config.json`` says how token vectors become one sentence vector,
and optionally ``Normalize`` (L2). all-MiniLM-L6-v2 lists
``Transformer -> 1_Pooling (mean tokens) -> 2_Normalize``; its
``2_Normalize`` directory does not exist (the module has no files), so only the
listed type counts. An app that embeds with such a model expects exactly that
vector: BERT's tanh ``pooled_output`` had cosine 0.01 to it.

Supported: mean over real tokens or the [CLS] token, each with or without
normalization; every other declaration is refused in one line.

The files are untrusted (docs/reliability.md, rows 117-121 and 289): read bounded, module paths kept inside the
checkpoint directory, symlinks refused except a hub cache snapshot's own links (:func:`cached_repository`).

Standard library only (no TensorFlow): the CLI and artifact readers may use it.
"""

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mobilebert_kit.errors import ConfigError
from mobilebert_kit.utils.atomic import write_text
from mobilebert_kit.utils.structured import load_json
from mobilebert_kit.utils.terminal import escape

MODULES_FILE = "modules.json"
# Both files are a few hundred bytes; 1 MiB refuses a wrong or hostile file long before it costs memory.
MAX_BYTES = 1 << 20
# modules.json is a list of flat objects (depth 2), the pooling config one flat object (depth 1).
MAX_DEPTH = 4
# At most this many modules: published pipelines have 2-5; a longer list is not a checkpoint we can export.
MAX_MODULES = 64

# sentence-transformers' Pooling config keys, each the pooling it selects as messages name it. Only
# SUPPORTED_MODES are exported: "mean" averages the token vectors where attention_mask is 1; "cls" takes position 0.
POOLING_KEYS = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_weightedmean_tokens": "weighted mean",
    "pooling_mode_lasttoken": "last token",
}
SUPPORTED_MODES = ("mean", "cls")
FIX = "pass --pooling mean|cls to export that pooling instead (the phone's vectors will differ from the checkpoint's)"


@dataclass(frozen=True)
class Pooling:
    """How token vectors become the sentence embedding.

    Args:
        mode (str): ``"mean"`` (average over real tokens) or ``"cls"`` (the first token's vector).
        normalize (bool): L2-normalize the pooled vector.

    Example:
        >>> Pooling("mean", True).describe()
        'mean pooling, L2-normalized'
    """

    mode: str
    normalize: bool

    def describe(self):
        """One phrase for reports and notes."""
        return f"{self.mode} pooling" + (", L2-normalized" if self.normalize else "")

    def to_dict(self):
        """The ``mbk_metadata`` form: ``{"mode", "normalize"}``."""
        return {"mode": self.mode, "normalize": self.normalize}


def read_pooling(directory, fix=FIX):
    """The pooling a sentence-transformers checkpoint declares, or None when ``directory`` has no ``modules.json``.

    An unsupported declaration (its message ends with ``fix``: :data:`FIX`, the export's; ``mbk import`` has
    no ``--pooling`` and says its own) or a hostile file (symlink, special file, oversized, too deep, wrong
    types, a path leaving the directory) is a one-line ConfigError.

    Example:
        >>> read_pooling("all-MiniLM-L6-v2/")  # doctest: +SKIP
        Pooling(mode='mean', normalize=True)
    """
    directory = Path(directory)
    modules_path = directory / MODULES_FILE
    if not os.path.lexists(modules_path):
        return None
    modules = _load(modules_path, directory, list)
    if len(modules) > MAX_MODULES:
        raise ConfigError(f"{escape(modules_path)} lists {len(modules)} modules (at most {MAX_MODULES}); "
                          "pass the sentence-transformers checkpoint directory")
    kinds = [_module_kind(module, index, modules_path) for index, module in enumerate(modules)]
    names = [kind for kind, _ in kinds]
    if "Pooling" not in names:
        raise ConfigError(f"{escape(modules_path)} declares no Pooling module (modules: {', '.join(names) or 'none'}); "
                          f"{fix}")
    expected = (["Transformer"] if names[:1] == ["Transformer"] else []) + ["Pooling"]
    rest = names[len(expected):]
    if names[:len(expected)] != expected or rest not in ([], ["Normalize"]):
        others = [n for n in names if n not in ("Transformer", "Pooling", "Normalize")]
        what = (f"a {', '.join(dict.fromkeys(others))} module" if others
                else f"the module order {' -> '.join(names)}")
        raise ConfigError(f"{escape(modules_path)} declares {what}; mobilebert-kit exports Transformer -> Pooling "
                          f"[-> Normalize] only: {fix}")
    pooling_dir = kinds[names.index("Pooling")][1]
    config_path = _inside(directory, pooling_dir, modules_path) / "config.json"
    config = _load(config_path, directory, dict)
    return Pooling(_mode(config, config_path, fix), normalize=bool(rest))


def _module_kind(module, index, modules_path):
    """``(class name, path)`` of one modules.json entry, type-checked."""
    if not isinstance(module, dict):
        raise ConfigError(f"{escape(modules_path)} entry {index} is not an object; "
                          "pass the sentence-transformers checkpoint directory (or fix modules.json)")
    kind, path = module.get("type"), module.get("path", "")
    if not isinstance(kind, str) or not kind:
        raise ConfigError(f"{escape(modules_path)} entry {index} has no module type string; fix modules.json")
    if not isinstance(path, str):
        raise ConfigError(f"{escape(modules_path)} entry {index} has a path that is not a string; fix modules.json")
    # The class name goes into error messages: a control character in it (the fuzzer wrote "\r") must not
    # break the one-line error, so it is escaped here, once; real names ("Pooling") are unchanged.
    return escape(kind.rsplit(".", 1)[-1]), path


def _mode(config, config_path, fix):
    """``"mean"`` or ``"cls"`` from a Pooling config, refusing every other or combined mode.

    sentence-transformers 5 writes one ``pooling_mode`` field (a name such as ``mean``, ``cls``, ``max``,
    ``lasttoken``, or a list of names for combined modes) instead of the :data:`POOLING_KEYS` flags."""
    if "pooling_mode" in config:
        value = config["pooling_mode"]
        chosen = [value] if isinstance(value, str) else value
        if not isinstance(chosen, list) or not chosen or not all(isinstance(n, str) for n in chosen):
            raise ConfigError(f"{escape(config_path)}: pooling_mode must be a mode name or a list of them, not "
                              f"{escape(repr(value))[:80]}; fix the pooling config")
    else:
        chosen = []
        for key, value in config.items():
            if key in POOLING_KEYS and not isinstance(value, bool):
                raise ConfigError(f"{escape(config_path)}: {key} must be true or false, not {escape(repr(value))}; "
                                  "fix the pooling config")
            if key in POOLING_KEYS and value:
                chosen.append(POOLING_KEYS[key])
    if len(chosen) != 1:
        declared = escape(", ".join(chosen)) or "none set"
        what = "several pooling modes at once" if chosen else "no pooling mode"
        raise ConfigError(f"{escape(config_path)} declares {what} ({declared}); mobilebert-kit exports one of mean, "
                          f"cls: {fix}")
    if chosen[0] not in SUPPORTED_MODES:
        raise ConfigError(f"{escape(config_path)} declares {escape(chosen[0])} pooling, which mobilebert-kit does not "
                          f"export (mean and cls only); {fix}")
    return chosen[0]


def _inside(directory, relative, modules_path):
    """``directory / relative``, refused when ``relative`` is absolute or climbs out of ``directory``."""
    parts = PurePosixPath(relative.replace("\\", "/")).parts
    if relative.startswith(("/", "\\")) or any(p == ".." for p in parts) or (parts and ":" in parts[0]):
        raise ConfigError(f"{escape(modules_path)} names the module path {escape(repr(relative))}, which leaves "
                          "the checkpoint directory; fix modules.json (module paths are relative, like 1_Pooling)")
    return directory.joinpath(*parts)


def cached_repository(directory):
    """The Hugging Face hub cache repository (``.../models--ORG--NAME``, resolved) that ``directory`` is a
    snapshot of (``.../models--ORG--NAME/snapshots/REV``), else None.

    Example:
        >>> cached_repository("/tmp/other") is None
        True
    """
    parts = Path(os.path.abspath(directory)).parts
    if len(parts) >= 4 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return Path(os.path.realpath(Path(*parts[:-2])))
    return None


def _load(path, directory, expect):
    """A JSON file of the checkpoint: no symlink on the way (but a hub snapshot's own links), a regular file,
    bounded."""
    relative = path.relative_to(directory)
    repository = cached_repository(directory)
    current = directory
    for part in relative.parts:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            raise ConfigError(f"{escape(current)} does not exist but {escape(directory / MODULES_FILE)} needs it; "
                              "copy the whole sentence-transformers checkpoint") from None
        except OSError as err:
            raise ConfigError(f"cannot read {escape(current)} ({escape(err.strerror or err)}); check its "
                              "permissions") from err
        if stat.S_ISLNK(info.st_mode) and not (
                repository and Path(os.path.realpath(current)).is_relative_to(repository)):
            raise ConfigError(f"{escape(current)} is a symbolic link; the pooling is read from the checkpoint's own "
                              "files: replace the link with the file it points to")
    return load_json(path, "the sentence-transformers file", max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, expect=expect,
                     fix="pass the checkpoint's own modules.json / 1_Pooling/config.json")


__all__ = ["Pooling", "read_pooling", "POOLING_KEYS", "write_pooling", "carry_pooling"]


# The modules.json entries (path, type) a derived model declares: the one layout read_pooling accepts.
_MODULES = {"Transformer": ("", "sentence_transformers.models.Transformer"),
            "Pooling": ("1_Pooling", "sentence_transformers.models.Pooling"),
            "Normalize": ("2_Normalize", "sentence_transformers.models.Normalize")}


def write_pooling(directory, pooling, dimension=None):
    """Declares ``pooling`` in ``directory`` as sentence-transformers does (``modules.json``, ``1_Pooling/``).

    A model derived from a sentence encoder (``mbk substitute``, ``mbk distill``) is still one: without the
    declaration ``mbk export --task auto`` would export its token features instead of the sentence vector an
    app embeds with, and ``--task embedding`` would refuse it. What is written is rebuilt from the
    :class:`Pooling` record, never copied, so it is always what :func:`read_pooling` accepts. ``dimension``
    is the token vector size (sentence-transformers' ``word_embedding_dimension``).

    Example:
        >>> write_pooling("out/student", Pooling("mean", True), 384)  # doctest: +SKIP
        >>> read_pooling("out/student")  # doctest: +SKIP
        Pooling(mode='mean', normalize=True)
    """
    directory = Path(directory)
    names = ["Transformer", "Pooling"] + (["Normalize"] if pooling.normalize else [])
    modules = [{"idx": i, "name": str(i), "path": _MODULES[name][0], "type": _MODULES[name][1]}
               for i, name in enumerate(names)]
    config = {key: mode == pooling.mode for key, mode in POOLING_KEYS.items()}
    if dimension is not None:
        config = {"word_embedding_dimension": int(dimension), **config}
    (directory / "1_Pooling").mkdir(exist_ok=True)
    for path, value in ((directory / "1_Pooling" / "config.json", config), (directory / MODULES_FILE, modules)):
        write_text(path, json.dumps(value, indent=2) + "\n")


def carry_pooling(source_dir, target_dir, dimension=None):
    """Declares in ``target_dir`` the pooling ``source_dir`` declares; returns it, or None when there is none.

    A declaration that cannot be read or is not exportable is a ConfigError (:func:`read_pooling`)."""
    if source_dir is None or not Path(source_dir).is_dir():
        return None
    pooling = read_pooling(source_dir)
    if pooling is not None:
        write_pooling(target_dir, pooling, dimension)
    return pooling
