"""docs/architecture.md's Python blocks run as shown, each in a fresh process (one registers a
metric, which must not leak into the suite's own registry)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "architecture.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


def test_the_page_has_its_examples():
    assert len(BLOCKS) == 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_python_block_runs(index, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", BLOCKS[index]], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_layer_table_names_every_package():
    text = PAGE.read_text(encoding="utf-8")
    packages = sorted(p.name for p in (REPO / "src" / "rankwise").iterdir() if p.is_dir() and p.name not in
                      ("__pycache__", "datasets"))
    missing = [p for p in packages if f"`{p}/`" not in text]
    assert missing == []
