"""Resuming ``mbk substitute``: an interrupted recovery continues to the weights an uninterrupted one ends with.

A recovery of tiny-bert (6 steps, checkpoints every 2) is stopped by SIGINT
(checkpointed at that step), by SIGTERM, by a crash (the last periodic
checkpoint is the resume point) and by a full disk, resumed each time, and
its saved model and report are compared with an uninterrupted run's. The
learning rate is high enough (1e-3) that one step taken on other rows, or at
another point of the schedule, or from fresh Adam moments, moves the weights
by far more than the 1e-6 compared.
"""

import json
import os
import shutil
import types

import numpy as np
import pytest

from tests.helpers import assert_one_line_error, assert_same_weights, damage_checkpoint, saved_weights, stop_at

SUBSTITUTE = ("substitute", "tiny-bert", "--norm", "no_norm", "--act", "relu", "--recover-steps", 6, "--seq-len", 16,
              "--batch-size", 4, "--learning-rate", 1e-3, "--checkpoint-every", 2)


def _mbk(capsys, *args):
    """``mbk ARGS`` in this process: ``(returncode, stdout, stderr)`` as a CompletedProcess-like object."""
    from mobilebert_kit.cli.main import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr() if capsys is not None else ("", "")
    return types.SimpleNamespace(returncode=code, stdout=out, stderr=err)


def _substitute(capsys, out, *extra):
    return _mbk(capsys, *SUBSTITUTE, "--out", out, *extra)


def _report(directory):
    return json.loads((directory / "substitution.json").read_text())


@pytest.fixture()
def stop(monkeypatch):
    """``stop(step, how)``: the next recoveries stop after ``step`` (``sigint``, ``sigterm`` or ``crash``);
    ``stop(None)``: they run to the end."""
    from mobilebert_kit.convert.prepare.recovery_run import RecoveryRun

    def at(step, how="sigint"):
        monkeypatch.setattr(RecoveryRun, "on_step_end", None if step is None else stop_at(step, how))

    yield at
    monkeypatch.setattr(RecoveryRun, "on_step_end", None)


def _files(directory):
    """Every file under ``directory`` with its bytes: what a refusal must leave as it was."""
    return {p.relative_to(directory): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("sub_whole") / "out"
    assert _substitute(None, out).returncode == 0
    return out


@pytest.fixture(scope="module")
def stopped_at_3(tmp_path_factory):
    """An ``OUT`` holding a recovery stopped by Ctrl-C at step 3 (checkpoints of steps 2 and 3); copied per test."""
    from mobilebert_kit.convert.prepare.recovery_run import RecoveryRun

    out = tmp_path_factory.mktemp("sub_stopped") / "out"
    RecoveryRun.on_step_end = stop_at(3, "sigint")
    try:
        assert _substitute(None, out).returncode == 130
    finally:
        RecoveryRun.on_step_end = None
    return out


@pytest.fixture()
def interrupted(stopped_at_3, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(stopped_at_3, out)
    return out


def test_an_interrupted_then_crashed_recovery_resumes_to_the_uninterrupted_weights(uninterrupted, stop, tmp_path,
                                                                                    capsys):
    out = tmp_path / "out"
    # Ctrl-C at step 3: the step is checkpointed, exit 130 with one line saying how to continue.
    stop(3, "sigint")
    proc = _substitute(capsys, out)
    assert proc.returncode == 130
    line = proc.stderr.strip()
    assert "\n" not in line and "stopped at step 3 of 6" in line and f"mbk substitute --out {out} --resume" in line
    assert not (out / "substitution.json").exists() and not (out / "config.json").exists()  # never a model
    assert json.loads((out / "run" / "progress.json").read_text())["step"] == 3
    # The same command line and --resume, crashed at step 5: the periodic checkpoint of step 4 is the next point.
    stop(5, "crash")
    proc = _substitute(capsys, out, "--resume")
    assert proc.returncode == 1 and "resuming the recovery at step 4 of 6" in proc.stdout
    assert json.loads((out / "run" / "progress.json").read_text())["step"] == 4
    # --resume alone: SRC and every option come from OUT/run/run.json.
    stop(None)
    proc = _mbk(capsys, "substitute", "--out", out, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert "resuming the recovery at step 5 of 6" in proc.stdout
    assert_same_weights(saved_weights(out), saved_weights(uninterrupted))
    resumed, reference = _report(out), _report(uninterrupted)
    assert resumed["fidelity"]["losses"] == pytest.approx(reference["fidelity"]["losses"], abs=1e-6)
    assert len(resumed["fidelity"]["losses"]) == 6
    # The finished output replaced OUT as a whole: no run state left.
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in uninterrupted.iterdir())
    assert not (out / "run").exists()
    assert_one_line_error(_mbk(capsys, "substitute", "--out", out, "--resume"), "nothing to resume",
                          "its run has finished")


def test_sigterm_checkpoints_like_ctrl_c_and_a_run_killed_before_its_first_checkpoint_resumes_from_0(
        uninterrupted, stop, tmp_path, capsys):
    term, early = tmp_path / "term", tmp_path / "early"
    stop(1, "sigterm")  # what a scheduler or `timeout` sends before SIGKILL
    assert _substitute(capsys, term).returncode == 130
    assert json.loads((term / "run" / "progress.json").read_text())["step"] == 1
    stop(1, "crash")  # before the first checkpoint (step 2): the record is there, the run resumes from step 0
    assert _substitute(capsys, early).returncode == 1
    assert (early / "run" / "run.json").is_file() and not list((early / "run").glob("checkpoints/ckpt-*"))
    stop(None)
    for directory, resumes_at in ((term, 2), (early, 1)):
        # How often checkpoints are written may change on resume: it does not change the result.
        proc = _mbk(capsys, "substitute", "--out", directory, "--resume", "--checkpoint-every", 5)
        assert proc.returncode == 0, proc.stderr
        assert f"resuming the recovery at step {resumes_at} of 6" in proc.stdout
        assert_same_weights(saved_weights(directory), saved_weights(uninterrupted))


def test_a_narrowing_run_resumes_narrow_and_refuses_another_width(stop, tmp_path, capsys):
    import mobilebert_kit as mbk

    whole, out = tmp_path / "whole", tmp_path / "narrow"
    stop(None)
    assert _substitute(capsys, whole, "--intermediate-size", 24).returncode == 0
    stop(3)
    assert _substitute(capsys, out, "--intermediate-size", 24).returncode == 130
    assert json.loads((out / "run" / "run.json").read_text())["config"]["intermediate_size"] == 24
    assert_one_line_error(_substitute(capsys, out, "--resume", "--intermediate-size", 32), "intermediate_size")
    stop(None)
    proc = _mbk(capsys, "substitute", "--out", out, "--resume")  # the width comes from the run's record
    assert proc.returncode == 0, proc.stderr
    assert mbk.load(out).config["intermediate_size"] == 24
    assert_same_weights(saved_weights(out), saved_weights(whole))


def test_the_cli_refuses_what_would_lose_or_mix_runs(interrupted, tmp_path, capsys):
    before = _files(interrupted)
    # A new run over the interrupted one would discard its checkpoints: refused, naming the step and the ways on.
    assert_one_line_error(_substitute(capsys, interrupted), "holds an interrupted substitution run", "step 3 of 6",
                          "--resume", "new --out")
    # Resuming with other options would recover another model: refused, naming each.
    assert_one_line_error(_substitute(capsys, interrupted, "--resume", "--learning-rate", 5e-4, "--seed", 1),
                          "different learning_rate, seed")
    assert_one_line_error(_mbk(capsys, "substitute", "layer_norm_model", "--out", interrupted, "--resume"),
                          "different source")
    # Nothing to resume: a new directory, a user's directory (never deleted), another command's resume.
    assert_one_line_error(_substitute(capsys, tmp_path / "new", "--resume"), "nothing to resume",
                          "start without --resume")
    assert not (tmp_path / "new").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert_one_line_error(_substitute(capsys, mine, "--resume"), "nothing to resume")
    assert_one_line_error(_substitute(capsys, mine), "not written by mbk", "--overwrite")
    assert _files(mine) == {mine.joinpath("notes.txt").relative_to(mine): b"keep me"}
    assert_one_line_error(_mbk(capsys, "finetune", "--out", interrupted, "--resume"), "nothing to resume",
                          "interrupted substitution run", f"mbk substitute --out {interrupted} --resume")
    assert_one_line_error(_mbk(capsys, "substitute", "--out", tmp_path / "x", "--norm", "no_norm"), "missing SRC")
    # A run.json that is a FIFO (reading it would block) or a run/ that links elsewhere is no run: said so.
    fifo = tmp_path / "fifo"
    (fifo / "run").mkdir(parents=True)
    os.mkfifo(fifo / "run" / "run.json")
    assert_one_line_error(_substitute(capsys, fifo, "--resume"), "nothing to resume", "run/run.json is not a regular file")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "run").symlink_to(interrupted / "run")
    assert_one_line_error(_substitute(capsys, linked, "--resume"), "nothing to resume", "run is a symbolic link")
    # A reader handed the run says how to finish it instead of "not a checkpoint".
    assert_one_line_error(_mbk(capsys, "export", interrupted, "--format", "onnx", "--seq-len", 16, "--out",
                               tmp_path / "m.onnx"),
                          "holds an interrupted substitution run", f"mbk substitute --out {interrupted} --resume")
    assert not (tmp_path / "m.onnx").exists()
    assert _files(interrupted) == before  # none of that touched the run


def test_a_new_run_keeps_the_finished_output_until_it_completes(uninterrupted, stop, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(uninterrupted, out)
    stop(3, "sigint")
    assert _substitute(capsys, out, "--seed", 7).returncode == 130
    assert_same_weights(saved_weights(out), saved_weights(uninterrupted), 0)  # the earlier model is still there, untouched
    assert (out / "substitution.json").is_file() and (out / "run" / "run.json").is_file()
    stop(None)
    proc = _substitute(capsys, out, "--seed", 7, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert not (out / "run").exists()
    changed = saved_weights(out)
    assert any(not np.allclose(changed[k], v, atol=1e-6) for k, v in saved_weights(uninterrupted).items())  # seed 7's


def test_overwrite_replaces_a_user_s_directory_only_with_the_finished_output(uninterrupted, monkeypatch, tmp_path,
                                                                            capsys):
    from mobilebert_kit.convert.prepare import recovery

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    real_rows = recovery.step_rows

    def crash_at_3(seed, step, count, batch_size):
        if step == 2:
            raise RuntimeError("simulated crash")
        return real_rows(seed, step, count, batch_size)

    monkeypatch.setattr(recovery, "step_rows", crash_at_3)
    proc = _substitute(capsys, mine, "--overwrite")
    assert proc.returncode == 1 and "keeps no state to resume from" in proc.stdout
    assert _files(mine) == {mine.joinpath("notes.txt").relative_to(mine): b"keep me"}  # no run state put in it
    monkeypatch.setattr(recovery, "step_rows", real_rows)
    assert _substitute(capsys, mine, "--overwrite").returncode == 0
    assert not (mine / "notes.txt").exists() and not (mine / "run").exists()
    assert_same_weights(saved_weights(mine), saved_weights(uninterrupted))  # the run without a state recovers the same model

@pytest.mark.parametrize("field, value, fragment", [
    ("source", 7, "bad 'source'"),
    ("data", 5, "bad 'data'"),
    ("data", "/dev/null", "not a regular file"),
    ("data", "/no/such/mbk/data.npz", "does not exist"),
    ("norm", "batch_norm", "bad 'norm'"),
    ("scale_migration", None, "bad 'scale_migration'"),
    ("recover_steps", 0, "bad 'recover_steps'"),
    ("learning_rate", "1e-3", "bad 'learning_rate'"),
    ("batch_size", 10**12, "bad 'batch_size'"),
    ("fit", "yes", "bad 'fit'"),
    ("intermediate_size", 0, "bad 'intermediate_size'"),
    ("intermediate_size", "768", "bad 'intermediate_size'"),
    ("config", [[[[]]]], "not a substitution run record"),
])
def test_a_hostile_run_record_is_one_line(interrupted, field, value, fragment, capsys):
    record_file = interrupted / "run" / "run.json"
    record = json.loads(record_file.read_text())
    if field in record:
        record[field] = value
    else:
        record["config"][field] = value
    record_file.write_text(json.dumps(record))
    before = _files(interrupted)
    assert_one_line_error(_mbk(capsys, "substitute", "--out", interrupted, "--resume"), fragment)
    assert _files(interrupted) == before


def test_a_deep_or_broken_run_record_is_one_line(interrupted, capsys):
    record_file = interrupted / "run" / "run.json"
    for text in ("[" * 100000, "{not json"):
        record_file.write_text(text)
        assert_one_line_error(_mbk(capsys, "substitute", "--out", interrupted, "--resume"), "run.json")
        assert_one_line_error(_substitute(capsys, interrupted), "holds an interrupted", "--resume")
    assert (interrupted / "run" / "checkpoints").is_dir()


def test_resuming_on_changed_data_is_refused(stop, tmp_path, capsys):
    from mobilebert_kit.convert.plan.input_set import InputSet

    data, out = tmp_path / "rows.npz", tmp_path / "out"
    InputSet.random(vocab_size=512, count=24, seq_len=16, seed=1).save(data)
    stop(3, "sigint")
    assert _substitute(capsys, out, "--data", data).returncode == 130
    InputSet.random(vocab_size=512, count=24, seq_len=16, seed=2).save(data)  # other rows, same path
    stop(None)
    assert_one_line_error(_mbk(capsys, "substitute", "--out", out, "--resume"), "the recovery data changed",
                          "--overwrite")
    assert json.loads((out / "run" / "progress.json").read_text())["step"] == 3



@pytest.mark.parametrize("how, resumes_at", [("truncated data", 3), ("missing index", 3),
                                             ("garbled state file", 4)])
def test_a_damaged_checkpoint_resumes_from_the_one_before(interrupted, uninterrupted, how, resumes_at, capsys):
    damage_checkpoint(interrupted / "run" / "checkpoints", 3, how)
    proc = _mbk(capsys, "substitute", "--out", interrupted, "--resume")
    assert proc.returncode == 0, proc.stderr
    assert f"resuming the recovery at step {resumes_at} of 6" in proc.stdout
    assert ("ckpt-3" in proc.stdout and "cannot be read" in proc.stdout) == (how == "truncated data")
    assert_same_weights(saved_weights(interrupted), saved_weights(uninterrupted))


def test_no_readable_checkpoint_is_one_line(interrupted, capsys):
    for data_file in (interrupted / "run" / "checkpoints").glob("ckpt-*.data-*"):
        data_file.write_bytes(b"\0" * 10)
    assert_one_line_error(_mbk(capsys, "substitute", "--out", interrupted, "--resume"), "no checkpoint in",
                          "can be read", "--overwrite")


def test_a_full_disk_at_a_checkpoint_is_one_line_and_the_run_resumes(uninterrupted, monkeypatch, tmp_path, capsys):
    import errno

    from mobilebert_kit.backend import tf

    out = tmp_path / "out"
    real_save = tf.train.CheckpointManager.save

    def full_at_4(self, checkpoint_number=None, **kwargs):
        if checkpoint_number == 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(self, checkpoint_number=checkpoint_number, **kwargs)

    monkeypatch.setattr(tf.train.CheckpointManager, "save", full_at_4)
    assert_one_line_error(_substitute(capsys, out), "cannot write a checkpoint", "the disk is full", "--resume")
    assert json.loads((out / "run" / "progress.json").read_text())["step"] == 2
    monkeypatch.setattr(tf.train.CheckpointManager, "save", real_save)
    proc = _substitute(capsys, out, "--resume")
    assert proc.returncode == 0 and "resuming the recovery at step 3 of 6" in proc.stdout
    assert_same_weights(saved_weights(out), saved_weights(uninterrupted))


def test_the_cli_defaults_are_the_library_defaults():
    from mobilebert_kit.cli.cmd_substitute import _DEFAULTS
    from mobilebert_kit.convert.prepare.source import Recovery
    from mobilebert_kit.convert.prepare.recovery_run import DEFAULT_CHECKPOINT_EVERY

    library = Recovery()
    assert _DEFAULTS == {"recover_steps": library.steps, "seq_len": library.seq_len,
                         "learning_rate": library.learning_rate, "batch_size": library.batch_size,
                         "seed": library.seed, "checkpoint_every": DEFAULT_CHECKPOINT_EVERY, "fit": library.fit,
                         "scale_migration": library.migrate}


def test_each_step_draws_its_rows_from_the_seed_and_the_step_alone():
    from mobilebert_kit.convert.prepare.recovery import step_rows

    rows = [step_rows(3, step, 40, 8) for step in range(5)]
    assert [list(r) for r in rows[2:]] == [list(step_rows(3, step, 40, 8)) for step in range(2, 5)]  # no history
    assert all(len(set(r)) == 8 and r.max() < 40 for r in rows)
    assert len({tuple(r) for r in rows}) == 5 and list(step_rows(4, 0, 40, 8)) != list(rows[0])
