"""A retrieval library that is not installed (or does not import) is one line naming the extra to
install, exit 2, before any model loads or index is built: never a traceback (issue 33, item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import rankwise
from rankwise.datasets import bundled_files

SRC = str(Path(rankwise.__file__).resolve().parents[1])
FIX = "pip install 'rankwise[retrieval]'"

# a module on PYTHONPATH ahead of the real one: `import faiss` fails as on a machine without it
MISSING = "raise ModuleNotFoundError(\"No module named '{name}'\", name='{name}')\n"
BROKEN = "raise ImportError('numpy.core.multiarray failed to import')\n"


def _without(tmp_path: Path, name: str, body: str) -> dict[str, str]:
    shadow = tmp_path / "shadow"
    shadow.mkdir(exist_ok=True)
    (shadow / f"{name}.py").write_text(body.format(name=name))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow), SRC]), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1"}


def _rankwise(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rankwise.cli", *args], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.parametrize(("command", "name", "needed_by"), [
    (["demo", "--no-html", "--quiet"], "faiss", "dense retrieval"),
    (["run", "-r", "dense"], "faiss", "dense retrieval"),
    (["run", "-r", "hybrid"], "faiss", "dense retrieval"),
    (["run", "-r", "bm25"], "bm25s", "BM25 retrieval"),
])
def test_missing_library_is_one_line_naming_the_extra(tmp_path, command, name, needed_by):
    files = bundled_files("kestrel")
    out = tmp_path / "out"
    args = [*command, "--out", str(out)]
    if command[0] == "run":
        args += ["--corpus", str(files.corpus), "--queries", str(files.questions), "--quiet"]
    done = _rankwise(args, _without(tmp_path, name, MISSING))
    package = "faiss-cpu" if name == "faiss" else name
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"rankwise: error: {needed_by} needs {name}, which is not installed: {FIX} "
                           f"(or pip install {package})\n")
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not out.exists() or not any(out.iterdir())  # nothing written


def test_a_library_that_fails_to_import_says_why(tmp_path):
    files = bundled_files("kestrel")
    done = _rankwise(["run", "-r", "dense", "--corpus", str(files.corpus), "--queries", str(files.questions),
                      "--out", str(tmp_path / "run.trec"), "--quiet"], _without(tmp_path, "faiss", BROKEN))
    assert done.returncode == 2
    assert done.stderr == ("rankwise: error: dense retrieval needs faiss, which failed to import (numpy.core."
                           f"multiarray failed to import): {FIX} (or pip install faiss-cpu)\n")


def test_the_library_call_raises_one_rankwise_error(tmp_path):
    """The same check from Python: a RankwiseError (one line), raised when the pipeline starts."""
    code = ("import sys\n"
            "from rankwise.errors import RankwiseError\n"
            "from rankwise.retrieval import run_retrievers\n"
            "try:\n"
            "    run_retrievers({'d': 'some text'}, {'q': 'text'}, ['dense'], quiet=True)\n"
            "except RankwiseError as exc:\n"
            "    print(type(exc).__name__, exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=_without(tmp_path, "faiss", MISSING))
    assert done.stdout == (f"RankwiseError dense retrieval needs faiss, which is not installed: {FIX} "
                           "(or pip install faiss-cpu)\n"), done.stderr
