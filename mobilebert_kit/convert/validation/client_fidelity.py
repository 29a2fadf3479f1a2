"""Client fidelity: does the file answer on the phone as the checkpoint answers on the same text?

Validation compares the artifact with its Keras source on the *same ids*. An
app does not send our ids: the TFLite clients (MediaPipe Tasks, the Task
Library) tokenize the text themselves with the packed ``vocab.txt``,
ASCII-lower-casing it and never stripping accents
(:meth:`~mobilebert_kit.data.text_tokenizer.TextTokenizer.client_tokenizer`).
all-MiniLM-L6-v2's own tokenizer strips accents, so on "naïve café" the phone
computes another embedding (cosine 0.37, issue 14) while validation passes.

This check tokenizes the validation text both ways, counts the texts whose ids
differ, runs the artifact on the client's ids and the Keras source on the
checkpoint's ids, and compares the first output as validation compares it
(:func:`~mobilebert_kit.convert.validation.compare.compare`, reading its answers
as ``export_model.logit_outputs`` says: argmax agreement for class scores, each
label's side of its cut for a multi-label file); a hidden-state output is
mean-pooled over each side's real tokens first, since the two tokenizations
need not align. It
warns; it does not fail the export, because the difference lies in the
client's tokenizer, which no export option changes (the fix is the app's text
or a checkpoint trained without accent stripping).

ONNX files are used with the checkpoint's own tokenizer (optimum-style code
calls the Hugging Face tokenizer), so the check applies to the formats in
:data:`CLIENT_TOKENIZED_FORMATS` only.
"""

import unicodedata
from dataclasses import asdict, dataclass, field

import numpy as np

from mobilebert_kit.convert.plan.input_set import INPUT_NAMES
from mobilebert_kit.convert.validation.compare import compare
from mobilebert_kit.utils.terminal import escape

# Formats whose clients tokenize on their own (shared/reference/clients.md): TFLite's MediaPipe and Task Library.
CLIENT_TOKENIZED_FORMATS = ("tflite",)
# Hidden-state outputs: compared after mean pooling over each side's real tokens.
HIDDEN_STATE_OUTPUTS = ("sequence_output", "last_hidden_state")
# Outputs indexed by token position, which shift when a word splits differently: values are not comparable.
POSITION_OUTPUTS = ("start_logits", "end_logits", "mlm_logits")
EXAMPLES = 3  # differing texts quoted in the report


@dataclass
class ClientFidelity:
    """How the artifact answers on the client's tokenization, against the checkpoint on its own: of ``texts``
    validation texts, ``differing`` tokenize differently (up to :data:`EXAMPLES` quoted, ``reason`` saying
    why); the compared ``output`` (the artifact's first; None: not comparable) has these cosines (artifact
    on client ids vs Keras on checkpoint ids) and, for class scores, the agreement of their answers
    (``answers``: "argmax" per row, "label" per label of a multi-label file).

    Example:
        >>> ClientFidelity("TFLite clients", 16, 3, ["naïve café"], "sentence_embedding", 0.96, 0.37).warning()
        '3 of 16 validation sentences tokenize differently on the phone (accents); min cosine 0.3700'
    """

    client: str
    texts: int
    differing: int
    examples: list = field(default_factory=list)
    output: str = None
    cosine_mean: float = None
    cosine_min: float = None
    argmax_agreement: float = None
    reason: str = "accents"
    answers: str = "argmax"

    def warning(self):
        """One line when some text tokenizes differently on the phone, else None."""
        if not self.differing:
            return None
        line = (f"{self.differing} of {self.texts} validation sentences tokenize differently on the phone "
                f"({self.reason})")
        if self.cosine_min is not None:
            line += f"; min cosine {self.cosine_min:.4f}"
        if self.argmax_agreement is not None:
            line += f", {self.answers} agreement {self.argmax_agreement:.4f}"
        return line

    def to_dict(self):
        """The export report's ``validation.client_tokenization``."""
        return {**asdict(self), "warning": self.warning()}

    def format_text(self):
        """Lines for ``mbk export`` / ``mbk validate`` output."""
        compared = "" if self.output is None else (
            f": {self.output} cos {self.cosine_mean:.6f} (min {self.cosine_min:.6f})"
            + ("" if self.argmax_agreement is None else f"  {self.answers} {self.argmax_agreement:.4f}"))
        lines = [f"  client tokenization ({self.client}, lower-case, accents kept): "
                 f"{self.differing} of {self.texts} texts differ{compared}"]
        if self.differing:
            lines.append(f"  warning: {self.warning()}; e.g. " + ", ".join(repr(escape(e)) for e in self.examples))
        return lines


def client_fidelity(runner, reference_outputs, lines, tokenizer, seq_len, logits):
    """Compares the artifact on the client's ids with the Keras source on the checkpoint's ids.

    ``reference_outputs`` maps ``{input name: int32 [n, seq]}`` to the Keras source's values under the
    artifact's output names; ``logits``: how validation reads each output's answers
    (``export_model.logit_outputs``). Returns None when no client can tokenize for the tokenizer's kind;
    ``output`` stays None when the first output is indexed by token position, which two tokenizations do not share.
    """
    client = tokenizer.client_tokenizer()
    if client is None:
        return None  # no client tokenizer for this kind (byte-level BPE): the readiness report says why
    ours = tokenizer.encode_inputs(lines, seq_len)
    theirs = client.encode_inputs(lines, seq_len)
    differs = np.zeros(len(lines), bool)
    for name in ours:
        differs |= (ours[name] != theirs[name]).any(axis=1)
    examples = [line for line, d in zip(lines, differs) if d]
    record = ClientFidelity("MediaPipe / Task Library", len(lines), int(differs.sum()), examples[:EXAMPLES],
                            reason=_reason(examples, tokenizer.lowercase))
    name = runner.output_names[0]
    if name in POSITION_OUTPUTS:
        return record
    expected = reference_outputs(ours)
    if name not in expected:
        return record
    phone = np.asarray(runner.run(theirs)[name], np.float64)
    source = np.asarray(expected[name], np.float64)
    if phone.ndim == 3 and name in HIDDEN_STATE_OUTPUTS:
        phone, source = _mean_pooled(phone, theirs["attention_mask"]), _mean_pooled(source, ours["attention_mask"])
    elif phone.ndim != 2:
        return record  # per-token scores (token classification): positions do not align either
    metrics = compare(name, phone, source, logits=logits.get(name, False))
    record.output, record.cosine_mean, record.cosine_min = name, metrics.cosine, metrics.cosine_min
    record.argmax_agreement, record.answers = metrics.argmax_agreement, metrics.answers
    return record


def client_fidelity_of(runner, fmt, texts, tokenizer, seq_len, reference_outputs, logits):
    """:func:`client_fidelity` where it applies, else None: a format whose clients tokenize
    (:data:`CLIENT_TOKENIZED_FORMATS`), validation text (not ``.npz`` rows) and a tokenizer.
    """
    if fmt not in CLIENT_TOKENIZED_FORMATS or not texts or tokenizer is None:
        return None
    if [s["name"] for s in runner.input_specs] != list(INPUT_NAMES) or runner.seq_len not in (None, seq_len):
        return None  # validation already reports the names or length it cannot feed
    return client_fidelity(runner, reference_outputs, texts, tokenizer, seq_len, logits)


def _mean_pooled(hidden, mask):
    mask = np.asarray(mask, np.float64)[..., None]
    return (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1.0)


def _reason(texts, lowercase):
    """What makes the two tokenizations of ``texts`` differ, in a word or two, for the warning."""
    reasons = []
    if any(unicodedata.category(c) == "Mn" for text in texts for c in unicodedata.normalize("NFD", text)):
        reasons.append("accents")
    if not lowercase and any("A" <= c <= "Z" for text in texts for c in text):
        reasons.append("the phone lower-cases a cased model's text")
    if any(c.isupper() and not c.isascii() for text in texts for c in text):
        reasons.append("non-ASCII capitals")
    # None of the known normalisation gaps: say so rather than blame accents the texts do not have (issue 47:
    # a vocab.txt disagreeing with tokenizer.json was reported as accents; the one reading now refuses it).
    return ", ".join(reasons) or "the packed tokenizer splits them otherwise than the checkpoint's"


__all__ = ["ClientFidelity", "client_fidelity", "client_fidelity_of", "CLIENT_TOKENIZED_FORMATS"]
