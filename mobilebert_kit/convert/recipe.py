"""Recipe: a declarative export target in TOML (``export/NAME.toml``), run by ``mbk export --recipe``.

A recipe names the source, optional operator substitutions, the quantization, the formats, the sequence
length, calibration and validation data and the validation thresholds; one file per deployment target. Its
tables, keys and rules are docs/recipes.md's.

Every key is checked (numbers against the bounds their commands declare, as the command line's flags are).
Relative paths resolve against the recipe's directory (the recipe path itself resolved first, so
``cd export && mbk export --recipe default.toml`` works) and must stay inside it. Outputs (``out_dir``
joined with ``name``) are resolved with symlinks followed, so a symlink cannot carry a write outside;
inputs may be symlinks the user placed inside the directory, so a recipe alone cannot read or write files
elsewhere.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from mobilebert_kit.convert.errors import RecipeError
from mobilebert_kit.convert.plan.export_options import EVALUATE_LIMITS, SUBSTITUTE_LIMITS, ExportOptions, recipe_keys
from mobilebert_kit.convert.plan.export_plan import plan_export
from mobilebert_kit.convert.quantization.modes import THRESHOLD_KEYS, THRESHOLD_LIMITS
from mobilebert_kit.errors import ConfigError
from mobilebert_kit.models.presets import PRESETS
from mobilebert_kit.utils.input_paths import check_input_path
from mobilebert_kit.utils.limits import check_number
from mobilebert_kit.utils.structured import load_toml
from mobilebert_kit.utils.terminal import escape

# Keys that set an ExportOptions field come from its declaration (export_options.recipe_keys);
# the rest place the artifacts, name the source, tune the substitution or override a threshold.
_OPTION_KEYS = recipe_keys()
_OWN_KEYS = {
    "source": {"model": str, "preset": str},
    "substitute": {"norm": str, "act": str, "intermediate_size": int, "fit": bool, "seq_len": int, "learning_rate": float, "batch_size": int},
    "export": {"formats": list, "out_dir": str, "name": str},
    "calibration": {},
    "validation": {k: float for k in THRESHOLD_KEYS},
    # `mbk pipeline` scores every exported file on [evaluation] data (limit, min_ratio: `mbk evaluate`'s
    # options); data and max_drop are also ExportOptions fields (quantize = "auto" holds the metric on data).
    "evaluation": {"limit": int, "min_ratio": float},
    # `mbk pipeline` times every file on the sentences of [profile] text too (`mbk profile --text`).
    "profile": {"text": str},
}
# The bounds of the numbers above, from the commands that own them.
_OWN_LIMITS = {"substitute": SUBSTITUTE_LIMITS, "validation": THRESHOLD_LIMITS, "evaluation": EVALUATE_LIMITS}
_SECTIONS = {table: {**own, **{key: option.type for key, option in _OPTION_KEYS.get(table, {}).items()}}
             for table, own in _OWN_KEYS.items()}
_FORMAT_TABLES = ("tflite", "onnx")
# [substitute] keys that name a substitution record (convert/prepare/substitution.py: SUBSTITUTIONS), as mbk substitute's flags.
_SUBSTITUTION_KEYS = {"norm": "norm", "act": "act", "intermediate_size": "ffn"}
_PATH_KEYS = {("source", "model"), ("substitute", "data"), ("export", "out_dir"), ("calibration", "data"),
              ("validation", "data"), ("evaluation", "data"), ("profile", "text")}
_OUTPUT_KEYS = {("export", "out_dir")}
# Keys of [export] that place the artifacts; a per-format table ([export.onnx]) cannot move them.
_PLACEMENT_KEYS = ("formats", "out_dir", "name")
_NONEMPTY_LISTS = {("export", "formats")}
# A recipe is a page of TOML; a larger file is not one (and is not read whole to find out).
MAX_RECIPE_BYTES = 1 << 20
# Root, [table], [table.sub], a list, its values: deeper is no recipe.
RECIPE_DEPTH = 8


@dataclass
class Recipe:
    """A parsed, checked recipe: its file and its checked TOML tables (paths already resolved).

    Example:
        >>> recipe = Recipe.load("export/minilm-dynamic.toml")  # doctest: +SKIP
        >>> [o.out for o in recipe.options()]  # doctest: +SKIP
        ['export/out/minilm-dynamic.tflite', 'export/out/minilm-dynamic.onnx']
    """

    path: Path
    tables: dict

    @classmethod
    def load(cls, path):
        """Reads and checks a recipe; raises RecipeError (one line) on any problem."""
        try:
            check_input_path(path, "recipe")
        except ConfigError as err:
            raise RecipeError(str(err)) from err
        # Resolved first: relative to "." the containment check of its paths had no directory to compare with.
        path = Path(os.path.realpath(os.fsdecode(path)))
        # The one reader of untrusted TOML: regular files only, bounded size and depth, one-line errors.
        raw = load_toml(path, "recipe", max_bytes=MAX_RECIPE_BYTES, max_depth=RECIPE_DEPTH, error=RecipeError,
                        fix="a recipe is a short TOML file of tables of keys (see export/default.toml)")
        return cls(path, _check(path, raw))

    def source_spec(self):
        source = self.tables.get("source", {})
        if ("model" in source) == ("preset" in source):
            raise RecipeError(f"{escape(self.path)}: [source] needs exactly one of model = \"path\" or preset = \"name\"")
        return source.get("model") or source["preset"]

    def options(self, validate=True):
        """One :class:`~mobilebert_kit.convert.plan.export_options.ExportOptions` per format."""
        export = dict(self.tables.get("export", {}))
        formats = export.pop("formats", ["tflite"])
        per_format = {fmt: export.pop(fmt, {}) for fmt in _FORMAT_TABLES}
        out_dir = export.pop("out_dir", str(self.path.parent / "out"))
        name = export.pop("name", self.path.stem)
        _check_name(self.path, name)
        validation = dict(self.tables.get("validation", {}))
        substitute = dict(self.tables.get("substitute", {}))
        options = []
        for fmt in formats:
            settings = {**export, **per_format.get(fmt, {})}
            # out_dir is checked already; the artifact itself (a symlink planted at out/NAME.tflite) is checked here.
            artifact = os.path.relpath(os.path.join(out_dir, f"{name}.{fmt}"), os.path.realpath(self.path.parent))
            out = _inside(self.path, "[export] name", artifact, output=True)
            tables = {**self.tables, "export": settings}
            fields = {option.field: _option_value(tables[table][key])
                      for table, keys in _OPTION_KEYS.items() for key, option in keys.items()
                      if key in tables.get(table, {})}
            opts = ExportOptions(
                source=self.source_spec(), format=fmt, out=out, validate=validate, named_by="recipe",
                thresholds={k: validation[k] for k in THRESHOLD_KEYS if k in validation},
                substitutions={record: substitute[key] for key, record in _SUBSTITUTION_KEYS.items()
                               if key in substitute}, **fields,
            )
            try:
                opts.check()
            except Exception as err:
                raise RecipeError(f"{escape(self.path)}: {err}") from err
            options.append(opts)
        return options

    def run(self, validate=True, log=print, score=None):
        """Exports every format of the recipe (the source is loaded and substituted once); ``score`` as in
        :func:`~mobilebert_kit.convert.exporter.export`."""
        from mobilebert_kit.convert.exporter import export

        all_options = self.options(validate)
        source = self.prepare(all_options[0], log=log)
        return [export(opts, source=source, log=log, score=score) for opts in all_options]

    def prepare(self, options, log=print):
        """The recipe's source, loaded, substituted and recovered once for all its exports.

        The recovery runs at ``[substitute] seq_len`` when given, else at the length the export plan decides
        for ``options`` (the source's own facts: a 64-position preset recovers at 64). ``options``: any of
        :meth:`options` (they share the source and ``[substitute]``). Returns the ModelSource to pass as
        ``export(..., source=...)``.
        """
        from mobilebert_kit.convert.prepare.source import Recovery, prepare_source, source_facts
        from mobilebert_kit.sources.model_source import ModelSource

        from mobilebert_kit.convert.prepare.substitution import SUBSTITUTIONS

        table = self.tables.get("substitute", {})
        for key, record in _SUBSTITUTION_KEYS.items():  # named as the recipe writes them, before the source loads
            if key in table:
                try:
                    SUBSTITUTIONS[record].validate(table[key], f"[substitute] {key}")
                except ConfigError as err:
                    raise RecipeError(f"{escape(self.path)}: {err}") from err
        loaded = ModelSource.load(options.source, head=options.head)
        if not options.substitutions:
            return loaded
        seq_len = table.get("seq_len") or plan_export(options, source_facts(loaded, options)).seq_len
        recovery = Recovery(steps=options.recover_steps, data=options.recover_data, seq_len=seq_len,
                            **{key: table[key] for key in ("learning_rate", "batch_size", "fit") if key in table})
        return prepare_source(loaded, options.substitutions, recovery, log=log).source


def _option_value(value):
    """A recipe value as its ExportOptions field holds it: TOML lists become tuples (``[]`` keeps nothing float)."""
    return tuple(value) if isinstance(value, list) else value


def _inside(recipe, what, value, output=False):
    """Resolves a path of the recipe against its (resolved) directory; rejects anything outside it.

    Inputs are checked lexically, so a symlink the user placed inside the directory may point elsewhere
    (documented above); outputs are resolved with every symlink followed, so no write leaves the directory.
    """
    if "\0" in value or not value.strip():
        raise RecipeError(f"{escape(recipe)}: {what} = {escape(repr(value))} is not a path")
    if os.path.isabs(value):
        raise RecipeError(f"{escape(recipe)}: {what} = {escape(repr(value))} is absolute; use a path inside "
                          f"{escape(recipe.parent)}")
    base = os.path.realpath(recipe.parent)
    joined = os.path.normpath(os.path.join(base, value))
    # No ".." at all: after a symlinked component the kernel's ".." and normpath's disagree.
    escapes = ".." in Path(value).parts or os.path.commonpath([base, joined]) != base
    if output and not escapes:
        escapes = os.path.commonpath([base, os.path.realpath(joined)]) != base
    if escapes:
        raise RecipeError(f"{escape(recipe)}: {what} = {escape(repr(value))} escapes the recipe's directory "
                          f"{escape(recipe.parent)}; use a path inside it")
    return joined


def _check_name(recipe, name):
    """``[export] name`` is a file name: the artifacts are ``out_dir/name.FORMAT``."""
    # Control characters (a newline, ESC) made files such as "a\nb.tflite" and terminal escapes in every listing.
    if not name.strip() or name in (".", "..") or "/" in name or os.sep in name or \
            any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise RecipeError(f"{escape(recipe)}: [export] name = {escape(repr(name))} must be a file name without "
                          "directories; set the directory with out_dir")


def _limit_of(section, key):
    """The bounds of a recipe number: its option's declared ``limit``, else its own table's."""
    option = _OPTION_KEYS.get(section, {}).get(key)
    return option.limit if option is not None else _OWN_LIMITS.get(section, {}).get(key)


def _check(path, raw):
    """Type- and key-checks every table; resolves paths."""
    tables = {}
    for section, values in raw.items():
        if section not in _SECTIONS:
            raise RecipeError(f"{escape(path)}: unknown table [{section}]; valid: {', '.join(_SECTIONS)}")
        if not isinstance(values, dict):
            raise RecipeError(f"{escape(path)}: [{section}] must be a table")
        tables[section] = _check_table(path, section, values, allow_formats=section == "export")
    return tables


def _check_table(path, section, values, allow_formats=False):
    schema = _SECTIONS[section]
    out = {}
    for key, value in values.items():
        if allow_formats and key in _FORMAT_TABLES:
            if not isinstance(value, dict):
                raise RecipeError(f"{escape(path)}: [export.{key}] must be a table")
            out[key] = _check_table(path, section, value)
            moved = [k for k in _PLACEMENT_KEYS if k in out[key]]
            if moved:
                raise RecipeError(f"{escape(path)}: [export.{key}] cannot set {moved[0]}; set it in [export]")
            continue
        if key not in schema:
            valid = ", ".join(list(schema) + (list(_FORMAT_TABLES) if allow_formats else []))
            raise RecipeError(f"{escape(path)}: unknown key {escape(repr(key))} in [{section}]; valid: {valid}")
        expected = schema[key]
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise RecipeError(f"{escape(path)}: [{section}] {key} must be a {expected.__name__}, got {escape(repr(value))}")
        if expected is list and not all(isinstance(v, str) and v.strip() for v in value):
            raise RecipeError(f"{escape(path)}: [{section}] {key} must be a list of non-empty strings")
        if (section, key) in _NONEMPTY_LISTS and not value:
            raise RecipeError(f"{escape(path)}: [{section}] {key} is empty; list at least one, e.g. {key} = [\"tflite\"]")
        if expected is list and len(set(value)) != len(value):
            raise RecipeError(f"{escape(path)}: [{section}] {key} lists a value twice; list each once")
        if expected is str and (not value.strip() or "\0" in value):
            raise RecipeError(f"{escape(path)}: [{section}] {key} is empty; give a value or remove the key")
        limit = _limit_of(section, key)
        if expected in (int, float) and limit:
            try:
                value = check_number(f"[{section}] {key}", value, limit)
            except ConfigError as err:
                raise RecipeError(f"{escape(path)}: {err}") from err
        if (section, key) == ("source", "preset") and value not in PRESETS:
            # Found at load time, not at the first export stage after the output directory was made.
            raise RecipeError(f"{escape(path)}: [source] preset = {escape(repr(value))} is not a preset; valid: "
                              f"{', '.join(PRESETS)}")
        if (section, key) in _PATH_KEYS:
            value = _inside(path, f"[{section}] {key}", value, output=(section, key) in _OUTPUT_KEYS)
        out[key] = value
    return out
