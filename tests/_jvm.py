"""The options the tests' JVMs start with, and their class-data archive.

The tests start three JVMs (the run's SparkSession, a ``spark-submit`` job, a driver with sessions a
user builds). Each spent half its start loading and verifying Spark's ~10,000 classes, the same ones
every time. The JDK can map them from an archive instead (CDS, JEP 350: ``-XX:ArchiveClassesAtExit``
writes it, ``-XX:SharedArchiveFile`` reads it): ``scripts/setup.sh --test`` writes one into the
virtual environment by running a small Spark job of each kind (``python tests/_jvm.py``), and the
tests' JVMs read it (a session and its first job: 19 -> 10 s, 24 -> 15 CPU-seconds). The numbers do
not move: the archive holds the classes, not what they compute. An archive that is missing or made
by another Java or Spark is not used (the key beside it says which it was made by; the JVM also
checks for itself and, finding it unusable, loads classes as before).

Run as a script: ``python tests/_jvm.py [--force]`` writes the archive unless one for this Java and
Spark is there.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

# The tests' JVMs compile with the client compiler only and collect with the serial collector: a
# test's Spark jobs are small and short, and on two cores the server compiler's threads took a third
# of the JVM's CPU (test_spark_cli's user-built sessions: 89 -> 56 CPU-seconds, 60 -> 54 s). Spark's
# own defaults are for jobs.
BASE_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
ARCHIVE = Path(sys.prefix) / "rankwise-test-jvm.jsa"
KEY = ARCHIVE.with_suffix(".key")  # archive_key() of the Java and Spark that made it
REPO = Path(__file__).resolve().parents[1]


def archive_key() -> str:
    """What the archive was made for: this Java binary (its path and modification time) and this
    pyspark."""
    java = shutil.which("java")
    if java is None:
        return ""
    real = os.path.realpath(java)
    try:
        spark = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        return ""
    return hashlib.sha256(f"{real}\0{os.stat(real).st_mtime_ns}\0{spark}\0{BASE_OPTIONS}".encode()).hexdigest()


def archive_ready() -> bool:
    """True when the archive exists and was made by this Java and this pyspark."""
    key = archive_key()
    return bool(key) and ARCHIVE.is_file() and KEY.is_file() and KEY.read_text() == key


def jvm_options() -> str:
    """``BASE_OPTIONS``, reading the class archive when there is one for this Java and Spark."""
    return f"{BASE_OPTIONS} -XX:SharedArchiveFile={ARCHIVE}" if archive_ready() else BASE_OPTIONS


_WORKLOAD = r'''
import sys, subprocess
from pathlib import Path
from click.testing import CliRunner
import rankwise.spark as rs
from rankwise.cli import main as cli
from rankwise.spark import submit
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import SparkContext

folder, options, examples = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
spark = rs.session("local[2]", conf={"spark.sql.shuffle.partitions": 3, "spark.ui.enabled": "false",
                                     "spark.ui.showConsoleProgress": "false", "spark.driver.extraJavaOptions": options})
spark.sparkContext.setLogLevel("ERROR")
(folder / "qrels.txt").write_text("q1 0 a 1\nq1 0 c 2\nq2 0 b 1\n")
(folder / "run.trec").write_text("q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq1 Q0 c 3 0.5 t\nq2 Q0 d 1 0.9 t\nq2 Q0 b 2 0.3 t\n")
pq.write_table(pa.table({"query_id": ["q1"], "doc_id": ["a"], "relevance": [1]}), folder / "q.parquet")
for args in (["eval", str(folder / "qrels.txt"), str(folder / "run.trec"), "-m", "map,ndcg@10,P@5,set_F.0.5"],
             ["eval", str(folder / "q.parquet"), str(folder / "run.trec"), "--per-query", "--format", "json"]):
    done = CliRunner().invoke(cli, [*args, "--engine", "spark"])
    assert done.exit_code == 0, done.output
done = CliRunner().invoke(submit.main, ["eval-rag", str(examples / "rich_testset.jsonl"), "--relevance", "span",
                                        "-k", "2", "--output", str(folder / "r.json"),
                                        "--records-out", str(folder / "records")])
assert done.exit_code == 0, done.output
spark.stop()
gateway = SparkContext._gateway.proc  # the JVM writes the archive as it exits: wait for it
gateway.stdin.close()
gateway.wait(timeout=600)
'''


def write_archive() -> None:
    """Run the workload in a JVM that writes the archive at exit; then write the key beside it."""
    key = archive_key()
    if not key:
        raise SystemExit("tests/_jvm.py: java or pyspark not found: no class archive for the test JVMs")
    with tempfile.TemporaryDirectory() as tmp:
        partial = Path(tmp) / "archive.jsa"
        env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
        done = subprocess.run([sys.executable, "-c", _WORKLOAD, tmp,
                               f"{BASE_OPTIONS} -XX:ArchiveClassesAtExit={partial}", str(REPO / "examples")],
                              capture_output=True, text=True, env=env, timeout=900)
        if done.returncode != 0 or not partial.is_file():
            raise SystemExit(f"tests/_jvm.py: the class archive was not written:\n{done.stderr[-3000:]}")
        shutil.move(partial, ARCHIVE)
    KEY.write_text(key)


if __name__ == "__main__":
    if "--force" in sys.argv[1:] or not archive_ready():
        print("setup: writing the test JVMs' class archive, once for this Java and Spark (about a minute)", flush=True)
        write_archive()
