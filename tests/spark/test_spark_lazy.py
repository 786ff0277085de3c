"""`import rankwise` (and the CLI, and rankwise.spark's modules) never import pyspark: it is an
optional extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def test_pyspark_is_imported_only_when_spark_is_used():
    code = ("import sys, rankwise, rankwise.cli, rankwise.spark, rankwise.spark.ir, rankwise.spark.rag, "
            "rankwise.spark.submit; print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
