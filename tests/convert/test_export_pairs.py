"""Issue 47 item 5: an export installs its file and its report as one unit, also when two run into one ``--out``."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from mobilebert_kit.artifacts.metadata import read_artifact_metadata
from mobilebert_kit.convert.errors import ExportError


def _options(out, seq_len):
    from mobilebert_kit.convert.exporter import ExportOptions

    return ExportOptions("tiny-bert", "onnx", "none", out=str(out), task="embedding", pooling="mean", seq_len=seq_len,
                         validate=False)


def _pair_is_one_writers(out):
    report = json.loads(out.with_name(f"{out.name}.report.json").read_text())
    assert report["size_bytes"] == out.stat().st_size
    assert read_artifact_metadata(out)["planned_seq_len"] == report["seq_len"]
    return report["seq_len"]


def test_an_export_whose_new_out_another_wrote_meanwhile_refuses_and_keeps_that_pair(tmp_path, monkeypatch):
    """Deterministic interleaving: export B runs whole while export A is about to install. A began with no OUT,
    finds B's pair, and refuses in one line; B's file and report stay together (before: A's file beside B's
    report, and both said "wrote")."""
    from mobilebert_kit.convert import exporter
    from mobilebert_kit.utils import atomic

    out = tmp_path / "m.onnx"
    real_hold, ran = atomic._InstallLock.hold, []

    def hold_after_another_export(lock):
        if not ran:
            ran.append("B")  # before B runs: B's own install must take the lock, not start a third export
            exporter.export(_options(out, 32), log=None)  # B, start to finish
        return real_hold(lock)

    monkeypatch.setattr(atomic._InstallLock, "hold", hold_after_another_export)
    with pytest.raises(ExportError, match="another command wrote .* while this export ran") as caught:
        exporter.export(_options(out, 16), log=None)  # A
    assert "\n" not in str(caught.value)
    assert _pair_is_one_writers(out) == 32
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx.report.json"]  # no temporary left


def test_two_real_exports_into_one_new_out_leave_one_writers_pair(tmp_path):
    """Two processes at once: one installs, and the other either refuses in one line (it began before the first
    installed) or, had it begun after, replaces the pair whole. Never a file beside the other's report."""
    out = tmp_path / "m.onnx"
    runs = [subprocess.Popen([sys.executable, "-m", "mobilebert_kit.cli.main", "export", "tiny-bert", "--format", "onnx",
                              "--task", "embedding", "--pooling", "mean", "--seq-len", str(n), "--no-validate",
                              "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}) for n in (16, 32)]
    done = [(run.wait(timeout=600), *run.communicate()) for run in runs]
    assert all(code in (0, 2) for code, _, _ in done) and any(code == 0 for code, _, _ in done), done
    for code, _, stderr in done:
        if code == 2:
            assert "another command wrote" in stderr.strip().splitlines()[-1] and "Traceback" not in stderr
    _pair_is_one_writers(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx.report.json"]


def test_an_export_stopped_between_its_report_and_its_file_keeps_the_earlier_pair(tmp_path, monkeypatch):
    """The report goes in before the file. Ctrl-C (or SIGTERM, or the final check of OUT refusing) between the two
    renames removed the new report, and the earlier export's report, which it had replaced, was gone with it: the
    earlier file stood without its report. Now the earlier report is put back, byte for byte."""
    from mobilebert_kit.convert import exporter
    from mobilebert_kit.utils import atomic

    out = tmp_path / "m.onnx"
    exporter.export(_options(out, 16), log=None)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real_finish = atomic._finish

    def stopped_before_the_files_rename(tmp, path, *args, **kwargs):
        if path == out:
            raise KeyboardInterrupt  # Ctrl-C; the final check's OutputError takes the same way out
        return real_finish(tmp, path, *args, **kwargs)

    monkeypatch.setattr(atomic, "_finish", stopped_before_the_files_rename)
    with pytest.raises(KeyboardInterrupt):
        exporter.export(_options(out, 32), log=None)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporary or set-aside copy left
    assert _pair_is_one_writers(out) == 16


def test_an_overwrite_export_refuses_what_another_command_wrote_meanwhile(tmp_path, monkeypatch):
    """--overwrite lets an export replace what was at OUT when it began, not what another command put there while it
    ran: a `mbk profile --json OUT.report.json` (or a second --overwrite export) that finished first was replaced
    silently, and both commands said "wrote". The export refuses in one line and leaves the other's file."""
    from mobilebert_kit.convert import exporter
    from mobilebert_kit.profiler.report import build_report, write_json
    from mobilebert_kit.utils import atomic

    out = tmp_path / "m.onnx"
    out.write_bytes(b"the user's file, which --overwrite replaces")
    report = tmp_path / "m.onnx.report.json"
    real_hold = atomic._InstallLock.hold

    def hold_after_a_profile_wrote_the_report(lock):
        if not report.exists():
            write_json(build_report([]), report, overwrite=True)
        return real_hold(lock)

    monkeypatch.setattr(atomic._InstallLock, "hold", hold_after_a_profile_wrote_the_report)
    options = dataclasses.replace(_options(out, 16), overwrite=True)
    with pytest.raises(ExportError, match=f"another command wrote {report} while this export ran") as caught:
        exporter.export(options, log=None)
    assert "\n" not in str(caught.value)
    assert json.loads(report.read_text())["schema"] == "mobilebert_kit.profile"
    assert out.read_bytes() == b"the user's file, which --overwrite replaces"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx.report.json"]
