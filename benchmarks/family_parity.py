"""Per-family parity with transformers, and MediaPipe's answers, for tiny checkpoints of every family (issue 35).

For each family a tiny random-weight ``...ForSequenceClassification`` with the
family's own tokenizer (``tests/tokenizer_fixtures.py``, saved by transformers)
is imported and exported by the command line as a user runs it; each is compared
with the PyTorch model on the package's real sample sentences tokenized by the
checkpoint's own tokenizer:

- Keras: max |logits - transformers'| on the imported model;
- TFLite float32 and dynamic int8, ONNX float32: the minimum row cosine of the
  class probabilities (ONNX: of the logits, fed the tokenizer's own arrays);
- MediaPipe TextClassifier on the lower-cased sentences: how many answers equal
  the file's answers on the checkpoint tokenizer's ids of the same text (|diff|
  <= 1e-5: the ids agree), with and without the accented sentences.

Prints a markdown table. No real non-BERT checkpoint ships in a package
registry, so the weights are random (far from init); the tokenizers are trained
on the sample text.

Usage:
    python benchmarks/family_parity.py [--workdir DIR] [--families xlm-roberta,mpnet]
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

FAMILIES = ("bert", "distilbert", "electra", "albert", "roberta", "xlm-roberta", "mpnet")


def cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def measure(family, workdir):
    import onnxruntime as ort
    import torch
    import transformers

    import mobilebert_kit as mbk
    from mobilebert_kit.artifacts.runner import ArtifactRunner
    from mobilebert_kit.cli.main import main
    from mobilebert_kit.convert.plan.sample_text import SENTENCES
    from tests.clients.clients import mediapipe_classify
    from tests.tokenizer_fixtures import LABELS, save_checkpoint

    source = workdir / family
    model = save_checkpoint(family, source)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(source))
    texts = list(SENTENCES)
    with torch.no_grad():
        expected = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits.numpy()
    row = {"family": family}
    ours = mbk.import_checkpoint(source, head="auto")
    encoded = tokenizer(texts, padding=True, return_tensors="np")
    feeds = {k: encoded[k].astype(np.int32) if k in encoded else np.zeros_like(encoded["input_ids"], np.int32)
             for k in ("input_ids", "attention_mask", "token_type_ids")}
    row["keras"] = float(np.abs(ours(feeds, training=False)["logits"].numpy() - expected).max())
    files = {}
    for name, flags in (("tflite-float", ("--format", "tflite")),
                        ("tflite-dynamic", ("--format", "tflite", "--quantize", "dynamic")),
                        ("onnx", ("--format", "onnx"))):
        files[name] = workdir / f"{family}-{name}.{flags[1]}"
        assert main(["export", str(source), *flags, "--out", str(files[name])]) == 0
    probabilities = torch.softmax(torch.tensor(expected), -1).numpy()
    for name in ("tflite-float", "tflite-dynamic"):
        runner = ArtifactRunner(files[name])
        ids = tokenizer(texts, padding=True, return_tensors="np")  # the file takes any length
        arrays = {k: ids[k] if k in ids else np.zeros_like(ids["input_ids"]) for k in
                  ("input_ids", "attention_mask", "token_type_ids")}
        row[name] = float(cosines(runner.run(arrays)["probability"], probabilities).min())
    session = ort.InferenceSession(str(files["onnx"]), providers=["CPUExecutionProvider"])
    logits = session.run(["logits"], {k: v.astype(np.int64) for k, v in encoded.items()})[0]
    row["onnx"] = float(cosines(logits, expected).min())
    row["onnx inputs"] = len(session.get_inputs())
    if family == "roberta":
        row["mediapipe"] = "no client tokenizer (byte-level BPE)"
        return row
    lower = [t.lower() for t in texts]
    runner = ArtifactRunner(files["tflite-float"])
    phone = np.array([[s[label] for label in LABELS] for s in mediapipe_classify(files["tflite-float"], lower)])
    ids = tokenizer(lower, padding=True, return_tensors="np")
    arrays = {k: ids[k] if k in ids else np.zeros_like(ids["input_ids"]) for k in
              ("input_ids", "attention_mask", "token_type_ids")}
    same = np.abs(phone - runner.run(arrays)["probability"]).max(-1) <= 1e-5
    ascii_rows = np.array([t.isascii() for t in texts])
    row["mediapipe"] = (f"{int(same.sum())}/{len(texts)} sentences ({int(same[ascii_rows].sum())}/"
                        f"{int(ascii_rows.sum())} without accents)")
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mbk-family-parity-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = [measure(family, workdir) for family in args.families.split(",")]
    print("| family | Keras max abs diff (logits) | TFLite float32 min cos | TFLite dynamic int8 min cos | "
          "ONNX min cos (inputs) | MediaPipe answers = file on the checkpoint's ids |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['family']} | {r['keras']:.1e} | {r['tflite-float']:.6f} | {r['tflite-dynamic']:.6f} | "
              f"{r['onnx']:.7f} ({r['onnx inputs']}) | {r['mediapipe']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
