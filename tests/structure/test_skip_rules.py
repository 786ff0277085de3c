"""Rules of the suite itself: no test skips for a package ``make test`` installs, and every
repository path the docs name exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# a back-quoted repository path: `tests/test_x.py`, `src/rankwise/...`, `docs/x.md#anchor`,
# `benchmarks/x.py:12`
PATH = re.compile(r"`((?:tests|src|docs|benchmarks|scripts|examples|\.ci)/[^`\s*<>{}]+)`")


def test_no_test_skips_for_an_installed_extra():
    """``pytest.importorskip`` would turn a broken extra into a quiet skip; tests use
    tests/_extras.py's ``need`` (a failure naming what is missing). Skips left are for things
    outside Python that a developer may lack (Chromium, a C compiler, perl), each of which fails
    instead under CI=true."""
    offenders = [f"{p.name}:{n}" for p in sorted((REPO / "tests").glob("test_*.py"))
                 for n, line in enumerate(p.read_text().splitlines(), 1) if "pytest." + "importorskip(" in line]
    assert offenders == []


def test_no_test_is_skipped_for_root():
    """The suite runs as root in CI: a test skipped for root never runs there (tests/_readonly.py
    gives root a folder it cannot write)."""
    rule = re.compile(r"skipif\(\s*os\.geteuid\(\)")
    offenders = [p.name for p in sorted((REPO / "tests").glob("test_*.py")) if rule.search(p.read_text())]
    assert offenders == []


def _paths(page: Path) -> list[tuple[int, str]]:
    found = []
    for n, line in enumerate(page.read_text().splitlines(), 1):
        for raw in PATH.findall(line):
            path = re.split(r"[#:]", raw, maxsplit=1)[0].rstrip(".,;)")
            found.append((n, path))
    return found


def test_the_docs_name_only_repository_paths_that_exist():
    """Back-quoted paths are not links, so the link check never saw them: a page citing a test file
    that was renamed said what was no longer so. Every back-quoted repository path in README.md and
    docs/ exists."""
    missing = [f"{page.relative_to(REPO)}:{n}: {path}" for page in PAGES for n, path in _paths(page)
               if not (REPO / path).exists()]
    assert missing == []
    assert sum(len(_paths(p)) for p in PAGES) > 50  # the rule reads the pages' paths (not a pattern gone stale)
