"""Regressions of what a fuzzing pass over the files users hand mbk found (session 9).

Each case is the cheapest reproduction of one finding, checked at the shared reader it was fixed in: an ONNX
file with a non-UTF-8 name, hand-edited ``mbk_metadata`` of the wrong type or past the file's positions, a
``.jsonl`` table or tagged file of the wrong shape, a NUL or byte-order mark in a text file, and a
benchmark result file with impossible figures. Every one must be refused in one line (an MbkError), never an
internal error or a silently different result. Deterministic and fast: no TensorFlow model is built.
"""

import json
import math
import struct

import pytest

from mobilebert_kit.artifacts.errors import ArtifactError
from mobilebert_kit.errors import ConfigError, DataError, MbkError
from tests.reliability.test_fuzz_parsers import parses_or_mbk_error


def _refused(fn, *args, error=Exception, fragment=None):
    err = parses_or_mbk_error(fn, *args)  # an MbkError in one line, or any other exception fails here
    assert isinstance(err, error), f"accepted: {args!r} -> {err!r}"
    if fragment:
        assert fragment in str(err), str(err)
    return err


# ------------------------------------------------------------------ ONNX files
def _tiny_onnx(path, node_name="node_A", metadata=None):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name=node_name)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph)
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("where, marker", [("graph.node.name", b"node_A"), ("metadata_props.value", b'"task"')])
def test_onnx_name_or_metadata_that_is_not_utf8_is_refused(tmp_path, where, marker):
    # A flipped byte in a node name or metadata value: protobuf hands the field back as bytes, and `mbk inspect`
    # was an internal error ('bytes' object has no attribute 'encode').
    from mobilebert_kit.artifacts.reader import read_artifact

    path = _tiny_onnx(tmp_path / "m.onnx", metadata={"mbk_metadata": '{"task": "features"}'})
    data = path.read_bytes()
    assert data.count(marker) == 1
    path.write_bytes(data.replace(marker, marker[:-2] + b"\xff" + marker[-1:]))
    _refused(read_artifact, path, error=ArtifactError, fragment=f"its model.{where} is not UTF-8")


# ------------------------------------------------------------------ mbk_metadata
@pytest.mark.parametrize("key, value", [("labels", 10**12), ("labels", [1, "x"]), ("task", ["a"]),
                                        ("do_lower_case", "no"), ("special_tokens", {"cls": 5}),
                                        ("pooling", {"mode": 1}), ("table_columns", {"text_columns": "s"}),
                                        ("input_names", "input_ids"), ("tokenizer_kind", 3)])
def test_metadata_entries_of_the_wrong_type_are_refused(key, value):
    # "labels": 10**12 made `mbk evaluate` an internal error; "do_lower_case": "no" lower-cased every text.
    from mobilebert_kit.artifacts.metadata import parse_mbk_metadata

    entry = {"mbk_metadata": json.dumps({key: value}).encode()}
    _refused(parse_mbk_metadata, entry, "m.onnx", error=ArtifactError, fragment=f"gives {key} = ")


def test_metadata_that_records_its_own_types_reads():
    from mobilebert_kit.artifacts.metadata import parse_mbk_metadata

    meta = {"labels": ["a", "b"], "do_lower_case": None, "pooling": {"mode": "mean", "normalize": True},
            "table_columns": {"text_columns": ["s"], "label_column": None}, "special_tokens": {"cls": "[CLS]"},
            "seq_len": None, "planned_seq_len": 16, "max_seq_len": 64}
    assert parse_mbk_metadata({"mbk_metadata": json.dumps(meta).encode()}, "m.onnx")[0] == meta


def test_a_length_past_the_recorded_positions_is_refused():
    # `mbk profile/evaluate/validate --seq-len 100` of a 64-position dynamic file failed inside onnxruntime
    # ("broadcast 64 by 100") and said to re-export the file.
    from mobilebert_kit.artifacts.metadata import parse_mbk_metadata, planned_length

    meta = {"max_seq_len": 64, "planned_seq_len": 16}
    _refused(lambda: planned_length(meta, requested=100), error=ConfigError, fragment="--seq-len 64 or less")
    assert planned_length(meta, requested=64) == 64 and planned_length(meta) == 16
    assert planned_length(meta, static_len=128, requested=128) == 128  # a fixed length: the runner says
    entry = {"mbk_metadata": json.dumps({"max_seq_len": 64, "planned_seq_len": 100}).encode()}
    _refused(parse_mbk_metadata, entry, "m.onnx", error=ArtifactError, fragment="planned_seq_len = 100")


# ------------------------------------------------------------------ tables and tagged files
@pytest.mark.parametrize("rows, fragment", [
    ([{"sentence": "a", "label": "x"}, {"label": "y"}], "data row 2 has no 'sentence'"),
    ([{"sentence": "a", "label": "x"}, {"sentence": "b"}], "data row 2 has no 'label'"),
    ([{"sentence": 5, "label": "x"}], "is 5, not text"),
    ([{"sentence": None, "label": "x"}], "is null, not text"),
    ([{"sentence": ["a", "b"], "label": "x"}], 'is ["a", "b"], not text'),
])
def test_jsonl_rows_without_a_column_or_with_non_text_are_refused(tmp_path, rows, fragment):
    # A missing key was an internal error (KeyError); 5, null and a list were scored as "5", "None", "['a', 'b']".
    from mobilebert_kit.training.task_data import read_table, resolve_columns

    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _refused(lambda: resolve_columns(read_table(path), path), error=DataError, fragment=fragment)


def test_more_than_two_text_columns_are_refused(tmp_path):
    # --text-columns a,b,c trained and scored on a and b, dropping c without a word.
    from mobilebert_kit.training.task_data import read_table, resolve_columns

    path = tmp_path / "d.tsv"
    path.write_text("a\tb\tc\tlabel\nx\ty\tz\tpos\n")
    _refused(lambda: resolve_columns(read_table(path), path, ["a", "b", "c"]), error=DataError,
             fragment="names 3 columns (a, b, c); give one text column or a pair")


@pytest.mark.parametrize("name, data", [("d.tsv", "sentence\tlabel\tlabel\nhello\tpos\tneg\n"),
                                        ("d.csv", "text,negative,text\na film,1,b\n")])
def test_a_header_that_names_a_column_twice_is_refused(tmp_path, name, data):
    # Each row kept the last column of the name: a table was trained and scored on the wrong label or text.
    from mobilebert_kit.training.task_data import read_table

    path = tmp_path / name
    path.write_text(data)
    _refused(read_table, path, error=DataError, fragment="names column")


@pytest.mark.parametrize("data", ["sentence\tlabel\nhel\x00lo\tx\n".encode(),
                                  "sentence\tlabel\nhello\tx\n".encode("utf-16-le")])
def test_a_table_with_nul_characters_is_refused_as_not_utf8(tmp_path, data):
    # UTF-16 without a byte-order mark is valid UTF-8 with a NUL after every character: it was refused as
    # "line 3 has 1 field(s)", or its NULs were scored inside the texts.
    from mobilebert_kit.training.task_data import read_table

    path = tmp_path / "d.tsv"
    path.write_bytes(data)
    _refused(read_table, path, error=DataError, fragment="holds a NUL character")


UTF16_TEXT = "the cat sat .\nthe dog ran .\n\na dog sat .\n".encode("utf-16-le")  # no byte-order mark: valid UTF-8


@pytest.mark.parametrize("reader, fragment", [
    ("mobilebert_kit.convert.plan.input_set:_text_lines", "holds a NUL character"),
    ("mobilebert_kit.profiler.real_text:read_lines", "line 1 is not UTF-8 text (byte 0x00)"),
    ("mobilebert_kit.data.pretraining_examples:read_documents", "line 1 is not UTF-8 text (byte 0x00 at column 2)"),
    ("mobilebert_kit.training.task_data:read_tagged", "line 1 holds a NUL character")])
def test_utf16_text_without_a_byte_order_mark_is_refused_by_every_text_reader(tmp_path, reader, fragment):
    # Only tables refused it: calibration, validation and --text sentences were tokenized as "t\0h\0e\0" and
    # PASSED, pretraining-data blamed "1 document", a CoNLL file trained on NUL-laced tags.
    import importlib
    from pathlib import Path

    module, name = reader.split(":")
    path = tmp_path / ("t.conll" if name == "read_tagged" else "t.txt")
    path.write_bytes(UTF16_TEXT)
    fn = getattr(importlib.import_module(module), name)
    call = {"_text_lines": lambda: fn(path, 16), "read_lines": lambda: fn(Path(path)),
            "read_documents": lambda: list(fn([path]))}.get(name, lambda: fn(path))
    _refused(call, fragment=fragment)


@pytest.mark.parametrize("line", ['{"tokens": 5, "tags": 7}', '{"tokens": "abc", "tags": "xyz"}',
                                  '{"tokens": [1], "tags": ["O"]}', '{"tokens": ["a"], "tags": [null]}'])
def test_tagged_jsonl_records_must_hold_lists(tmp_path, line):
    # A number was an internal error (len of int); "abc" trained as the tokens a, b, c.
    from mobilebert_kit.training.task_data import read_tagged

    path = tmp_path / "t.jsonl"
    path.write_text(line + "\n")
    _refused(read_tagged, path, error=DataError, fragment="record 1 needs equally long")


def test_conll_text_bom_and_bad_bytes(tmp_path):
    from mobilebert_kit.training.task_data import read_tagged

    path = tmp_path / "t.conll"
    path.write_bytes(b"\xef\xbb\xbfEU B-ORG\nrejects O\n")
    assert read_tagged(path) == [(["EU", "rejects"], ["B-ORG", "O"])]
    path.write_bytes(b"EU B-ORG\n\xff O\n")  # was an internal error (UnicodeDecodeError)
    _refused(read_tagged, path, error=DataError, fragment="is not UTF-8 text")


# ------------------------------------------------------------------ one sentence per line
def test_text_files_lose_their_byte_order_mark(tmp_path):
    # A SentencePiece tokenizer reads the mark as a token of its own: the first sentence was not the file's.
    from mobilebert_kit.convert.plan.input_set import _text_lines
    from mobilebert_kit.data.pretraining_examples import read_documents
    from mobilebert_kit.profiler.real_text import read_lines

    path = tmp_path / "t.txt"
    path.write_bytes(b"\xef\xbb\xbfhello world\nsecond\n")
    assert _text_lines(path, 10) == ["hello world", "second"]
    assert read_lines(path, 10) == ["hello world", "second"]
    assert list(read_documents([path])) == [["hello world", "second"]]


# ------------------------------------------------------------------ benchmark result files
def _result(**latency_ms):
    fields = {"avg_ms": 1, "min_ms": 2, "max_ms": 3, "median_ms": 5, "p5_ms": 6, "p95_ms": 7}
    body = b"".join(struct.pack("<Bf", fields[k] << 3 | 5, v) for k, v in latency_ms.items())
    return bytes([2 << 3 | 2, len(body)]) + body


@pytest.mark.parametrize("latency, fragment", [
    (dict(median_ms=math.nan), "median_ms is nan"), (dict(avg_ms=-5.0), "avg_ms is -5.0"),
    (dict(p95_ms=math.inf), "p95_ms is inf"), (dict(median_ms=9.0, p95_ms=3.0), "median_ms = 9 above p95_ms = 3"),
])
def test_result_file_figures_that_no_run_gives_are_refused(latency, fragment):
    # They were merged into the report as the run's median or average.
    from mobilebert_kit.profiler.bench_parser import parse_benchmark_result
    from mobilebert_kit.profiler.errors import BenchmarkParseError

    _refused(parse_benchmark_result, _result(**latency), error=BenchmarkParseError, fragment=fragment)


def test_result_file_median_outside_the_printed_runs_is_refused():
    from mobilebert_kit.profiler.bench_parser import merge_benchmark_result, parse_benchmark_output, parse_benchmark_result
    from mobilebert_kit.profiler.errors import BenchmarkParseError

    text = "count=40 first=2000 curr=2000 min=1900 max=2100 avg=2000 std=10\n"
    result = parse_benchmark_result(_result(median_ms=2.05))
    assert merge_benchmark_result(parse_benchmark_output(text), result).latency_ms()["median"] == pytest.approx(2.05)
    far = parse_benchmark_result(_result(median_ms=1000.0))
    _refused(lambda: merge_benchmark_result(parse_benchmark_output(text), far), error=BenchmarkParseError,
             fragment="outside the printed runs' range")


# ------------------------------------------------------------------ tokenizer files
_WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s"]


def _wordpiece_dir(directory, unk_token="[UNK]", vocab_lines=None):
    from tokenizers import BertWordPieceTokenizer

    directory.mkdir(exist_ok=True)
    spec = json.loads(BertWordPieceTokenizer({w: i for i, w in enumerate(_WORDS)}).to_str())
    spec["model"]["unk_token"] = unk_token
    (directory / "tokenizer.json").write_text(json.dumps(spec))
    if vocab_lines is not None:
        (directory / "vocab.txt").write_text("".join(f"{w}\n" for w in vocab_lines))
    return directory


def test_a_tokenizer_json_whose_unknown_token_is_not_in_its_vocabulary_is_refused(tmp_path):
    # It loaded, then failed on the first unknown word ("WordPiece error: Missing [UNK] token from the
    # vocabulary"): an internal error of export, validate and finetune.
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    assert TextTokenizer.from_directory(_wordpiece_dir(tmp_path / "ok")).encode("hello \u2603")[-2:] != []
    bad = _wordpiece_dir(tmp_path / "bad", unk_token="<nope>")
    # The checkpoint's declared special tokens are all in the vocabulary; only its WordPiece model's unk is not.
    (bad / "special_tokens_map.json").write_text(json.dumps({"unk_token": "[UNK]", "cls_token": "[CLS]",
                                                             "sep_token": "[SEP]", "pad_token": "[PAD]"}))
    _refused(TextTokenizer.from_directory, bad, error=DataError, fragment="cannot tokenize a word outside its vocabulary")


def test_a_vocab_txt_cut_short_beside_tokenizer_json_is_refused(tmp_path):
    # It agreed line by line with tokenizer.json, and was carried beside the imported weights.
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    TextTokenizer.from_directory(_wordpiece_dir(tmp_path / "ok", vocab_lines=_WORDS))
    _refused(TextTokenizer.from_directory, _wordpiece_dir(tmp_path / "cut", vocab_lines=_WORDS[:3]), error=DataError,
             fragment="lists 3 tokens but tokenizer.json's vocabulary has 8")


def test_a_sentencepiece_model_whose_unk_id_is_none_of_its_pieces_is_refused():
    # The tokenizers library refused it with a bare Exception (an internal error of `mbk evaluate` on a .tflite).
    from sentencepiece import sentencepiece_model_pb2 as pb

    from mobilebert_kit.data import sentencepiece_model as spm

    model = pb.ModelProto.FromString(spm.write_model([("<unk>", 0.0, spm.UNKNOWN), ("\u2581a", -1.0, spm.NORMAL)],
                                                     unk_id=0))
    model.trainer_spec.unk_id = 7
    _refused(spm.read_model, model.SerializeToString(), error=DataError, fragment="unk_id 7 is none of its 2 pieces")


def test_a_packed_sentencepiece_model_with_damaged_normalization_rules_is_refused():
    # Its precompiled_charsmap (most of a real model's bytes) made the tokenizers library raise a bare Exception:
    # an internal error, exit 1, for `mbk evaluate`/`profile --text` on a damaged .tflite.
    from mobilebert_kit.data import sentencepiece_model as spm
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    pieces = [("<unk>", 0.0, spm.UNKNOWN), ("[CLS]", 0.0, spm.CONTROL), ("[SEP]", 0.0, spm.CONTROL),
              ("\u2581a", -1.0, spm.NORMAL)]
    data = spm.write_model(pieces, unk_id=0, precompiled_charsmap=b"\x10\x00\x00\x00abc")
    _refused(TextTokenizer.from_packed, "sentencepiece", data, "m.tflite", error=DataError,
             fragment="m.tflite: its SentencePiece normalization rules cannot be read")


def test_an_embedded_vocabulary_that_cannot_be_read_is_blamed_on_the_exported_file(tmp_path):
    # The message named a temporary vocab.txt and said to use "the vocab.txt the model was trained with".
    from mobilebert_kit.evaluation.artifact_metrics import app_tokenizer

    path = _tiny_onnx(tmp_path / "m.onnx", metadata={"mbk_metadata": '{"tokenizer_kind": "wordpiece"}',
                                                     "mbk_vocab": "[PAD]\n[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"})
    err = _refused(app_tokenizer, path, error=MbkError, fragment=f"the embedded mbk_vocab of {path}")
    assert "mbk-eval-" not in str(err)


def test_a_foreign_file_that_fails_at_the_default_length_says_to_pass_seq_len():
    # torch.onnx.export of a 64-position model, run at 128 tokens: the hint was "re-export the model".
    from types import SimpleNamespace

    from mobilebert_kit.profiler.host import _runtime_message

    info = SimpleNamespace(path="hf.onnx", static_seq_len=None, max_seq_len=None)
    assert "pass --seq-len within the model's positions" in _runtime_message(info, "onnxruntime", RuntimeError("x"), 128)
    info.max_seq_len = 64  # an mbk export: its length was checked against the table before the run
    assert _runtime_message(info, "onnxruntime", RuntimeError("x"), 32).endswith("re-export the model")


# ------------------------------------------------------------------ recipes
@pytest.mark.parametrize("make, fragment", [(lambda p: p.mkdir(), "is a directory; pass a file"),
                                            (lambda p: p.write_bytes(b"\xd8\x00binary"), "line 1 is not UTF-8 text")])
def test_a_recipe_profile_text_that_cannot_be_read_is_refused_before_any_export(tmp_path, make, fragment):
    # Found after every export, validation and padded timing, and named as "--text", which no recipe has.
    from mobilebert_kit.convert.recipe import Recipe
    from mobilebert_kit.pipeline.runner import _check_vocabulary

    make(tmp_path / "text")
    (tmp_path / "r.toml").write_text('[source]\npreset = "tiny-bert"\n[export]\nformats = ["onnx"]\n'
                                     '[profile]\ntext = "text"\n')
    recipe = Recipe.load(tmp_path / "r.toml")
    _refused(_check_vocabulary, recipe, recipe.options(), error=MbkError, fragment=f"r.toml: [profile] text {tmp_path}")


@pytest.mark.parametrize("with_json", [True, False])
def test_tokenize_chinese_chars_false_is_followed_as_transformers_follows_it(tmp_path, with_json):
    # tokenizer_config.json's tokenize_chinese_chars was ignored: "你好" was two words here and one in transformers.
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    directory = _wordpiece_dir(tmp_path / "t", vocab_lines=_WORDS)
    if not with_json:
        (directory / "tokenizer.json").unlink()
    split = TextTokenizer.from_directory(directory)
    (directory / "tokenizer_config.json").write_text('{"tokenize_chinese_chars": false, "do_lower_case": true}')
    whole = TextTokenizer.from_directory(directory)
    assert split.tokenize("hello \u4f60\u597d") == ["hello", "[UNK]", "[UNK]"]
    assert whole.tokenize("hello \u4f60\u597d") == ["hello", "[UNK]"]
    assert not whole.handle_chinese_chars and whole.fingerprint() != split.fingerprint()
    (directory / "tokenizer_config.json").write_text('{"tokenize_chinese_chars": "no"}')
    _refused(TextTokenizer.from_directory, directory, error=MbkError, fragment="tokenize_chinese_chars is 'no'")


@pytest.mark.parametrize("single, pair, fragment", [([], [], "drops the text"),
                                                    (["[CLS]", "$A", "[SEP]"], ["[CLS]", "$A", "[SEP]"],
                                                     "drops the second text of a pair"),
                                                    # tokenizers panicked on the first text: a raw traceback
                                                    (["[CLS]", "$A", "[SEP]"], ["<s>", "$A", "[SEP]", "$B", "[SEP]"],
                                                     "adds the special token '<s>', which its special_tokens do not")])
def test_a_post_processor_that_drops_the_text_is_refused(tmp_path, single, pair, fragment):
    # An empty template gave every text no tokens: `mbk export` was an internal error in its validation. The
    # library refuses such a template built in Python, not one read from a file.
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    def piece(name):
        return {"Sequence": {"id": "A", "type_id": 0}} if name == "$A" else {"SpecialToken": {"id": name, "type_id": 0}}

    directory = _wordpiece_dir(tmp_path / "t")
    spec = json.loads((directory / "tokenizer.json").read_text())
    spec["post_processor"] = {"type": "TemplateProcessing", "single": [piece(n) for n in single],
                              "pair": [piece(n) for n in pair],
                              "special_tokens": {t: {"id": t, "ids": [_WORDS.index(t)], "tokens": [t]}
                                                 for t in ("[CLS]", "[SEP]")}}
    (directory / "tokenizer.json").write_text(json.dumps(spec))
    (directory / "special_tokens_map.json").write_text('{"cls_token": "[CLS]", "sep_token": "[SEP]"}')
    _refused(TextTokenizer.from_directory, directory, error=DataError, fragment=fragment)


# ------------------------------------------------------------------ checkpoint weights
def test_integer_weights_are_refused_for_their_dtype_not_blamed_on_the_position_layout(tmp_path):
    # An int8 BERT checkpoint rounds position row 0 to zeros: it was refused as a RoBERTa-layout table
    # ("row pad_token_id (0) ... is all zeros"), whose fix (another model_type) was wrong.
    import numpy as np
    from safetensors.numpy import save_file

    import mobilebert_kit as mbk

    (tmp_path / "config.json").write_text(json.dumps(dict(
        model_type="bert", vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=8, max_position_embeddings=8, type_vocab_size=2, pad_token_id=0)))
    table = np.zeros((8, 8), np.int8)
    table[1:] = 1
    save_file({"bert.embeddings.position_embeddings.weight": table}, str(tmp_path / "model.safetensors"))
    _refused(mbk.import_checkpoint, tmp_path, error=MbkError, fragment="with a non-floating dtype")


def test_a_tflite_tensor_name_that_is_not_utf8_is_refused_where_the_file_is_read():
    # `mbk inspect` called such a file ready; `mbk profile` was an internal error inside the LiteRT interpreter.
    import numpy as np
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    from mobilebert_kit.artifacts.reader import read_tflite_bytes

    tensor = schema.TensorT()
    tensor.name, tensor.shape, tensor.type, tensor.buffer = b"input_tensor", np.array([1], np.int32), 0, 0
    graph = schema.SubGraphT()
    graph.tensors, graph.inputs, graph.outputs, graph.operators = [tensor], [0], [0], []
    model = schema.ModelT()
    model.version, model.subgraphs, model.buffers = 3, [graph], [schema.BufferT()]
    data = bytes(flatbuffer_utils.convert_object_to_bytearray(model))
    assert read_tflite_bytes(data).tensors[0]["name"] == "input_tensor"
    at = data.index(b"input_tensor")
    _refused(read_tflite_bytes, data[:at] + b"\xff" + data[at + 1:], error=ArtifactError,
             fragment="the name of tensor 0 is not UTF-8 text")


# ------------------------------------------------------------------ a fine-tune's task.json
@pytest.mark.parametrize("change, fragment", [
    ({"task": []}, "task is [], not one of"), ({"task": {}}, "task is {}, not one of"),
    ({"task": "tagging"}, 'task is "tagging"'), ({"text_columns": {"a": 1}}, "text_columns is"),
    ({"text_columns": ["a", "b", "c"]}, "text_columns is"), ({"label_column": 1.5}, "label_column is 1.5"),
    ({"task": "span_qa", "doc_stride": "abc"}, 'doc_stride is "abc"'),
])
def test_a_hand_edited_task_json_is_refused_before_evaluation(change, fragment):
    # "task": [] was an internal error of `mbk evaluate DIR` (unhashable type: 'list').
    from mobilebert_kit.errors import TrainingError
    from mobilebert_kit.training.fine_tuner import _check_task_spec

    spec = {"task": "classification", "seq_len": 16, "label_names": ["a", "b"], "text_columns": ["sentence"],
            "label_column": "label", "doc_stride": 128, "max_query_length": 64}
    _check_task_spec(dict(spec), "task.json", True)
    _refused(_check_task_spec, {**spec, **change}, "task.json", True, error=TrainingError, fragment=fragment)


# ------------------------------------------------------------------ mbk_metadata, fuzzed to its consumers
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_META_KEYS = ["format", "format_version", "architecture", "task", "client", "pooling", "source", "quantization",
              "seq_len", "planned_seq_len", "batch_size", "inputs", "input_names", "input_dtypes", "outputs",
              "mask_dtype", "io_type", "vocab_size", "max_seq_len", "do_lower_case", "special_tokens",
              "tokenizer_kind", "labels", "table_columns", "normalization_type", "hidden_act",
              "client_tokenizer_sha256", "tokenizer_in_graph"]
_META_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10 ** 13) | st.floats() | st.sampled_from(
        ["wordpiece", "sentencepiece", "classification", "embedding", "mean", "cls", "[CLS]", "", "x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["mode", "normalize", "text_columns", "label_column", "cls", "sep", "kind", "x"]), inner,
        max_size=3), max_leaves=6)


@settings(max_examples=200, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(_META_KEYS), _META_VALUES, max_size=6), st.none() | st.integers(1, 200),
       st.lists(st.sampled_from(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a", ""]), max_size=6))
def test_fuzz_metadata_that_parses_is_used_without_a_crash(meta, requested, vocab):
    """Whatever a hand-edited mbk_metadata holds, it is refused where it is read, or every reader of it (the
    length rule, the carried tokenizer, the inspector's record) takes it: never another exception."""
    from mobilebert_kit.artifacts.carried_tokenizer import carried_tokenizer
    from mobilebert_kit.artifacts.metadata import parse_mbk_metadata, planned_length

    entries = {"mbk_metadata": json.dumps(meta).encode(), "mbk_vocab": "\n".join(vocab).encode()}
    parsed = parses_or_mbk_error(parse_mbk_metadata, entries, "m.onnx")
    if isinstance(parsed, tuple):
        recorded, lines = parsed
        length = parses_or_mbk_error(planned_length, recorded, None, requested)
        assert isinstance(length, ConfigError) or (isinstance(length, int) and length > 0)
        carried = carried_tokenizer("m.onnx", None, recorded, lines)
        assert carried.ready or carried.missing



@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(_META_KEYS), _META_VALUES, max_size=6))
def test_fuzz_metadata_reaches_inspect(tmp_path, meta):
    """`mbk inspect` of a file with a hand-edited mbk_metadata: a report (text and JSON) or one line."""
    from mobilebert_kit.artifacts.inspection import inspect_artifact

    path = _tiny_onnx(tmp_path / "m.onnx", metadata={"mbk_metadata": json.dumps(meta), "mbk_vocab": "[PAD]\n[UNK]\n"})
    info = parses_or_mbk_error(inspect_artifact, path)
    if not isinstance(info, Exception):
        json.dumps(info.to_dict(), default=str)
        assert info.format_text()


# ------------------------------------------------------------------ whole files, mutated
def _tiny_tflite(metadata):
    """A two-tensor flatbuffer (one ADD) with metadata entries, built without TensorFlow."""
    import numpy as np
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    tensors = []
    for i, name in enumerate((b"input_ids", b"logits")):
        tensor = schema.TensorT()
        tensor.name, tensor.shape, tensor.type, tensor.buffer = name, np.array([1, 8], np.int32), 2, 0
        tensor.shapeSignature = np.array([1, -1], np.int32)
        tensors.append(tensor)
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.ADD
    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, np.array([0, 0], np.int32), np.array([1], np.int32)
    graph = schema.SubGraphT()
    graph.tensors, graph.inputs, graph.outputs, graph.operators = tensors, [0], [1], [op]
    model = schema.ModelT()
    model.version, model.subgraphs, model.operatorCodes, model.buffers = 3, [graph], [code], [schema.BufferT()]
    model.metadata = []
    for key, value in metadata.items():
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(value.encode(), np.uint8)
        model.buffers.append(buffer)
        entry = schema.MetadataT()
        entry.name, entry.buffer = key.encode(), len(model.buffers) - 1
        model.metadata.append(entry)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


_MUTATED_META = {"mbk_metadata": json.dumps({"task": "classification", "labels": ["a", "b"], "max_seq_len": 64,
                                             "planned_seq_len": 16, "tokenizer_kind": "wordpiece"}),
                 "mbk_vocab": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n"}


@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_fuzz_mutated_files_reach_inspect(tmp_path, fmt):
    """Seeded byte flips, cuts and splices of a small file with mbk metadata: `mbk inspect`'s report (text and JSON)
    or one line, never another exception (a flipped name byte was an internal error in both formats)."""
    import random

    from mobilebert_kit.artifacts.inspection import inspect_artifact

    if fmt == "onnx":
        original = _tiny_onnx(tmp_path / "seed.onnx", metadata=_MUTATED_META).read_bytes()
    else:
        original = _tiny_tflite(_MUTATED_META)
    assert inspect_artifact(_write(tmp_path / f"seed.{fmt}", original)).format_text()
    rng = random.Random(9)
    for case in range(150):
        data = bytearray(original)
        how = rng.randrange(3)
        if how == 0:
            for _ in range(rng.choice([1, 2, 8])):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif how == 1:
            del data[rng.randrange(len(data)):]
        else:
            start = rng.randrange(len(data))
            data[start:start + rng.randrange(1, 16)] = rng.randbytes(rng.randrange(1, 16))
        info = parses_or_mbk_error(inspect_artifact, _write(tmp_path / f"m{case}.{fmt}", bytes(data)))
        if not isinstance(info, Exception):
            json.dumps(info.to_dict(), default=str)
            info.format_text()


def _write(path, data):
    path.write_bytes(data)
    return path


def test_text_is_never_padded_to_a_length_no_model_has(tmp_path):
    # An .onnx whose inputs claimed a fixed length of 10**9: `mbk profile --text` padded every sentence to it and
    # the tokenizers library aborted the process ("memory allocation of 4000000004 bytes failed").
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    tok = TextTokenizer.from_directory(_wordpiece_dir(tmp_path / "t"))
    assert tok.encode_inputs(["hello world"], 8)["input_ids"].shape == (1, 8)
    _refused(tok.encode_inputs, ["hello world"], 10 ** 9, error=DataError, fragment="cannot pad text to 1,000,000,000")
