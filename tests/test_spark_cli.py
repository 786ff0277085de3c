"""`rankwise eval --engine spark` on Parquet (in-process, on the run's one local Spark) and the spark-submit
job (a real process, with its own local Spark): the same output as one process."""

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

import rankwise
from _inprocess import run_cli
from rankwise.data.trec import write_trec_qrels, write_trec_run

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO / "src") + os.pathsep + e.get("PYTHONPATH", "")
    e["PYSPARK_PYTHON"] = e["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return e


@pytest.fixture(autouse=True)
def _one_spark(spark):
    """The run's SparkSession (conftest): ``--engine spark`` in-process uses it rather than starting another."""


def rankwise_cli(*args: str) -> subprocess.CompletedProcess:
    """``rankwise ARGS`` in-process (tests/_inprocess.py), as a finished process; the spark-submit job below
    stays a real process."""
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


def test_spark_submit_job_eval_rag_and_one_line_errors(tmp_path):
    import pyspark

    from rankwise.spark import submit

    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    out = tmp_path / "result.json"
    cmd = [str(spark_submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false", submit.__file__,
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
    # an error inside the job: one line on stderr, exit code 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "retrieved_contexts": ["x"]}\n{"id": "a", "retrieved_contexts": ["y"]}\n')
    cmd = [str(spark_submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", submit.__file__,
           "eval-rag", str(bad)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    # spark-submit passes the Python driver's output on through its own (stdout when piped)
    lines = (done.stdout + "\n" + done.stderr).replace("\r", "\n").splitlines()
    errors = [line for line in lines if line.startswith("rankwise-spark: error:")]
    assert errors == ["rankwise-spark: error: <spark cases>: field 'id': case id 'a' appears twice"], \
        done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout


def test_spark_engine_prints_the_runid_line_of_the_local_engine(tmp_path):
    """``--format trec -m runid,...``: the run file's last tag on Spark as in memory; no line when not asked."""
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
