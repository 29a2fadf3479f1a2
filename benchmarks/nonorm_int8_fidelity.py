"""Issue 15 target 2, fidelity only: a substituted MiniLM's float model and its all-int8 file against the original.

For one substituted model directory (``mbk substitute ... --seq-len 64``), exports it as all-int8 TFLite
(``--quantize int8 --no-validate``: the point is to measure how far off it is, even where validation would refuse)
and prints, on the held-out sentences of ``benchmarks/nonorm_int8_data.py``, the mean sentence-embedding cosine of
the float model and of the file to the ORIGINAL float MiniLM, and of the file to its own float model (mean and
min). No latency: ``benchmarks/nonorm_int8.py`` measures that.

Usage:
  PYTHONPATH=$PWD nice python benchmarks/nonorm_int8_fidelity.py SUBSTITUTED_DIR [OUT.tflite] [--data-dir /tmp/q15]
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from nonorm_int8 import SEQ, held_out, mbk, sentence_embeddings  # noqa: E402

from mobilebert_kit.artifacts.runner import ArtifactRunner  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("substituted")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--data-dir", default="/tmp/q15")
    parser.add_argument("--rows", type=int, default=300)
    args = parser.parse_args()
    data = Path(args.data_dir)
    out = Path(args.out or f"{args.substituted}.all8.tflite")
    if not out.exists():
        code, text = mbk("export", args.substituted, "--format", "tflite", "--quantize", "int8", "--seq-len", SEQ,
                         "--calibration", data / "recover.txt", "--out", out, "--no-validate")
        if code:
            sys.exit(text)
    arrays, mask, reference, own = held_out(data / "heldout.txt", args.rows, args.substituted)
    quantized = sentence_embeddings(ArtifactRunner(out).run(arrays), mask)
    print(json.dumps({
        "substituted": args.substituted, "rows": len(mask),
        "float_to_original": float((own * reference).sum(1).mean()),
        "int8_to_original": float((quantized * reference).sum(1).mean()),
        "int8_to_own_float_mean": float((quantized * own).sum(1).mean()),
        "int8_to_own_float_min": float((quantized * own).sum(1).min()),
    }, indent=2))


if __name__ == "__main__":
    main()
