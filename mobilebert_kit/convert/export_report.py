"""An export's result and its report, ``OUT.report.json``, written beside the artifact.

The report (sizes, float ops left in quantized models, validation metrics, per-layer drift, the search's
frontier) is written before the artifact is put in place, so that a failure while writing it leaves
neither; :func:`report_guard` puts the report it replaced back when the artifact then is not put in place.
"""

import contextlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mobilebert_kit.convert.plan.export_tasks import export_task
from mobilebert_kit.convert.quantization.modes import MODES
from mobilebert_kit.convert.quantization.search import Frontier, Tried
from mobilebert_kit.utils.atomic import atomic_file, remove_path
from mobilebert_kit.utils.output_check import OutputKind, json_field, temp_prefix
from mobilebert_kit.utils.terminal import escape

REPORT_SCHEMA = "mobilebert_kit.export"  # the "schema" of OUT.report.json
# A later export recognises its own report by the schema tag and replaces it (utils.output_check).
EXPORT_REPORT_OUTPUT = OutputKind("export-report", False, "an export report", json_field("schema", REPORT_SCHEMA))


@dataclass
class ExportResult:
    """What an export produced and measured.

    Args:
        path (str): the artifact's path (the user's ``--out``).
        format (str): ``"tflite"`` or ``"onnx"``.
        quantize (str): the quantization mode written.
        size_bytes (int): the file's size.
        seconds (float): the export's wall time.
        source (str): the source as described to the user.
        task (str): the export task.
        seq_len (int): the planned sequence length (the static length, or the validated one).
        notes (list[str]): what the user should know about the file.
        float_ops (dict): op type -> count of ops left in float.
        op_counts (dict): op type -> count.
        validation: the ValidationReport (None without validation).
        search (dict): the search's frontier (``Frontier.to_dict``), None when nothing was searched.
        clients (dict): ``{client name: [reasons it is not ready]}`` (``artifacts.clients``; empty list: ready).
        input_shape (list): the inputs' ``[batch, seq]``, -1 where an axis is open (``ExportPlan.open_axes``).

    Example:
        >>> ExportResult("m.tflite", "tflite", "none", 10, 0.1, "tiny-bert").format_text().split(":")[0]
        'wrote m.tflite'
    """

    path: str
    format: str
    quantize: str
    size_bytes: int
    seconds: float
    source: str
    task: str = None
    seq_len: int = None
    notes: list = field(default_factory=list)
    float_ops: dict = field(default_factory=dict)
    op_counts: dict = field(default_factory=dict)
    validation: object = None
    search: dict = None
    clients: dict = field(default_factory=dict)
    input_shape: list = None

    def to_dict(self):
        out = {k: v for k, v in asdict(self).items() if k != "validation"}
        out["validation"] = self.validation.to_dict() if self.validation is not None else None
        return out

    def format_text(self):
        lines = [f"wrote {escape(self.path)}: {self.format} {self.quantize}, {self.size_bytes / 1e6:.2f} MB "
                 f"({self.seconds:.1f} s) from {escape(self.source)}"
                 + (f"; task {self.task}, {self._length()}" if self.task else "")]
        lines += [f"  note: {escape(n)}" for n in self.notes]  # a note may quote a path
        if self.clients:
            ready = [name for name, reasons in self.clients.items() if not reasons]
            lines.append(f"  ready for: {', '.join(ready) or 'none'}")
            # For a task an app client serves, the first reason of each MediaPipe task that is not ready
            # (mbk inspect lists them all).
            served = self.task is not None and export_task(self.task).client is not None
            for name, reasons in self.clients.items() if served else ():
                if reasons and name.startswith("MediaPipe"):
                    lines.append(f"  not ready for {name}: {reasons[0]}")
        if MODES[self.quantize].calibration:  # static activation ranges: list what stayed float
            listed = ", ".join(f"{op} x{n}" for op, n in sorted(self.float_ops.items()))
            lines.append(f"  ops left in float: {listed or 'none'}")
        if self.search:
            lines.append(frontier_of(self.search).format_text())
        if self.validation is not None:
            lines.append(self.validation.format_text())
        return "\n".join(lines)

    def _length(self):
        if self.input_shape and len(self.input_shape) == 1:
            # A text-in .onnx (--tokenizer-in-graph): one string per text, tokenized inside the file.
            return f"text {self.input_shape} in, tokenized inside the file and cut at {self.seq_len} tokens"
        if self.input_shape and -1 in self.input_shape[1:]:
            return f"inputs {self.input_shape} (each text at its own length), validated at {self.seq_len} tokens"
        return f"seq {self.seq_len}"


def frontier_of(data):
    """The :class:`Frontier` of an ExportResult's ``search`` dict (the report's JSON form)."""
    frontier = Frontier(data["asked"], data["judged_by"], ranking=data["ranking"], stopped=data["stopped"])
    frontier.reference = Tried(**data["reference"]) if data["reference"] else None
    frontier.rows = [Tried(**row) for row in data["frontier"]]
    return frontier


def report_path(out):
    """The report of the artifact ``out``: ``OUT.report.json``."""
    return Path(f"{out}.report.json")


def write_report(out, result, start, overwrite, sources, note=None):
    """Writes ``result`` as ``OUT.report.json`` (atomically; ``sources``, the export's inputs, are never
    overwritten); its ``seconds`` run from the export's ``start`` (``time.perf_counter()``), and ``note`` (why the
    artifact was not written, when it was not) is appended to its notes.
    """
    result.seconds = time.perf_counter() - start
    # The schema tag lets a later export recognise the report as its own and replace it (EXPORT_REPORT_OUTPUT).
    data = {"schema": REPORT_SCHEMA, **result.to_dict()}
    if note:
        data["notes"] = data["notes"] + [note]
    with atomic_file(report_path(out), "w", kind=EXPORT_REPORT_OUTPUT, overwrite=overwrite, sources=sources) as handle:
        json.dump(data, handle, indent=2, default=_json_default)


class _ReportInstall:
    """The success report of one export, and what it replaced (:func:`report_guard`)."""

    def __init__(self, out):
        self.path, self.aside, self.written = report_path(out), None, False

    def write(self, out, result, start, overwrite, sources):
        """:func:`write_report` of the success report; the report it replaces is kept aside (a hard link, a copy
        where the file system has none) until the file itself is in place."""
        self.aside = _set_aside(self.path)
        write_report(out, result, start, overwrite, sources)
        self.written = True

    def undo(self):
        """The report this export replaced back in place, or none where there was none."""
        if self.aside is not None:
            os.replace(self.aside, self.path)  # one rename: the path holds one report or the other, never none
            # rename() of two links to one file (the new report never went in) does nothing and keeps both names.
            remove_path(self.aside, ignore_errors=True)
            self.aside = None
        elif self.written:
            remove_path(self.path, ignore_errors=True)

    def done(self):
        if self.aside is not None:
            remove_path(self.aside, ignore_errors=True)


def _set_aside(path):
    """A hidden ``.NAME.PID.RANDOM.old`` sibling holding what ``path`` holds now (None where nothing regular is
    there); a later write of ``path`` sweeps it if this process dies first."""
    if not os.path.isfile(path) or os.path.islink(path):
        return None
    aside = path.parent / f"{temp_prefix(path)}{os.urandom(4).hex()}.old"
    try:
        os.link(path, aside)
    except OSError:
        shutil.copy2(path, aside)
    return aside


@contextlib.contextmanager
def report_guard(out):
    """Puts the report an export replaced back when the file itself is then not put in place (the report goes in
    first: module doc); without it an interrupt or the final check of ``out`` between the two renames left the
    earlier export's file without its report. Yields the object whose ``write`` writes the success report."""
    state = _ReportInstall(out)
    try:
        yield state
    except BaseException:
        state.undo()
        raise
    state.done()


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)
