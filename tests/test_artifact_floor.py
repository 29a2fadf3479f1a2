"""The TensorFlow-free floor: ``artifacts/`` and ``profiler/`` never import TensorFlow, Keras or the model code.

Two checks, because each misses what the other sees: the source scan finds
an import inside a function that no test happens to call (the way the floor
used to be kept TF-free: by care at ~300 function-level imports, issue 13
item 9); the subprocess import finds a dependency pulled in indirectly, for
example through a ``utils/`` module that starts importing TensorFlow.
"""

import subprocess
import sys

import pytest

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.artifacts.metadata import parse_mbk_metadata
from mobilebert_kit.artifacts.taxonomy import variant_name, variant_ops
from tests.helpers import PACKAGE_DIR as PACKAGE
from tests.helpers import imported_modules

FLOOR_PACKAGES = ("artifacts", "profiler")
# Third-party roots that load TensorFlow (tf2onnx and tfmot import it on import).
FORBIDDEN_ROOTS = ("tensorflow", "tf_keras", "keras", "tf2onnx", "tensorflow_model_optimization")
# mobilebert_kit modules the floor may import: the shared base and the floor itself.
# The profiler sits on the artifacts floor; the artifacts floor imports no profiler code.
ALLOWED_INTERNAL = {
    "artifacts": ("mobilebert_kit.errors", "mobilebert_kit.utils", "mobilebert_kit.artifacts"),
    "profiler": ("mobilebert_kit.errors", "mobilebert_kit.utils", "mobilebert_kit.artifacts", "mobilebert_kit.profiler"),
}


def forbidden_imports(source, allowed):
    """``[(line, module)]`` of every import in ``source`` outside the floor, at any depth.

    Reads :func:`tests.helpers.imported_modules` (imports anywhere, ``from
    mobilebert_kit import name``, lazy-import strings); the bare package is
    TensorFlow-free (its public API loads lazily), its names are not.

    Args:
        source (str): a module's text.
        allowed (tuple[str, ...]): ``mobilebert_kit`` module prefixes the module may import.

    Example:
        >>> forbidden_imports("def f():\\n    import tensorflow as tf\\n", ("mobilebert_kit.errors",))
        [(2, 'tensorflow')]
    """
    found = []
    for line, module in imported_modules(source, FORBIDDEN_ROOTS):
        root = module.split(".")[0]
        if root in FORBIDDEN_ROOTS:
            found.append((line, module))
        elif root == "mobilebert_kit" and module != "mobilebert_kit" and not any(module == a or module.startswith(a + ".") for a in allowed):
            found.append((line, module))
    return found


@pytest.mark.parametrize("package", FLOOR_PACKAGES)
def test_floor_source_imports_no_tensorflow_or_model_code(package):
    bad = {
        str(path.relative_to(PACKAGE)): hits
        for path in sorted((PACKAGE / package).rglob("*.py"))
        if (hits := forbidden_imports(path.read_text(), ALLOWED_INTERNAL[package]))
    }
    assert not bad, f"{package}/ must stay TensorFlow-free (see docs/architecture.md); imports found: {bad}"


@pytest.mark.parametrize(
    "source, module",
    [
        ("import tensorflow as tf\n", "tensorflow"),
        ("def f():\n    from tf_keras import layers\n", "tf_keras"),
        ("def f():\n    import keras\n", "keras"),
        ("def f():\n    from mobilebert_kit.models.api import build\n", "mobilebert_kit.models.api"),
        ("from mobilebert_kit.convert import exporter\n", "mobilebert_kit.convert"),
        ("def f():\n    from mobilebert_kit import build\n", "mobilebert_kit.build"),
        ("_LAZY = {'x': 'mobilebert_kit.training.distiller'}\n", "mobilebert_kit.training.distiller"),
        ("import mobilebert_kit.checkpoints.importer\n", "mobilebert_kit.checkpoints.importer"),
        ("import tf2onnx\n", "tf2onnx"),
    ],
)
def test_the_scan_finds_every_kind_of_import(source, module):
    assert [m for _, m in forbidden_imports(source, ALLOWED_INTERNAL["artifacts"])] == [module]


def test_the_scan_allows_the_floor_and_its_base():
    source = ("import numpy as np\nimport onnx\nimport mobilebert_kit\nfrom mobilebert_kit.errors import MbkError\n"
              "SCHEMA = 'mobilebert_kit.profile'\n"
              "from mobilebert_kit.utils.quiet import quiet_fd2\nfrom mobilebert_kit.artifacts import taxonomy\n"
              "'''Docstrings may name mobilebert_kit.convert in a sentence.'''\n")
    assert forbidden_imports(source, ALLOWED_INTERNAL["artifacts"]) == []
    # The artifacts floor sits below the profiler, so it may not import it.
    assert forbidden_imports("from mobilebert_kit.profiler import host\n", ALLOWED_INTERNAL["artifacts"]) == [
        (1, "mobilebert_kit.profiler")]


def test_importing_every_floor_module_loads_no_tensorflow():
    code = (
        "import importlib, pkgutil, sys\n"
        "import mobilebert_kit.artifacts, mobilebert_kit.profiler\n"
        "names = []\n"
        "for package in (mobilebert_kit.artifacts, mobilebert_kit.profiler):\n"
        "    for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(info.name)\n"
        "        names.append(info.name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in %r or m.startswith(%r))\n"
        "print('MODULES', len(names))\n"
        "print('IMPORTED', bad)\n"
    ) % (FORBIDDEN_ROOTS, ("mobilebert_kit.models", "mobilebert_kit.convert", "mobilebert_kit.training",
                            "mobilebert_kit.checkpoints", "mobilebert_kit.layers", "mobilebert_kit.backend"))
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    count = len([p for pkg in FLOOR_PACKAGES for p in (PACKAGE / pkg).rglob("*.py") if p.name != "__init__.py"])
    assert f"MODULES {count}" in completed.stdout  # every module was imported, not just the packages
    assert "IMPORTED []" in completed.stdout, completed.stdout


# ------------------------------------------------------------------ one taxonomy, one metadata parser
@pytest.mark.parametrize(
    "ops, fmt, name",
    [
        ({"MEAN", "FULLY_CONNECTED", "RELU"}, "tflite", "NoNorm+ReLU"),  # mean pooling is not LayerNorm
        ({"MEAN", "SQUARED_DIFFERENCE", "RSQRT", "ERF"}, "tflite", "LayerNorm+GELU"),  # exact GELU lowers to ERF
        ({"POW", "FULLY_CONNECTED"}, "tflite", "no LayerNorm/GELU/ReLU found"),  # a lone POW is not GELU
        ({"MatMul", "com.microsoft.SkipLayerNormalization", "com.microsoft.FastGelu"}, "onnx", "LayerNorm+GELU"),
        ({"ReduceMean", "Pow", "Sqrt", "Erf"}, "onnx", "LayerNorm+GELU"),  # torch's LayerNorm: Pow is x**2
        ({"ReduceMean", "MatMul", "Relu"}, "onnx", "NoNorm+ReLU"),
    ],
)
def test_one_variant_rule_for_inspect_and_profile(ops, fmt, name):
    assert variant_name(ops, fmt) == name
    left = variant_ops(dict.fromkeys(ops, 1), fmt)
    assert bool(left["layer_norm"]) == name.startswith("LayerNorm") and bool(left["gelu"]) == name.endswith("GELU")


@pytest.mark.parametrize(
    "entries, fragment",
    [
        ({"mbk_metadata": b"[1, 2]"}, "must hold a JSON object"),
        ({"mbk_metadata": b'"text"'}, "must hold a JSON object"),
        ({"mbk_metadata": b"{not json"}, "not valid JSON"),
        ({"mbk_metadata": b"{}", "mbk_vocab": b"\xff\xfe"}, "not UTF-8"),
    ],
)
def test_bad_metadata_is_one_artifact_error(entries, fragment):
    with pytest.raises(ArtifactError, match=fragment) as caught:
        parse_mbk_metadata(entries, "m.onnx")
    assert "m.onnx" in str(caught.value) and "\n" not in str(caught.value)  # names the file, one line


def test_metadata_round_trip():
    assert parse_mbk_metadata({"mbk_metadata": b'{"seq_len": 16}', "mbk_vocab": b"[PAD]\na\n"}, "m.tflite") == (
        {"seq_len": 16}, ["[PAD]", "a"])
    assert parse_mbk_metadata({}, "m.tflite") == ({}, [])
