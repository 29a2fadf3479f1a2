"""The real app-side clients, driven as apps drive them: the shared helpers of tests/clients/.

Each helper loads an exported file *unchanged* into a client and returns plain
numpy / Python values, so a test compares them with the Keras source or with
a reference implementation:

- MediaPipe Tasks (``mediapipe`` 1.2.2, a dev dependency): TextEmbedder and
  TextClassifier, which tokenize the text themselves with the vocabulary
  packed in the file's TFLite Metadata.
- onnxruntime the optimum way: the tokenizer's int64 arrays at their natural
  length (padding to the longest sentence of the batch), any batch, outputs
  read by name.
- the TFLite Task Library (``tflite-support`` 0.4.4): it cannot share a venv
  with TensorFlow 2.21 (it needs protobuf 3.20), so it runs in another
  interpreter (``MBK_TASK_LIBRARY_PYTHON``) through ``task_library_driver.py``.

What the clients require is in ``shared/reference/clients.md``.

Example:
    >>> vectors = mediapipe_embed("minilm.tflite", ["a sentence"])  # doctest: +SKIP
    >>> vectors.shape
    (1, 384)
"""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

DRIVER = Path(__file__).with_name("task_library_driver.py")
# Real English sentences without accents: the clients never strip accents and many checkpoints' tokenizers do
# (a known difference the export report warns about), so accented text is not a test of the file.
REAL_SENTENCES = [
    "A man is playing a guitar on the street.",
    "The new movie is awesome and I would watch it again.",
    "How do I reset the password of my account?",
    "Stock markets fell sharply after the announcement.",
    "Two dogs are running through a snowy field.",
    "The recipe needs three eggs, flour and a cup of milk.",
]
# The interpreter of a venv where `import tflite_support` works (see docs/clients/task-library.md).
TASK_LIBRARY_PYTHON = "MBK_TASK_LIBRARY_PYTHON"


def mediapipe_embed(path, texts):
    """Embeds each text with MediaPipe's TextEmbedder loaded from ``path``.

    Args:
        path (str | Path): a ``.tflite`` file, loaded as it is.
        texts (list[str]): sentences; the client tokenizes them.

    Returns:
        np.ndarray: ``[len(texts), N]`` float vectors, ``embed(text).embeddings[0].embedding``
        (no normalization or quantization by the client).

    Example:
        >>> mediapipe_embed("m.tflite", ["hello"]).shape  # doctest: +SKIP
        (1, 384)
    """
    from mediapipe.tasks.python import text

    with text.TextEmbedder.create_from_model_path(str(path)) as embedder:
        return np.stack([np.asarray(embedder.embed(t).embeddings[0].embedding, np.float64) for t in texts])


def mediapipe_classify(path, texts):
    """Classifies each text with MediaPipe's TextClassifier loaded from ``path``.

    Args:
        path (str | Path): a ``.tflite`` classifier file, loaded as it is.
        texts (list[str]): sentences.

    Returns:
        list[dict[str, float]]: per text, ``{category_name: score}`` over every category, in the order of
        the output's index (so a test sees which label the client put on which output).

    Example:
        >>> mediapipe_classify("c.tflite", ["a good film"])  # doctest: +SKIP
        [{'negative': 0.2, 'positive': 0.8}]
    """
    from mediapipe.tasks.python import text
    from mediapipe.tasks.python.core.base_options import BaseOptions

    options = text.TextClassifierOptions(base_options=BaseOptions(model_asset_path=str(path)), max_results=-1)
    with text.TextClassifier.create_from_options(options) as classifier:
        results = [classifier.classify(t).classifications[0].categories for t in texts]
    return [{c.category_name: float(c.score) for c in sorted(categories, key=lambda c: c.index)}
            for categories in results]


def wordpiece_tokenizer(vocab_path, lowercase=True):
    """A Hugging Face ``tokenizers`` WordPiece tokenizer padding each batch to its longest sentence.

    Args:
        vocab_path (str | Path): a ``vocab.txt``.
        lowercase (bool): lower-case (and strip accents, as BERT's tokenizers do).

    Example:
        >>> wordpiece_tokenizer("vocab.txt").encode("the cat").ids  # doctest: +SKIP
        [2, 5, 6, 3]
    """
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertTextTokenizer.from_vocab(str(vocab_path), lowercase=lowercase)
    tokenizer.enable_padding()
    return tokenizer


def optimum_feeds(tokenizer, texts):
    """The three int64 arrays optimum-style code feeds: natural length (the batch's longest), any batch.

    Example:
        >>> optimum_feeds(tokenizer, ["the cat", "the dog ran"])["input_ids"].shape  # doctest: +SKIP
        (2, 5)
    """
    encodings = tokenizer.encode_batch(list(texts))
    return {
        "input_ids": np.array([e.ids for e in encodings], np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], np.int64),
    }


def ort_run(path, feeds, output_names):
    """Runs ``path`` in onnxruntime on ``feeds`` and returns ``{name: array}`` for ``output_names``.

    Fails (onnxruntime's own error) when the file does not accept the feeds' names, types or shapes.

    Example:
        >>> ort_run("m.onnx", feeds, ["last_hidden_state"])["last_hidden_state"].shape  # doctest: +SKIP
        (2, 5, 384)
    """
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip(output_names, session.run(list(output_names), feeds)))


def mean_pooled(sequence_output, mask):
    """Mean over real tokens (sentence-transformers' mean pooling), before any normalization."""
    mask = np.asarray(mask)[..., None].astype(np.float64)
    return (np.asarray(sequence_output, np.float64) * mask).sum(1) / mask.sum(1)


def cosines(a, b):
    """Row-wise cosine similarity of two ``[n, d]`` arrays."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def softmax(logits):
    z = np.asarray(logits, np.float64)
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


# Ways to break a client-ready file's metadata, each as a byte edit a client must refuse: the metadata
# entry hidden (renamed), the packed files (vocab.txt, labels.txt) stripped, an input's metadata name changed
# (the clients look inputs up by "ids"/"mask"/"segment_ids"). Each with the client's refusal (MediaPipe 1.2.2,
# as it answered a file whose metadata tflite-support's writer wrote): the test checks the cause, not any error.
BREAKS = {
    "metadata_renamed": "No metadata or input process unit found",
    "packed_files_stripped": "No associated file with name",
    "input_name_changed": r"Input tensor indices form the set .*-1",
}


def break_metadata(path, how, out):
    """Writes a copy of ``path`` to ``out`` with its client metadata broken ``how`` (a key of :data:`BREAKS`).

    Raises AssertionError when ``path`` lacks what is to be broken (the test then fails: the file was not
    client-ready in the first place).

    Example:
        >>> break_metadata("c.tflite", "packed_files_stripped", "broken.tflite")  # doctest: +SKIP
    """
    data = Path(path).read_bytes()
    if how == "metadata_renamed":
        data = _replace_once(data, b"TFLITE_METADATA", b"TFLITE_METADATX")
    elif how == "packed_files_stripped":
        with zipfile.ZipFile(path) as archive:  # offsets are absolute: zipfile corrects for the prefix
            start = min(info.header_offset for info in archive.infolist())
        assert start > 0, f"{path}: no zip appended after the flatbuffer"
        data = data[:start]
    elif how == "input_name_changed":
        data = _replace_once(data, b"segment_ids", b"segment_idz")
    else:
        raise ValueError(f"unknown break {how!r}; one of {sorted(BREAKS)}")
    Path(out).write_bytes(data)
    return Path(out)


def _replace_once(data, old, new):
    assert data.count(old) == 1, f"{old!r} occurs {data.count(old)} times, expected once"
    return data.replace(old, new)


def task_library_python():
    """The interpreter that runs the Task Library, or None (then Task Library tests skip).

    This interpreter when ``tflite_support`` imports in it, else ``$MBK_TASK_LIBRARY_PYTHON``.
    """
    try:
        import tflite_support  # noqa: F401

        return sys.executable
    except ImportError:
        return os.environ.get(TASK_LIBRARY_PYTHON) or None


def run_task_library(task, path, *inputs):
    """Runs one Task Library ``task`` on ``path`` in :func:`task_library_python` and returns its JSON answer.

    Args:
        task (str): ``"bert_nl_classifier"``, ``"bert_question_answerer"`` or ``"text_embedder"``.
        path (str | Path): the model file.
        *inputs: sentences (classifier, embedder) or ``context, question`` (question answerer).

    Returns:
        dict: ``{"ok": True, "result": ...}`` or ``{"ok": False, "error": "..."}`` (the client refused
        the file; a crash of the client process is reported as an error too).

    Example:
        >>> run_task_library("bert_nl_classifier", "c.tflite", "a good film")["result"]  # doctest: +SKIP
        [{'negative': 0.2, 'positive': 0.8}]
    """
    proc = subprocess.run([task_library_python(), str(DRIVER), task, str(path), *inputs],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": ""})
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"ok": False, "error": f"client process exited {proc.returncode}: {proc.stderr.strip()[-500:]}"}
    return json.loads(lines[-1])
