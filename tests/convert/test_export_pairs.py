"""Issue 47 item 5: an export installs its file and its report as one unit, also when two run into one ``--out``."""

import json
import os
import subprocess
import sys

from mobilebert_kit.artifacts.metadata import read_artifact_metadata

ROUNDS = 2


def _start(out, seq_len):
    return subprocess.Popen([sys.executable, "-m", "mobilebert_kit.cli.main", "export", "tiny-bert", "--format", "onnx",
                             "--task", "embedding", "--pooling", "mean", "--seq-len", str(seq_len), "--no-validate",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def test_two_exports_into_one_new_out_give_one_whole_pair_and_one_refusal(tmp_path):
    """Both began with no OUT; the one that installs second finds OUT replaced since it began and refuses in one
    line, keeping the other's pair (before: both said "wrote", and a file could stand beside the other's report)."""
    for round_ in range(ROUNDS):
        out = tmp_path / f"m{round_}.onnx"
        runs = [_start(out, 16), _start(out, 32)]
        done = [(run.wait(timeout=600), *run.communicate()) for run in runs]
        codes = sorted(code for code, _, _ in done)
        assert codes == [0, 2], done
        wrote = [stdout for code, stdout, _ in done if code == 0]
        refused = [stderr for code, _, stderr in done if code == 2][0]
        assert sum("wrote" in stdout for _, stdout, _ in done) == 1
        # (tf2onnx logs its INFO lines to stderr before the refusal; the error itself is one line)
        assert "another export wrote" in refused.strip().splitlines()[-1] and "Traceback" not in refused
        # The pair on disk is one writer's: the report describes the file beside it.
        report = json.loads((tmp_path / f"{out.name}.report.json").read_text())
        meta = read_artifact_metadata(out)
        assert report["size_bytes"] == out.stat().st_size
        assert meta["planned_seq_len"] == report["seq_len"] and f"{report['seq_len']} tokens" in wrote[0]
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(f"m{round_}")) == \
            [out.name, f"{out.name}.report.json"]  # no temporary left behind
