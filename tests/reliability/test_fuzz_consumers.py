"""Fuzzing that reaches the consumers: deep, large and adversarial structures fed to the code that uses them.

test_fuzz_parsers.py feeds small shallow values to the parsers; here every generated structure goes
through what *uses* the parsed values (``mbk_api.build``, ``mbk_api.import_checkpoint``, ``mbk_api.load``, the
tokenizers, export), and the generators aim at what broke before (issue 12): nesting 10^5 deep,
dimensions of 2^62, NaN/inf/bool/string numbers, overlapping and duplicate offsets, BOMs and duplicate
tokens. Each case must succeed or raise one one-line MbkError: never another exception, a hang or a
huge allocation.
"""

import json
import math
import os
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mobilebert_kit as mbk_api
from mobilebert_kit.utils.safetensors_io import read_safetensors, read_safetensors_dir
from mobilebert_kit.checkpoints.weight_names import reference_name
from mobilebert_kit.errors import ConfigError, MbkError
from mobilebert_kit.models.api import named_weights
from mobilebert_kit.models.encoder import CONFIG_FIELDS, MAX_PARAMETERS, check_fields, estimate_parameters
from mobilebert_kit.models.presets import preset_config
from mobilebert_kit.utils.structured import load_json, load_toml
from tests.reliability.test_fuzz_parsers import parses_or_mbk_error

# Few examples, no shrinking database: the default tier stays fast; deadline=None because building a
# tiny model legitimately takes ~1 s, and hangs are caught by the bounds asserted below instead.
FEW = settings(max_examples=25, deadline=None, database=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
DEEP = 100_000

# Numbers that broke consumers: huge, negative, non-integral, non-finite, and non-numbers typed as numbers.
_BAD_NUMBERS = st.one_of(
    st.sampled_from([0, -1, -(2 ** 63), 2 ** 62, 2 ** 64 + 1, 10 ** 9, 1e9, 1e308, 0.5, -0.0,
                     math.nan, math.inf, -math.inf, True, False, None, "12", "NaN", [], {}, [12], {"a": 1}]),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True),
)


def _deep_json(depth=DEEP, opener="[", closer="]"):
    return opener * depth + closer * depth


def _expect_mbk_error(fn, *args, fragment=None):
    err = parses_or_mbk_error(fn, *args)
    assert isinstance(err, MbkError), f"accepted: {args!r}"
    if fragment:
        assert fragment in str(err), str(err)
    return err


def _safetensors(header, body=b""):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body


def write_hf_checkpoint(directory, encoder, poison=None):
    """Writes ``encoder`` (a BERT preset) as a Hugging Face BERT directory; ``poison``: {hf name: (index, value)}."""
    from safetensors.numpy import save_file

    config = encoder.config
    arrays = {}
    for path, var in named_weights(encoder).items():
        name, transpose = reference_name(path, "hf", config)
        value = var.numpy()
        arrays[name] = np.ascontiguousarray(value.T if transpose is True and value.ndim == 2 else value)
    for name, (index, value) in (poison or {}).items():
        arrays[name][index] = value
    directory.mkdir(parents=True, exist_ok=True)
    save_file(arrays, str(directory / "model.safetensors"))
    hf = dict(model_type="bert", vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
              num_hidden_layers=config["num_layers"], num_attention_heads=config["num_heads"],
              intermediate_size=config["intermediate_size"], max_position_embeddings=config["max_position_embeddings"],
              type_vocab_size=config["type_vocab_size"], hidden_act="gelu")
    (directory / "config.json").write_text(json.dumps(hf))
    return directory


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory):
    """A valid tiny Hugging Face BERT checkpoint directory (the base every config case mutates)."""
    return write_hf_checkpoint(tmp_path_factory.mktemp("hf") / "tiny", mbk_api.build("tiny-bert"))


# ------------------------------------------------------------------ the one JSON/TOML loader
@pytest.mark.parametrize("text", [_deep_json(), _deep_json(opener='{"a":', closer="}"), '{"a": 1, "a": 2}',
                                  b"\xff\xfe{}", "1" * 5000, "[1, 2]"])
def test_load_json_refuses_deep_duplicate_undecodable_and_non_object_documents(text):
    _expect_mbk_error(lambda t: load_json(t, "the test document", expect=dict), text)


@pytest.mark.parametrize("text", ['{"text": "a \\ud83d film"}', '{"\\udfff": 1}', '{"a": [{"b": "x\\udc00"}]}'])
def test_load_json_refuses_half_a_surrogate_pair_and_keeps_whole_ones(text):
    # A .jsonl text with an emoji cut in two ("\ud83d") was an internal error (TypeError) in the tokenizer.
    err = _expect_mbk_error(lambda t: load_json(t, "the test document", expect=dict), text)
    assert "half of a UTF-16 surrogate pair" in str(err), err
    assert load_json('{"a": "\\ud83d\\ude00"}', "the test document") == {"a": "\U0001f600"}


@pytest.mark.parametrize("text", ["a = " + "[" * DEEP, "a = " + "{b = " * 20_000, "[t]\nx = 1\nx = 2"])
def test_load_toml_refuses_deep_and_invalid_documents(text):
    _expect_mbk_error(lambda t: load_toml(t, "the test recipe"), text)


def test_load_json_refuses_a_fifo_and_an_oversized_file_without_reading_them(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    _expect_mbk_error(lambda p: load_json(p, "the config"), fifo, fragment="not a regular file")  # would block
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:
        handle.truncate(3 * 10 ** 9)  # sparse: a never-filled download
    tracemalloc.start()
    _expect_mbk_error(lambda p: load_json(p, "the config"), big, fragment="over the")
    assert tracemalloc.get_traced_memory()[1] < 10 * 2 ** 20
    tracemalloc.stop()


# ------------------------------------------------------------------ safetensors headers
_DTYPES = st.sampled_from(["F32", "F16", "BF16", "I64", "U8", "BOOL", "f32", "Q4", "", ["F32"], {"F32": 1}, None, 4])
_DIMS = st.lists(_BAD_NUMBERS | st.integers(0, 8), max_size=4) | _BAD_NUMBERS
_OFFSETS = st.lists(_BAD_NUMBERS | st.integers(0, 64), max_size=3) | _BAD_NUMBERS
_ENTRY = st.fixed_dictionaries({"dtype": _DTYPES, "shape": _DIMS, "data_offsets": _OFFSETS}) | _BAD_NUMBERS


@FEW
@given(st.dictionaries(st.text(max_size=4), _ENTRY, max_size=4), st.integers(0, 64))
def test_fuzz_safetensors_entries_reach_the_reader(tmp_path, header, body_len):
    path = tmp_path / "model.safetensors"
    path.write_bytes(_safetensors(header, bytes(body_len)))
    result = parses_or_mbk_error(read_safetensors, path)
    if isinstance(result, dict):  # accepted: then every tensor is exactly what its header promised
        assert set(result) == set(header) - {"__metadata__"}


@pytest.mark.parametrize("header, body_len, fragment", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, 8, "overlaps"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
      "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, 4, "overlaps"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, 12, "use 4 of its 12"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, 8, "unused"),
    ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, 4, "non-negative"),
    ({"a": {"dtype": "F32", "shape": [2 ** 62, 2 ** 62], "data_offsets": [0, 4]}}, 4, "needs bytes"),
    ({"a": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}, 4, "dtype"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": "0-4"}}, 4, "data_offsets"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0.0, 4.0]}}, 4, "data_offsets"),
    ({"a": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}, 4, "shape"),
])
def test_safetensors_overlaps_gaps_and_mistyped_entries_are_refused(tmp_path, header, body_len, fragment):
    path = tmp_path / "model.safetensors"
    path.write_bytes(_safetensors(header, bytes(body_len)))
    _expect_mbk_error(read_safetensors, path, fragment=fragment)


def test_safetensors_duplicate_names_and_deep_headers_are_refused(tmp_path):
    path = tmp_path / "model.safetensors"
    entry = '{"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}'
    path.write_bytes(_safetensors(f'{{"a": {entry}, "a": {entry}}}'.encode(), bytes(4)))
    _expect_mbk_error(read_safetensors, path, fragment="twice")
    path.write_bytes(_safetensors(('{"a": ' + _deep_json() + "}").encode()))
    _expect_mbk_error(read_safetensors, path, fragment="nests")


def test_safetensors_never_filled_download_is_refused_from_its_first_bytes(tmp_path):
    path = tmp_path / "model.safetensors"
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", 2 * 10 ** 9))
        handle.truncate(3 * 10 ** 9)  # sparse zeros: the header is never there
    tracemalloc.start()
    _expect_mbk_error(read_safetensors, path)
    assert tracemalloc.get_traced_memory()[1] < 10 * 2 ** 20  # the old reader held all 3 GB
    tracemalloc.stop()


@pytest.mark.parametrize("index, fragment", [
    ({"weight_map": {"a": "../outside.safetensors"}}, "not a .safetensors file name"),
    ({"weight_map": {"a": ["x.safetensors"]}}, "not a .safetensors file name"),
    ({"weight_map": []}, "weight_map"),
    ({"weight_map": {"a": "one.safetensors", "b": "two.safetensors"}}, "in both"),
    ({"weight_map": {"a": "one.safetensors", "zzz": "one.safetensors"}}, "is in no shard"),
    ([1, 2], "JSON object"),
])
def test_sharded_index_is_checked_against_its_shards(tmp_path, index, fragment):
    tensor = {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    for shard in ("one", "two"):
        (tmp_path / f"{shard}.safetensors").write_bytes(_safetensors(tensor, bytes(4)))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    _expect_mbk_error(read_safetensors_dir, tmp_path, fragment=fragment)


# ------------------------------------------------------------------ configs, through build/import/load
@FEW
@given(st.sampled_from(sorted(CONFIG_FIELDS)), _BAD_NUMBERS)
def test_fuzz_encoder_fields_reach_build(field, value):
    config = dict(preset_config("tiny-bert"), **{field: value})
    result = parses_or_mbk_error(mbk_api.build, config)
    if not isinstance(result, MbkError):  # built: then the value was a valid one
        check_fields({field: value})
        assert result.config[field] == value


@pytest.mark.parametrize("field, value, fragment", [
    # Hypothesis found these: 0 and -0.0 are falsy, and `value or hidden_size` took them for "unset".
    ("embedding_size", 0, "embedding_size must be between 1"),
    ("embedding_size", -0.0, "embedding_size must be an integer"),
])
def test_a_falsy_size_is_refused_not_taken_for_the_default(field, value, fragment):
    with pytest.raises(MbkError, match=fragment):
        mbk_api.build(dict(preset_config("tiny-bert"), **{field: value}))


_HF_FIELDS = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
              "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
              "initializer_range", "layer_norm_eps"]


@FEW
@given(st.dictionaries(st.sampled_from(_HF_FIELDS), _BAD_NUMBERS, min_size=1, max_size=3))
def test_fuzz_hf_config_reaches_import(tiny_hf, tmp_path, changes):
    base = json.loads((tiny_hf / "config.json").read_text())
    case = tmp_path / "case"
    case.mkdir(exist_ok=True)
    (case / "model.safetensors").write_bytes((tiny_hf / "model.safetensors").read_bytes())
    (case / "config.json").write_text(json.dumps({**base, **changes}))
    parses_or_mbk_error(mbk_api.import_checkpoint, case)


@pytest.mark.parametrize("changes, fragment", [
    ({"num_hidden_layers": 10 ** 9}, "num_hidden_layers must be between 1 and 256"),
    ({"num_hidden_layers": 1e9}, "num_hidden_layers must be an integer"),
    ({"hidden_size": 10 ** 9}, "hidden_size must be between"),
    ({"layer_norm_eps": math.nan}, "layer_norm_eps must be a finite number"),
    ({"hidden_dropout_prob": math.inf}, "hidden_dropout_prob must be a finite number"),
    ({"hidden_size": 16_000, "intermediate_size": 65_536, "num_hidden_layers": 200}, "parameters"),
])
def test_import_refuses_an_unbuildable_config_before_building(mbk, tiny_hf, tmp_path, changes, fragment):
    case = tmp_path / "case"
    case.mkdir()
    (case / "model.safetensors").write_bytes((tiny_hf / "model.safetensors").read_bytes())
    (case / "config.json").write_text(json.dumps({**json.loads((tiny_hf / "config.json").read_text()), **changes}))
    proc = mbk("import", case, "--out", tmp_path / "out")
    assert proc.returncode == 2 and fragment in proc.stderr and "config.json" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_model_size_is_bounded_before_building_and_says_by_how_much():
    config = dict(preset_config("tiny-bert"), hidden_size=8192, intermediate_size=32768, num_layers=256)
    assert estimate_parameters(config) > MAX_PARAMETERS
    with pytest.raises(ConfigError, match=r"about .* parameters .*GB in float32\), [0-9.]+x the"):
        mbk_api.build(config)


@FEW
@given(st.sampled_from(sorted(CONFIG_FIELDS)), _BAD_NUMBERS)
def test_fuzz_saved_model_config_reaches_load(saved_tiny_bert, field, value):
    config_path = saved_tiny_bert / "config.json"
    original = config_path.read_text()
    meta = json.loads(original)
    meta["encoder"][field] = value
    try:
        config_path.write_text(json.dumps(meta))
        parses_or_mbk_error(mbk_api.load, saved_tiny_bert)
    finally:
        config_path.write_text(original)


@pytest.fixture(scope="module")
def saved_tiny_bert(tmp_path_factory):
    return mbk_api.save(mbk_api.build("tiny-bert"), tmp_path_factory.mktemp("saved") / "tiny")


# ------------------------------------------------------------------ non-finite weights
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_import_refuses_a_non_finite_embedding_row_naming_the_tensor(tmp_path, value):
    poisoned = {"embeddings.word_embeddings.weight": (7, value)}
    directory = write_hf_checkpoint(tmp_path / "hf", mbk_api.build("tiny-bert"), poison=poisoned)
    err = _expect_mbk_error(mbk_api.import_checkpoint, directory, fragment="embeddings.word_embeddings.weight")
    assert "non-finite" in str(err)


def test_load_and_export_refuse_a_poisoned_weight_and_write_nothing(tmp_path):
    from mobilebert_kit.convert.exporter import ExportOptions, export

    model = mbk_api.build("tiny-bert")
    table = model.embedding_table
    rows = table.numpy()
    rows[7] = np.inf  # a token the validation sentences never use
    table.assign(rows)
    out = tmp_path / "out" / "m.tflite"
    out.parent.mkdir()
    options = ExportOptions(model, "tflite", out=str(out), seq_len=16)
    _expect_mbk_error(lambda o: export(o, log=None), options, fragment="embeddings/word_embeddings")
    assert list(out.parent.iterdir()) == []
    saved = mbk_api.save(model, tmp_path / "saved")
    _expect_mbk_error(mbk_api.load, saved, fragment="non-finite")


# ------------------------------------------------------------------ artifact metadata
@pytest.mark.parametrize("metadata", ["[1, 2]", "null", _deep_json(), '{"seq_len": 1, "seq_len": 2}', "{bad"])
def test_onnx_metadata_that_is_not_a_json_object_is_refused(tmp_path, metadata):
    import onnx
    from onnx import TensorProto, helper

    from mobilebert_kit.artifacts.metadata import read_artifact_metadata

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph)
    model.metadata_props.add(key="mbk_metadata", value=metadata)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    _expect_mbk_error(read_artifact_metadata, path, fragment="mbk_metadata")



@pytest.mark.parametrize("key, value", [("max_seq_len", 10**12), ("planned_seq_len", -5), ("seq_len", 1e300),
                                        ("vocab_size", 2**40), ("batch_size", "many")])
def test_implausible_lengths_and_sizes_in_metadata_are_refused_before_use(tmp_path, key, value):
    """Issue 47 item 7: a hand-edited ``max_seq_len`` made ``mbk profile --text`` abort in a 4 GB allocation;
    each length, size and count is bounded where the metadata is read, and every command says so in one line."""
    import onnx

    from mobilebert_kit.cli.main import main
    from tests.profiler.fixture_models import build_onnx_bert

    path = build_onnx_bert(tmp_path / "m.onnx")
    model = onnx.load(str(path))
    model.metadata_props.add(key="mbk_metadata", value=json.dumps({key: value}))
    onnx.save(model, str(path))
    text = tmp_path / "t.txt"
    text.write_text("a short real sentence\n")
    from mobilebert_kit.artifacts.metadata import read_artifact_metadata

    _expect_mbk_error(read_artifact_metadata, path, fragment=key)
    assert main(["profile", str(path), "--text", str(text), "--runs", "2", "--warmup", "1"]) == 2


# ------------------------------------------------------------------ vocabularies
_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_TOKENS = st.lists(st.sampled_from(["the", "a", "##s", "hello", "[PAD]", "", " ", "é", "x\r"]) | st.text(max_size=3),
                   max_size=8)


def _vocab_bytes(tokens, bom, crlf):
    text = ("\r\n" if crlf else "\n").join(_SPECIALS + tokens) + "\n"
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass")


@FEW
@given(_TOKENS, st.booleans(), st.booleans())
def test_fuzz_vocab_every_consumer_reads_the_same_tokens_or_refuses(tmp_path, tokens, bom, crlf):
    from mobilebert_kit.data.vocab import read_vocab
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    directory = tmp_path / "tok"
    directory.mkdir(exist_ok=True)
    (directory / "vocab.txt").write_bytes(_vocab_bytes(tokens, bom, crlf))
    results = [parses_or_mbk_error(read_vocab, directory / "vocab.txt"),
               parses_or_mbk_error(TextTokenizer.from_file, directory),  # pretraining-data, finetune
               parses_or_mbk_error(TextTokenizer.from_directory, directory)]  # export
    refused = [isinstance(r, MbkError) for r in results]
    assert refused in ([True] * 3, [False] * 3), results  # pretraining-data and export never disagree
    if not refused[0]:
        vocab = results[0]
        assert not vocab[0].startswith("\ufeff") and len(set(vocab)) == len(vocab)
        data_vocab = sorted(results[1].vocab, key=results[1].vocab.get)
        assert data_vocab == vocab == results[2].vocab_lines()


@pytest.mark.parametrize("content, fragment", [
    (b"\xef\xbb\xbf[PAD]\n[PAD]\n", "lists '[PAD]' twice (lines 1 and 2)"),
    (b"[PAD]\n\n[UNK]\n", "line 2 is blank"),
    (b"[PAD]\n\xff\xfe\n", "line 2 is not UTF-8"),
    (b"\n\n", "is empty"),
])
def test_vocab_bom_duplicates_blanks_and_bad_bytes_are_refused_with_line_numbers(tmp_path, content, fragment):
    from mobilebert_kit.data.vocab import read_vocab

    (tmp_path / "vocab.txt").write_bytes(content)
    _expect_mbk_error(read_vocab, tmp_path / "vocab.txt", fragment=fragment)


def test_vocab_bom_is_stripped_for_every_consumer(tmp_path):
    from mobilebert_kit.sources.model_source import ModelSource
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    directory = mbk_api.save(mbk_api.build("tiny-bert"), tmp_path / "saved")
    (directory / "vocab.txt").write_bytes(_vocab_bytes(["hello"], bom=True, crlf=True))
    data, export = TextTokenizer.from_file(directory), ModelSource.load(directory).tokenizer
    assert data.pad_id == 0 and "\ufeff[PAD]" not in data.vocab and data.tokenize("hello") == ["hello"]
    assert export.vocab_lines()[0] == "[PAD]" and export.encode_inputs(["hello"], 4)["input_ids"][0].tolist() == [2, 5, 3, 0]
    assert data.tokenize("hello") == ["hello"]  # encode_inputs' padding does not leak into later calls


# ------------------------------------------------------------------ caches and run records
@pytest.mark.parametrize("content", ["null", "[1]", '{"k": "many"}', _deep_json(), "\xff"])
def test_a_damaged_preset_cache_is_rebuilt_not_a_crash(tmp_path, monkeypatch, content):
    from mobilebert_kit.models.api import count_params
    from mobilebert_kit.models.summary import _cache_file, preset_param_counts

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _cache_file().parent.mkdir(parents=True)
    _cache_file().write_text(content, encoding="latin-1")
    assert preset_param_counts(["tiny-bert"]) == {"tiny-bert": count_params(mbk_api.build("tiny-bert"))}
    assert json.loads(_cache_file().read_text())  # rewritten as a valid cache


@pytest.mark.parametrize("content", [_deep_json(opener='{"config":', closer="}"), '{"config": 1, "config": {}}'])
def test_distill_resume_with_a_deep_or_ambiguous_run_record(mbk, tmp_path, content):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(content)
    proc = mbk("distill", "--out", run, "--resume")
    assert proc.returncode == 2 and "run.json" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert sorted(p.name for p in run.iterdir()) == ["run.json"]


@pytest.mark.parametrize("head", [{"num_labels": 10 ** 9}, {"num_labels": 2.5}, {"dropout": math.nan}])
def test_saved_task_model_head_config_is_checked_before_building(tmp_path, head):
    from mobilebert_kit.models.heads import HEADS

    saved = mbk_api.save(HEADS["sequence_classifier"](mbk_api.build("tiny-bert"), num_labels=3), tmp_path / "clf")
    meta = json.loads((saved / "config.json").read_text())
    meta["head"].update(head)
    (saved / "config.json").write_text(json.dumps(meta))
    _expect_mbk_error(mbk_api.load, saved, fragment=next(iter(head)))


@pytest.mark.parametrize("call, problem", [
    (lambda: mbk_api.build([1]), "a preset is a name"),
    (lambda: mbk_api.build("tiny-bert", dtype="int8"), "dtype must be one of"),
    (lambda: mbk_api.build("tiny-bert", dtype=3), "dtype must be a dtype policy name"),
    (lambda: mbk_api.build("tiny-bert", layer_norm_epsilon_overrides=[1]), "must be a mapping"),
    (lambda: mbk_api.build("tiny-bert", name="enc oder"), "name must be letters, digits"),
    (lambda: mbk_api.build("tiny-bert", name="a/b\n../c"), "name must be letters, digits"),
    (lambda: mbk_api.build("tiny-bert", name=7), "name must be letters, digits"),
    (lambda: mbk_api.load(None), "expected a saved-model directory as a str or pathlib.Path, got NoneType"),
    (lambda: mbk_api.load(b"dir"), "got bytes"),
    (lambda: mbk_api.import_checkpoint(3), "expected a checkpoint path"),
])
def test_the_python_api_refuses_values_keras_would_crash_on(call, problem):
    # Each was a raw TypeError or ValueError, or (a name with a space) a crash inside tracing at export time.
    with pytest.raises(ConfigError, match=problem):
        call()


def test_a_bad_keyword_of_load_is_blamed_on_the_keyword_not_on_the_saved_config(tmp_path):
    mbk_api.save(mbk_api.build("tiny-bert"), tmp_path / "m")
    with pytest.raises(ConfigError) as info:
        mbk_api.load(tmp_path / "m", attention_mask_value=float("nan"))
    assert "attention_mask_value" in str(info.value) and "config.json" not in str(info.value)
    assert mbk_api.build("tiny-bert", name="my.enc-1", dtype="mixed_bfloat16").name == "my.enc-1"
