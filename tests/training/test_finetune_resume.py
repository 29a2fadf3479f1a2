"""Resuming ``mbk finetune``: an interrupted run continues to the model an uninterrupted run trains.

A run is stopped by SIGINT (checkpointed at that step) and by a crash (the
last periodic checkpoint is the resume point), resumed each time, and its
weights are compared with an uninterrupted run's. Dropout is on, so the
comparison also checks that the masks and the data order survive the resume.
"""

import json

import numpy as np
import pytest

from mobilebert_kit.training.fine_tuner import FineTuner
from mobilebert_kit.training.finetune_config import FinetuneConfig
from tests.training.test_cli import mbk
from tests.training.test_finetune import _quiet, _sentiment, tokenizer  # noqa: F401  (a fixture)
from tests.helpers import assert_same_weights, damage_checkpoint, saved_weights, stop_at


# 48 rows, batch 8: 6 steps per epoch, 12 in all; checkpoints at steps 4 and 8.
CONFIG = dict(task="classification", epochs=2, batch_size=8, learning_rate=2e-3, seq_len=12, dropout=0.1,
              checkpoint_every=4, seed=5)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("ft_resume")
    return _sentiment(root / "train.tsv", 48, 0), _sentiment(root / "dev.tsv", 16, 1)


@pytest.fixture(scope="module")
def uninterrupted(tokenizer, data, tmp_path_factory):
    out = tmp_path_factory.mktemp("ft_whole") / "out"
    results = FineTuner("tiny-bert", tokenizer, FinetuneConfig(**CONFIG), console=_quiet()).train(
        data[0], out, eval_path=data[1])
    return out, results


def test_an_interrupted_then_crashed_run_resumes_to_the_uninterrupted_model(tokenizer, data, uninterrupted, tmp_path):
    train, dev = data
    out = tmp_path / "out"

    def tuner(hook=None):
        return FineTuner("tiny-bert", tokenizer, FinetuneConfig(**CONFIG), console=_quiet(), on_step_end=hook)

    # Ctrl-C at step 7 (mid epoch 2): the step is checkpointed and the run stops.
    with pytest.raises(KeyboardInterrupt):
        tuner(stop_at(7, "sigint")).train(train, out, eval_path=dev)
    assert not (out / "task.json").exists() and not (out / "model").exists()  # never taken for a finished output
    progress = json.loads((out / "run" / "progress.json").read_text())
    assert (progress["step"], progress["total"]) == (7, 12)
    # Resumed, then crashed at step 10: the periodic checkpoint of step 8 is the next resume point.
    with pytest.raises(RuntimeError, match="simulated crash"):
        tuner(stop_at(10, "crash")).train(train, out, eval_path=dev, resume=True)
    assert json.loads((out / "run" / "progress.json").read_text())["step"] == 8
    results = tuner().train(train, out, eval_path=dev, resume=True)
    reference, reference_results = uninterrupted
    assert_same_weights(saved_weights(out / "model"), saved_weights(reference / "model"))
    assert results == pytest.approx(reference_results)
    # The finished output replaced the run's state; its TensorBoard scalars span the three processes.
    assert sorted(p.name for p in out.iterdir()) == [".mbk-output.json", "model", "task.json", "tensorboard",
                                                    "vocab.txt"]
    from mobilebert_kit.training.summaries import read_scalars

    steps = [step for step, _ in read_scalars(out / "tensorboard")["finetune/loss"]]
    assert steps == [step for step, _ in read_scalars(reference / "tensorboard")["finetune/loss"]]


def test_sigterm_checkpoints_like_ctrl_c_and_a_run_killed_before_its_first_checkpoint_resumes_from_0(
        tokenizer, data, uninterrupted, tmp_path):
    import io

    from rich.console import Console

    train, dev = data
    config = FinetuneConfig(**CONFIG)
    # What a scheduler or `timeout` sends before SIGKILL: the step is checkpointed as for Ctrl-C.
    out = tmp_path / "term"
    with pytest.raises(KeyboardInterrupt):
        FineTuner("tiny-bert", tokenizer, config, console=_quiet(), on_step_end=stop_at(2, "sigterm")).train(
            train, out, eval_path=dev)
    assert json.loads((out / "run" / "progress.json").read_text())["step"] == 2
    # A crash before the first checkpoint (step 4): the run's record is there, so --resume starts from step 0.
    early = tmp_path / "early"
    with pytest.raises(RuntimeError, match="simulated crash"):
        FineTuner("tiny-bert", tokenizer, config, console=_quiet(), on_step_end=stop_at(2, "crash")).train(
            train, early, eval_path=dev)
    assert (early / "run" / "run.json").is_file() and not list((early / "run").glob("checkpoints/ckpt-*"))
    for directory, resumes_at in ((out, 3), (early, 1)):
        text = io.StringIO()
        FineTuner("tiny-bert", tokenizer, config, console=Console(file=text, width=400)).train(
            train, directory, eval_path=dev, resume=True)
        assert f"resuming at step {resumes_at} of 12" in text.getvalue()
        assert_same_weights(saved_weights(directory / "model"), saved_weights(uninterrupted[0] / "model"))


def test_a_full_disk_at_the_output_keeps_the_trained_model_for_resume(tokenizer, data, uninterrupted, tmp_path,
                                                                        monkeypatch, capsys):
    import errno

    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.training import fine_tuner

    out = tmp_path / "out"
    real_save = fine_tuner.save_model

    def full_disk(model, directory):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fine_tuner, "save_model", full_disk)
    with pytest.raises(MbkError, match="disk full while writing"):
        FineTuner("tiny-bert", tokenizer, FinetuneConfig(**CONFIG), console=_quiet()).train(data[0], out,
                                                                                          eval_path=data[1])
    assert not (out / "task.json").exists()
    assert json.loads((out / "run" / "progress.json").read_text())["step"] == 12  # the trained model
    monkeypatch.setattr(fine_tuner, "save_model", real_save)
    proc = mbk(capsys, *_cli(tokenizer, data, out), check=False)  # a plain re-run is refused, naming the state
    assert "trained to step 12, its output not written" in proc.stderr and "--resume" in proc.stderr
    proc = mbk(capsys, "finetune", "--out", out, "--resume")
    assert "training is complete, writing the output" in proc.stdout
    assert "fine-tuning 1/" not in proc.stdout  # no step trained again
    assert_same_weights(saved_weights(out / "model"), saved_weights(uninterrupted[0] / "model"))


def test_a_run_failing_before_its_first_step_leaves_nothing(tokenizer, tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence\tlabel\nthe movie was good\tpos\n")  # fewer rows than the batch
    with pytest.raises(Exception, match="fewer than --batch-size"):
        FineTuner("tiny-bert", tokenizer, FinetuneConfig(**CONFIG), console=_quiet()).train(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_new_run_keeps_the_finished_output_until_it_completes(tokenizer, data, uninterrupted, tmp_path):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(uninterrupted[0], out)
    before = saved_weights(out / "model")
    config = FinetuneConfig(**{**CONFIG, "seed": 6})
    with pytest.raises(KeyboardInterrupt):
        FineTuner("tiny-bert", tokenizer, config, console=_quiet(), on_step_end=stop_at(5, "sigint")).train(
            data[0], out)
    assert_same_weights(saved_weights(out / "model"), before, 0)  # the earlier model is still there, untouched
    assert (out / "task.json").is_file() and (out / "run" / "run.json").is_file()


def _tree(directory):
    """Every file under ``directory`` with its bytes, and every directory (None): what must stay as it was."""
    return {p.relative_to(directory): p.read_bytes() if p.is_file() else None
            for p in sorted(directory.rglob("*"))}


def _users_directory(path):
    """A directory mbk did not write, with a file and a subdirectory; returns its tree."""
    path.mkdir()
    (path / "notes.txt").write_text("keep me")
    (path / "data").mkdir()
    (path / "data" / "table.bin").write_bytes(bytes(range(256)))
    return _tree(path)


@pytest.mark.parametrize("what, how", [("directory", "sigint"), ("directory", "sigterm"), ("directory", "crash"),
                                       ("file", "sigint"), ("saved model", "crash")])
def test_overwrite_leaves_a_user_s_directory_intact_when_the_run_stops(tokenizer, data, uninterrupted, tmp_path,
                                                                       what, how):
    import io
    import shutil

    from rich.console import Console

    mine = tmp_path / "mine"
    if what == "directory":
        _users_directory(mine)
    elif what == "file":  # a file of the user's where the output directory goes
        mine.write_bytes(b"the user's notes\n")
    else:  # another command's output: a model directory mbk saved, not a fine-tuning output
        shutil.copytree(uninterrupted[0] / "model", mine)
    before = mine.read_bytes() if what == "file" else _tree(mine)
    text = io.StringIO()
    with pytest.raises(RuntimeError if how == "crash" else KeyboardInterrupt):
        FineTuner("tiny-bert", tokenizer, FinetuneConfig(**CONFIG), console=Console(file=text, width=400),
                  on_step_end=stop_at(5, how)).train(data[0], mine, eval_path=data[1], overwrite=True)
    if what == "directory":
        assert (mine / "notes.txt").read_text() == "keep me"
    # Byte for byte, and nothing added: no run state, no marker; nothing left beside it either.
    assert (mine.read_bytes() if what == "file" else _tree(mine)) == before
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]
    assert "was not written by mbk finetune" in text.getvalue()
    assert "keeps no state to resume from" in text.getvalue()
    if how != "crash":  # the stop line does not promise a checkpoint it did not write
        assert f"interrupted at step 5 of 12; nothing was kept and {mine} is as it was" in text.getvalue()
        assert "--resume" not in text.getvalue().split("interrupted at step 5")[1]


_FINETUNER_INIT = FineTuner.__init__


def _stop_the_cli_at(monkeypatch, step, how):
    """Makes the FineTuner that `mbk finetune` builds stop at ``step`` (``_stop_at``); step None: run through."""
    def init(self, *args, **kwargs):
        _FINETUNER_INIT(self, *args, **{**kwargs, "on_step_end": stop_at(step, how) if step else None})

    monkeypatch.setattr(FineTuner, "__init__", init)


def test_overwrite_replaces_a_user_s_directory_only_with_the_finished_output(tokenizer, data, uninterrupted,
                                                                            tmp_path, monkeypatch, capsys):
    mine = tmp_path / "mine"
    before = _users_directory(mine)
    _stop_the_cli_at(monkeypatch, 7, "sigint")
    proc = mbk(capsys, *_cli(tokenizer, data, mine, "--overwrite"), check=False)
    assert proc.returncode == 130 and _tree(mine) == before
    assert "keeps no state to resume from" in proc.stdout
    # Nothing to resume, and the refusal touches nothing.
    proc = mbk(capsys, "finetune", "--out", mine, "--resume", check=False)
    assert proc.returncode == 2 and "nothing to resume" in proc.stderr
    assert _tree(mine) == before
    _stop_the_cli_at(monkeypatch, None, None)
    proc = mbk(capsys, *_cli(tokenizer, data, mine, "--overwrite"))
    assert "keeps no state to resume from" in proc.stdout
    # The finished output replaced the directory as a whole: the model an uninterrupted run trains.
    assert sorted(p.name for p in mine.iterdir()) == [".mbk-output.json", "model", "task.json", "tensorboard",
                                                     "vocab.txt"]
    assert_same_weights(saved_weights(mine / "model"), saved_weights(uninterrupted[0] / "model"))


def test_a_finished_output_stays_usable_until_a_new_run_with_overwrite_completes(tokenizer, data, uninterrupted,
                                                                                tmp_path, monkeypatch, capsys):
    import shutil

    from mobilebert_kit.training.fine_tuner import evaluate_directory

    out = tmp_path / "out"
    shutil.copytree(uninterrupted[0], out)
    earlier = _tree(out)
    reference = evaluate_directory(uninterrupted[0], data[1])

    def usable():
        assert {k: v for k, v in _tree(out).items() if k.parts[0] != "run"} == earlier
        assert mbk(capsys, "evaluate", "--model", out, "--data", data[1]).returncode == 0
        assert evaluate_directory(out, data[1]) == pytest.approx(reference)

    # A new run (another seed) with --overwrite over the finished output: stopped, it keeps its state beside
    # the earlier output (OUT is ours), which stays as it was.
    _stop_the_cli_at(monkeypatch, 5, "sigint")
    assert mbk(capsys, *_cli(tokenizer, data, out, "--overwrite", "--seed", 6), check=False).returncode == 130
    assert json.loads((out / "run" / "progress.json").read_text())["step"] == 5
    usable()
    # Started over again with --overwrite (the interrupted run discarded), crashed before its first checkpoint.
    _stop_the_cli_at(monkeypatch, 2, "crash")
    assert mbk(capsys, *_cli(tokenizer, data, out, "--overwrite", "--seed", 6), check=False).returncode == 1
    usable()
    # Resumed to the end: now OUT is the new run's model, and only that.
    _stop_the_cli_at(monkeypatch, None, None)
    assert "resuming at step 1 of 12" in mbk(capsys, "finetune", "--out", out, "--resume").stdout
    assert sorted(p.name for p in out.iterdir()) == [".mbk-output.json", "model", "task.json", "tensorboard",
                                                    "vocab.txt"]
    new, old = saved_weights(out / "model"), saved_weights(uninterrupted[0] / "model")
    assert any(not np.allclose(new[k], old[k], atol=1e-6) for k in old)  # seed 6's model


def _cli(tokenizer, data, out, *extra):
    train, _ = data
    return ("finetune", "--model", "tiny-bert", "--vocab", tokenizer.source, "--task", "classification", "--train",
            train, "--out", out, "--epochs", 2, "--batch-size", 8, "--seq-len", 12, "--learning-rate", 2e-3,
            "--seed", 5, "--checkpoint-every", 4, *extra)


@pytest.fixture()
def interrupted(tokenizer, data, tmp_path):
    """An ``OUT`` holding a run stopped by Ctrl-C at step 3 (checkpointed there)."""
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        FineTuner("tiny-bert", tokenizer, FinetuneConfig(**{**CONFIG, "dropout": 0.1}), console=_quiet(),
                  on_step_end=stop_at(3, "sigint")).train(data[0], out)
    return out


def test_the_cli_refuses_what_would_lose_or_mix_runs(tokenizer, data, interrupted, tmp_path, capsys):
    from tests.helpers import assert_one_line_error

    out = interrupted
    # Starting again without --resume would discard the checkpoint: refused, naming both ways on.
    line = assert_one_line_error(mbk(capsys, *_cli(tokenizer, data, out), check=False),
                                 "holds an interrupted fine-tuning run", "step 3 of 12", "--resume", "--overwrite")
    assert "Traceback" not in line
    # Resuming with other options would train a different model: refused, naming the option.
    assert_one_line_error(mbk(capsys, *_cli(tokenizer, data, out, "--resume", "--learning-rate", 1e-3), check=False),
                          "different learning_rate")
    # Nothing to resume: a new directory, and a finished output.
    assert_one_line_error(mbk(capsys, *_cli(tokenizer, data, tmp_path / "new", "--resume"), check=False),
                          "nothing to resume", "start without --resume")
    assert not (tmp_path / "new").exists()
    assert (out / "run" / "checkpoints").is_dir()  # none of that touched the run
    # --resume alone: the inputs and options come from OUT/run/run.json, and the run completes.
    proc = mbk(capsys, "finetune", "--out", out, "--resume")
    assert "resuming at step 4 of 12" in proc.stdout
    assert (out / "task.json").is_file() and not (out / "run").exists()
    assert_one_line_error(mbk(capsys, "finetune", "--out", out, "--resume", check=False),
                          "nothing to resume", "its run has finished")
    assert_one_line_error(mbk(capsys, "finetune", "--out", tmp_path / "x", check=False),
                          "missing --model, --task, --train")


def test_resuming_on_changed_training_data_is_refused(tokenizer, data, interrupted, tmp_path, capsys):
    from tests.helpers import assert_one_line_error

    train = tmp_path / "train.tsv"
    train.write_text(data[0].read_text())
    record_file = interrupted / "run" / "run.json"
    record = json.loads(record_file.read_text())
    record["train"] = str(train)
    record_file.write_text(json.dumps(record))
    with train.open("a") as handle:  # 8 more rows: another step per epoch
        handle.write("".join(f"the movie was good\tpos\n" for _ in range(8)))
    assert_one_line_error(mbk(capsys, "finetune", "--out", interrupted, "--resume", check=False),
                          f"{train} changed since the run", "same path, other content")  # issue 37's fingerprint
    _drop_fingerprint(interrupted)  # a record from before fingerprints: the step count still tells
    assert_one_line_error(mbk(capsys, "finetune", "--out", interrupted, "--resume", check=False),
                          "now makes 14 steps", "started on 12", "the training data changed")


def _drop_fingerprint(out):
    """Makes ``out``'s run record one written before run records kept the data's fingerprint (issue 37)."""
    record_file = out / "run" / "run.json"
    record = json.loads(record_file.read_text())
    record.pop("fingerprint")
    record_file.write_text(json.dumps(record))


@pytest.mark.parametrize("field, value, fragment", [
    ("text_columns", {"a": 1}, "bad 'text_columns'"),
    ("cased", "yes", "bad 'cased'"),
    ("train", 7, "bad 'train'"),
    ("train", "/dev/null", "not a regular file"),
    ("vocab", "/no/such/mbk/vocab.txt", "vocab"),
    ("config", [[[[]]]], "not a fine-tuning run record"),
])
def test_a_hostile_run_record_is_one_line(interrupted, field, value, fragment, capsys):
    from tests.helpers import assert_one_line_error

    record_file = interrupted / "run" / "run.json"
    record = json.loads(record_file.read_text())
    record[field] = value
    record_file.write_text(json.dumps(record))
    assert_one_line_error(mbk(capsys, "finetune", "--out", interrupted, "--resume", check=False), fragment)
    assert (interrupted / "run" / "checkpoints").is_dir()


def test_a_deep_or_broken_run_record_is_one_line(interrupted, capsys):
    from tests.helpers import assert_one_line_error

    record_file = interrupted / "run" / "run.json"
    record_file.write_text("[" * 100000)
    assert_one_line_error(mbk(capsys, "finetune", "--out", interrupted, "--resume", check=False), "run.json")
    record_file.write_text("{not json")
    assert_one_line_error(mbk(capsys, "finetune", "--out", interrupted, "--resume", check=False), "run.json")



@pytest.mark.parametrize("how, resumes_at", [("truncated data", 5), ("missing index", 5),
                                             ("garbled state file", 6)])
def test_a_damaged_checkpoint_resumes_from_the_one_before(tokenizer, data, uninterrupted, tmp_path, how, resumes_at):
    import io

    from rich.console import Console

    out = tmp_path / "out"
    config = FinetuneConfig(**CONFIG)
    with pytest.raises(KeyboardInterrupt):  # checkpoints of steps 4 and 5
        FineTuner("tiny-bert", tokenizer, config, console=_quiet(), on_step_end=stop_at(5, "sigint")).train(
            data[0], out, eval_path=data[1])
    damage_checkpoint(out / "run" / "checkpoints", 5, how)
    text = io.StringIO()
    FineTuner("tiny-bert", tokenizer, config, console=Console(file=text, width=400)).train(
        data[0], out, eval_path=data[1], resume=True)
    assert f"resuming at step {resumes_at} of 12" in text.getvalue()
    assert ("ckpt-5" in text.getvalue() and "cannot be read" in text.getvalue()) == (how == "truncated data")
    assert_same_weights(saved_weights(out / "model"), saved_weights(uninterrupted[0] / "model"))


def test_no_readable_checkpoint_is_one_line(interrupted, capsys):
    from tests.helpers import assert_one_line_error

    for data_file in (interrupted / "run" / "checkpoints").glob("ckpt-*.data-*"):
        data_file.write_bytes(b"\0" * 10)
    assert_one_line_error(mbk(capsys, "finetune", "--out", interrupted, "--resume", check=False),
                          "no checkpoint in", "can be read", "--overwrite")


def test_readers_handed_an_interrupted_run_say_how_to_finish_it(interrupted, data, tmp_path, capsys):
    from tests.helpers import assert_one_line_error

    for command in (("evaluate", "--model", interrupted, "--data", data[1]),
                    ("export", interrupted, "--format", "onnx", "--seq-len", 12, "--out", tmp_path / "m.onnx")):
        assert_one_line_error(mbk(capsys, *command, check=False), "holds an interrupted fine-tuning run",
                              f"mbk finetune --out {interrupted} --resume")
    assert not (tmp_path / "m.onnx").exists()


def test_resuming_after_the_data_gained_a_class_is_one_line(tokenizer, tmp_path, capsys):
    # Same rows, another label set: the head has another size, and restoring the checkpoint was an internal error.
    from tests.helpers import assert_one_line_error

    train = _sentiment(tmp_path / "train.tsv", 48, 0)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        FineTuner("tiny-bert", tokenizer, FinetuneConfig(**CONFIG), console=_quiet(),
                  on_step_end=stop_at(3, "sigint")).train(train, out)
    lines = train.read_text().splitlines()
    train.write_text("\n".join(lines[:-1] + [lines[-1].rsplit("\t", 1)[0] + "\tneutral"]) + "\n")
    assert_one_line_error(mbk(capsys, "finetune", "--out", out, "--resume", check=False),
                          f"{train} changed since the run", "same path, other content")  # issue 37's fingerprint
    _drop_fingerprint(out)  # a record from before fingerprints: the head's size still tells
    assert_one_line_error(mbk(capsys, "finetune", "--out", out, "--resume", check=False),
                          "does not fit the model", "3 output(s)", "the training data changed", "--overwrite")
    assert (out / "run" / "checkpoints").is_dir()
