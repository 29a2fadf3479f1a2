"""Everyday English sentences: validation inputs and the default calibration text when no data file is given.

Real text matters for validation and calibration: random token ids give attention patterns and activation
ranges that real sentences never produce. These lines were written for this package, one per line in the text
files beside this module, so ``mbk profile --text`` and a recipe's ``[profile] text`` can name them too.

Two separate sets, because an artifact must never be validated on the rows it
was calibrated on (its ranges would fit the test): :data:`SENTENCES` and
:data:`SENTENCE_PAIRS` validate (``sentences.txt``, ``sentence_pairs.txt``: one pair per line, the two
texts separated by a tab), :data:`CALIBRATION_SENTENCES` (``calibration_sentences.txt``) calibrate full
integer modes of a model with a vocabulary when no ``--calibration`` file is
given (``tests/convert/test_default_calibration.py`` checks they share no line).
A few validation sentences carry accents: the TFLite clients never strip them
while uncased checkpoints such as all-MiniLM-L6-v2 do, and client-fidelity
validation (``convert/validation/client_fidelity.py``) must see that difference.
"""

from pathlib import Path

_HERE = Path(__file__).parent
# The sentences `mbk pipeline` times every file on when the recipe names no [profile] text: the validation set,
# real sentences at their own lengths (median 9 words), the same for every file and every run.
SAMPLE_TEXT = _HERE / "sentences.txt"


def _lines(name):
    return tuple(line for line in (_HERE / name).read_text(encoding="utf-8").splitlines() if line.strip())


SENTENCES = _lines("sentences.txt")
SENTENCE_PAIRS = _lines("sentence_pairs.txt")
# Calibration text (module doc): short queries, everyday statements, a few long lines and tab-separated pairs.
CALIBRATION_SENTENCES = _lines("calibration_sentences.txt")
