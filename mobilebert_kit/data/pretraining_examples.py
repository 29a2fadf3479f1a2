"""Pre-training examples from plain text: NSP sentence pairs with masked tokens, into sharded TFRecords.

Input text: one sentence per line, a blank line between documents. The algorithm is Google's
``create_pretraining_data.py`` (docs/distillation.md, "Pre-training data"), processed in chunks of
``chunk_documents`` so that memory stays bounded: a random next sentence comes from another document of the same
chunk, never from A's own (:func:`_chunks`, :func:`_instances`). Everything random draws from one
``random.Random(seed)``: the same inputs and options give byte-identical shards.
"""

import contextlib
import dataclasses
import hashlib
import json
import random
from pathlib import Path

from mobilebert_kit.data.masking import WHOLE_WORD_MODES, mask_tokens, word_starts
from mobilebert_kit.data.records import (
    FORMAT,
    FORMAT_VERSION,
    METADATA_FILE,
    PRETRAINING_DATA,
    serialize_example,
    shard_name,
)
from mobilebert_kit.errors import ConfigError, DataError, check_choice
from mobilebert_kit.utils.atomic import UNCHECKED, atomic_dir, check_output, file_signature
from mobilebert_kit.utils.input_paths import text_line
from mobilebert_kit.utils.limits import SEED, Limit, within
from mobilebert_kit.utils.output_check import os_error_in

# The valid values of each numeric option. The command line's argparse types and PretrainingDataOptions both
# check these, so a value the parser takes is one the builder can use.
OPTION_LIMITS = {
    # [CLS] A [SEP] B [SEP] with a token in each segment; the short target is drawn from 2 to seq_len - 3
    # (artifacts.formats.SEQ_LEN's upper bound)
    "seq_len": Limit(int, 5, 8192),
    "max_predictions": Limit(int, 1, 8192),
    "masked_lm_prob": Limit(float, 0.0, 1.0, lo_open=True),
    "short_seq_prob": Limit(float, 0.0, 1.0),
    "dupe_factor": Limit(int, 1, 1000),
    "num_shards": Limit(int, 1, 100_000),
    # a random next segment comes from another document of the same chunk
    "chunk_documents": Limit(int, 2, 10_000_000),
    "seed": SEED,
}


@dataclasses.dataclass
class PretrainingDataOptions:
    """Options of :func:`write_pretraining_data` (recorded in ``dataset.json``), each a ``mbk pretraining-data``
    flag (docs/cli.md; ``num_shards`` is ``--shards``): ``seq_len`` counts ``[CLS] A [SEP] B [SEP]``,
    ``dupe_factor`` passes over the corpus with other masks, ``chunk_documents`` documents are held in memory."""

    seq_len: int = 128
    max_predictions: int = 20
    masked_lm_prob: float = 0.15
    whole_word: str = "wordpiece"
    short_seq_prob: float = 0.1
    dupe_factor: int = 1
    num_shards: int = 4
    chunk_documents: int = 2000
    seed: int = 12345

    def __post_init__(self):
        check_choice("whole_word", self.whole_word, WHOLE_WORD_MODES)
        for field, limit in OPTION_LIMITS.items():
            value = getattr(self, field)
            if not within(limit, value):
                raise ConfigError(f"{field} must be {limit.describe()}, got {value!r}")


def read_documents(files, on_bytes=None):
    """Yields documents (lists of sentences) from UTF-8 text files (one sentence per line, blank lines between
    documents), streaming; ``on_bytes(n)``, when given, receives the bytes read since its last call."""
    for path in files:
        document = []
        try:
            handle = open(path, "rb")
        except OSError as err:
            raise DataError(f"cannot read {path} ({err.strerror}); check the --input paths") from err
        with handle:
            for number, raw in enumerate(handle, 1):
                if on_bytes is not None:
                    on_bytes(len(raw))
                try:
                    line = text_line(raw, number).strip()
                except UnicodeDecodeError as err:
                    # Decoding with replacement would train on U+FFFD soup (a Latin-1 file, a binary file).
                    raise DataError(
                        f"{path} line {number} is not UTF-8 text (byte 0x{raw[err.start]:02x} at column "
                        f"{err.start + 1}); convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
                    ) from err
                if line:
                    document.append(line)
                elif document:
                    yield document
                    document = []
        if document:
            yield document


def _tokenize_document(tokenizer, sentences, whole_word):
    """Each sentence as a list of ``(id, starts_word)``; empty sentences dropped."""
    out = []
    for text in sentences:
        tokens, ids, offsets = tokenizer.encode(text)
        if not ids:
            continue
        starts = word_starts(tokens, offsets, text, whole_word)
        out.append(list(zip(ids, starts)))
    return out


def _truncate_pair(a, b, max_tokens, rng):
    """Google's truncate_seq_pair, in place: one token at a time from the longer side, front or back at random.

    The kept window of each list moves by index and is cut once at the end: deleting from the front one token
    at a time is quadratic, and one 200,000-word line took 39 s (the same draws, the same result).
    """
    window_a, window_b = [0, len(a)], [0, len(b)]  # [first kept, past the last kept]
    while (window_a[1] - window_a[0]) + (window_b[1] - window_b[0]) > max_tokens:
        longer = window_a if window_a[1] - window_a[0] > window_b[1] - window_b[0] else window_b
        if rng.random() < 0.5:
            longer[0] += 1  # from the front, as Google's truncate_seq_pair: avoids a bias to sentence ends
        else:
            longer[1] -= 1
    a[:] = a[window_a[0]:window_a[1]]
    b[:] = b[window_b[0]:window_b[1]]


def _instances(documents, index, options, rng):
    """Google's create_instances_from_document: ``[(tokens_a, tokens_b, is_random_next), ...]``.

    ``documents`` holds at least two documents: a random B comes from one other than ``documents[index]``.
    """
    document = documents[index]
    max_tokens = options.seq_len - 3
    target = max_tokens
    if rng.random() < options.short_seq_prob:
        target = rng.randint(2, max_tokens)
    instances, chunk, length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for seg in chunk[:a_end] for t in seg]
            tokens_b = []
            random_next = len(chunk) == 1 or rng.random() < 0.5
            if random_next:
                target_b = target - len(tokens_a)
                # Drawn among the other documents: Google's ten tries of any document can all hit this one
                # (1 in 1,024 with two documents), and B would then be A's own text labelled "random".
                other = rng.randint(0, len(documents) - 2)
                source = documents[other + 1 if other >= index else other]
                for j in range(rng.randint(0, len(source) - 1), len(source)):
                    tokens_b.extend(source[j])
                    if len(tokens_b) >= target_b:
                        break
                i -= len(chunk) - a_end  # put the unused segments back
            else:
                tokens_b = [t for seg in chunk[a_end:] for t in seg]
            _truncate_pair(tokens_a, tokens_b, max_tokens, rng)
            if tokens_a and tokens_b:
                instances.append((tokens_a, tokens_b, random_next))
            chunk, length = [], 0
        i += 1
    return instances


def build_example(tokens_a, tokens_b, random_next, tokenizer, options, rng):
    """Assembles, masks and pads one example; returns the feature dict of ``records.serialize_example``."""
    ids = [tokenizer.cls_id] + [t for t, _ in tokens_a] + [tokenizer.sep_id] + [t for t, _ in tokens_b] + [tokenizer.sep_id]
    starts = [True] + [s for _, s in tokens_a] + [True] + [s for _, s in tokens_b] + [True]
    maskable = [False] + [True] * len(tokens_a) + [False] + [True] * len(tokens_b) + [False]
    types = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    corrupted, positions, labels = mask_tokens(
        ids, starts, maskable, rng, tokenizer.mask_id, tokenizer.regular_ids,
        masked_lm_prob=options.masked_lm_prob, max_predictions=options.max_predictions,
    )
    pad = options.seq_len - len(ids)
    pad_predictions = options.max_predictions - len(positions)
    return {
        "input_ids": corrupted + [tokenizer.pad_id] * pad,
        "attention_mask": [1] * len(ids) + [0] * pad,
        "token_type_ids": types + [0] * pad,
        "masked_lm_positions": positions + [0] * pad_predictions,
        "masked_lm_ids": labels + [0] * pad_predictions,
        "masked_lm_weights": [1.0] * len(positions) + [0.0] * pad_predictions,
        "next_sentence_labels": 1 if random_next else 0,
    }


def _chunks(documents, size):
    """Lists of ``size`` documents (``size`` >= 2), the last of up to ``size + 1``.

    A chunk is yielded once two more documents follow it, so the last chunk never holds one document alone
    (it joins the chunk before): a lone document has no other to draw a random next sentence from. Only an
    input of one document gives a one-document chunk.
    """
    chunk = []
    for document in documents:
        chunk.append(document)
        if len(chunk) == size + 2:
            yield chunk[:size]
            chunk = chunk[size:]
    if chunk:
        yield chunk


def _too_few_documents(count, files):
    """The refusal of an input with fewer than two documents: no pair can have a random next sentence."""
    names = ", ".join(str(f) for f in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return DataError(
        f"the input produced no examples: next-sentence prediction needs at least two documents (one sentence "
        f"per line, a blank line between documents) and {names} hold{'s' if len(files) == 1 else ''} "
        f"{count or 'none'}; add documents or separate them with blank lines"
    )


def write_pretraining_data(files, tokenizer, out_dir, options=None, on_progress=None, overwrite=False,
                           unchanged_since=UNCHECKED):
    """Creates pre-training examples from text files into ``out_dir`` (shards + ``dataset.json``).

    The directory appears only when complete (written under a temporary name). ``on_progress(bytes_read,
    total_bytes, examples_written)`` follows the run; ``overwrite`` replaces what mbk did not write at
    ``out_dir`` (``utils.atomic``); ``unchanged_since``: ``out_dir``'s ``file_signature`` when the caller began
    (what it held then is what may be replaced; default: when this function begins). Returns the metadata dict
    written to ``dataset.json``."""
    from mobilebert_kit.backend import tf

    options = options or PretrainingDataOptions()
    files = [Path(f) for f in files]
    missing = [str(f) for f in files if not f.is_file()]
    # The vocabulary is an input too: --overwrite of the directory holding it deleted it.
    sources = [*files, *([tokenizer.source] if getattr(tokenizer, "source", None) else [])]
    # Checked before tokenizing: a refused --out must not cost the whole run first.
    check_output(out_dir, PRETRAINING_DATA, overwrite=overwrite, sources=sources)
    # Another run into the same --out meanwhile is not silently replaced.
    began = file_signature(out_dir) if unchanged_since is UNCHECKED else unchanged_since
    if missing:
        raise DataError(f"input file {missing[0]} does not exist; check the --input paths")
    if not files:
        raise DataError("no input files; pass --input with one or more text files")
    total = sum(f.stat().st_size for f in files)
    rng = random.Random(options.seed)
    names = [shard_name(i, options.num_shards) for i in range(options.num_shards)]
    counts = {"examples": 0, "documents": 0, "masked": 0, "tokens": 0, "random_next": 0}
    read = [0]

    def on_bytes(n):
        read[0] += n

    _allow_open_files(options.num_shards)
    with atomic_dir(out_dir, PRETRAINING_DATA, overwrite=overwrite, sources=sources, unchanged_since=began) as tmp:
        writers = [tf.io.TFRecordWriter(str(tmp / n)) for n in names]
        try:
            # Chunked after tokenizing: a document with no token is no document to draw a random next from.
            tokenized_documents = (
                doc for doc in (_tokenize_document(tokenizer, text, options.whole_word)
                                for text in read_documents(files, on_bytes)) if doc
            )
            for tokenized in _chunks(tokenized_documents, options.chunk_documents):
                if len(tokenized) < 2:
                    raise _too_few_documents(len(tokenized), files)
                counts["documents"] += len(tokenized)
                instances = []
                for _ in range(options.dupe_factor):
                    for index in range(len(tokenized)):
                        instances.extend(_instances(tokenized, index, options, rng))
                rng.shuffle(instances)
                for tokens_a, tokens_b, random_next in instances:
                    example = build_example(tokens_a, tokens_b, random_next, tokenizer, options, rng)
                    writers[counts["examples"] % len(writers)].write(serialize_example(example))
                    counts["examples"] += 1
                    counts["masked"] += int(sum(example["masked_lm_weights"]))
                    counts["tokens"] += int(sum(example["attention_mask"]))
                    counts["random_next"] += example["next_sentence_labels"]
                if on_progress is not None:
                    on_progress(read[0], total, counts["examples"])
            for writer in writers:
                writer.close()
        except tf.errors.OpError as err:
            # TensorFlow reports a full disk (ENOSPC) or a file size limit (EFBIG) as its own error: as the OSError
            # it is, atomic_dir removes the partial shards and says so in one line.
            failed = os_error_in(err)
            if failed is None:
                raise
            raise failed from err
        finally:
            for writer in writers:
                with contextlib.suppress(tf.errors.OpError):
                    writer.close()  # closed already, or after another failure: its error would hide that one
        if counts["documents"] == 0:
            raise _too_few_documents(0, files)
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "num_examples": counts["examples"],
            "num_documents": counts["documents"],
            "num_masked_tokens": counts["masked"],
            "num_tokens": counts["tokens"],
            "num_random_next": counts["random_next"],
            "shards": names,
            "vocab_size": tokenizer.vocab_size,
            "vocab_sha256": tokenizer.fingerprint(),
            "lowercase": tokenizer.lowercase,
            "inputs": [str(f) for f in files],
            "inputs_sha256": _files_digest(files),
            **dataclasses.asdict(options),
        }
        (tmp / METADATA_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return meta


# Descriptors the process needs besides the shards: inputs, TensorFlow's and Python's own files.
_SPARE_FILES = 64


def _allow_open_files(shards):
    """Raises the open-file limit to fit one writer per shard, or refuses before any work.

    Every shard stays open while examples are dealt round-robin; past ``ulimit -n`` TensorFlow
    would fail mid-run with "Too many open files"."""
    try:
        import resource
    except ImportError:  # not POSIX: no limit to read
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = shards + _SPARE_FILES
    if soft == resource.RLIM_INFINITY or need <= soft:
        return
    if hard == resource.RLIM_INFINITY or need <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
        return
    raise ConfigError(f"--shards {shards} needs {need} open files and this process may open at most {hard} "
                      f"(ulimit -Hn); use --shards {max(1, hard - _SPARE_FILES)} or fewer")


def _files_digest(files):
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
