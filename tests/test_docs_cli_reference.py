"""docs/cli.md is generated from the parser and must match it."""

from pathlib import Path

from mobilebert_kit.cli.reference import render


def test_cli_reference_is_current():
    committed = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    assert committed == render(), "docs/cli.md is stale: run `python -m mobilebert_kit.cli.reference > docs/cli.md`"


def test_help_shows_no_doubled_percent_signs():
    """argparse %-formats argument help but prints a description as written: a "99%%" there reached users."""
    assert "%%" not in render()
