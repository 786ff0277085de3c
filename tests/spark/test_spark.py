"""rankwise.spark on a real Spark (local mode, pyspark from PyPI, a Debian Java): bit-identical to
one process.

Every registered metric (IR, RAG context metrics, counts, id-set metrics with undefined values) on
random runs with ties, graded and unjudged judgements, queries only in the run or only in the qrels,
under 1, 3 and 7 partitions/buckets and shuffled row order; RAG test sets and records (containment,
span, ids, stored LLM verdicts with failures). One SparkSession per test run (conftest's ``spark``).
Skip with ``-m "not spark"``.
"""

from __future__ import annotations

import json
import random
import subprocess

import numpy as np
import pytest

import rankwise
from _jvm import ARCHIVE, BASE_OPTIONS, archive_ready
from rankwise.data.records import Verdict, records_from_testset, write_records
from rankwise.errors import InputError
from rankwise.metrics.registry import METRICS

pytestmark = pytest.mark.spark


def all_ir_metrics() -> list[str]:
    """Every registered metric, plain and at 5, that one process computes on qrels + run
    (char_recall needs spans; some metrics need a cutoff): a metric added to the registry is covered
    here without a change."""
    names = []
    for name in METRICS:
        for candidate in (name, f"{name}@5"):
            try:
                rankwise.evaluate({"q": {"a": 1, "b": 0}}, {"q": {"a": 1.0, "x": 2.0}}, [candidate])
            except InputError:
                continue
            names.append(candidate)
    assert {"ndcg@5", "map", "wcp@5", "id_precision", "num_ret"} <= set(names)
    return names


def random_data(seed: int, n_queries: int = 120):
    """qrels and run rows with score ties, grades -1..3, qrels-only and run-only queries, ids in odd
    byte order."""
    rng = random.Random(seed)
    qids = [f"q{i}" for i in range(n_queries)] + ["Q7", "é1", "q01", "z"]
    qrels, run = {}, {}
    for i, q in enumerate(qids):
        if i % 11 != 5:  # some queries only in the run
            for d in rng.sample(range(40), rng.randint(0, 10)):
                qrels[(q, f"d{d}")] = rng.choice([-1, 0, 0, 1, 1, 2, 3])
        if i % 7 != 3:  # some only in the qrels
            for d in rng.sample(range(40), rng.randint(0, 25)):
                run[(q, f"d{d}")] = float(rng.randint(0, 6)) / 2  # many ties
    qrels_rows = [(q, d, g) for (q, d), g in qrels.items()]
    run_rows = [(q, d, s) for (q, d), s in run.items()]
    return qrels_rows, run_rows


def frames(spark, qrels_rows, run_rows, partitions: int, seed: int):
    rng = random.Random(seed)
    qrels_rows, run_rows = list(qrels_rows), list(run_rows)
    rng.shuffle(qrels_rows)
    rng.shuffle(run_rows)
    q = spark.createDataFrame(qrels_rows, "query_id string, doc_id string, relevance long").repartition(partitions)
    r = spark.createDataFrame(run_rows, "query_id string, doc_id string, score double").repartition(partitions)
    return q, r


def local_result(qrels_rows, run_rows, metrics, **kw):
    import pandas as pd

    q = pd.DataFrame(qrels_rows, columns=["query_id", "doc_id", "relevance"])
    r = pd.DataFrame(run_rows, columns=["query_id", "doc_id", "score"])
    return rankwise.evaluate(q, r, metrics, **kw)


def assert_identical(spark_result, local):
    assert spark_result.query_ids == local.per_query.query_ids
    assert spark_result.names == local.names
    # bit for bit: the same float64 bytes, NaN where undefined included
    assert spark_result.values.tobytes() == local.per_query.values.tobytes()
    assert json.dumps(spark_result.mean) == json.dumps(local.mean)
    assert spark_result.summary == local.summary
    assert spark_result.texts == getattr(local, "texts", {})  # relstring's per-query text


@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_every_metric_bit_identical_under_partitionings(spark, partitions):
    import rankwise.spark as rs

    qrels_rows, run_rows = random_data(1)
    metrics = all_ir_metrics()
    local = local_result(qrels_rows, run_rows, metrics)
    assert local.summary["missing_from_run"] and local.summary["ignored_not_in_qrels"]
    assert "undefined" in local.summary  # id-set metrics have undefined queries here
    q, r = frames(spark, qrels_rows, run_rows, partitions, seed=partitions)
    result = rs.evaluate(q, r, metrics, buckets=partitions)
    assert_identical(result, local)
    # the Spark DataFrame holds the same values
    rows = {row["query_id"]: row for row in result.per_query.collect()}
    assert sorted(rows, key=str.encode) == local.per_query.query_ids
    for j, name in enumerate(local.names):
        got = np.array([rows[qid][name] for qid in local.per_query.query_ids], dtype=np.float64)
        assert got.tobytes() == local.per_query.values[:, j].tobytes()
    result.per_query.unpersist()


def test_skip_missing_and_relevance_level(spark):
    import rankwise.spark as rs

    qrels_rows, run_rows = random_data(2, n_queries=60)
    metrics = ["ndcg@10", "map", "P@5", "bpref", "num_rel", "num_q", "id_recall", "set_F"]
    local = local_result(qrels_rows, run_rows, metrics, missing="skip", relevance_level=2)
    q, r = frames(spark, qrels_rows, run_rows, 3, seed=5)
    assert_identical(rs.evaluate(q, r, metrics, missing="skip", relevance_level=2, buckets=5), local)


def test_depth_as_trec_eval_M(spark):
    import rankwise.spark as rs

    qrels_rows, run_rows = random_data(3, n_queries=40)
    metrics = ["ndcg", "map", "P@5", "num_ret", "num_rel_ret", "recall@10"]
    local = local_result(qrels_rows, run_rows, metrics, depth=4)
    assert local.mean["num_ret"] < local_result(qrels_rows, run_rows, metrics).mean["num_ret"]
    q, r = frames(spark, qrels_rows, run_rows, 3, seed=6)
    assert_identical(rs.evaluate(q, r, metrics, depth=4, buckets=4), local)


def test_ordered_run_by_rank_column(spark):
    import rankwise.spark as rs

    qrels = {"q1": {"a": 1, "c": 2}, "q2": {"b": 1}}
    lists = {"q1": ["c", "x", "a"], "q2": ["y", "b"]}
    local = rankwise.evaluate(qrels, lists, ["P@2", "mrr", "ndcg@3"])
    q = spark.createDataFrame([(qid, d, g) for qid, docs in qrels.items() for d, g in docs.items()],
                              "query_id string, doc_id string, relevance int")
    r = spark.createDataFrame([(qid, d, i + 1) for qid, docs in lists.items() for i, d in enumerate(docs)][::-1],
                              "query_id string, doc_id string, rank int")
    assert_identical(rs.evaluate(q, r, ["P@2", "mrr", "ndcg@3"], buckets=2), local)


def test_bad_input_is_a_one_line_error(spark, tmp_path):
    import rankwise.spark as rs

    q = spark.createDataFrame([("q1", "a", 1), ("q1", "a", 0)], "query_id string, doc_id string, relevance long")
    r = spark.createDataFrame([("q1", "a", 1.0)], "query_id string, doc_id string, score double")
    with pytest.raises(InputError, match="pair \\(query 'q1', doc 'a'\\) is judged twice") as err:
        rs.evaluate(q, r, ["P@1"])
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="share no query id"):
        rs.evaluate(q.limit(1), r.selectExpr("'x' as query_id", "doc_id", "score"), ["P@1"])
    nulls = spark.createDataFrame([(None, "a", 1)], "query_id string, doc_id string, relevance long")
    with pytest.raises(InputError) as err:
        rs.evaluate(nulls, r, ["P@1"])
    assert str(err.value) == "<spark qrels>: field 'query_id': missing id"  # no row number within a bucket
    with pytest.raises(InputError, match="no column 'relevance'"):
        rs.evaluate(q.drop("relevance"), r, ["P@1"])
    bad = tmp_path / "run.trec"
    bad.write_text("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 zero t\n")
    with pytest.raises(InputError) as err:
        rs.evaluate(rs.read_qrels(spark, write(tmp_path / "qrels.txt", "q1 0 a 1\n")), rs.read_run(spark, bad),
                    ["P@1"])
    assert str(err.value) == f"{bad}:2: field 'score': not a number: 'zero'"


def write(path, text: str):
    path.write_text(text)
    return path


def test_trec_and_parquet_files_read_as_rankwise_reads_them(spark, tmp_path, shared_data):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import rankwise.spark as rs

    qrels_path = shared_data / "cranfield" / "qrels" / "test.tsv"
    qrels = rankwise.load_qrels(qrels_path)
    rng = np.random.default_rng(3)
    run_rows = [(qid, str(d), float(rng.integers(0, 50))) for qid in qrels.queries[:100]
                for d in rng.choice(1400, 30, replace=False)]
    run_file = tmp_path / "run.trec"
    run_file.write_text("".join(f"{q} Q0 {d} {i} {s} t\n" for i, (q, d, s) in enumerate(run_rows)))
    metrics = ["ndcg@10", "map", "P@5", "recall@100", "num_rel_ret"]
    local = rankwise.evaluate(qrels_path, run_file, metrics)
    result = rs.evaluate(rs.read_qrels(spark, qrels_path), rs.read_run(spark, run_file), metrics)
    assert_identical(result, local)
    pq.write_table(pa.table({"query_id": [r[0] for r in run_rows], "doc_id": [r[1] for r in run_rows],
                             "score": [r[2] for r in run_rows]}), tmp_path / "run.parquet")
    parquet = rs.evaluate(rs.read_qrels(spark, qrels_path), rs.read_run(spark, tmp_path / "run.parquet"), metrics)
    assert parquet.values.tobytes() == local.per_query.values.tobytes() and parquet.mean == local.mean
    # TREC qrels and run lines in files named .tsv (MS MARCO ships its qrels so): read as TREC, as
    # locally
    tsv_qrels, tsv_run = tmp_path / "qrels.dev.tsv", tmp_path / "run.tsv"
    tsv_qrels.write_text("".join(f"{q}\t0\t{d}\t{g}\n" for q, docs in qrels.to_dict().items() for d, g in docs.items()))
    tsv_run.write_text(run_file.read_text())
    assert rankwise.evaluate(tsv_qrels, tsv_run, metrics).mean == local.mean
    headerless = rs.evaluate(rs.read_qrels(spark, tsv_qrels), rs.read_run(spark, tsv_run), metrics)
    assert headerless.values.tobytes() == local.per_query.values.tobytes()


# ------------------------------------------------------------------------------------------------
# RAG

WORDS = ["alpha", "beta", "gamma", "delta", "kettle", "warranty", "toaster", "crumb", "tray", "lever", "power", "light", "boil", "rinse", "vinegar"]


def random_testset(seed: int, n_cases: int = 40) -> list[dict]:
    """Cases over random documents: chunks and reference passages are spans of them (text, doc_id,
    start, end); reference ids; some cases without ground truth or without chunks; duplicate chunk
    ids."""
    rng = random.Random(seed)
    docs = {f"doc{i}": " ".join(rng.choice(WORDS) for _ in range(60)) for i in range(6)}

    def span(doc: str, size: int) -> dict:
        text = docs[doc]
        start = rng.randrange(0, len(text) - size)
        return {"doc_id": doc, "start": start, "end": start + size, "text": text[start:start + size]}

    cases = []
    for i in range(n_cases):
        doc_ids = rng.sample(sorted(docs), 3)
        refs = [span(rng.choice(doc_ids), rng.randint(15, 40)) for _ in range(rng.randint(0 if i % 9 == 4 else 1, 3))]
        chunks = []
        for _ in range(0 if i % 13 == 7 else rng.randint(1, 8)):
            if refs and rng.random() < 0.4:  # a chunk around a reference passage
                p = rng.choice(refs)
                start = max(0, p["start"] - rng.randint(0, 10))
                end = min(len(docs[p["doc_id"]]), p["end"] + rng.randint(-5, 20))
                c = {"doc_id": p["doc_id"], "start": start, "end": end, "text": docs[p["doc_id"]][start:end]}
            else:
                c = span(rng.choice(doc_ids), rng.randint(20, 60))
            c["id"] = f"{c['doc_id']}#{c['start'] // 50}"
            chunks.append(c)
        cases.append({"id": f"case-{i:03d}" if i % 5 else f"C{i}", "user_input": f"question {i}?",
                      "retrieved_contexts": chunks, "reference_contexts": refs,
                      "reference_context_ids": sorted({f"{p['doc_id']}#{p['start'] // 50}" for p in refs})})
    return cases


def assert_rag_identical(result, local, *, in_order: bool = True):
    """Bit-identical values and means, the same summary. A warning's example case is the first in
    input order: after a shuffle only its count is compared."""
    assert result.query_ids == local.per_query.query_ids
    assert result.values.tobytes() == local.per_query.values.tobytes()
    assert json.dumps(result.mean) == json.dumps(local.mean)
    if in_order:
        assert result.summary == local.summary
    else:
        assert {k: v for k, v in result.summary.items() if k != "warnings"} == \
            {k: v for k, v in local.summary.items() if k != "warnings"}
        assert [w.split(" (")[0] for w in result.summary["warnings"]] == \
            [w.split(" (")[0] for w in local.summary["warnings"]]


def lines_in_order(spark, path, partitions: int):
    """A JSONL file as a one-column DataFrame in file order, over several partitions (no shuffle).
    """
    return spark.createDataFrame(spark.sparkContext.textFile(str(path), minPartitions=partitions).map(lambda x: (x,)),
                                 "value string")


@pytest.mark.parametrize(("relevance", "partitions"), [("containment", 1), ("span", 3), ("ids", 7)])
def test_rag_test_set_bit_identical(spark, tmp_path, relevance, partitions):
    import rankwise.spark as rs

    cases = random_testset(partitions)
    path = tmp_path / "testset.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    k = [1, 3, 5]
    local = rankwise.evaluate_rag(path, relevance, k=k)
    assert local.summary["unscorable"]
    result = rs.evaluate_rag(lines_in_order(spark, path, partitions), relevance, k=k)
    assert result.records.rdd.getNumPartitions() >= partitions
    assert_rag_identical(result, local)
    assert local.summary["warnings"]  # repeated chunk ids: the example names the first such case
    # the records the workers wrote are the records evaluate_rag keeps
    got = {json.loads(line)["id"]: json.loads(line) for line in (r["record"] for r in result.records.collect())}
    for rec in local.records:
        assert got[rec.id]["scores"] == json.loads(json.dumps(rec.to_dict()["scores"]))
        assert [c["verdicts"][relevance]["verdict"] for c in got[rec.id]["chunks"]] == rec.verdicts(relevance)


@pytest.mark.parametrize("relevance", ["containment", "span"])
def test_rag_budget_metrics_bit_identical(spark, tmp_path, relevance):
    """Metrics at a context budget (characters and tokens) on Spark: the same bits as
    evaluate_rag's."""
    import rankwise.spark as rs

    path = tmp_path / "testset.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in random_testset(3)))
    names = ["recall@200c", "precision@200c", "ndcg@50t", "wcp@300c", "recall@100000c"]
    local = rankwise.evaluate_rag(path, relevance, metrics=names)
    assert len(set(local.mean.values())) > 2  # the budgets cut: not one value for all
    result = rs.evaluate_rag(lines_in_order(spark, path, 3), relevance, metrics=names)
    assert_rag_identical(result, local)


def test_rag_skip_treatments_and_columns(spark):
    import rankwise.spark as rs

    cases = random_testset(11)
    local = rankwise.evaluate_rag(cases, "containment", k=[2, 4], unscorable="skip")
    rows = [(c["id"], c["user_input"], [x["text"] for x in c["retrieved_contexts"]],
             [x["text"] for x in c["reference_contexts"]]) for c in cases]
    frame = spark.createDataFrame(spark.sparkContext.parallelize(rows, 3),
                                  "id string, user_input string, retrieved_contexts array<string>, "
                                  "reference_contexts array<string>")
    ragas = rankwise.evaluate_rag([{"id": r[0], "user_input": r[1], "retrieved_contexts": r[2],
                                    "reference_contexts": r[3]} for r in rows], "containment", k=[2, 4],
                                  unscorable="skip")
    assert_rag_identical(rs.evaluate_rag(frame, "containment", k=[2, 4], unscorable="skip"), ragas)
    assert local.summary["evaluated"] < local.summary["cases"]


def test_rag_stored_llm_verdicts_from_records(spark, tmp_path):
    import rankwise.spark as rs

    rng = random.Random(5)
    records = records_from_testset(random_testset(5))
    for rec in records:
        for c in rec.chunks:
            if rng.random() < 0.1:
                c.verdicts["llm"] = Verdict(None, status="failed", error="unparseable reply after 3 tries")
            else:
                grade = rng.choice([0, 0, 1, 2, 3])
                c.verdicts["llm"] = Verdict(1 if grade >= 1 else 0, grade=grade, reason="judged")
    path = write_records(records, tmp_path / "records.jsonl")
    metrics = ["precision@3", "ndcg@5", "acp@5", "wcp@5", "f1_acp@5", "context_recall@5", "mrr", "id_precision"]
    for incomplete in ("zero", "skip"):
        local = rankwise.evaluate_rag(path, "llm", metrics=metrics, incomplete=incomplete)
        assert local.summary["verdicts"]["failed"] and local.summary["verdicts_from"] == "stored in the records"
        result = rs.evaluate_rag(spark.read.text(str(path)).repartition(4), "llm", metrics=metrics,
                                 incomplete=incomplete)
        assert_rag_identical(result, local, in_order=False)  # shuffled rows


def test_rag_errors_are_one_line(spark, tmp_path):
    import rankwise.spark as rs

    path = write(tmp_path / "cases.jsonl", '{"id": "a", "retrieved_contexts": ["x"]}\n{"retrieved_contexts": ["y"]}\n')
    with pytest.raises(InputError, match="a case has no id"):
        rs.evaluate_rag(spark.read.text(str(path)))
    path = write(tmp_path / "dup.jsonl", '{"id": "a", "retrieved_contexts": ["x"], "reference_contexts": ["x"]}\n' * 2)
    with pytest.raises(InputError, match="case id 'a' appears twice"):
        rs.evaluate_rag(spark.read.text(str(path)).repartition(2))
    with pytest.raises(InputError, match="no 'llm' verdicts"):
        rs.evaluate_rag(spark.read.text(str(path)).limit(1), "llm")


def test_rag_metrics_over_calls_bit_identical(spark, tmp_path):
    """Cases with several retrieval calls: the metrics over calls on Spark are
    rankwise.evaluate_rag's."""
    from pathlib import Path

    import rankwise.spark as rs

    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text(encoding="utf-8")
    block = doc[doc.index("<!-- calls-example -->"):].split("```jsonl\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "calls.jsonl"
    path.write_text(block)
    metrics = ["merged(metric=recall)@5", "per_call(metric=recall,call=1)@3", "call_mean(metric=ndcg)@3",
               "evidence_coverage@3", "all_hops_covered@3", "calls_to_evidence@3", "call_redundancy@3"]
    local = rankwise.evaluate_rag(path, "containment", metrics=metrics)
    result = rs.evaluate_rag(lines_in_order(spark, path, 2), "containment", metrics=metrics)
    assert_rag_identical(result, local)
    assert result.summary["undefined"] == {"calls_to_evidence@3": 1} and "never complete" in \
        result.summary["undefined_why"]["calls_to_evidence@3"]


def test_the_sessions_jvm_reads_the_class_archive_setup_wrote(spark):
    """tests/_jvm.py's class archive (scripts/setup.sh --test writes it) is one this session's JVM
    was started with and can map: with -Xshare:on the JVM refuses to start on an archive of another
    Java or class path."""
    assert archive_ready(), f"no class archive for this Java and Spark at {ARCHIVE}: run scripts/setup.sh --test"
    lang = spark._jvm.java.lang
    started_with = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={ARCHIVE}" in started_with
    java = lang.System.getProperty("java.home") + "/bin/java"
    cmd = [java, "-Xshare:on", f"-XX:SharedArchiveFile={ARCHIVE}", *BASE_OPTIONS.split(), "-cp",
           lang.System.getProperty("java.class.path"), "-version"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "sharing" in done.stderr, done.stderr[-1000:]
    refused = subprocess.run([*cmd[:-3], "-cp", str(ARCHIVE.parent), "-version"], capture_output=True, text=True,
                             timeout=60)  # another class path: the check is not a formality
    assert refused.returncode != 0 and "mismatch" in refused.stderr


def test_rag_default_metrics_include_the_call_metrics_when_cases_have_calls(spark, tmp_path):
    """No metrics given: on cases with several retrieval calls Spark scores the same default list as
    rankwise.evaluate_rag — the metrics over calls included (before: left out on Spark)."""
    from pathlib import Path

    import rankwise.spark as rs

    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text(encoding="utf-8")
    block = doc[doc.index("<!-- calls-example -->"):].split("```jsonl\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "calls.jsonl"
    path.write_text(block)
    local = rankwise.evaluate_rag(path, "containment", k=[3])
    assert any(n.startswith("calls_to_evidence") for n in local.mean)
    result = rs.evaluate_rag(lines_in_order(spark, path, 2), "containment", k=[3])
    assert list(result.mean) == list(local.mean)
    assert_rag_identical(result, local)
