"""Error types of the converter: what went wrong, named so callers can catch it.

Validation collects every problem of an artifact before raising (names, then
shapes, then values). Each problem is one of the specific types below; the
raised :class:`ValidationError` keeps them all in ``failures`` and takes the
type of the problems when they are all of one kind, so ``except
OutputValueError`` catches "the numbers are off" and nothing else.
"""

from mobilebert_kit.artifacts.errors import ArtifactError  # noqa: F401  (re-exported: converter code catches it here)
from mobilebert_kit.errors import ConfigError, MbkError


class ExportError(MbkError):
    """The converter could not produce an artifact (unsupported op, bad option)."""


def check_op_types(asked, present, runtime):
    """Refuses ``--keep-float-ops`` names the graph does not have (both formats).

    The converters and the ONNX quantizer ignore a deny-listed op type they do not find, so a typo kept nothing
    in float, silently. ``runtime`` (``"TFLite"`` / ``"ONNX"``) is named in the message.
    """
    unknown = sorted(set(asked) - set(present))
    if unknown:
        raise ExportError(f"keep-float op type(s) {', '.join(unknown)} are not in this model; its {runtime} op "
                          f"types: {', '.join(sorted(present))}")


class RecipeError(ConfigError):
    """A recipe file that cannot be used: unknown key, bad value, path outside its directory."""


class ValidationError(MbkError):
    """An artifact that does not match its Keras source.

    Args:
        message: one-line summary.
        failures: the individual problems (instances of the subclasses below).
    """

    exit_code = 1

    def __init__(self, message, failures=()):
        self.failures = list(failures)
        super().__init__(message)


class InputNameError(ValidationError):
    """The artifact's inputs are not ``input_ids``, ``attention_mask``, ``token_type_ids`` in order."""


class OutputNameError(ValidationError):
    """An expected output is missing, an extra one appears, or the first output is wrong."""


class OutputShapeError(ValidationError):
    """An output has a different shape from the Keras source's."""


class OutputValueError(ValidationError):
    """An output's values are outside the precision's thresholds."""


def raise_for_failures(artifact, failures):
    """Raises one ValidationError carrying every failure, typed as the module doc says; no-op without any."""
    if not failures:
        return
    kinds = {type(f) for f in failures}
    cls = kinds.pop() if len(kinds) == 1 else ValidationError
    summary = "; ".join(str(f) for f in failures[:4])
    more = f" (+{len(failures) - 4} more)" if len(failures) > 4 else ""
    raise cls(f"{artifact} failed validation, {len(failures)} problem(s): {summary}{more}", failures)
