"""Dependencies run one way: no module imports a layer above its own, and library code never uses the facade.

The layers are the rows of ``LAYERS`` (docs/architecture.md draws them): a
module may import its own top-level part and any part in a lower row, never
one in its row or above. So ``models/`` cannot import ``checkpoints/``,
``convert/`` cannot import ``training/`` (issue 13 item 7: both happened),
and nothing below ``cli/`` imports it. Imports inside functions count: they
are real dependencies, only deferred.

Library modules import the defining module (``models.api.build``), not the
package facade (``mbk.build``), so a file's real dependencies can be read at
its top (issue 13 item 3). ``import mobilebert_kit`` itself stays allowed:
it sets TensorFlow's environment and carries ``__version__``.
"""

import ast

import pytest

import mobilebert_kit
from tests.helpers import PACKAGE_DIR, PACKAGE_PARTS, imported_modules

# Lowest first. A part may import its own part and the parts of lower rows.
LAYERS = (
    ("errors",),
    ("utils",),
    ("backend",),
    ("artifacts", "layers", "losses", "data"),  # artifacts/: the TensorFlow-free floor (tests/test_artifact_floor.py)
    ("models",),
    ("checkpoints",),
    ("sources",),
    ("training", "convert", "profiler"),
    ("evaluation",),  # task metrics of exported files: reads convert/'s task records and training/'s scoring
    ("pipeline",),
    ("cli",),
)
RANK = {part: rank for rank, row in enumerate(LAYERS) for part in row}
FACADE_NAMES = set(mobilebert_kit._LAZY)  # what the package resolves lazily from the defining modules


def _part(module_path):
    """``convert`` for ``mobilebert_kit/convert/exporter.py``, ``backend`` for ``mobilebert_kit/backend.py``."""
    relative = module_path.relative_to(PACKAGE_DIR)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def arrows_up(source, part):
    """``[(line, module)]`` of the imports in ``source`` (a module of ``part``) that do not point down.

    Args:
        source (str): a module's text.
        part (str): its top-level part of the package (``"convert"``).

    Example:
        >>> arrows_up("def f():\\n    from mobilebert_kit.convert import exporter\\n", "models")
        [(2, 'mobilebert_kit.convert')]
    """
    found = []
    # Strings are not counted: schema tags ("mobilebert_kit.pipeline") read like module paths, and the one
    # lazy-import table is the facade's (mobilebert_kit/__init__.py, not scanned).
    for line, module in imported_modules(source, strings=False):
        names = module.split(".")
        if names[0] != "mobilebert_kit" or len(names) == 1:
            continue
        target = names[1]
        if target in FACADE_NAMES:
            continue  # reported by facade_uses
        if target != part and RANK.get(target, len(LAYERS)) >= RANK[part]:
            found.append((line, module))
    return found


def facade_uses(source):
    """``[(line, name)]`` where ``source`` reaches a model API through the package facade.

    Counts ``from mobilebert_kit import build`` and ``mbk.build`` after ``import mobilebert_kit as mbk``.

    Example:
        >>> facade_uses("import mobilebert_kit as mbk\\nmbk.save(model, 'out')\\n")
        [(2, 'save')]
    """
    tree = ast.parse(source)
    aliases = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for a in node.names if a.name == "mobilebert_kit"}
    found = [(line, module.split(".", 1)[1]) for line, module in imported_modules(source, strings=False)
             if module.startswith("mobilebert_kit.") and module.split(".")[1] in FACADE_NAMES]
    found += [(node.lineno, node.attr) for node in ast.walk(tree)
              if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
              and node.attr in FACADE_NAMES]
    return sorted(found)


def _library_modules():
    return sorted(p for p in PACKAGE_DIR.rglob("*.py") if p != PACKAGE_DIR / "__init__.py")


def test_every_part_of_the_package_has_a_layer():
    assert PACKAGE_PARTS - {"__init__"} == set(RANK), "add the new part to LAYERS and to docs/architecture.md"


def test_no_import_points_up_or_sideways():
    bad = {str(p.relative_to(PACKAGE_DIR)): hits for p in _library_modules()
           if (hits := arrows_up(p.read_text(), _part(p)))}
    assert not bad, f"imports against the layering (LAYERS, docs/architecture.md): {bad}"


def test_library_modules_import_the_defining_module_not_the_facade():
    bad = {str(p.relative_to(PACKAGE_DIR)): hits for p in _library_modules() if (hits := facade_uses(p.read_text()))}
    assert not bad, f"import these from their defining module (mobilebert_kit._LAZY names it): {bad}"


@pytest.mark.parametrize(
    "source, part, expected",
    [
        ("from mobilebert_kit.checkpoints.safetensors_io import read\n", "models", ["mobilebert_kit.checkpoints.safetensors_io"]),
        ("def f():\n    from mobilebert_kit.convert.model_source import copy\n", "training", ["mobilebert_kit.convert.model_source"]),
        ("from mobilebert_kit.training import losses\n", "convert", ["mobilebert_kit.training"]),
        ("import mobilebert_kit.cli.main\n", "pipeline", ["mobilebert_kit.cli.main"]),
        ("SCHEMA = 'mobilebert_kit.pipeline'\n", "utils", []),
        ("from mobilebert_kit.models.api import build\nfrom mobilebert_kit.convert import rebuild\n", "convert", []),
        ("import mobilebert_kit\nfrom mobilebert_kit.errors import MbkError\n", "utils", []),
    ],
)
def test_the_layer_scan_finds_arrows_up(source, part, expected):
    assert [module for _, module in arrows_up(source, part)] == expected


def test_the_facade_scan_finds_every_spelling():
    source = ("import mobilebert_kit\nimport mobilebert_kit as mbk\nfrom mobilebert_kit import load\n"
              "mobilebert_kit.build('x')\nmbk.import_checkpoint('d')\nversion = mbk.__version__\n")
    assert facade_uses(source) == [(3, "load"), (4, "build"), (5, "import_checkpoint")]
