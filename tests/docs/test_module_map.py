"""docs/architecture.md's module map names every module and subpackage of mobilebert_kit/, and nothing else.

A module is every ``.py`` file under ``mobilebert_kit/`` except ``__init__.py``
(written as its path relative to the package: ``convert/exporter.py``,
``backend.py``); a subpackage is every directory with an ``__init__.py``
(written ``convert/``). A new module that the map does not mention, or a map
row naming a module that was removed, fails the test: the map cannot rot.
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_runner import DOCS, REPO  # noqa: E402

PACKAGE = REPO / "mobilebert_kit"
ARCHITECTURE = DOCS / "architecture.md"


def package_entries(package):
    """Modules (``sub/name.py``, ``name.py``) and subpackages (``sub/``) of ``package``, relative to it."""
    package = Path(package)
    modules = {
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }
    subpackages = {
        p.parent.relative_to(package).as_posix() + "/"
        for p in package.rglob("__init__.py")
        if p.parent != package and "__pycache__" not in p.parts
    }
    return modules | subpackages


def _mentioned(entry, text):
    # Not preceded by a path character: the root module `errors.py` must be named
    # on its own, `convert/errors.py` does not count for it.
    return re.search(rf"(?<![\w/.-]){re.escape(entry)}(?![\w])", text) is not None


def unmentioned(package, text):
    """Entries of ``package`` that ``text`` does not name."""
    return sorted(e for e in package_entries(package) if not _mentioned(e, text))


def map_rows(text):
    """First-cell paths of the tables in the ``## Module map`` section (``.py`` files only)."""
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\|\s*`([\w/]+\.py)`\s*\|", section, flags=re.MULTILINE)


def test_every_module_and_subpackage_is_in_the_map():
    text = ARCHITECTURE.read_text()
    missing = unmentioned(PACKAGE, text)
    assert not missing, (
        f"docs/architecture.md does not mention {missing}: add a line to its module map saying what each is for"
    )


def test_every_module_the_map_names_exists():
    rows = map_rows(ARCHITECTURE.read_text())
    assert len(rows) >= len([e for e in package_entries(PACKAGE) if e.endswith(".py")])
    gone = sorted(r for r in rows if not (PACKAGE / r).is_file())
    assert not gone, f"docs/architecture.md's module map names modules that do not exist: {gone}"
    assert len(rows) == len(set(rows)), "a module appears in two rows of the map"


def test_the_check_catches_a_missing_module_and_subpackage(tmp_path):
    """The checker itself: a fake package with one module and one subpackage the text leaves out."""
    package = tmp_path / "pkg"
    (package / "convert").mkdir(parents=True)
    (package / "newpkg").mkdir()
    for path in ("__init__.py", "errors.py", "convert/__init__.py", "convert/errors.py",
                 "convert/new_pass.py", "newpkg/__init__.py"):
        (package / path).write_text("")
    text = "| `convert/` | ... |\n| `convert/errors.py` | ... |\n| `errors.py` | ... |\n"
    assert unmentioned(package, text) == ["convert/new_pass.py", "newpkg/"]
    # The root errors.py is not satisfied by convert/errors.py alone.
    assert unmentioned(package, "`convert/` `convert/errors.py` `convert/new_pass.py` `newpkg/`") == ["errors.py"]
    # And a row for a removed module is found by the reverse check.
    assert map_rows("## Module map\n\n| `convert/gone.py` | x |\n\n## Next\n| `other.py` | y |\n") == ["convert/gone.py"]
