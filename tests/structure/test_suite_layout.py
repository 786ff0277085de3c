"""The suite's layout (docs/architecture.md, "Where the tests live"): test files sit in the folder
of what they test, never flat in tests/, each base name once (pytest imports a test file by its base
name)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PAGE = TESTS.parent / "docs" / "architecture.md"


def test_no_test_file_sits_flat_in_tests():
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []


def test_each_base_name_once():
    names = Counter(p.name for p in TESTS.glob("*/test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []


def test_the_page_names_every_test_folder_and_no_other():
    section = PAGE.read_text(encoding="utf-8").split("## Where the tests live", 1)[1]
    named = set(re.findall(r"`([a-z_]+)/`", section)) - {"tests"}
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert folders == named
