"""Real faults: a full disk (a file-size limit in a child process), SIGKILL during export and distillation."""

import errno
import json
import os

import pytest

from tests.helpers import assert_one_line_error, run_mbk
from tests.reliability.faults import kill_when, mbk_with_file_size_limit, start_mbk


def _litter(directory):
    return sorted(p.name for p in directory.iterdir())


def test_disk_full_while_writing_an_onnx_artifact(tmp_path):
    out = tmp_path / "m.onnx"
    proc = mbk_with_file_size_limit(100_000, "export", "tiny-mobilebert", "--format", "onnx", "--seq-len", 16,
                                    "--out", out)
    assert proc.returncode == 2
    assert_one_line_error(proc, "file size limit reached while writing", str(out), "nothing was written")
    assert _litter(tmp_path) == []  # no artifact, no report, no temp file


def test_disk_full_while_the_tflite_converter_saves_its_temporary_model(tmp_path):
    # TensorFlow's converter swallows the failed write of its temporary SavedModel and
    # returns a model without a signature: the error must still point at the disk.
    out = tmp_path / "m.tflite"
    proc = mbk_with_file_size_limit(100_000, "export", "tiny-mobilebert", "--seq-len", 16, "--out", out)
    assert proc.returncode == 2
    assert_one_line_error(proc, "could not save its temporary SavedModel", "disk full?", "TMPDIR")
    assert _litter(tmp_path) == []


@pytest.mark.parametrize("code, message", [(errno.ENOSPC, "disk full while writing"),
                                           (errno.EDQUOT, "disk full while writing"),
                                           (errno.EFBIG, "file size limit reached")])
def test_write_errors_become_one_line_and_leave_nothing(tmp_path, monkeypatch, code, message):
    from mobilebert_kit.errors import MbkError
    from mobilebert_kit.utils import atomic

    def failing_fsync(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(atomic.os, "fsync", failing_fsync)
    with pytest.raises(MbkError) as err:
        with atomic.atomic_file(tmp_path / "r.json", "w") as handle:
            handle.write("{}")
    assert message in str(err.value) and "\n" not in str(err.value)
    assert _litter(tmp_path) == []


@pytest.mark.parametrize("writer", ["atomic_file", "atomic_dir"])
def test_a_failed_write_removes_the_directories_made_for_it(tmp_path, writer):
    # `mbk pretraining-data --out d/e/f` refused for its data left d/e behind; a directory that was there stays.
    from mobilebert_kit.data.records import PRETRAINING_DATA
    from mobilebert_kit.utils import atomic

    (tmp_path / "kept").mkdir()
    for out in (tmp_path / "d" / "e" / "f", tmp_path / "kept" / "x" / "y"):
        with pytest.raises(ValueError, match="the command failed"):
            opened = atomic.atomic_file(out, "w") if writer == "atomic_file" else atomic.atomic_dir(out, PRETRAINING_DATA)
            with opened:
                raise ValueError("the command failed")
    assert _litter(tmp_path) == ["kept"] and _litter(tmp_path / "kept") == []


def _scratch_holds_a_temporary(tmpdir):
    """The command's scratch directory holds a temporary made through ``tempfile`` (the converter's SavedModel)."""
    return any(d.name.startswith("mbk-cmd-") and any(e.name.startswith("tmp") and e.is_dir() for e in d.iterdir())
               for d in tmpdir.iterdir())


def test_sigkill_during_export_leaves_no_artifact_and_the_rerun_succeeds(tmp_path, monkeypatch):
    from mobilebert_kit.utils import scratch

    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    work = tmp_path / "work"
    work.mkdir()
    out = work / "m.tflite"
    args = ("export", "tiny-mobilebert", "--seq-len", 16, "--out", out)
    proc = start_mbk(*args)
    # Kill while the TFLite converter has its temporary SavedModel (in the export's scratch directory) and
    # the output's temp file exists (conversion and validation follow).
    kill_when(proc, lambda: any(n.startswith(".m.tflite.") and n.endswith(".partial") for n in os.listdir(work))
              and _scratch_holds_a_temporary(tmpdir))
    # The converter's SavedModel and AutoGraph's modules are in the command's scratch directories, not beside
    # them (a session file of another library, ".ses", is not ours to remove).
    dead = [d for d in tmpdir.iterdir() if d.name != ".ses"]
    assert sorted(d.name.split("-")[1] for d in dead) == ["cmd", "export"]
    for directory in dead:
        assert f"-{proc.pid}-" in directory.name
        old = directory.stat().st_mtime - scratch.STALE_AFTER_S - 60
        os.utime(directory, (old, old))  # idle long enough for the next command to take it for a dead one's
    leftovers = _litter(work)
    assert not out.exists() and not (work / "m.tflite.report.json").exists()
    # Only a hidden temp file named after the dead writer, which nothing takes for a finished artifact.
    assert len(leftovers) == 1 and leftovers[0].startswith(f".m.tflite.{proc.pid}.") and leftovers[0].endswith(".partial")
    assert_one_line_error(run_mbk("inspect", out), "does not exist")
    rerun = run_mbk(*args, check=True)
    assert "PASSED" in rerun.stdout
    # The re-run wrote the artifact and removed the dead writer's leftover, and its scratch directory.
    assert _litter(work) == ["m.tflite", "m.tflite.report.json"]
    assert json.loads((work / "m.tflite.report.json").read_text())["validation"]["passed"] is True
    assert [n for n in _litter(tmpdir) if n != ".ses"] == []


# About 24 s; tests/training/test_distiller.py::test_resume_after_sigint_and_sigkill_matches_uninterrupted kills
# the same run in the default tier and also checks the resumed weights: slow tier.
@pytest.mark.slow
def test_sigkill_during_distillation_resumes_from_the_last_checkpoint(tiny_run_inputs, tmp_path, capsys):
    from mobilebert_kit.cli.main import main

    run = tmp_path / "run"
    args = ["distill", "--teacher", tiny_run_inputs / "teacher", "--student", "tiny-mobilebert", "--data",
            tiny_run_inputs / "data", "--out", run, "--schedule", "progressive", "--layer-steps", 3,
            "--checkpoint-every", 1, "--batch-size", 4, "--log-every", 1, "--shuffle-buffer", 16,
            "--student-override", "attention_dropout=0.0", "--student-override", "hidden_dropout=0.0"]

    def progress():
        try:
            return json.loads((run / "progress.json").read_text())
        except (OSError, ValueError):
            return {}

    proc = start_mbk(*args, log=tmp_path / "first.log")
    kill_when(proc, lambda: progress().get("global_step", 0) >= 2)
    saved = progress()
    assert 2 <= saved["global_step"] < 6 and not saved.get("complete")
    assert not (run / "student").exists()  # the distilled model is only written at the end
    # The re-run (in this process: one TensorFlow import less) continues from the checkpoint.
    code = main(["distill", "--out", str(run), "--resume"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"resuming at {saved['stage_name']}, step {saved['stage_step']}" in out, out
    if saved["stage_step"] > 0:
        # Steps before the checkpoint are not trained again: the stage's first progress line is the next step.
        stage_lines = [ln for ln in out.splitlines() if ln.strip().startswith(f"{saved['stage_name']} ")]
        assert stage_lines and stage_lines[0].strip().startswith(f"{saved['stage_name']} {saved['stage_step'] + 1}/3"), out
    final = progress()
    assert final["complete"] and final["global_step"] == 6
    assert [h["stage"] for h in final["history"]] == ["layer_0", "layer_1"]
    assert (run / "student" / "model.safetensors").is_file()


def _finetune_inputs(tmp_path):
    from tests.training.test_finetune import WORDS, _sentiment

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
    return vocab, _sentiment(tmp_path / "train.tsv", 48, 0)


def test_a_full_disk_at_a_finetune_checkpoint_is_one_line_and_the_run_resumes(tmp_path, capsys):
    from mobilebert_kit.cli.main import main

    vocab, train = _finetune_inputs(tmp_path)
    out = tmp_path / "ft"
    # The record (under 1 KB) is written; the checkpoint's data file (over 100 KB) is not.
    proc = mbk_with_file_size_limit(20_000, "finetune", "--model", "tiny-bert", "--vocab", vocab, "--task",
                                    "classification", "--train", train, "--out", out, "--epochs", 2,
                                    "--batch-size", 8, "--seq-len", 12, "--checkpoint-every", 4)
    assert proc.returncode == 2
    assert_one_line_error(proc, f"cannot write a checkpoint to {out / 'run' / 'checkpoints'}", "--resume")
    assert not (out / "task.json").exists()
    assert [p.name for p in (out / "run" / "checkpoints").iterdir() if "_temp" in p.name] == []  # TF's half-write
    # With room again, the run continues (in this process: one TensorFlow import less).
    code = main(["finetune", "--out", str(out), "--resume"])
    assert code == 0, capsys.readouterr().err
    assert _litter(out) == [".mbk-output.json", "model", "task.json", "tensorboard", "vocab.txt"]


def test_sigkill_during_finetuning_resumes_to_the_uninterrupted_model(tmp_path, capsys):
    import numpy as np

    from mobilebert_kit.cli.main import main
    from mobilebert_kit.utils.safetensors_io import read_safetensors

    vocab, train = _finetune_inputs(tmp_path)
    args = ["finetune", "--model", "tiny-bert", "--vocab", vocab, "--task", "classification", "--train", train,
            "--epochs", 40, "--batch-size", 8, "--seq-len", 12, "--checkpoint-every", 7, "--learning-rate", 1e-3]
    out = tmp_path / "ft"

    def step():
        try:
            return json.loads((out / "run" / "progress.json").read_text())["step"]
        except (OSError, ValueError, KeyError):
            return 0

    proc = start_mbk(*args, "--out", out, log=tmp_path / "first.log")
    kill_when(proc, lambda: step() >= 7)
    saved = step()
    assert saved >= 6 and saved < 240 and not (out / "task.json").exists()  # every 7 steps and each epoch (6)
    assert main(["finetune", "--out", str(out), "--resume"]) == 0
    assert f"resuming at step {saved + 1} of 240" in capsys.readouterr().out
    assert main([*map(str, args), "--out", str(tmp_path / "whole")]) == 0
    resumed = read_safetensors(out / "model" / "model.safetensors")
    whole = read_safetensors(tmp_path / "whole" / "model" / "model.safetensors")
    for name in whole:
        np.testing.assert_allclose(resumed[name], whole[name], rtol=1e-6, atol=1e-6, err_msg=name)


def test_leftovers_of_dead_writers_are_swept_and_live_ones_kept(tmp_path):
    """What a SIGKILLed ``mbk import`` or ``mbk distill`` leaves (a temp directory) goes with the next write."""
    import subprocess

    from mobilebert_kit.models.api import SAVED_MODEL
    from mobilebert_kit.utils.atomic import atomic_dir, atomic_file

    dead = subprocess.Popen(["true"])
    dead.wait()
    live = os.getppid()  # pytest's parent: certainly running
    (tmp_path / f".saved.{dead.pid}.abc123.partial").mkdir()
    (tmp_path / f".saved.{dead.pid}.abc123.partial" / "model.safetensors").write_bytes(b"half")
    (tmp_path / f".saved.{live}.def456.partial").mkdir()
    (tmp_path / f".saved.2.{dead.pid}.ghi789.partial").write_text("belongs to the file 'saved.2'")
    (tmp_path / f".r.json.{dead.pid}.jkl012.partial").write_text("{")
    with atomic_dir(tmp_path / "saved", SAVED_MODEL) as tmp:
        (tmp / "config.json").write_text("{}")
    assert _litter(tmp_path) == sorted([".r.json." + f"{dead.pid}.jkl012.partial", f".saved.2.{dead.pid}.ghi789.partial",
                                        f".saved.{live}.def456.partial", "saved"])
    with atomic_file(tmp_path / "r.json", "w") as handle:
        handle.write("{}")
    assert f".r.json.{dead.pid}.jkl012.partial" not in _litter(tmp_path) and (tmp_path / "r.json").read_text() == "{}"


def test_finished_files_get_the_mode_a_plain_open_gives(tmp_path):
    """mkstemp's 0600 must not leak into artifacts: other users and tools read models like any file."""
    from mobilebert_kit.utils.atomic import atomic_file, atomic_path

    umask = os.umask(0)
    os.umask(umask)
    with atomic_file(tmp_path / "a.json", "w") as handle:
        handle.write("{}")
    with atomic_path(tmp_path / "b.tflite") as tmp:
        tmp.write_bytes(b"x")
    for name in ("a.json", "b.tflite"):
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o666 & ~umask


def test_a_write_error_inside_a_directory_names_the_final_path_not_the_temporary_one(tmp_path):
    from mobilebert_kit.models.api import SAVED_MODEL
    from mobilebert_kit.training.finetune_run import FINETUNE_OUTPUT
    from mobilebert_kit.utils.atomic import OutputError, atomic_dir

    out = tmp_path / "ft"
    with pytest.raises(OutputError) as caught:
        with atomic_dir(out, FINETUNE_OUTPUT) as tmp:
            with atomic_dir(tmp / "model", SAVED_MODEL):  # a model saved into the output, as mbk finetune does
                raise OSError(errno.ENOSPC, "No space left on device")
    assert str(caught.value).startswith(f"disk full while writing {out / 'model'};"), caught.value
    assert _litter(tmp_path) == []


def test_sigterm_outside_a_training_loop_unwinds_like_ctrl_c(tmp_path):
    # SIGTERM's default action killed `mbk pretraining-data` at once: no message, its .partial directory left.
    import signal

    from tests.data.conftest import write_vocab

    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{' '.join(words[i % 9:] + words[:i % 9])}.\n" + ("\n" if i % 5 == 4 else "")
                              for i in range(4000)))
    vocab = write_vocab(tmp_path / "vocab.txt", words + ["."])
    out = tmp_path / "data"
    log = tmp_path / "log.txt"
    proc = start_mbk("pretraining-data", "--input", corpus, "--vocab", vocab, "--out", out, "--seq-len", 32,
                     "--dupe-factor", 200, log=log)
    kill_when(proc, lambda: any(n.endswith(".partial") for n in os.listdir(tmp_path)), signum=signal.SIGTERM)
    assert proc.returncode == 130
    assert "mbk pretraining-data: interrupted" in log.read_text() and "Traceback" not in log.read_text()
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "log.txt", "vocab.txt"]


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_an_interrupt_that_surfaces_as_another_error_is_reported_as_the_interrupt(monkeypatch, capsys, signame):
    # A signal while onnxruntime's extension initialised came back as "ImportError: initialization failed", which
    # mbk reported as an internal error with exit 1 (about 1 in 12 tries at 0.45 s into an export).
    import signal

    from mobilebert_kit.cli import cmd_presets, main

    def interrupted_import(args):
        try:
            signal.raise_signal(getattr(signal, signame))
        except KeyboardInterrupt:
            raise ImportError("initialization failed") from None

    monkeypatch.setattr(cmd_presets, "run", interrupted_import)
    # Python's own Ctrl-C handler, as in a terminal: a process started in the background of a non-interactive
    # shell (a CI script's `cmd &`) inherits SIGINT ignored, and then no Ctrl-C reaches it at all.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert main.main(["presets"]) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    err = capsys.readouterr().err
    assert err.strip() == "mbk presets: interrupted" and "internal error" not in err
    monkeypatch.setattr(cmd_presets, "run", lambda args: 1 / 0)  # with no signal, an error stays an internal error
    assert main.main(["presets"]) == 1
    assert "internal error (ZeroDivisionError" in capsys.readouterr().err


def test_onnx_quantization_on_a_full_temporary_directory_names_it(tmp_path, monkeypatch):
    # A full TMPDIR made ORT's quantizer read back a truncated copy: "Error parsing message ... Wire format was
    # corrupt", with nothing saying why.
    import shutil
    from collections import namedtuple

    import onnx

    from mobilebert_kit.convert.onnx.export import _short_of_room
    from tests.profiler.fixture_models import build_onnx_bert

    build_onnx_bert(tmp_path / "m.onnx", vocab_size=20, hidden=8, layers=1, seq_len=8)
    model = onnx.load(str(tmp_path / "m.onnx"))
    assert _short_of_room(tmp_path, model) == ""
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**6, 10**6 - 1000, 1000))
    assert _short_of_room(tmp_path, model).startswith(f"; the temporary directory {tmp_path} has 0.0 MB free")
    assert "set TMPDIR to a larger disk" in _short_of_room(tmp_path, model)


@pytest.mark.parametrize("guard", ["InterruptFlag", "TerminateAsInterrupt"])
def test_a_handler_python_cannot_put_back_leaves_the_default_action(monkeypatch, guard):
    # signal.signal returns None for a handler installed outside Python (an embedding program's): putting that back
    # raised TypeError on leaving InterruptFlag, and TerminateAsInterrupt left its own handler installed.
    import signal

    from mobilebert_kit.utils import interrupt

    real = signal.signal
    monkeypatch.setattr(signal, "signal", lambda signum, handler: (real(signum, handler), None)[1])
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        with getattr(interrupt, guard)() as held:
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, before[signal.SIGTERM])
        assert held is not None
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        for signum, handler in before.items():
            real(signum, handler)
