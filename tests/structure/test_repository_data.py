"""The suite needs only the repository: the public collections it reads are carried in
tests/fixtures (Cranfield and CISI in BEIR layout, trec_eval 10.0's test files, each folder with a
README saying where it comes from); only trec_eval's source stays outside, for the binary
conformance test, which says how to get it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_collections_are_in_the_repository():
    data = REPO / "tests" / "fixtures"
    for folder in ("cranfield", "cisi"):
        for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "README.md"):
            assert (data / folder / name).is_file(), f"tests/fixtures/{folder}/{name}"
    for name in ("qrels.test", "results.test", "out.test", "out.test.a", "prefs.test", "qrels.test.with-comments",
                 "README.md"):
        assert (data / "trec_eval" / name).is_file(), f"tests/fixtures/trec_eval/{name}"


def test_without_the_variable_the_tests_read_the_repositorys_copy():
    env = {k: v for k, v in os.environ.items() if k != "RANKWISE_SHARED_DATA"}
    out = subprocess.run([sys.executable, "-c", "import conftest; print(conftest.SHARED_DATA)"], cwd=REPO / "tests",
                         env=env, capture_output=True, text=True, check=True)
    assert Path(out.stdout.strip()) == REPO / "tests" / "fixtures"
