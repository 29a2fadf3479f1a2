"""Runs the command blocks of a documentation page, so the docs cannot rot.

The convention (also written down in docs/tutorials/README.md):

- Every fenced ```bash block of a page is run, in order, in one ``bash`` script
  (``set -euo pipefail``), so variables set in one block are seen by the next.
- Every fenced ```python block is written to a file and run with this
  interpreter at its place in that order (working directory: the page's run
  directory).
- Other blocks (```text, ```toml, plain ```) are not run, unless a ``write``
  directive saves them to a file first.
- An HTML comment right before a block (only blank lines or other directives
  between) tells the runner what to do with that block:

  ``<!-- test: replace "OLD" "NEW" ["OLD2" "NEW2" ...] -->``
      swap text before running (to run at tiny size); each OLD must occur in
      the block, so a stale substitution fails instead of silently doing nothing.
  ``<!-- test: skip REASON -->``
      do not run the block; REASON is required and says why (e.g. it needs a
      network or a real phone).
  ``<!-- test: write PATH -->``
      write the block's text to PATH (relative to the run directory).
  ``<!-- test: creates PATH [PATH ...] -->``
      the block leaves these files or directories; the test asserts they exist.

  ``<!-- test-page: replace "OLD" "NEW" -->`` anywhere on a page applies to every
  run block of the page; each OLD must occur in at least one of them.

Example:
    >>> page = parse_page(Path("docs/tutorials/distill-student.md"))  # doctest: +SKIP
    >>> result = run_page(page, tmp_path, env)  # doctest: +SKIP
"""

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

_FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*test(-page)?:\s*(.*?)\s*-->\s*$")
RUN_LANGUAGES = ("bash", "python")


@dataclass
class Block:
    """One fenced block: its language, text, first line number and directives."""

    language: str
    text: str
    line: int
    replace: list = field(default_factory=list)
    skip: str = None
    write: str = None
    creates: list = field(default_factory=list)

    @property
    def runs(self):
        return self.language in RUN_LANGUAGES and self.skip is None


@dataclass
class Page:
    """A parsed page: its blocks and the page-wide replacements."""

    path: Path
    blocks: list
    page_replace: list

    def run_blocks(self):
        return [b for b in self.blocks if b.runs]

    def skipped(self):
        return [b for b in self.blocks if b.language in RUN_LANGUAGES and b.skip is not None]

    def creates(self):
        return [p for b in self.blocks if b.runs or b.write for p in b.creates]


def _pairs(arguments, where):
    words = shlex.split(arguments)
    if not words or len(words) % 2:
        raise ValueError(f"{where}: replace needs \"OLD\" \"NEW\" pairs, got {arguments!r}")
    return list(zip(words[::2], words[1::2]))


def _apply_directive(pending, verb, arguments, where):
    if verb == "replace":
        pending["replace"].extend(_pairs(arguments, where))
    elif verb == "skip":
        if not arguments.strip():
            raise ValueError(f"{where}: skip needs a reason")
        pending["skip"] = arguments.strip()
    elif verb == "write":
        if not arguments.strip():
            raise ValueError(f"{where}: write needs a path")
        pending["write"] = arguments.strip()
    elif verb == "creates":
        pending["creates"].extend(shlex.split(arguments))
    else:
        raise ValueError(f"{where}: unknown test directive {verb!r} (replace, skip, write, creates)")


def parse_page(path):
    """Parses ``path`` into a Page. Raises ValueError on a malformed directive or an unclosed fence."""
    path = Path(path)
    lines = path.read_text().splitlines()
    blocks, page_replace = [], []
    pending = {"replace": [], "skip": None, "write": None, "creates": []}
    i = 0
    while i < len(lines):
        line = lines[i]
        where = f"{path.name}:{i + 1}"
        directive = _DIRECTIVE.match(line)
        fence = _FENCE.match(line)
        if directive:
            page_wide, body = directive.group(1), directive.group(2)
            verb, _, arguments = body.partition(" ")
            if page_wide:
                if verb != "replace":
                    raise ValueError(f"{where}: test-page supports only replace")
                page_replace.extend(_pairs(arguments, where))
            else:
                _apply_directive(pending, verb, arguments, where)
        elif fence:
            indent, language = fence.group(1), fence.group(2)
            start = i + 1
            body = []
            i += 1
            while i < len(lines) and not re.match(rf"^{re.escape(indent)}```\s*$", lines[i]):
                text = lines[i]
                body.append(text[len(indent):] if text.startswith(indent) else text)
                i += 1
            if i == len(lines):
                raise ValueError(f"{path.name}:{start}: unclosed code fence")
            blocks.append(Block(language=language, text="\n".join(body) + "\n", line=start, **pending))
            pending = {"replace": [], "skip": None, "write": None, "creates": []}
        elif line.strip() and any(pending.values()):
            raise ValueError(f"{where}: a test directive must come right before a code block")
        i += 1
    return Page(path=path, blocks=blocks, page_replace=page_replace)


def build_script(page, run_dir, work_dir):
    """Returns the bash script that runs ``page``'s blocks in ``run_dir`` (block files go to ``work_dir``)."""
    used = {old: False for old, _ in page.page_replace}
    parts = ["set -euo pipefail", f"cd {shlex.quote(str(run_dir))}"]
    for n, block in enumerate(page.blocks):
        if not (block.runs or block.write):
            continue
        text = block.text
        for old, new in block.replace:
            if old not in text:
                raise AssertionError(f"{page.path.name}:{block.line}: replace {old!r}: not in the block (stale directive)")
            text = text.replace(old, new)
        for old, new in page.page_replace:
            if old in text:
                used[old] = True
                text = text.replace(old, new)
        label = f"{page.path.name}:{block.line} ({block.language})"
        parts.append(f"echo \"@@ block {label} at ${{SECONDS}}s\" >&2")
        if block.write:
            target = Path(run_dir) / block.write
            parts.append(f"mkdir -p {shlex.quote(str(target.parent))}")
            parts.append(f"cat > {shlex.quote(str(target))} <<'MBK_DOC_EOF'\n{text}MBK_DOC_EOF")
        elif block.language == "python":
            script = Path(work_dir) / f"block_{n}_line{block.line}.py"
            script.write_text(text)
            parts.append(f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
        else:
            parts.append(text)
    stale = [old for old, hit in used.items() if not hit]
    if stale:
        raise AssertionError(f"{page.path.name}: test-page replace {stale} matches no block (stale directive)")
    return "\n".join(parts) + "\n"


def tool_env(bin_dir, extra=None):
    """Environment for the blocks: ``mbk`` and ``python`` on PATH run this checkout with this interpreter."""
    bin_dir = Path(bin_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "mbk").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m mobilebert_kit.cli.main "$@"\n')
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    for name in ("mbk", "python"):
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env.update(extra or {})
    return env


def run_page(page, run_dir, work_dir, env, timeout=900):
    """Runs the page's blocks; returns the CompletedProcess (text output)."""
    script = build_script(page, run_dir, work_dir)
    path = Path(work_dir) / f"{page.path.stem}.sh"
    path.write_text(script)
    return subprocess.run(["bash", str(path)], cwd=run_dir, env=env, capture_output=True, text=True, timeout=timeout)


def relative_links(path):
    """Yields ``(target, line)`` for every relative Markdown link of a page (anchors stripped)."""
    text = Path(path).read_text()
    in_code = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            yield target.split("#", 1)[0], number


if __name__ == "__main__":
    # Manual use: python tests/docs/doc_runner.py docs/tutorials/PAGE.md RUN_DIR (prints the block timings).
    import tempfile

    page_path, run_dir = Path(sys.argv[1]), Path(sys.argv[2])
    run_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        proc = run_page(parse_page(page_path), run_dir, work, tool_env(Path(work) / "bin"))
    print(proc.stdout[-3000:])
    print("\n".join(line for line in proc.stderr.splitlines() if line.startswith("@@") or "error" in line.lower()))
    sys.exit(proc.returncode)
