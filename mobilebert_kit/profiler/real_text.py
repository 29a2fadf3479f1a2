"""Real text as a model's app feeds it: the sentences ``mbk profile --text FILE`` times a file on (docs/profiler.md,
"Real text", says how they are tokenized, cut and fed). The caller passes the app's tokenizer (e.g.
``evaluation.artifact_metrics.app_tokenizer``): the profiler imports no tokenizer.

Example:
    >>> text = RealText.from_file("tweets.txt", "model.tflite", app_tokenizer("model.tflite"))  # doctest: +SKIP
    >>> text.summary()["tokens"]["median"]  # doctest: +SKIP
    21.0
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mobilebert_kit.errors import MbkError
from mobilebert_kit.profiler.errors import ProfilerError
from mobilebert_kit.profiler.inputs import feed_shape
from mobilebert_kit.profiler.model_info import ModelInfo
from mobilebert_kit.utils.input_paths import text_line

# Sentences read from --text at most: a latency distribution needs hundreds, not a corpus.
MAX_SENTENCES = 2000
# The longest line read: a text file of one 3 GB line must not be read whole.
MAX_LINE_CHARS = 100_000
# A dynamic file without a recorded position table (no mbk metadata) takes at most this many tokens.
FALLBACK_MAX_TOKENS = 512


@dataclass(frozen=True)
class RealText:
    """Token rows of real sentences, each at its own length, and where they came from.

    Args:
        source (str): the text file.
        ids (tuple): one int64 array of token ids per sentence, at its own token count.
        types (tuple): the token type ids of each sentence (zeros for one text).
        max_tokens (int): the length the sentences were cut at.
        truncated (int): sentences longer than ``max_tokens`` before the cut.
        lines (tuple): the sentences themselves, fed as they are to a file that takes text
            (``--tokenizer-in-graph``: it tokenizes and cuts them inside; ``ids`` and ``types`` are then empty).
    """

    source: str
    ids: tuple
    types: tuple
    max_tokens: int
    truncated: int
    lines: tuple = ()

    @classmethod
    def from_file(cls, text, model, tokenizer, limit=MAX_SENTENCES):
        """Tokenizes the non-empty lines of ``text`` (at most ``limit``) with ``model``'s app tokenizer.

        Args:
            text (str | os.PathLike): a UTF-8 text file, one sentence per line.
            model (str | os.PathLike): the ``.tflite`` / ``.onnx`` file to be timed.
            tokenizer: the ids the app computes: any object with ``encode_inputs(lines, seq_len)`` returning
                ``input_ids`` / ``attention_mask`` / ``token_type_ids`` rows (``app_tokenizer(model)``); None for
                a file that takes text (it tokenizes inside).
            limit (int): sentences read at most.

        Raises:
            ProfilerError: the text is missing, not UTF-8 or empty, or cannot be tokenized.
        """
        lines = read_lines(Path(text), limit)
        info = ModelInfo(model)
        max_tokens = info.static_seq_len or info.max_seq_len or FALLBACK_MAX_TOKENS
        if info.takes_text:
            return cls(str(text), (), (), int(max_tokens), 0, tuple(lines))
        try:
            # One token over the cut tells a sentence that was cut from one that fits exactly.
            arrays = tokenizer.encode_inputs(lines, max_tokens + 1)
        except MbkError as err:
            raise ProfilerError(f"--text {text}: {err}") from err
        lengths = np.asarray(arrays["attention_mask"]).sum(axis=1).astype(int)
        ids, types = [], []
        for row, length in enumerate(lengths):
            keep = min(int(length), max_tokens)
            row_ids = np.asarray(arrays["input_ids"][row][:keep], dtype=np.int64)
            if length > max_tokens:  # cut as a truncating tokenizer cuts: the last token ([SEP]) stays
                row_ids[-1] = arrays["input_ids"][row][length - 1]
            ids.append(row_ids)
            types.append(np.asarray(arrays["token_type_ids"][row][:keep], dtype=np.int64))
        return cls(str(text), tuple(ids), tuple(types), int(max_tokens), int((lengths > max_tokens).sum()))

    @property
    def lengths(self):
        """The token count of each sentence as fed (after the cut)."""
        return np.array([len(row) for row in self.ids])

    def feeds(self, inputs, static_len=None):
        """``{input name: [1, n] array}`` per sentence for a model's ``inputs`` (``ModelInfo.inputs``), each padded to
        ``static_len`` (a static file) or at its own length (None); a static batch of B gets the sentence in B rows."""
        if self.lines:
            return [{inputs[0]["name"]: np.array([line], dtype=object)} for line in self.lines]
        out = []
        for ids, types in zip(self.ids, self.types):
            width = static_len or len(ids)
            row = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": types}
            feed = {}
            for spec in inputs:
                # A static batch (static_axes with batch_size 2) takes that many rows: each the sentence.
                values = np.zeros(feed_shape(spec, width), dtype=np.int64)
                source = row.get(spec.get("role"))
                if source is not None:
                    values[..., : len(source)] = source
                feed[spec["name"]] = values.astype(spec["dtype"])
            out.append(feed)
        return out

    def summary(self, fed="own length"):
        """The text's record in a profile result: its sentences and their token counts; ``fed`` says how they were fed
        (``"own length"`` or ``"padded to N"``)."""
        # A text-in file's tokens are counted inside it: its sentences are described by their characters.
        lengths, unit = (np.array([len(line) for line in self.lines]), "characters") if self.lines else \
            (self.lengths, "tokens")
        return {
            "source": self.source,
            "sentences": int(len(lengths)),
            unit: {"min": int(lengths.min()), "median": float(np.median(lengths)),
                   "mean": float(lengths.mean()), "p90": float(np.percentile(lengths, 90)),
                   "max": int(lengths.max())},
            "max_tokens": self.max_tokens,
            "truncated": self.truncated if not self.lines else None,
            "fed": "text, tokenized and cut inside the file" if self.lines else fed,
        }


def read_lines(path, limit=MAX_SENTENCES, what="--text"):
    """The first ``limit`` non-blank lines of a UTF-8 text file of sentences; ``what`` names it in messages
    (``--text``, or a recipe's ``[profile] text``)."""
    if not path.is_file():
        raise ProfilerError(f"{what} {path} does not exist; pass a UTF-8 text file with one sentence per line")
    lines = []
    with path.open("rb") as handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_CHARS * 4 + 1), b""), 1):
            if len(raw) > MAX_LINE_CHARS * 4:
                raise ProfilerError(f"{what} {path} line {number} is longer than {MAX_LINE_CHARS:,} characters; "
                                    "pass one sentence per line")
            try:
                line = text_line(raw, number).strip()
            except UnicodeDecodeError as err:
                raise ProfilerError(f"{what} {path} line {number} is not UTF-8 text (byte 0x{raw[err.start]:02x}); "
                                    "convert it to UTF-8") from err
            if line:
                lines.append(line)
                if len(lines) >= limit:
                    break
    if not lines:
        raise ProfilerError(f"{what} {path} holds no text lines; put one sentence per line")
    return lines
