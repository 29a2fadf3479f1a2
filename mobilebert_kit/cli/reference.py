"""Generates the CLI reference (docs/cli.md) from the argument parser itself.

Run ``python -m mobilebert_kit.cli.reference > docs/cli.md``; a test checks the
committed file is current, so the reference cannot drift from the parser.
"""

import argparse
import sys

from mobilebert_kit.cli.main import build_parser


def _subparsers(parser):
    for action in parser._actions:  # noqa: SLF001  (argparse has no public accessor)
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return action
    return None


def render():
    """Returns the Markdown reference of every ``mbk`` sub-command."""
    parser = build_parser()
    lines = [
        "# CLI reference",
        "",
        "Generated from the argument parser by `python -m mobilebert_kit.cli.reference`; do not edit by hand.",
        "",
    ]
    sub = _subparsers(parser)
    helps = {a.dest: a.help for a in sub._choices_actions}  # noqa: SLF001
    lines += ["| command | what it does |", "|---|---|"]
    lines += [f"| `mbk {name}` | {helps.get(name, '')} |" for name in sorted(sub.choices)]
    for name in sorted(sub.choices):
        command = sub.choices[name]
        command.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=100)
        lines += ["", f"## mbk {name}", "", "```text", command.format_help().rstrip(), "```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
