"""``mbk profile --text FILE``: latency on real sentences, each fed as the file's app feeds it (issue 36).

The fixture files carry no vocabulary, so the tests pass ``--tokenizer`` with a vocab.txt of the fixtures'
100-row embedding table; an exported file's own packed vocabulary is read by ``mbk evaluate``'s tokenizer
(``evaluation.artifact_metrics.app_tokenizer``, which the command hands the profiler), tested there.
"""

import json

import numpy as np
import pytest

from mobilebert_kit.evaluation.artifact_metrics import app_tokenizer
from mobilebert_kit.profiler.errors import ProfilerError
from mobilebert_kit.profiler.host import HostProfiler
from mobilebert_kit.profiler.real_text import RealText
from tests.data.conftest import write_vocab

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "good", "film", "was", "very", "."]
# Token counts with [CLS] and [SEP]: 8, 3, 9, and 22 (cut at a static file's 16).
LINES = ["the cat sat on a mat", "dog", "the film was very very good .", " ".join(["the cat sat"] * 6 + ["."] * 2)]


@pytest.fixture()
def text(tmp_path):
    vocab = write_vocab(tmp_path / "vocab.txt", WORDS)
    lines = tmp_path / "sentences.txt"
    lines.write_text("\n".join(LINES) + "\n\n", encoding="utf-8")
    return lines, vocab


def fast():
    return HostProfiler(runs=1, warmup=1, min_time_s=0.0, max_time_s=20.0)


def test_sentences_are_cut_only_where_the_file_takes_fewer_tokens(models, text):
    lines, vocab = text
    dynamic = RealText.from_file(lines, models["dynamic"], app_tokenizer(models["dynamic"], vocab))
    static = RealText.from_file(lines, models["ln_gelu"], app_tokenizer(models["ln_gelu"], vocab))
    assert list(dynamic.lengths) == [8, 3, 9, 22]
    assert list(static.lengths) == [8, 3, 9, 16] and static.truncated == 1 and dynamic.truncated == 0
    # A cut keeps the last token, [SEP] (id 3), as a truncating tokenizer does.
    assert static.ids[3][-1] == 3 and dynamic.ids[3][-1] == 3
    # Feeds: a dynamic file gets each sentence at its own length; a static one padded, the mask marking it.
    from mobilebert_kit.profiler.model_info import ModelInfo

    own = dynamic.feeds(ModelInfo(models["dynamic"]).inputs)
    padded = static.feeds(ModelInfo(models["ln_gelu"]).inputs, static_len=16)
    assert [f["input_ids"].shape for f in own] == [(1, 8), (1, 3), (1, 9), (1, 22)]
    assert {f["input_ids"].shape for f in padded} == {(1, 16)}
    assert [int(f["attention_mask"].sum()) for f in padded] == [8, 3, 9, 16]


def test_profile_text_times_every_sentence_at_its_own_length(models, text, monkeypatch):
    lines, vocab = text
    fed = []
    import mobilebert_kit.profiler.host as host

    real_load = host.load_tflite

    def spying_load(*args, **kwargs):
        interpreter = real_load(*args, **kwargs)
        original = interpreter.resize_tensor_input

        def resize(index, shape, strict=False):
            fed.append(tuple(shape))
            return original(index, shape, strict=strict)

        interpreter.resize_tensor_input = resize
        return interpreter

    monkeypatch.setattr(host, "load_tflite", spying_load)
    result = fast().profile_text(models["dynamic"], RealText.from_file(lines, models["dynamic"], app_tokenizer(models["dynamic"], vocab)))
    assert result["text"]["fed"] == "own length" and result["text"]["sentences"] == 4
    assert result["text"]["tokens"]["max"] == 22 and result["seq_len"] == 22
    assert result["latency_ms"]["count"] >= 4  # at least one pass over the sentences
    assert {(1, 8), (1, 3), (1, 9), (1, 22)} <= set(fed)  # resized to each sentence, as the client does
    assert result["flops"] is None and "real text" in result["flops_source"]


def test_static_file_is_fed_padded_sentences(models, text):
    lines, vocab = text
    result = fast().profile_text(models["ln_gelu"], RealText.from_file(lines, models["ln_gelu"], app_tokenizer(models["ln_gelu"], vocab)))
    assert result["text"]["fed"] == "padded to 16" and result["seq_len"] == 16
    assert any("1 sentence(s)" in w and "cut" in w for w in result["warnings"])


def test_real_text_warns_when_threads_share_pinned_cores(models, text):
    # The real-text timing said nothing where the synthetic one warned: its figures looked like one thread per core.
    lines, vocab = text
    profiler = HostProfiler(threads=3, cores="1", runs=1, warmup=1, min_time_s=0.0, max_time_s=20.0)
    result = profiler.profile_text(models["ln_gelu"], RealText.from_file(lines, models["ln_gelu"], app_tokenizer(models["ln_gelu"], vocab)))
    assert any("3 threads on 1 pinned cores" in w for w in result["warnings"])


def test_cli_text_and_fixed_lengths_in_one_report(models, text, tmp_path, mbk):
    lines, vocab = text
    out = tmp_path / "r.json"
    code, stdout, stderr = mbk("profile", models["dynamic"], models["onnx"], "--text", lines, "--tokenizer", vocab,
                               "--seq-len", "8,16", "--runs", "2", "--warmup", "1", "--min-time", "0", "--json", out)
    assert code == 0, stderr
    records = json.loads(out.read_text())["results"]
    assert [(r["model"]["name"], bool(r.get("text")), r["seq_len"]) for r in records] == [
        ("dynamic", True, 22), ("dynamic", False, 8), ("dynamic", False, 16),
        ("tiny", True, 22), ("tiny", False, 8), ("tiny", False, 16)]
    assert "text 8.5/22" in stdout  # the seq column of a real-text row: median / max tokens


@pytest.mark.parametrize("content, words", [(b"\xff\xfe not utf-8\n", "not UTF-8"), (b"\n  \n", "no text lines")])
def test_bad_text_is_a_one_line_error(models, text, tmp_path, mbk, content, words):
    _, vocab = text
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    code, _, stderr = mbk("profile", models["dynamic"], "--text", bad, "--tokenizer", vocab)
    assert code != 0 and words in stderr and stderr.count("\n") == 1 and "Traceback" not in stderr


def test_a_file_without_a_tokenizer_names_the_option(models, text, mbk):
    lines, _ = text
    code, _, stderr = mbk("profile", models["dynamic"], "--text", lines)
    assert code != 0 and "--tokenizer" in stderr and stderr.count("\n") == 1


def test_text_on_a_phone_is_refused_in_one_line(models, text):
    lines, vocab = text
    from mobilebert_kit.cli.cmd_profile import _run_adb

    class Args:
        pass

    args = Args()
    args.text, args.adb = lines, None
    with pytest.raises(ProfilerError, match="host only"):
        _run_adb(args, [])


def test_real_text_lengths_of_a_sentence_set(models, text):
    lines, vocab = text
    summary = RealText.from_file(lines, models["dynamic"], app_tokenizer(models["dynamic"], vocab)).summary()
    assert summary["tokens"] == {"min": 3, "median": 8.5, "mean": float(np.mean([8, 3, 9, 22])),
                                 "p90": float(np.percentile([8, 3, 9, 22], 90)), "max": 22}


def test_a_static_batch_of_two_is_fed_each_sentence_in_both_rows(tmp_path, text):
    """A recipe's static_axes with batch_size = 2: `mbk profile --text` (and the pipeline's real-text timing) fed
    [1, seq] rows and onnxruntime refused them ('Got invalid dimensions for input: input_ids')."""
    from mobilebert_kit.profiler.model_info import ModelInfo
    from tests.helpers import run_mbk

    lines, vocab = text
    path = tmp_path / "b2.onnx"
    run_mbk("export", "tiny-bert", "--format", "onnx", "--static-axes", "--batch-size", "2", "--seq-len", "16",
            "--out", path, check=True)
    real = RealText.from_file(lines, path, app_tokenizer(path, vocab))
    (first, *_) = real.feeds(ModelInfo(path).inputs, static_len=16)
    assert first["input_ids"].shape == (2, 16) and (first["input_ids"][0] == first["input_ids"][1]).all()
    result = fast().profile_text(path, real)
    assert result["latency_ms"]["median"] > 0 and result["text"]["sentences"] == len(LINES)
