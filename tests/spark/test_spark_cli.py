"""`rankwise eval --engine spark` on Parquet (in-process, on the run's one local Spark) and the
spark-submit job (a real process, with its own local Spark): the same output as one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import rankwise
from _inprocess import run_cli
from conftest import TEST_JVM_OPTIONS
from rankwise.data.trec import write_trec_qrels, write_trec_run

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO / "src") + os.pathsep + e.get("PYTHONPATH", "")
    e["PYSPARK_PYTHON"] = e["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return e


@pytest.fixture(autouse=True)
def _one_spark(spark):
    """The run's SparkSession (conftest): ``--engine spark`` in-process uses it rather than starting
    another."""


def rankwise_cli(*args: str) -> subprocess.CompletedProcess:
    """``rankwise ARGS`` in-process (tests/_inprocess.py), as a finished process; the spark-submit
    job below stays a real process."""
    return run_cli(args, env=env())


def test_cli_engine_spark_on_parquet_equals_local(tmp_path):
    rng = np.random.default_rng(7)
    qids = [f"q{i}" for i in range(40)]
    run_rows = [(q, f"d{d}", float(rng.integers(0, 5))) for q in qids[:35] for d in rng.choice(60, 20, replace=False)]
    qrels_rows = [(q, f"d{d}", int(rng.integers(0, 3))) for q in qids[5:] for d in rng.choice(60, 6, replace=False)]
    pq.write_table(pa.table({"query_id": [r[0] for r in run_rows], "doc_id": [r[1] for r in run_rows],
                             "score": [r[2] for r in run_rows]}), tmp_path / "run.parquet")
    pq.write_table(pa.table({"query_id": [r[0] for r in qrels_rows], "doc_id": [r[1] for r in qrels_rows],
                             "relevance": [r[2] for r in qrels_rows]}), tmp_path / "qrels.parquet")
    run = rankwise.Run.from_columns([r[0] for r in run_rows], [r[1] for r in run_rows], [r[2] for r in run_rows])
    qrels = rankwise.Qrels.from_columns([r[0] for r in qrels_rows], [r[1] for r in qrels_rows],
                                        [r[2] for r in qrels_rows])
    write_trec_run(run, tmp_path / "run.trec")
    write_trec_qrels(qrels, tmp_path / "qrels.txt")
    args = ["-m", "ndcg@10,map,P@5,num_ret,id_recall", "--format", "json", "--per-query"]
    local = rankwise_cli("eval", str(tmp_path / "qrels.txt"), str(tmp_path / "run.trec"), *args)
    assert local.returncode == 0, local.stderr
    spark = rankwise_cli("eval", str(tmp_path / "qrels.parquet"), str(tmp_path / "run.parquet"), *args,
                         "--engine", "spark", "--master", "local[2]")
    assert spark.returncode == 0, spark.stderr[-2000:]
    assert json.loads(spark.stdout) == json.loads(local.stdout)
    assert spark.stdout == local.stdout  # every digit
    assert "pandas" not in spark.stderr  # pyspark's "does not yet fully support pandas >= 3.0.0": quiet


def test_spark_submit_job_eval_rag_and_one_line_errors(tmp_path):
    import pyspark

    from rankwise.spark import submit

    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    out = tmp_path / "result.json"
    cmd = [str(spark_submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--driver-java-options", TEST_JVM_OPTIONS, submit.__file__,
           "eval-rag", str(EXAMPLES / "rich_testset.jsonl"), "--relevance", "span", "-k", "2", "-k", "4",
           "--output", str(out), "--records-out", str(tmp_path / "records")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    local = rankwise.evaluate_rag(EXAMPLES / "rich_testset.jsonl", "span", k=[2, 4])
    got = json.loads(out.read_text())
    assert got["mean"] == local.mean
    assert got["summary"] == json.loads(json.dumps(local.summary))
    written = [json.loads(line) for p in sorted((tmp_path / "records").glob("part-*")) for line in
               p.read_text().splitlines()]
    assert sorted(r["id"] for r in written) == sorted(r.id for r in local.records)
    # an error inside the job: one line on stderr, exit code 2 (the job's own entry point,
    # in-process on the run's session: the spark-submit process boundary is checked above)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "retrieved_contexts": ["x"]}\n{"id": "a", "retrieved_contexts": ["y"]}\n')
    done = CliRunner().invoke(submit.main, ["eval-rag", str(bad)])
    assert done.exit_code == 2, done.output
    errors = [line for line in done.output.splitlines() if line.startswith("rankwise-spark: error:")]
    assert errors == ["rankwise-spark: error: <spark cases>: field 'id': case id 'a' appears twice"], done.output
    assert "Traceback" not in done.output


def test_relative_paths_are_read_from_the_current_folder(tmp_path, monkeypatch):
    """The run's Spark session started in another folder: a relative path is still this folder's
    file (Spark alone would read it against its JVM's working directory)."""
    (tmp_path / "qrels.txt").write_text("q1 0 a 1\nq1 0 b 0\n")
    (tmp_path / "run.trec").write_text("q1 Q0 b 1 2.0 t\nq1 Q0 a 2 1.0 t\n")
    monkeypatch.chdir(tmp_path)
    done = rankwise_cli("eval", "qrels.txt", "run.trec", "-m", "map", "--format", "trec", "--engine", "spark")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "map                   \tall\t0.5000\n"


def test_spark_engine_prints_the_runid_line_of_the_local_engine(tmp_path):
    """``--format trec -m runid,...``: the run file's last tag on Spark as in memory; no line when
    not asked."""
    (tmp_path / "qrels.txt").write_text("q1 0 a 1\nq1 0 b 0\nq2 0 c 2\n")
    (tmp_path / "run.trec").write_text("q1 Q0 a 1 2.0 first\nq1 Q0 b 2 1.0 first\nq2 Q0 c 1 1.0 lasttag\n")
    outputs = {}
    for metrics in ("runid,map,set_F.0.5", "map"):
        for engine in ("local", "spark"):
            extra = ["--master", "local[2]"] if engine == "spark" else []
            done = rankwise_cli("eval", str(tmp_path / "qrels.txt"), str(tmp_path / "run.trec"), "-m", metrics,
                                "--format", "trec", "--engine", engine, *extra)
            assert done.returncode == 0, done.stderr[-2000:]
            outputs[metrics, engine] = done.stdout
    assert outputs["runid,map,set_F.0.5", "spark"] == outputs["runid,map,set_F.0.5", "local"] == (
        "runid                 \tall\tlasttag\n"
        "map                   \tall\t1.0000\n"
        "set_F_0.5             \tall\t0.8000\n")  # q1 1.5·½·1 / (½·½ + 1) = 0.6, q2 1
    assert outputs["map", "spark"] == outputs["map", "local"] == "map                   \tall\t1.0000\n"


_DRIVER = r'''
import json, os, sys
sys.path.insert(0, sys.argv[1])  # rankwise on the driver only: the workers' PYTHONPATH does not hold it
from pyspark.sql import SparkSession
import rankwise.spark as rs
from rankwise.errors import RankwiseError
from rankwise.spark import io as spark_io
out = {}
# rankwise's own local session: as many shuffle partitions as local threads, unless the conf says
# otherwise (first: pyspark's SparkSession.builder keeps the options of earlier sessions)
ours = rs.session("local[3]", conf={"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": sys.argv[2]})
out["partitions"] = ours.conf.get("spark.sql.shuffle.partitions")
ours.stop()
for python in sys.argv[3:]:
    os.environ["PYSPARK_PYTHON"] = python  # as a user's SparkSession.builder picks it up
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    qrels = spark.createDataFrame([("q1", "d1", 1), ("q2", "d3", 1)], ["query_id", "doc_id", "relevance"])
    run = spark.createDataFrame([("q1", "d1", 1.0), ("q1", "d2", 0.5), ("q2", "d3", 0.1), ("q2", "d4", 0.9)],
                                ["query_id", "doc_id", "score"])
    try:
        first = rs.evaluate(qrels, run, ["map"])
        second = rs.evaluate(qrels, run, ["P@1"])  # the same session: not checked again
        out[python] = {"map": first.mean["map"], "P@1": second.mean["precision@1"],
                       "checked": sorted(spark_io._CHECKED) == [spark.sparkContext.applicationId]}
    except RankwiseError as exc:
        out[python] = {"error": str(exc)}
    spark.stop()
    spark_io._CHECKED.clear()
print("RESULT " + json.dumps(out))
'''


def test_workers_that_cannot_import_rankwise_get_one_sentence(tmp_path):
    """A session the user built (SparkSession.builder) whose worker Python cannot import rankwise
    (installed on the driver only), or imports another version: one sentence saying what to do, no
    JVM stack trace; with workers that import it the job runs, and the check runs once per session.
    """
    fake = tmp_path / "fake" / "rankwise"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('__version__ = "0.0.1"\n')
    workers = {}
    for name, line in (("none", f'exec "{sys.executable}" -S "$@"'),  # -S: no site-packages, no rankwise
                       ("other", f'PYTHONPATH="{fake.parent}:$PYTHONPATH" exec "{sys.executable}" -S "$@"'),
                       ("good", f'PYTHONPATH="{REPO / "src"}:$PYTHONPATH" exec "{sys.executable}" "$@"')):
        path = tmp_path / f"python-{name}"
        path.write_text(f"#!/bin/sh\n{line}\n")
        path.chmod(0o755)
        workers[name] = str(path)
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    done = subprocess.run([sys.executable, str(driver), str(REPO / "src"), TEST_JVM_OPTIONS, *workers.values()],
                          capture_output=True, text=True, env=e, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    todo = (f"install rankwise {rankwise.__version__} on every worker (e.g. pip install "
            f"'rankwise[spark]=={rankwise.__version__}' in the cluster's Python environment), point PYSPARK_PYTHON "
            f"at a Python that has it, or start the session with rankwise.spark.session(), whose local workers "
            f"run this Python ({sys.executable})")
    assert result[workers["none"]] == {"error": f"Spark's Python workers ({sys.executable}) cannot import rankwise "
                                                f"(ModuleNotFoundError: No module named 'rankwise'); {todo}"}
    assert result[workers["other"]] == {"error": f"Spark's Python workers ({sys.executable}) import rankwise 0.0.1, "
                                                 f"the driver {rankwise.__version__}: the numbers could differ; {todo}"}
    assert result[workers["good"]] == {"map": 0.75, "P@1": 0.5, "checked": True}
    assert result["partitions"] == "3"
    assert "Py4JJavaError" not in done.stderr and "Traceback" not in done.stderr


def test_spark_errors_name_the_file_and_line(tmp_path):
    """Rows a Spark worker refuses (a doc listed twice, a score that is not a finite number) are
    named by file and line, as the local engine names them, not as '<spark run>'."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 a 1\nq2 0 c 1\n")
    cases = {"twice.trec": "q1 Q0 a 1 2 t\nq1 Q0 b 2 1 t\nq2 Q0 c 1 1 t\nq1 Q0 a 3 0.5 t\n",  # in a worker
             "suffix.trec": "q1 Q0 a 1 2 t\nq1 Q0 b 2 1d t\n"}  # Spark reads '1d' as 1.0; rankwise does not
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        local = rankwise_cli("eval", str(qrels), str(tmp_path / name), "-m", "map")
        spark = rankwise_cli("eval", str(qrels), str(tmp_path / name), "-m", "map", "--engine", "spark",
                             "--master", "local[1]")
        assert local.returncode == spark.returncode == 2, (name, spark.stderr[-2000:])
        assert f"{tmp_path / name}:" in spark.stderr and "<spark" not in spark.stderr, spark.stderr[-2000:]
        assert spark.stderr.splitlines()[-1] == local.stderr.splitlines()[-1], name
