"""Spark scaling: rankwise.spark.evaluate (local[2]) vs the single-process engine, same Parquet
files.

For each size: a synthetic run (100 docs per query, scores with ties) and qrels (10 graded
judgements per query) written as Parquet; then, from the files to the means,
  * one process: pyarrow reads the files, rankwise.evaluate scores them;
  * Spark local[2]: rankwise.spark.read_* + rankwise.spark.evaluate (buckets of queries in
    applyInArrow, exact means on the driver);
  * (smallest size only) the per-query pandas-UDF approach for contrast: one applyInArrow group per
    query.
Every Spark result is checked bit for bit against the single process (per-query values and means).
The 10^9-row line is an ESTIMATE from the measured per-row cost, not a measurement.

    python benchmarks/spark_scaling.py                 # 10^6 and 10^7 rows
    python benchmarks/spark_scaling.py --sizes 1e6 --per-query-udf
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import rankwise
from rankwise.data import Qrels, Run

METRICS = ["ndcg@10", "map", "P@10", "recall@100", "mrr", "bpref", "num_rel_ret"]
DOCS_PER_QUERY = 100
JUDGED_PER_QUERY = 10


def make_files(rows: int, folder: Path, seed: int = 0) -> tuple[Path, Path, int]:
    rng = np.random.default_rng(seed)
    n_q = rows // DOCS_PER_QUERY
    qids = np.char.add("q", np.arange(n_q).astype(str))
    run_q = np.repeat(qids, DOCS_PER_QUERY)
    docs = rng.integers(0, 10 * DOCS_PER_QUERY, size=(n_q, DOCS_PER_QUERY))
    docs.sort(axis=1)
    dup = np.zeros_like(docs, dtype=bool)
    dup[:, 1:] = docs[:, 1:] == docs[:, :-1]
    docs[dup] += 10 * DOCS_PER_QUERY + np.arange(int(dup.sum()))  # unique per query
    run_d = np.char.add("d", docs.ravel().astype(str))
    scores = np.round(rng.normal(size=rows), 2)  # ties
    order = rng.permutation(rows)  # rows in no particular order
    pq.write_table(pa.table({"query_id": run_q[order], "doc_id": run_d[order], "score": scores[order]}),
                   folder / "run.parquet")
    judged = docs[:, :JUDGED_PER_QUERY]
    pq.write_table(pa.table({"query_id": np.repeat(qids, JUDGED_PER_QUERY),
                             "doc_id": np.char.add("d", judged.ravel().astype(str)),
                             "relevance": rng.integers(0, 4, size=n_q * JUDGED_PER_QUERY)}),
                   folder / "qrels.parquet")
    return folder / "qrels.parquet", folder / "run.parquet", n_q


def single_process(qrels_path: Path, run_path: Path):
    t = time.perf_counter()
    q = pq.read_table(qrels_path)
    r = pq.read_table(run_path)
    qrels = Qrels.from_columns(q["query_id"], q["doc_id"], q["relevance"].to_numpy())
    run = Run.from_columns(r["query_id"], r["doc_id"], r["score"].to_numpy())
    result = rankwise.evaluate(qrels, run, METRICS)
    return time.perf_counter() - t, result


def on_spark(spark, qrels_path: Path, run_path: Path, buckets=None):
    import rankwise.spark as rs

    t = time.perf_counter()
    result = rs.evaluate(rs.read_qrels(spark, qrels_path), rs.read_run(spark, run_path), METRICS, buckets=buckets)
    elapsed = time.perf_counter() - t
    result.per_query.unpersist()
    return elapsed, result


def same(spark_result, local) -> bool:
    return (spark_result.query_ids == local.per_query.query_ids
            and spark_result.values.tobytes() == local.per_query.values.tobytes()
            and spark_result.mean == local.mean)


def driver_cost(n_queries: int) -> float:
    """Seconds the driver spends putting n queries' values in byte order and summing them (the exact
    mean)."""
    from rankwise.metrics.registry import parse_measures
    from rankwise.spark.ir import EVALUATED, _finish

    rng = np.random.default_rng(1)
    ids = np.char.add("q", rng.permutation(n_queries).astype(str))
    cols = {"query_id": ids, "_status": np.full(n_queries, EVALUATED, dtype=np.int32),
            "_in_run": np.ones(n_queries, dtype=bool), "_nrel_all": np.ones(n_queries, dtype=np.int64),
            "_error": pa.nulls(n_queries, pa.string())}
    for j in range(len(METRICS)):
        cols[f"m{j}"] = rng.random(n_queries)
    table = pa.table(cols)
    t = time.perf_counter()
    _finish(table, parse_measures(METRICS), 1, "zero", "run")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["1e6", "1e7"], help="run rows per size")
    ap.add_argument("--per-query-udf", action="store_true", help="also time one UDF group per query (smallest size)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--buckets", type=int, default=None, help="default: 2 x cores, at least 1 per 2e6 rows")
    args = ap.parse_args()
    import rankwise.spark as rs

    spark = rs.session(args.master, conf={"spark.sql.shuffle.partitions": 8, "spark.ui.enabled": "false",
                                          "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "6g",
                                          "spark.sql.execution.arrow.maxRecordsPerBatch": 200_000})
    spark.sparkContext.setLogLevel("ERROR")
    cores = spark.sparkContext.defaultParallelism
    print(f"# rankwise.spark scaling, master {args.master} ({cores} cores), load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; metrics: {', '.join(METRICS)}")
    print("# warm-up (JVM, Python workers) on 10^4 rows")
    with tempfile.TemporaryDirectory() as tmp:
        qp, rp, _ = make_files(10_000, Path(tmp))
        on_spark(spark, qp, rp, buckets=2)
    print(f"{'rows':>12} {'queries':>9} {'one process s':>14} {'spark s':>9} {'spark s/1e6 rows':>17} "
          f"{'spark/one':>10} {'identical':>9}")
    measured = []
    for size in sorted(int(float(s)) for s in args.sizes):
        with tempfile.TemporaryDirectory() as tmp:
            qp, rp, n_q = make_files(size, Path(tmp))
            t_one, local = single_process(qp, rp)
            buckets = args.buckets or max(2 * cores, size // 2_000_000)
            t_spark, result = on_spark(spark, qp, rp, buckets=buckets)
            ok = same(result, local)
            measured.append((size, t_spark))
            print(f"{size:>12,} {n_q:>9,} {t_one:>14.2f} {t_spark:>9.2f} {t_spark / size * 1e6:>17.2f} "
                  f"{t_spark / t_one:>10.1f} {'yes' if ok else 'NO':>9}")
            if not ok:
                raise SystemExit("the Spark result differs from the single process")
            if args.per_query_udf and size == min(int(float(s)) for s in args.sizes):
                t_udf, udf = on_spark(spark, qp, rp, buckets="query")
                print(f"{'':>12} per-query UDF groups: {t_udf:.2f} s ({t_udf / t_spark:.1f}x the bucketed "
                      f"groups), identical: {'yes' if same(udf, local) else 'NO'}")
    t_driver = driver_cost(1_000_000)
    print(f"# driver: ordering and summing 10^6 queries' values ({len(METRICS)} metrics) took {t_driver:.2f} s "
          f"(collecting them from the workers not included)")
    size, t = measured[-1]
    core_s = t * cores / size * 1e6  # core-seconds per 10^6 rows, fixed costs included (pessimistic)
    print(f"# per-row cost at {size:,} rows: {core_s:.2f} core-seconds per 10^6 rows (local[{cores}], "
          f"fixed job costs included)")
    for executors, per in ((10, 4), (50, 4), (200, 4)):
        est = 1e9 / 1e6 * core_s / (executors * per)
        print(f"# ESTIMATE, not measured: 10^9 rows on {executors} executors x {per} cores ~ {est / 60:.1f} min "
              f"of worker time, plus ~{10 * t_driver:.0f} s on the driver for 10^7 queries (and their transfer)")
    spark.stop()


if __name__ == "__main__":
    main()
