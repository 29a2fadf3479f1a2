"""Every page the docs index links exists, every relative link in the docs resolves,
and every directive of the runnable pages parses (tests/docs/doc_runner.py)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_runner import DOCS, parse_page, relative_links  # noqa: E402

PAGES = sorted(DOCS.glob("*.md")) + sorted((DOCS / "tutorials").glob("*.md")) + sorted((DOCS / "clients").glob("*.md"))
RUNNABLE = ([DOCS / "quickstart.md"] + sorted(p for p in (DOCS / "tutorials").glob("*.md") if p.name != "README.md")
            # task-library.md runs nothing here: its client needs a second venv (tests/clients covers it).
            + sorted(p for p in (DOCS / "clients").glob("*.md") if p.name not in ("README.md", "task-library.md")))


def test_index_links_every_tutorial_and_each_linked_page_exists():
    links = [target for target, _ in relative_links(DOCS / "README.md")]
    assert links, "docs/README.md links nothing"
    missing = [t for t in links if not (DOCS / t).exists()]
    assert not missing, f"docs/README.md links pages that do not exist: {missing}"
    tutorials = {p.relative_to(DOCS).as_posix() for p in RUNNABLE if p.parent.name == "tutorials"}
    assert tutorials <= set(links), f"tutorials missing from docs/README.md: {sorted(tutorials - set(links))}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_relative_links_resolve(page):
    broken = [f"{target} (line {line})" for target, line in relative_links(page) if not (page.parent / target).exists()]
    assert not broken, f"{page.relative_to(DOCS)}: broken relative links: {broken}"


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.name)
def test_runnable_pages_parse_and_skip_only_with_reasons(page):
    parsed = parse_page(page)
    assert parsed.run_blocks(), f"{page.name}: no block would run"
    for block in parsed.skipped():
        assert len(block.skip.split()) >= 4, f"{page.name}:{block.line}: skip reason too short: {block.skip!r}"


def test_parser_rejects_a_stale_replacement_and_a_reasonless_skip(tmp_path):
    from doc_runner import build_script

    page = tmp_path / "p.md"
    page.write_text('<!-- test: replace "--seq-len 128" "--seq-len 16" -->\n```bash\nmbk info tiny-bert --seq-len 64\n```\n')
    with pytest.raises(AssertionError, match="stale directive"):
        build_script(parse_page(page), tmp_path, tmp_path)
    page.write_text("<!-- test: skip -->\n```bash\nfalse\n```\n")
    with pytest.raises(ValueError, match="skip needs a reason"):
        parse_page(page)
    page.write_text("<!-- test: creates x -->\nSome prose.\n```bash\ntrue\n```\n")
    with pytest.raises(ValueError, match="right before a code block"):
        parse_page(page)
