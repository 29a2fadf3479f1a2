"""Issue 16 item 2: how close a student's sentence embeddings are to all-MiniLM-L6-v2's, on held-out real text.

Every model (a saved-model directory, run in Keras, or an exported ``.tflite`` / ``.onnx`` file, run in its
runtime) embeds the same held-out labelled tweets (``sent-test.tsv`` of ``benchmarks/nonorm_int8_data.py``: the
test split, never used to make a student), mean-pooled over real tokens and unit length. Per model:

- ``cos_teacher``: mean cosine to the teacher's (float MiniLM) embedding of the same text;
- ``cos_own_float``: mean and min cosine of a file to the float model it was exported from (``NAME=FILE@DIR``);
- ``recall@10``: retrieval against the teacher: of each text's 10 nearest neighbours under the teacher, the share
  that are among its 10 nearest under the model (the neighbours a search or dedup feature would return);
- ``label_p@10``: of each text's 10 nearest neighbours, the share with the same sentiment label (a task metric
  that needs no fine-tuning; the teacher's own figure is the bar).

No latency: ``benchmarks/time_files.py`` measures that on one pinned core.

Usage:
  PYTHONPATH=$PWD python benchmarks/student_minilm.py --rows 1000 \\
      student=/tmp/s16/w768L student-int8=/tmp/s16/w768L.int8.tflite@/tmp/s16/w768L
"""

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from nonorm_int8 import MINILM, SEQ, keras_outputs, sentence_embeddings  # noqa: E402

from mobilebert_kit.artifacts.runner import ArtifactRunner  # noqa: E402
from mobilebert_kit.convert.plan.input_set import InputSet  # noqa: E402
from mobilebert_kit.sources.model_source import ModelSource  # noqa: E402


def labelled_rows(tsv, rows, seed=0):
    """``(texts, labels)``: ``rows`` rows of a ``sentence<TAB>label`` table, sampled across it (it is ordered)."""
    with open(tsv, encoding="utf-8") as f:
        table = [r for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)][1:]
    table = [r for r in table if len(r) >= 2 and r[0].strip()]
    pick = np.sort(np.random.default_rng(seed).choice(len(table), size=min(rows, len(table)), replace=False))
    return [table[i][0] for i in pick], np.array([table[i][1] for i in pick])


def neighbours(embeddings, k):
    """Indices of each row's ``k`` nearest other rows by cosine (unit-length rows)."""
    similarity = embeddings @ embeddings.T
    np.fill_diagonal(similarity, -np.inf)
    return np.argsort(-similarity, axis=1, kind="stable")[:, :k]


def embed(path, arrays, mask):
    if Path(path).is_dir():
        return sentence_embeddings(keras_outputs(ModelSource.load(path).model, arrays), mask)
    return sentence_embeddings(ArtifactRunner(path).run(arrays), mask)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="NAME=DIR_OR_FILE, or NAME=FILE@DIR to compare a file with DIR")
    parser.add_argument("--data-dir", default="/tmp/q15")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    texts, labels = labelled_rows(Path(args.data_dir) / "sent-test.tsv", args.rows)
    teacher = ModelSource.load(MINILM)
    arrays = {k: np.asarray(v) for k, v in InputSet.from_text(texts, teacher.tokenizer, SEQ).arrays.items()}
    mask = arrays["attention_mask"]
    reference = sentence_embeddings(keras_outputs(teacher.model, arrays), mask)
    wanted = neighbours(reference, args.k)
    results = {}
    cache = {}
    for spec in [f"teacher={MINILM}", *args.models]:
        name, _, path = spec.partition("=")
        path, _, own = path.partition("@")
        emb = cache[path] = cache.get(path) if path in cache else embed(path, arrays, mask)
        found = neighbours(emb, args.k)
        row = {
            "cos_teacher": float((emb * reference).sum(1).mean()),
            "recall@10": float(np.mean([len(set(a) & set(b)) / args.k for a, b in zip(wanted, found)])),
            "label_p@10": float((labels[found] == labels[:, None]).mean()),
        }
        if own:
            base = cache[own] = cache.get(own) if own in cache else embed(own, arrays, mask)
            cosines = (emb * base).sum(1)
            row["cos_own_float_mean"], row["cos_own_float_min"] = float(cosines.mean()), float(cosines.min())
        results[name] = row
        print(name, json.dumps(row), flush=True)
    print(json.dumps({"rows": len(texts), "k": args.k, "seq_len": SEQ, "results": results}, indent=2))


if __name__ == "__main__":
    main()
