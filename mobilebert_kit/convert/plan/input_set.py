"""InputSet: the arrays an artifact is calibrated and validated on.

Sources, best first: a text file run through the model's tokenizer (one
sentence per line; a tab separates a sentence pair), saved input arrays
(``.npz`` with ``input_ids``, ``attention_mask``, ``token_type_ids``; read
with ``allow_pickle=False``), the built-in sample sentences, and as a last
resort random ids (``InputSet.random``; calibration of full int8 uses
``InputSet.like_text``: framed like tokenized text, special ids excluded, padded
to a realistic length distribution) when the model has no vocabulary (a preset).
"""

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mobilebert_kit.convert.errors import ExportError
from mobilebert_kit.convert.plan.export_options import ROWS
from mobilebert_kit.convert.plan.export_tasks import GRAPH_INPUTS as INPUT_NAMES
from mobilebert_kit.convert.plan.sample_text import CALIBRATION_SENTENCES, SENTENCE_PAIRS, SENTENCES
from mobilebert_kit.data.text_tokenizer import PAIR_MIN_LENGTH
from mobilebert_kit.errors import MbkError
from mobilebert_kit.utils.atomic import atomic_file
from mobilebert_kit.utils.input_paths import open_regular
from mobilebert_kit.utils.terminal import escape

TEXT_SUFFIXES = (".txt", ".tsv", ".text")
# Rows read when the caller uses every row (recovery data): the largest --count / [calibration] count.
MAX_ROWS = int(ROWS.hi)
# Characters kept of one text line: the tokenizer keeps at most seq_len (<= 8192) tokens of a line, and
# WordPiece turns a word of more than 100 characters into one [UNK], so 1 Mi characters is never the limit
# on a real sentence; a file without newlines is not read whole to find that out.
MAX_LINE_CHARS = 1 << 20


@dataclass
class InputSet:
    """Int32 arrays ``[n, seq_len]`` keyed by input name, with where they came from.

    Example:
        >>> inputs = InputSet.random(vocab_size=512, count=8, seq_len=16)
        >>> inputs.count, inputs.seq_len
        (8, 16)
    """

    arrays: dict
    description: str
    # The text lines the rows were tokenized from (from_text), in order; None for arrays (.npz, random rows).
    texts: list = None

    @property
    def count(self):
        return int(self.arrays["input_ids"].shape[0])

    @property
    def seq_len(self):
        return int(self.arrays["input_ids"].shape[1])

    def take(self, count):
        """The first ``count`` rows (the description says so when rows are left out)."""
        description = self.description if count >= self.count else f"the first {count} of {self.description}"
        return InputSet({k: v[:count] for k, v in self.arrays.items()}, description,
                        None if self.texts is None else list(self.texts[:count]))

    def single_texts(self):
        """The rows of single texts (no sentence pair), with their lines: what a text-in file is fed."""
        if self.texts is None:
            return self
        keep = [i for i, line in enumerate(self.texts) if "\t" not in line]
        if len(keep) == len(self.texts):
            return self
        return InputSet({k: v[keep] for k, v in self.arrays.items()}, f"the {len(keep)} single texts of "
                        f"{self.description}", [self.texts[i] for i in keep])

    def with_padded_rows(self, count=4):
        """These rows, plus ``count`` of them cut to half length, when no row has padding.

        Validation compares a file with its Keras model on these rows; with no padded row, an attention
        mask the file ignores (``--mask-value 0``) passed, and the app's short inputs then got other answers.
        Rows of text longer than ``seq_len`` (the built-in sentences at ``--seq-len 16``) have none.

        Example:
            >>> InputSet.random(100, 2, 8).with_padded_rows().count  # one of the two rows is padded already
            2
        """
        mask = self.arrays["attention_mask"]
        if self.count == 0 or (mask == 0).any():
            return self
        take = min(count, self.count)
        keep = max(1, self.seq_len // 2)
        cut = {k: v[:take].copy() for k, v in self.arrays.items()}
        for name in ("input_ids", "attention_mask", "token_type_ids"):
            cut[name][:, keep:] = 0
        arrays = {k: np.concatenate([v, cut[k]]) for k, v in self.arrays.items()}
        return InputSet(arrays, f"{self.description}, and {take} of them cut to {keep} token(s) to check the padding "
                                "mask")

    def rows(self, batch_size=1):
        """Yields dicts of ``batch_size`` rows (the last batch repeats rows to fill it)."""
        n = self.count
        for start in range(0, n, batch_size):
            index = [(start + i) % n for i in range(batch_size)]
            yield {k: v[index] for k, v in self.arrays.items()}

    @classmethod
    def from_text(cls, lines, tokenizer, seq_len, description="text"):
        lines = [line.rstrip("\n") for line in lines if line.strip()]
        if not lines:
            raise ExportError(f"{description} holds no text lines; put one sentence per line")
        return cls(tokenizer.encode_inputs(lines, seq_len), f"{len(lines)} line(s) of {description}", lines)

    @classmethod
    def from_file(cls, path, seq_len, tokenizer=None, vocab_size=None, count=None, type_vocab_size=None):
        """Reads the first ``count`` rows of a ``.txt`` (tokenized with ``tokenizer``) or ``.npz`` file.

        Only the rows used are read: a 37 MB calibration file of which 200 rows were used took 4.4 GB
        (issue 12). Text is read line by line; ``.npz`` arrays row by row from their ``.npy`` headers.

        Ids and segment ids must stay below ``vocab_size`` / ``type_vocab_size`` (None: unchecked); ``count``
        None reads up to :data:`MAX_ROWS`. A missing or special file, text without a tokenizer, wrong arrays or
        no rows is an ExportError.
        """
        path = Path(path)
        count = MAX_ROWS if count is None else int(count)
        if path.suffix == ".npz":
            return cls._from_npz(path, seq_len, vocab_size, count, type_vocab_size)
        if path.suffix in TEXT_SUFFIXES:
            if tokenizer is None:
                raise ExportError(
                    f"{escape(path)} is text but the model has no vocabulary (vocab.txt) to tokenize it; "
                    "pass saved input arrays (.npz) instead"
                )
            if vocab_size and getattr(tokenizer, "vocab_size", 0) > vocab_size:
                # Ids past the embedding table would fail deep inside the model (or, on a phone, read garbage).
                raise ExportError(
                    f"the vocabulary {escape(getattr(tokenizer, 'vocab_path', ''))} has {tokenizer.vocab_size} "
                    f"tokens but the model embeds only {vocab_size}; it is not this model's vocabulary: use the "
                    "vocab.txt the model was trained with"
                )
            return cls.from_text(_text_lines(path, count), tokenizer, seq_len, description=escape(path))
        raise ExportError(f"{escape(path)}: unknown data file type {escape(repr(path.suffix))}; use .txt (one "
                          "sentence per line) or .npz")

    @classmethod
    def for_model(cls, path, seq_len, tokenizer, config, count=None):
        """:meth:`from_file` with the id limits of an encoder's ``config``: its vocabulary and segment sizes.

        The one call of export, validation and recovery, so no caller forgets a limit.
        """
        return cls.from_file(path, seq_len, tokenizer, config["vocab_size"], count=count,
                             type_vocab_size=config.get("type_vocab_size"))

    @classmethod
    def _from_npz(cls, path, seq_len, vocab_size, count, type_vocab_size=None):
        where = escape(path)
        try:
            with _opened(path) as handle, zipfile.ZipFile(handle) as archive:
                names = {n[:-4] for n in archive.namelist() if n.endswith(".npy")}
                missing = [n for n in INPUT_NAMES if n not in names]
                if missing:
                    raise ExportError(f"{where} lacks array(s) {', '.join(missing)}; it needs {', '.join(INPUT_NAMES)}")
                arrays = {name: _npy_rows(archive, name, where, seq_len, count) for name in INPUT_NAMES}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
            raise ExportError(f"cannot read {where} as .npz input arrays ({escape(err)})") from err
        out = {}
        for name in INPUT_NAMES:
            a = arrays[name]
            # Booleans, strings and complex numbers are no token ids (a string array was an internal error).
            if a.dtype.kind not in "iuf":
                raise ExportError(f"{where}: {name} holds {a.dtype} values; save integer arrays (np.int32)")
            if a.dtype.kind == "f" and not np.all(a == np.round(a)):
                raise ExportError(f"{where}: {name} must hold integers, got {a.dtype}")
            # Checked before the cast: int64 ids past int32 wrapped around into valid-looking ids.
            if a.size and not (a.min() >= -2**31 and a.max() < 2**31):
                raise ExportError(f"{where}: {name} holds values outside int32")
            out[name] = a.astype(np.int32)
        rows = {a.shape[0] for a in out.values()}
        if len(rows) != 1:
            raise ExportError(f"{where}: the three arrays have different numbers of rows")
        if rows == {0}:
            raise ExportError(f"{where} holds 0 rows; save at least one row per array")
        mask = out["attention_mask"]
        if not np.isin(mask, (0, 1)).all():
            raise ExportError(f"{where}: attention_mask holds values other than 0 and 1; save 1 for real tokens, 0 "
                              "for padding")
        empty = np.flatnonzero(mask.max(axis=1) == 0)
        if empty.size:
            # A row of padding only is no input a tokenizer makes ([CLS] is always real), and recovery on it gave NaN.
            raise ExportError(f"{where}: row {int(empty[0])} has no real token (attention_mask all 0); every row "
                              "needs at least [CLS]")
        if vocab_size and (out["input_ids"].min() < 0 or out["input_ids"].max() >= vocab_size):
            raise ExportError(f"{where}: input_ids outside the vocabulary [0, {vocab_size})")
        if type_vocab_size and (out["token_type_ids"].min() < 0 or out["token_type_ids"].max() >= type_vocab_size):
            # Like ids past the vocabulary: an out-of-range row lookup deep inside the model.
            raise ExportError(f"{where}: token_type_ids outside the model's {type_vocab_size} segment(s) "
                              f"[0, {type_vocab_size}); save 0 (first sentence) or 1 (second) per token")
        return cls(out, f"{out['input_ids'].shape[0]} row(s) of {where}")

    @classmethod
    def random(cls, vocab_size, count, seq_len, type_vocab_size=2, seed=0):
        """Realistic random inputs: ids in [1, vocab), segments 0/1, every other row right padded."""
        rng = np.random.default_rng(seed)
        ids = rng.integers(1, vocab_size, size=(count, seq_len), dtype=np.int32)
        mask = np.ones((count, seq_len), np.int32)
        types = np.zeros((count, seq_len), np.int32)
        shortest = min(max(2, seq_len // 4), seq_len - 1)  # seq_len 2 (the smallest --seq-len): one real token
        for row in range(count):
            length = seq_len if row % 2 == 0 or seq_len < 2 else int(rng.integers(shortest, seq_len))
            mask[row, length:] = 0
            ids[row, length:] = 0
            if type_vocab_size > 1:
                types[row, length // 2: length] = 1
        return cls({"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
                   f"{count} random row(s) (seed {seed}; no vocabulary to tokenize real text)")

    @classmethod
    def like_text(cls, vocab_size, count, seq_len, type_vocab_size=2, seed=0):
        """Random rows shaped like tokenized text: the default calibration of a model without a vocabulary.

        Shaped like tokenized text, so that calibration ranges and validation see what an app
        sends: ``[CLS] A [SEP]`` or, for every other row, ``[CLS] A [SEP] B [SEP]`` with segment 1
        on ``B``; word ids drawn from the vocabulary without its special ids (BERT's layout: 0
        ``[PAD]``, 1-99 unused, 100-103 ``[UNK] [CLS] [SEP] [MASK]``); lengths from a log-normal
        around a quarter of ``seq_len`` (short sentences are common, a few fill the row and are
        cut); ``[PAD]`` (0) after the text, with a mask of 1 on the text and 0 on the padding. No pairs when
        ``type_vocab_size`` is 1.

        Example:
            >>> rows = InputSet.like_text(vocab_size=30522, count=4, seq_len=32)
            >>> int(rows.arrays["input_ids"][0, 0])  # [CLS]
            101
        """
        rng = np.random.default_rng(seed)
        cls_id, sep_id, first_word = _special_ids(vocab_size)
        ids = np.zeros((count, seq_len), np.int32)
        mask = np.zeros((count, seq_len), np.int32)
        types = np.zeros((count, seq_len), np.int32)
        for row in range(count):
            length = int(np.clip(rng.lognormal(np.log(max(seq_len / 4, 3)), 0.6), 3, seq_len))
            words = rng.integers(first_word, vocab_size, size=length, dtype=np.int32)
            words[0] = words[length - 1] = -1  # framing slots, filled below
            pair = type_vocab_size > 1 and row % 2 == 1 and length >= 5
            if pair:
                split = int(rng.integers(2, length - 2))
                words[split] = -1
                types[row, split + 1: length] = 1
            words[0] = cls_id
            words[words == -1] = sep_id
            ids[row, :length] = words
            mask[row, :length] = 1
        return cls({"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
                   f"{count} realistic random row(s) (seed {seed}; no vocabulary to tokenize real text)")

    @classmethod
    def sample(cls, tokenizer, seq_len, count=None):
        """The built-in sample sentences (and a few pairs) through ``tokenizer``."""
        return cls.from_text(sample_lines(count, seq_len), tokenizer, seq_len, description="built-in sample sentences")

    @classmethod
    def default_calibration(cls, tokenizer, vocab_size, count, seq_len, type_vocab_size=2):
        """What a calibrated mode measures its ranges on when no ``--calibration`` file is given.

        A model with a vocabulary: the built-in calibration sentences (``sample_text.CALIBRATION_SENTENCES``,
        real English, none of them a validation sentence, so validation still sees text the ranges
        were not fitted to). Without one: :meth:`like_text` rows (seed 1; validation uses seed 0).
        Whether a mode may calibrate on these at all is its record's ``default_calibration`` rule
        (``quantization/modes.py``).

        Example:
            >>> InputSet.default_calibration(None, 512, 8, 16).description
            '8 realistic random row(s) (seed 1; no vocabulary to tokenize real text)'
        """
        if tokenizer is None:
            return cls.like_text(vocab_size, count, seq_len, type_vocab_size, seed=1)
        return cls.from_text(CALIBRATION_SENTENCES[:count], tokenizer, seq_len,
                             description="built-in calibration sentences")

    def save(self, path):
        """Writes the arrays as ``.npz`` (atomically)."""
        with atomic_file(path, "wb") as handle:
            np.savez(handle, **self.arrays)


def sample_lines(count=None, seq_len=None):
    """The first ``count`` built-in validation lines (sentences, then tab-separated pairs).

    The pairs are left out at a ``seq_len`` too short for a pair's three special tokens.
    """
    pairs = list(SENTENCE_PAIRS) if seq_len is None or seq_len >= PAIR_MIN_LENGTH else []
    return (list(SENTENCES) + pairs)[:count]


def validation_lines(path, tokenizer, count, seq_len=None):
    """The lines an export or ``mbk validate`` validates on (``path`` None: the built-in ones), in the order of
    the validation rows; None for ``.npz`` arrays or a model without a tokenizer.
    """
    if tokenizer is None:
        return None
    if path is None:
        return sample_lines(count, seq_len)
    if Path(path).suffix not in TEXT_SUFFIXES:
        return None
    return _text_lines(Path(path), count)


def _special_ids(vocab_size):
    """``(cls_id, sep_id, first word id)``: BERT's layout when the vocabulary has room for it."""
    # BERT's vocabularies (and so the presets' vocab_size 30522) put [CLS] 101, [SEP] 102, [MASK] 103
    # and the word pieces from 104 on; a smaller test vocabulary gets the same order at its start.
    if vocab_size > 104:
        return 101, 102, 104
    if vocab_size < 4:
        raise ExportError(f"vocab_size {vocab_size} is too small for [PAD], [CLS], [SEP] and a word")
    return 1, 2, 3


def default_inputs(encoder_config, seq_len, tokenizer=None, count=16, seed=0):
    """Sample sentences through ``tokenizer`` if there is one, else random realistic ids."""
    if tokenizer is not None:
        return InputSet.sample(tokenizer, seq_len).take(count)
    return InputSet.random(encoder_config["vocab_size"], count, seq_len, encoder_config["type_vocab_size"], seed)


def _opened(path):
    """``path`` opened for reading if it is a regular file (a FIFO never blocks), else a one-line ExportError."""
    try:
        return open_regular(path, "calibration/validation data")
    except MbkError as err:
        raise ExportError(f"{err}; pass a .txt or .npz file") from err
    except OSError as err:
        raise ExportError(f"cannot read {escape(path)} ({escape(err.strerror or err)})") from err


def _text_lines(path, count):
    """The first ``count`` non-blank lines of a UTF-8 text file, each cut at :data:`MAX_LINE_CHARS`."""
    lines = []
    try:
        with _opened(path) as raw:
            handle = io.TextIOWrapper(raw, encoding="utf-8-sig")  # a byte-order mark is no text (utils.input_paths.text_line)
            while len(lines) < count:
                line = handle.readline(MAX_LINE_CHARS)
                if not line:
                    break
                if not line.endswith("\n"):
                    while (rest := handle.readline(MAX_LINE_CHARS)) and not rest.endswith("\n"):
                        pass  # the rest of an over-long line: read in bounded pieces and dropped
                if "\0" in line:  # UTF-16 without a byte-order mark: valid UTF-8, a NUL after each ASCII character
                    raise ExportError(f"{escape(path)} holds a NUL character, so it is UTF-16 or binary, not UTF-8 "
                                      "text; save it as UTF-8")
                if line.strip():
                    lines.append(line.rstrip("\r\n"))
    except UnicodeDecodeError as err:
        raise ExportError(f"{escape(path)} is not UTF-8 text ({err}); save it as UTF-8") from err
    return lines


def _npy_rows(archive, name, where, seq_len, count):
    """The first ``count`` rows of ``name.npy`` in an open ``.npz``, read from its header, never the whole array."""
    with archive.open(f"{name}.npy") as member:
        version = np.lib.format.read_magic(member)
        readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            raise ExportError(f"{where}: {name}.npy has format version {version}; save it with np.savez")
        # max_header_size: numpy's own default limit (a header is a short dict literal).
        shape, fortran, dtype = readers[version](member, max_header_size=10000)
        if dtype.hasobject:
            raise ExportError(f"{where}: {name} holds Python objects; save integer arrays (np.int32)")
        if len(shape) != 2 or shape[1] != seq_len:
            raise ExportError(f"{where}: {name} has shape {list(shape)}, expected [n, {seq_len}] (--seq-len)")
        rows = min(int(shape[0]), count)
        if fortran:
            # Column-major rows are not contiguous; such files come only from np.asfortranarray by hand.
            raise ExportError(f"{where}: {name} is saved in Fortran order; save np.ascontiguousarray(...) instead")
        data = member.read(rows * seq_len * dtype.itemsize)
        if len(data) != rows * seq_len * dtype.itemsize:
            raise ExportError(f"{where}: {name} is shorter than its header says (truncated file)")
        return np.frombuffer(data, dtype=dtype).reshape(rows, seq_len)
