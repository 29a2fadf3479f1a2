"""Fuzzing of the parsers that read untrusted files: recipes (TOML), model configs (JSON), safetensors headers.

Every input must either parse or raise an :class:`~mobilebert_kit.errors.MbkError` subclass whose message is
one line; any other exception type is a bug (the CLI would print "internal error"). The benchmark-output
parser has its own fuzz tests in tests/profiler/test_bench_parser.py.
"""

import json
import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobilebert_kit.errors import CheckpointError, MbkError

FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _one_line(err):
    """One error line; a CheckpointError may list one indented ``  - `` line per variable below it."""
    lines = str(err).strip().splitlines()
    assert lines and lines[0].strip(), f"{type(err).__name__} has an empty message"
    extra = [ln for ln in lines[1:] if not ln.startswith("  - ")] if isinstance(err, CheckpointError) else lines[1:]
    assert not extra, f"{type(err).__name__} message is not one line: {str(err)!r}"


def parses_or_mbk_error(fn, *args):
    """Calls ``fn``; an MbkError (one line) is fine, any other exception fails the test."""
    try:
        return fn(*args)
    except MbkError as err:
        _one_line(err)
        return err


# ------------------------------------------------------------------ TOML
def _toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string (\\uXXXX escapes)
    return "[" + ", ".join(_toml_value(v) for v in value) + "]"


def _toml(tables):
    lines = []
    for name, body in tables.items():
        lines.append(f"[{name}]")
        lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


_KEYS = ["model", "preset", "head", "norm", "act", "recover_steps", "data", "fit", "seq_len", "learning_rate",
         "formats", "quantize", "batch_size", "out_dir", "name", "mask_dtype", "mask_value", "io_type", "opset",
         "dynamic_axes", "embed_vocab", "keep_float_layers", "keep_float_ops", "qat_steps", "labels", "count",
         "drift_report", "min_cosine", "min_snr_db", "task", "pooling", "static_axes", "bogus"]
_TABLES = ["source", "substitute", "export", "export.tflite", "export.onnx", "calibration", "validation", "sauce"]
_STRINGS = st.sampled_from(["tiny-bert", "tiny-mobilebert", "../x", "/etc", "out", "data/c.txt", "tflite", "onnx",
                            "dynamic", "int8", "int4", "no_norm", "relu", "", ".", "a/../../b", "~", "é", "x\x00y"]) | st.text(max_size=12)
_SCALARS = st.booleans() | st.integers(-(2 ** 63), 2 ** 63 - 1) | st.floats() | _STRINGS
_VALUES = _SCALARS | st.lists(_SCALARS, max_size=3)
_RECIPES = st.dictionaries(st.sampled_from(_TABLES), st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=5),
                           max_size=5)


def _load_recipe(path):
    from mobilebert_kit.convert.recipe import Recipe

    return Recipe.load(path).options()


@FUZZ
@given(_RECIPES)
def test_fuzz_structured_recipes(tmp_path, tables):
    path = tmp_path / "r.toml"
    path.write_text(_toml(tables), encoding="utf-8")
    parses_or_mbk_error(_load_recipe, path)


@FUZZ
@given(st.text(max_size=300))
def test_fuzz_recipe_text(tmp_path, text):
    path = tmp_path / "r.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    parses_or_mbk_error(_load_recipe, path)


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_recipe_bytes(tmp_path, data):
    path = tmp_path / "r.toml"
    path.write_bytes(data)
    parses_or_mbk_error(_load_recipe, path)


# ------------------------------------------------------------------ JSON configs
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10 ** 6) | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
_HF_KEYS = ["model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "max_position_embeddings", "hidden_act", "type_vocab_size", "layer_norm_eps",
            "embedding_size", "trigram_input", "use_bottleneck", "intra_bottleneck_size", "normalization_type",
            "num_feedforward_networks", "key_query_shared_bottleneck", "true_hidden_size", "hidden_dropout_prob"]
_HF_VALUES = st.none() | st.booleans() | st.integers(-3, 4096) | st.floats() | st.sampled_from(
    ["bert", "mobilebert", "gelu", "relu", "swish", "no_norm", "layer_norm", "gpt2", ""]) | st.lists(st.integers(0, 3), max_size=2)


@FUZZ
@given(st.one_of(_JSON, st.dictionaries(st.sampled_from(_HF_KEYS), _HF_VALUES, max_size=12)))
def test_fuzz_hugging_face_config(config):
    from mobilebert_kit.checkpoints.importer import config_from_hf

    parses_or_mbk_error(config_from_hf, config)


def _tiny_encoder_config():
    import mobilebert_kit as mbk

    return dict(mbk.build("tiny-bert").config)


@pytest.fixture(scope="module")
def saved_tiny(tmp_path_factory):
    import mobilebert_kit as mbk

    return mbk.save(mbk.build("tiny-bert"), tmp_path_factory.mktemp("saved") / "m")


@FUZZ
@given(st.binary(max_size=120) | _JSON.map(lambda v: json.dumps(v).encode()))
def test_fuzz_saved_model_config_file(saved_tiny, content):
    """Arbitrary bytes or JSON as a saved model's config.json: load and the directory probe never crash."""
    import mobilebert_kit as mbk
    from mobilebert_kit.models.api import is_saved_model

    original = (saved_tiny / "config.json").read_bytes()
    try:
        (saved_tiny / "config.json").write_bytes(content)
        assert is_saved_model(saved_tiny) in (True, False)
        parses_or_mbk_error(mbk.load, saved_tiny)
    finally:
        (saved_tiny / "config.json").write_bytes(original)


# Values that keep any model that still builds tiny (a fuzzed hidden_size of 10**6 would only test memory).
_ENCODER_VALUES = st.none() | st.booleans() | st.integers(-2, 6) | st.floats(-2, 2) | st.text(max_size=6) | st.sampled_from(
    ["gelu", "relu", "no_norm", "layer_norm", "bogus"]) | st.lists(st.integers(0, 2), max_size=2) | st.just({})


@settings(max_examples=100, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fuzz_saved_model_encoder_fields(saved_tiny, data):
    """A well-formed config.json whose encoder fields are mutated: load builds, or refuses in one line."""
    import mobilebert_kit as mbk

    original = (saved_tiny / "config.json").read_text()
    meta = json.loads(original)
    keys = sorted(meta["encoder"])
    for key in data.draw(st.lists(st.sampled_from(keys + ["not_an_option"]), min_size=1, max_size=3)):
        meta["encoder"][key] = data.draw(_ENCODER_VALUES)
    if data.draw(st.booleans()):
        # Not "encoder": an empty dict there builds the default BERT-base size, a slow example that tests nothing new.
        meta[data.draw(st.sampled_from(["architecture", "head", "format_version"]))] = data.draw(_JSON)
    if data.draw(st.booleans()):
        meta["encoder"] = data.draw(_JSON.filter(lambda v: not isinstance(v, dict)))
    try:
        (saved_tiny / "config.json").write_text(json.dumps(meta))
        parses_or_mbk_error(mbk.load, saved_tiny)
    finally:
        (saved_tiny / "config.json").write_text(original)


# ------------------------------------------------------------------ safetensors
@FUZZ
@given(st.binary(max_size=200) | _JSON.map(lambda v: (lambda h: struct.pack("<Q", len(h)) + h)(json.dumps(v).encode())))
def test_fuzz_safetensors_headers(tmp_path, data):
    from mobilebert_kit.utils.safetensors_io import read_safetensors

    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    parses_or_mbk_error(read_safetensors, path)


@FUZZ
@given(st.one_of(_JSON, st.dictionaries(st.sampled_from(_HF_KEYS + ["hidden_act", "use_relative_position"]), _HF_VALUES,
                                        max_size=12)))
def test_fuzz_tf1_config(config):
    from mobilebert_kit.checkpoints.importer import config_from_tf1

    parses_or_mbk_error(config_from_tf1, config)


# ------------------------------------------------------------------ class names beside the weights
# Pieces of look-alikes: composed and decomposed letters, case, full-width forms, invisible characters, emoji joins.
_NAME_PIECES = st.sampled_from(["a", "A", "b", "\u00e9", "e\u0301", "\u200b", "\u200f", "\u2060", "\ufeff", " ", "\uff50",
                                "p", "\U0001f468", "\u200d", "\n", "1"])
_NAMES = st.lists(_NAME_PIECES, max_size=4).map("".join)


@FUZZ
@given(st.one_of(_JSON, st.dictionaries(st.one_of(st.text(st.sampled_from("0123 x-"), max_size=3), st.integers(-1, 4)),
                                        st.one_of(_NAMES, _JSON), max_size=5)),
       st.none() | st.integers(0, 5))
def test_fuzz_id2label(id2label, classes):
    # issue 37: whatever a config holds, its names are strings in id order that no app shows alike, or one line.
    from mobilebert_kit.data.class_names import check_class_names, look_alike_key, names_of_id2label

    names = parses_or_mbk_error(lambda: check_class_names(names_of_id2label(id2label, "config.json"),
                                                          "config.json", classes))
    if isinstance(names, list):
        assert all(isinstance(n, str) and n.strip() for n in names)
        assert len({look_alike_key(n) for n in names}) == len(names)
        assert classes is None or len(names) == classes


@FUZZ
@given(st.lists(_NAMES, max_size=6))
def test_fuzz_labels_file(tmp_path, names):
    from mobilebert_kit.data.class_names import look_alike_key
    from mobilebert_kit.sources.model_source import read_labels

    (tmp_path / "labels.txt").write_text("".join(f"{n}\n" for n in names), encoding="utf-8")
    read = parses_or_mbk_error(read_labels, tmp_path)
    if isinstance(read, list):
        assert len({look_alike_key(n) for n in read}) == len(read)
