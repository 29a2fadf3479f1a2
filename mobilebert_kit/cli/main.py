"""Entry point of the ``mbk`` command line.

Sub-commands are discovered from the ``cmd_*.py`` modules of this package; each
module defines ``register(subparsers)`` and sets ``func`` on its parser. Modules
import TensorFlow inside their functions so that ``mbk --help`` and the profiler
start quickly.

User errors (:class:`mobilebert_kit.errors.MbkError`) print one line and exit
non-zero; ``--debug`` shows the traceback of any failure.
"""

import argparse
import importlib
import pkgutil
import sys

import mobilebert_kit
from mobilebert_kit.errors import MbkError


def _command_modules():
    package = importlib.import_module("mobilebert_kit.cli")
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("cmd_"))
    return [importlib.import_module(f"mobilebert_kit.cli.{name}") for name in names]


def build_parser():
    """Returns the full argument parser (also used to generate the CLI reference)."""
    parser = argparse.ArgumentParser(
        prog="mbk",
        description="mobilebert-kit: build, distill, export, quantize and profile BERT-family encoders.",
    )
    parser.add_argument("--version", action="version", version=f"mbk {mobilebert_kit.__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        module.register(subparsers)
    return parser


def _one_line(text):
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[0] if len(lines) <= 1 else "\n".join(lines)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        result = args.func(args)
        return int(result or 0)
    except MbkError as err:
        if args.debug:
            raise
        print(f"mbk {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"mbk {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001  (last line of defence: never a raw traceback)
        if args.debug:
            raise
        kind = type(err).__name__
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        print(
            f"mbk {args.command}: internal error ({kind}: {first}); "
            "re-run with --debug for the traceback and report it",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
