"""Bounds of numeric settings: the :class:`Limit` record and the checks that read it.

Each command declares its own options' bounds beside the code that uses them
(docs/architecture.md lists the owners). The command line (the argparse
``type=`` factory :func:`number_option`) and the recipe reader
(:func:`check_number`) take the same :class:`Limit`, so ``--count 0`` and
``count = 0`` in a recipe are refused alike, each error naming what the user
wrote (the flag or the key).
Floats must be finite: ``--min-time nan`` never stopped the profiler (issue 12),
``nan`` compares false with every bound.

Standard library only: ``mbk profile`` and the recipe reader never import TensorFlow.
"""

import argparse
import math
from dataclasses import dataclass

from mobilebert_kit.errors import ConfigError, is_int


@dataclass(frozen=True)
class Limit:
    """The valid values of one numeric setting.

    Args:
        kind: ``int`` or ``float``.
        lo: smallest valid value.
        hi: largest valid value.
        lo_open: ``lo`` itself is invalid (a rate or a time that must be > 0).
    """

    kind: type
    lo: float
    hi: float
    lo_open: bool = False

    def describe(self):
        what, show = ("an integer", lambda v: str(int(v))) if self.kind is int else ("a finite number", lambda v: f"{v:g}")
        low = f"> {show(self.lo)}" if self.lo_open else f">= {show(self.lo)}"
        return f"{what} {low} and <= {show(self.hi)}"


# Seeds: numpy's legacy seeding and tf.random.set_seed accept 32-bit seeds (the one bound every command shares
# that no product file records).
SEED = Limit(int, 0, 2**32 - 1)


def _problem(limit, value):
    """Why ``value`` breaks ``limit`` (its type, finiteness or bounds), or None."""
    number = isinstance(value, int if limit.kind is int else (int, float)) and not isinstance(value, bool)
    if number and (isinstance(value, int) or math.isfinite(value)):
        if (value > limit.lo if limit.lo_open else value >= limit.lo) and value <= limit.hi:
            return None
    return f"must be {limit.describe()}, got {value!r}"


def within(limit, value):
    """Whether ``value`` satisfies ``limit`` (type, finiteness, bounds): for values read from files, whose
    messages name the file's own fix.

    Example:
        >>> within(Limit(int, 0, 10), 3), within(Limit(int, 0, 10), True), within(Limit(float, 0, 1), float("nan"))
        (True, False, False)
    """
    return _problem(limit, value) is None


def check_number(name, value, limit):
    """Returns ``value`` (an int as float for float settings) if ``limit`` allows it, else raises ConfigError
    naming the setting as the user wrote it (``name``: ``--count`` or ``[validation] count``).

    Example:
        >>> check_number("[calibration] count", 200, Limit(int, 1, 10**6))
        200
        >>> check_number("--min-time", float("nan"), Limit(float, 0.0, 86400.0))
        Traceback (most recent call last):
        ...
        mobilebert_kit.errors.ConfigError: --min-time must be a finite number >= 0 and <= 86400, got nan; pass a value in range
    """
    if limit.kind is float and is_int(value):
        value = float(value)
    problem = _problem(limit, value)
    if problem:
        raise ConfigError(f"{name} {problem}; pass a value in range")
    return value


def _parse(limit, text):
    text = str(text).strip()
    try:
        return int(text, 10) if limit.kind is int else float(text)
    except ValueError:
        return text


def number_option(limit):
    """An argparse ``type=`` checking ``limit`` (kept as ``type.limit``: tests enumerate every numeric flag by
    it); argparse names the flag in its error.
    """

    def parse(text):
        value = _parse(limit, text)
        problem = _problem(limit, value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = "integer" if limit.kind is int else "number"
    parse.limit = limit  # lets tests enumerate every numeric flag of every command
    return parse
