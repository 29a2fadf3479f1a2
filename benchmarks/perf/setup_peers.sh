#!/usr/bin/env bash
# Installs the issue 7 benchmark peers into the current Python environment.
#
# The peers are benchmark-only: nothing in mobilebert_kit imports them, and
# they are not dependencies of the package.
#
# (a) TF Model Garden (PyPI tf-models-official) declares tensorflow~=2.20.0 and
#     tensorflow-text~=2.20.0 plus ~25 packages the encoder never imports
#     (opencv, pycocotools, kaggle, pandas, sacrebleu, ...). Installed with its
#     dependencies it would downgrade TensorFlow 2.21 -- the toolkit's pin -- so
#     it goes in with --no-deps. Importing official.nlp.modeling (networks,
#     layers, models) with TF 2.21 + tf_keras 2.21 then needs exactly one more
#     package, gin-config (also --no-deps: it has none). `pip check` will list
#     the undeclared extras as missing; that is expected and harmless here.
# (b) Hugging Face MobileBertModel -> ONNX needs torch (CPU) and transformers,
#     which are the package's dev extra (test-only references).
# (c) --edge: the on-device peers of 2026, ExecuTorch 1.5.1 and litert-torch 0.10.0
#     (benchmarks/perf/edge_peers.py). executorch needs torch at run time without
#     declaring it; both run with the CPU torch 2.13.0 pinned here (executorch's own
#     docs name 2.14, whose wheel on PyPI is a CUDA build of several GB). litert-torch
#     pulls jax, ai-edge-quantizer and litert-converter: about 2 GB more, so a venv
#     of its own is wise (python -m venv /tmp/peers && PYTHON=/tmp/peers/bin/python
#     ... after `pip install -e '.[dev]'` there).
# (d) --st-onnx VENV: sentence-transformers' ONNX backend (issue 45 item 5, benchmarks/st_onnx_backend.py),
#     which exports through optimum-onnx. It goes in a venv of its own, VENV, and nothing else is installed
#     then: the benchmark runs VENV/bin/python only to export the backend's files (--peer-python VENV/bin/python)
#     and times them in the toolkit's environment. optimum-onnx 0.1.0 (with optimum 2.1.0) keeps the pins:
#     transformers 4.57.6, CPU torch 2.13.0 (its local wheel), onnxruntime 1.32.0 as here; the toolkit is not
#     installed in VENV (the checkpoint's directory is passed to it).
#
# Usage: bash benchmarks/perf/setup_peers.sh [--edge]     (PYTHON=... to choose the interpreter)
#        bash benchmarks/perf/setup_peers.sh --st-onnx /tmp/stpeers
set -euo pipefail
PYTHON="${PYTHON:-python}"
EDGE=0
[ "${1:-}" = "--edge" ] && EDGE=1

if [ "${1:-}" = "--st-onnx" ]; then
    VENV="${2:?--st-onnx VENV: the peers venv to create}"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install "sentence-transformers==5.7.0" "optimum-onnx[onnxruntime]==0.1.0" \
        "onnxruntime==1.32.0" "torch==2.13.0" "transformers>=4.57,<4.58"
    "$VENV/bin/python" -c "import optimum.onnxruntime, sentence_transformers, torch, transformers; \
print('st-onnx peer ready:', sentence_transformers.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
    exit 0
fi

"$PYTHON" -m pip install --no-deps "tf-models-official==2.20.0" "gin-config==0.5.0"

if ! "$PYTHON" -c "import torch, transformers" 2>/dev/null; then
    # The CPU wheel; an unpinned torch pulls gigabytes of CUDA wheels (pyproject's dev extra pins it too).
    "$PYTHON" -m pip install "torch==2.13.0" "transformers>=4.57,<4.58"
fi

if [ "$EDGE" = 1 ]; then
    "$PYTHON" -m pip install "torch==2.13.0" "executorch==1.5.1" "litert-torch==0.10.0" "transformers>=4.57,<4.58"
    "$PYTHON" -c "import executorch.runtime, litert_torch; print('edge peers ready: executorch, litert-torch')"
fi

# Verify: TensorFlow still the toolkit's version, both peers importable.
TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=3 "$PYTHON" - <<'PY'
import tensorflow as tf

assert tf.__version__.startswith("2.21"), f"TensorFlow {tf.__version__}: the peers' install changed it; reinstall tensorflow==2.21.*"
from official.nlp.modeling.networks import MobileBERTEncoder  # noqa: F401
import transformers
from transformers import MobileBertModel  # noqa: F401

print(f"peers ready: tf-models-official (TF {tf.__version__}), transformers {transformers.__version__}")
PY
