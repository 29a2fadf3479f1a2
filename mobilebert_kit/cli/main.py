"""Entry point of the ``mbk`` command line.

Sub-commands are discovered from the ``cmd_*.py`` modules of this package; each
module defines ``register(subparsers)`` and sets ``func`` on its parser. Modules
import TensorFlow inside their functions so that ``mbk --help`` and the profiler
start quickly.

User errors (:class:`mobilebert_kit.errors.MbkError`) and bad arguments print one
line and exit non-zero (Ctrl-C: 130, with the line of a run that checkpointed); ``--debug`` shows the traceback of any failure. Every
message is escaped (:func:`mobilebert_kit.utils.terminal.escape`): a file or
tensor name it quotes cannot break the line, forge another, or send terminal
escapes.
"""

import argparse
import contextlib
import importlib
import os
import pkgutil
import signal
import sys
import warnings

import mobilebert_kit
from mobilebert_kit.errors import CheckpointError, MbkError
from mobilebert_kit.utils.interrupt import TerminateAsInterrupt
from mobilebert_kit.utils.run_state import interrupted_run, resume_hint
from mobilebert_kit.utils.scratch import scratch_directory
from mobilebert_kit.utils.terminal import escape


class _UsageError(Exception):
    """A bad command line, raised by :class:`_Parser` instead of argparse's exit."""

    def __init__(self, prog, message):
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """argparse without the usage block on errors: one ``mbk CMD: error: ...`` line, exit 2 (the CLI contract)."""

    def error(self, message):
        raise _UsageError(self.prog, message)


def _command_modules():
    package = importlib.import_module("mobilebert_kit.cli")
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("cmd_"))
    return [importlib.import_module(f"mobilebert_kit.cli.{name}") for name in names]


def build_parser():
    """Returns the full argument parser (also used to generate the CLI reference)."""
    parser = _Parser(
        prog="mbk",
        description="mobilebert-kit: build, distill, export, quantize and profile BERT-family encoders.",
    )
    parser.add_argument("--version", action="version", version=f"mbk {mobilebert_kit.__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        module.register(subparsers)
    return parser


def _error_text(err):
    """The message of ``err`` as one escaped line; a CheckpointError keeps one escaped ``  - `` line per detail."""
    text = str(err)
    details = getattr(err, "details", None) if isinstance(err, CheckpointError) else None
    if not details:
        return escape(text.strip())
    suffix = "\n" + "\n".join(f"  - {d}" for d in details)
    head = text[: -len(suffix)] if text.endswith(suffix) else text
    return "\n".join([escape(head.strip())] + [f"  - {escape(d)}" for d in details])


def _resume_note(args):
    """``"; <how to resume>"`` when an interrupt that carried no message (a second Ctrl-C, which stops at once)
    left a resumable run in ``--out``; else ``""``."""
    out = getattr(args, "out", None)
    try:
        return f"; {escape(resume_hint(out))}" if isinstance(out, (str, os.PathLike)) and interrupted_run(out) else ""
    except OSError:
        return ""


class StdoutError(MbkError):
    """Standard output could not take the results (a full disk, a closed descriptor)."""


class _GuardedStdout:
    """``sys.stdout`` whose write failures are a :class:`StdoutError`, so the command stops with one line.

    Without it a full disk on ``> report.json`` was an "internal error ... report it" with exit 1, which for
    ``validate`` and ``evaluate`` means "the numbers failed".
    """

    def __init__(self, stream):
        self._stream = stream

    def _guarded(self, call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise  # the reader left (`| head`): handled in main()
        except OSError as err:
            raise StdoutError(f"cannot write the results to standard output ({err.strerror or err}); free space "
                              "on its device or redirect it elsewhere") from err

    def write(self, text):
        return self._guarded(self._stream.write, text)

    def flush(self):
        return self._guarded(self._stream.flush)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def main(argv=None):
    if sys.stdout is None:
        # Descriptor 1 closed (`mbk ... >&-`): print() would drop the results and the command would exit 0.
        print("mbk: error: standard output is closed, so the results would be lost; run mbk with it open "
              "(redirect it to a file or to /dev/null)", file=sys.stderr)
        return 2
    stdout = sys.stdout
    sys.stdout = _GuardedStdout(stdout)
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader of a pipe left (`mbk presets | head -1`): stop quietly, as tools killed by SIGPIPE do;
        # pointing the descriptor at /dev/null keeps the exit-time flush from failing again.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
        return 141
    finally:
        sys.stdout = stdout


def _quiet_process():
    """What the command line sets for its whole process, so that a failure stays one line.

    * numpy's floating-point warnings (``RuntimeWarning: overflow encountered in cast``) went to stderr before
      the one-line error that explains them (a model answering inf, a metric that overflows); what they warn
      of is checked and named where it matters (``convert/validation/compare.py``, ``evaluation/``).
    * A file size limit (``ulimit -f``, RLIMIT_FSIZE): SIGXFSZ's default action kills the process with no
      message, its temporaries left behind. Ignored, the write fails with EFBIG and the writer's one-line
      error says so and removes what it wrote (``utils/output_check.write_error``).
    """
    warnings.filterwarnings("ignore", message=r".* encountered in ", category=RuntimeWarning)
    with contextlib.suppress(AttributeError, ValueError):  # no SIGXFSZ (Windows), or not the main thread
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _main(argv):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as err:
        print(f"{escape(err.prog)}: error: {escape(err)}; see {escape(err.prog)} --help", file=sys.stderr)
        return 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _quiet_process()
    try:
        # The command's temporaries (ours, the converters', AutoGraph's) in one directory that a later
        # command sweeps if this process is killed (utils/scratch.py). Not required: `mbk presets` needs
        # no temporary space, and what does names a full TMPDIR itself.
        with TerminateAsInterrupt(), scratch_directory("cmd", capture=True, required=False):
            result = args.func(args)
            sys.stdout.flush()  # a result still buffered must fail here, as one line, not at exit
        return int(result or 0)
    except MbkError as err:
        if args.debug:
            raise
        print(f"mbk {args.command}: error: {_error_text(err)}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt as err:
        # A loop that checkpointed before stopping says how to continue in the interrupt's message.
        said = f"; {escape(str(err).strip())}" if str(err).strip() else _resume_note(args)
        print(f"mbk {args.command}: interrupted{said}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise  # the reader of a pipe left (`mbk inspect F | head`): main() stops quietly
    except Exception as err:  # noqa: BLE001  (last line of defence: never a raw traceback)
        if args.debug:
            raise
        if TerminateAsInterrupt.received:  # the interrupt, surfacing as another error (an import it broke)
            print(f"mbk {args.command}: interrupted{_resume_note(args)}", file=sys.stderr)
            return 130
        kind = type(err).__name__
        first = escape(str(err).strip().splitlines()[0]) if str(err).strip() else ""
        print(
            f"mbk {args.command}: internal error ({kind}: {first}); "
            "re-run with --debug for the traceback and report it",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
