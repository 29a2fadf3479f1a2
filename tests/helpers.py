"""Shared test helpers: each model test is a few calls at tiny size.

Import with ``from tests.helpers import ...`` (tests/ is a package).
"""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIR = REPO / "mobilebert_kit"
# Top-level parts of the package: subpackages and root modules ("convert", "backend", "losses").
PACKAGE_PARTS = {p.stem for p in PACKAGE_DIR.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}
_MODULE_STRING = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*$")


def imported_modules(source, string_roots=(), strings=True):
    """``[(line, module)]`` of every module ``source`` imports, at any depth.

    Counts ``import x`` / ``from x import y`` anywhere (module level or inside
    functions), ``from mobilebert_kit import name`` as ``mobilebert_kit.name``,
    and module-path strings (the keys of a lazy-import table handed to
    ``importlib.import_module``) that name a real part of the package or start
    with one of ``string_roots``. The one import scanner of the tests: the
    TensorFlow-free floor (tests/test_artifact_floor.py) and the layering
    (tests/test_layering.py) both read it.

    Args:
        source (str): a module's text.
        string_roots (tuple[str, ...]): third-party roots whose module-path strings count too.
        strings (bool): count module-path strings at all (a schema tag such as
            ``"mobilebert_kit.pipeline"`` reads like one).

    Example:
        >>> imported_modules("import numpy as np\ndef f():\n    from mobilebert_kit import losses\n")
        [(1, 'numpy'), (3, 'mobilebert_kit.losses')]
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "mobilebert_kit":
                found += [(node.lineno, f"mobilebert_kit.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
        elif strings and isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.match(node.value):
            # "mobilebert_kit.profile" is a schema name, not a module: only real parts count.
            parts = node.value.split(".")
            if parts[0] in string_roots or (parts[0] == "mobilebert_kit" and len(parts) > 1 and parts[1] in PACKAGE_PARTS):
                found.append((node.lineno, node.value))
    return sorted(found)


def random_inputs(vocab_size, batch_size=2, seq_len=8, pad_last=0, type_vocab_size=2, seed=0):
    """Realistic int32 input dict: ids in range, segments 0/1, optional right padding of the last row."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab_size, size=(batch_size, seq_len), dtype=np.int32)
    mask = np.ones((batch_size, seq_len), np.int32)
    types = np.zeros((batch_size, seq_len), np.int32)
    if type_vocab_size > 1:
        types[:, seq_len // 2 :] = 1
    if pad_last:
        mask[-1, seq_len - pad_last :] = 0
        ids[-1, seq_len - pad_last :] = 0
        types[-1, seq_len - pad_last :] = 0
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def run_encoder(model, inputs):
    """Runs a Keras model on numpy inputs and returns numpy outputs."""
    out = model({k: np.asarray(v) for k, v in inputs.items()}, training=False)
    return {k: (v.numpy() if hasattr(v, "numpy") else v) for k, v in out.items()}


def assert_close_relative(ours, reference, rtol=1e-4, mask=None):
    """max |ours - ref| <= rtol * max |ref| over real tokens (``mask`` [B, S]) if given."""
    ours, reference = np.asarray(ours, np.float64), np.asarray(reference, np.float64)
    assert ours.shape == reference.shape, f"shape {ours.shape} != reference {reference.shape}"
    if mask is not None:
        keep = np.asarray(mask).astype(bool)
        ours, reference = ours[keep], reference[keep]
    err = np.abs(ours - reference).max()
    scale = np.abs(reference).max()
    assert err <= rtol * scale, f"max abs error {err:.3e} > {rtol} * max|ref| {scale:.3e}"
    return err / scale


def run_model_saving_test(model, tmp_path, inputs):
    """Saves and reloads ``model`` with mbk.save/mbk.load and checks identical outputs."""
    import mobilebert_kit as mbk

    before = run_encoder(model, inputs)
    directory = mbk.save(model, tmp_path / "saved")
    loaded = mbk.load(directory)
    after = run_encoder(loaded, inputs)
    assert set(before) == set(after)
    for key in before:
        np.testing.assert_array_equal(before[key], after[key], err_msg=key)
    return loaded


def run_mbk(*args, check=False, timeout=600):
    """Runs the ``mbk`` CLI in a subprocess; returns CompletedProcess with text output."""
    proc = subprocess.run(
        [sys.executable, "-m", "mobilebert_kit.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"mbk {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def assert_one_line_error(proc, *fragments):
    """A CLI failure: non-zero exit, no traceback, a first error line containing ``fragments``."""
    assert proc.returncode != 0, f"expected failure, got exit 0; stdout: {proc.stdout}"
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("mbk ")]
    assert lines, f"no 'mbk ...: error' line in stderr: {proc.stderr!r}"
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]


def write_json(path, value):
    Path(path).write_text(json.dumps(value))
    return Path(path)


def run_layer_test(layer_cls, init_kwargs, inputs, call_kwargs=None, expected_shape=None):
    """Builds ``layer_cls(**init_kwargs)``, checks the output shape, then rebuilds it from
    ``get_config()``, copies the weights by name and checks identical outputs."""
    from mobilebert_kit.backend import keras

    call_kwargs = call_kwargs or {}
    layer = layer_cls(**init_kwargs)
    args = inputs if isinstance(inputs, tuple) else (inputs,)
    out = layer(*args, **call_kwargs)
    if expected_shape is not None:
        assert tuple(out.shape) == tuple(expected_shape), f"{out.shape} != {expected_shape}"
    config = layer.get_config()
    for key, value in init_kwargs.items():
        if isinstance(value, (int, float, str, bool)) or value is None:
            assert config[key] == value, f"get_config()[{key!r}] = {config[key]!r}, expected {value!r}"
    clone = layer_cls.from_config(config)
    clone(*args, **call_kwargs)
    source = {w.name.split("/", 1)[-1]: w for w in layer.weights}
    assert len(clone.weights) == len(layer.weights)
    for weight in clone.weights:
        weight.assign(source[weight.name.split("/", 1)[-1]])
    np.testing.assert_array_equal(clone(*args, **call_kwargs).numpy(), out.numpy())
    assert isinstance(keras.layers.serialize(layer), dict)
    return layer


def saved_weights(directory):
    """The arrays of ``directory/model.safetensors`` (a saved model, a run's output) by tensor name.

    Example:
        >>> saved_weights(tmp_path / "model")["encoder/..."].shape  # doctest: +SKIP
    """
    from mobilebert_kit.utils.safetensors_io import read_safetensors

    return read_safetensors(Path(directory) / "model.safetensors")


def assert_same_weights(a, b, tolerance=1e-6):
    """Asserts two :func:`saved_weights` dicts hold the same tensors, each equal within ``tolerance``."""
    assert set(a) == set(b), sorted(set(a) ^ set(b))
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=tolerance, atol=tolerance, err_msg=name)


def stop_at(step, how):
    """A step-end hook that stops a run at ``step``: ``"sigint"``/``"sigterm"`` signal this process (the run
    checkpoints and stops), anything else raises a simulated crash.

    Example:
        >>> FinetuneRun.on_step_end = stop_at(5, "sigint")  # doctest: +SKIP
    """
    import os
    import signal

    def hook(done):
        if done == step:
            if how in ("sigint", "sigterm"):
                os.kill(os.getpid(), signal.SIGINT if how == "sigint" else signal.SIGTERM)
            else:
                raise RuntimeError("simulated crash")
    return hook


def damage_checkpoint(checkpoints, step, how):
    """Damages checkpoint ``ckpt-<step>`` in ``checkpoints`` the way a crash or a full disk can.

    Args:
        how: ``"truncated data"``, ``"missing index"`` or ``"garbled state file"`` (TensorFlow ignores a garbled
            ``checkpoint`` file with a warning and would start over).

    Example:
        >>> damage_checkpoint(out / "run" / "checkpoints", 5, "missing index")  # doctest: +SKIP
    """
    checkpoints = Path(checkpoints)
    if how == "truncated data":
        data = next(checkpoints.glob(f"ckpt-{step}.data-*"))
        data.write_bytes(data.read_bytes()[:100])
    elif how == "missing index":
        (checkpoints / f"ckpt-{step}.index").unlink()
    elif how == "garbled state file":
        (checkpoints / "checkpoint").write_text("garbage {{{\n")
    else:
        raise ValueError(how)

