"""``rankwise.spark.evaluate``: qrels + run as Spark DataFrames -> per-query values and exact means.

How: every row gets a bucket (a hash of its query id); run and qrels rows are co-grouped by bucket
and each bucket runs rankwise's own engine (:func:`~rankwise.metrics.matrix.join` then
:func:`~rankwise.metrics.engine.evaluate_matrix`) on its Arrow table in a Python worker. A query's
rows all land in one bucket, and a query's values depend only on its own rows, so they are the
values one process computes. The means are not left to Spark: the per-query values are collected to
the driver, put in query-id byte order and summed by :func:`~rankwise.metrics.engine.aggregate`, as
``rankwise.evaluate`` does, so they do not depend on the partitioning either.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.errors import InputError
from rankwise.metrics.engine import DEFAULT_METRICS, EvalResult, PerQuery, aggregate_columns, check_depth
from rankwise.metrics.registry import Measure, parse_measures
from rankwise.spark.io import PROBLEM, check_workers, raise_problem, require_pyspark

__all__ = ["evaluate", "SparkEvalResult", "bucket_evaluator"]

EVALUATED, SKIPPED, IGNORED, ERROR = 0, 1, 2, 3  # a worker row's _status


@dataclass
class SparkEvalResult:
    """What :func:`evaluate` returns.

    Attributes:
        measures: the measures, in the order asked.
        per_query: a Spark DataFrame, ``query_id`` and one double column per metric (named as
            ``measures``; NaN where a metric is undefined), persisted: ``.unpersist()`` it when
            done.
        mean: canonical name -> mean over evaluated queries (sum for count measures), as
            ``rankwise.evaluate`` computes it.
        summary: the same summary ``rankwise.evaluate`` gives.
        run_name: name of the evaluated run.
    """

    measures: list[Measure]
    per_query: Any
    mean: dict[str, float]
    summary: dict
    run_name: str
    query_ids: list[str]
    values: np.ndarray
    texts: dict[str, list[str]] = field(default_factory=dict)
    runid: str | None = None  # trec_eval's runid line, when asked (as EvalResult.runid)

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.measures]

    def to_eval_result(self) -> EvalResult:
        """The result as a local :class:`~rankwise.metrics.engine.EvalResult` (per-query values on
        the driver), for reports, ``compare`` and the rest of rankwise."""
        result = EvalResult(self.measures, PerQuery(self.query_ids, self.names, self.values), dict(self.mean),
                            self.summary, self.run_name)
        if self.texts:
            result.texts = {name: list(t) for name, t in self.texts.items()}
        result.runid = self.runid
        return result

    def to_json(self, *, per_query: bool = False) -> dict:
        """``{"summary", "mean", "per_query"?}`` as ``rankwise eval --format json`` prints it."""
        return self.to_eval_result().to_json(per_query=per_query)


def _out_schema(n: int) -> str:
    cols = ["query_id string", "_status int", "_in_run boolean", "_nrel_all long", "_error string", "_texts string"]
    return ", ".join(cols + [f"m{j} double" for j in range(n)])


def _table(n: int, query_ids: list[str], status: int, in_run=None, nrel=None, values=None, error=None,
           texts=None) -> pa.Table:
    rows = len(query_ids)
    cols = {
        "query_id": pa.array(query_ids, pa.string()),
        "_status": pa.array(np.full(rows, status, dtype=np.int32)),
        "_in_run": pa.array(np.zeros(rows, dtype=bool) if in_run is None else np.asarray(in_run, dtype=bool)),
        "_nrel_all": pa.array(np.zeros(rows, dtype=np.int64) if nrel is None else np.asarray(nrel, np.int64)),
        "_error": pa.array([error] * rows, pa.string()),
        "_texts": pa.array(texts if texts is not None else [None] * rows, pa.string()),
    }
    for j in range(n):
        cols[f"m{j}"] = pa.array(np.full(rows, np.nan) if values is None else values[:, j], pa.float64())
    return pa.table(cols)


def _problem_of(table: pa.Table) -> str | None:
    if PROBLEM in table.column_names:
        bad = table.column(PROBLEM).drop_null()
        if len(bad):
            return bad[0].as_py()
    return None


def bucket_evaluator(names: list[str], relevance_level: int, missing: str, depth: int | None = None):
    """The function each worker runs on one co-group: (run rows, qrels rows) -> one row per query.
    """
    n = len(names)

    def run_bucket(run_tbl: pa.Table, qrels_tbl: pa.Table) -> pa.Table:
        from rankwise.data.qrels import Qrels
        from rankwise.data.run import Run
        from rankwise.metrics.engine import evaluate_matrix
        from rankwise.metrics.matrix import join

        try:
            for tbl in (qrels_tbl, run_tbl):
                problem = _problem_of(tbl)
                if problem is not None:
                    return _table(n, [""], ERROR, error=problem)
            qrels = Qrels.from_columns(qrels_tbl.column("query_id"), qrels_tbl.column("doc_id"),
                                       qrels_tbl.column("relevance").to_numpy(), source="<spark qrels>")
            if "score" in run_tbl.column_names:
                run = Run.from_columns(run_tbl.column("query_id"), run_tbl.column("doc_id"),
                                       run_tbl.column("score").to_numpy(), source="<spark run>")
            else:  # an ordered run: the rank column orders each query's items
                ranks = run_tbl.column("rank")
                if ranks.null_count:
                    raise InputError("rank is null", source="<spark run>", field="rank")
                ordered = run_tbl.sort_by([("query_id", "ascending"), ("rank", "ascending"),
                                           ("doc_id", "ascending")])
                run = Run.from_columns(ordered.column("query_id"), ordered.column("doc_id"), kind="ordered",
                                       source="<spark run>")
            if depth is not None:  # a bucket holds whole queries: trec_eval's -M per query
                run = run.truncate(depth)
            matrix, summary = join(qrels, run, relevance_level=relevance_level, missing=missing)
            result = evaluate_matrix(matrix, names, summary)
            position = {q: i for i, q in enumerate(qrels.queries)}
            rel_all = np.bincount(qrels.query_codes()[qrels.grades > 0], minlength=qrels.n_queries)
            nrel = [int(rel_all[position[q]]) for q in matrix.query_ids]
            texts = None
            if getattr(result, "texts", None):  # text measures (relstring): {name: text} per query
                texts = [json.dumps({name: t[i] for name, t in result.texts.items()})
                         for i in range(len(matrix.query_ids))]
            parts = [_table(n, matrix.query_ids, EVALUATED, matrix.in_run, nrel, result.per_query.values,
                            texts=texts)]
            if missing == "skip" and summary["missing_queries"]:
                parts.append(_table(n, summary["missing_queries"], SKIPPED))
            if summary["ignored_queries"]:
                parts.append(_table(n, summary["ignored_queries"], IGNORED, in_run=[True] *
                                    len(summary["ignored_queries"])))
            return pa.concat_tables(parts)
        except InputError as exc:
            if exc.source and exc.source.startswith("<spark"):  # row numbers within a bucket mean nothing
                exc = InputError(exc.problem.split(" (first at line")[0], source=exc.source, field=exc.field)
            return _table(n, [""], ERROR, error=str(exc))

    return run_bucket


def _examples(ids: list[str], n: int = 3) -> str:
    shown = ", ".join(repr(i) for i in ids[:n])
    return shown + (f" ... ({len(ids)} in all)" if len(ids) > n else "")


def _byte_order(ids: pa.Array) -> np.ndarray:
    """Positions that put string ids in byte order (the order rankwise's engine keeps queries in).
    """
    return np.asarray(pc.sort_indices(ids)).astype(np.int64)


def _check_frame(df, role: str, wanted: list[str]):
    if not hasattr(df, "columns") or not hasattr(df, "groupBy"):
        raise InputError(f"{role} must be a Spark DataFrame, got {type(df).__name__}", field=role)
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise InputError(f"{role} has no column {missing[0]!r}; columns: {df.columns}", source=f"<spark {role}>",
                         field=missing[0])


def evaluate(qrels, run, metrics: Iterable[str | Measure] | str | None = None, *, relevance_level: int = 1,
             missing: str = "zero", buckets: int | str | None = None,
             run_name: str = "run", depth: int | None = None) -> SparkEvalResult:
    """Evaluate a run against qrels on Spark; the numbers are ``rankwise.evaluate``'s, bit for bit.

    Args:
        qrels: Spark DataFrame ``query_id, doc_id, relevance`` (integer grades).
        run: Spark DataFrame ``query_id, doc_id, score`` (ranked by score, ties by doc id in
            descending byte order, as trec_eval), or ``query_id, doc_id, rank`` for an ordered run.
        metrics: metric names, as for ``rankwise.evaluate`` (default: its defaults).
        relevance_level: grade from which a judgement counts as relevant.
        missing: ``"zero"`` (qrels queries absent from the run score 0) or ``"skip"``.
        buckets: how many groups of queries the work is split into (default: the session's
            ``spark.sql.shuffle.partitions``); each group is evaluated in one Python worker, so a
            group must fit in a worker's memory. ``"query"`` makes one group per query (much slower;
            for comparison only). The numbers never depend on it.
        run_name: the name reported for the run.
        depth: evaluate only the top ``depth`` items of each query (trec_eval ``-M``).

    Example:
        >>> r = evaluate(spark.read.parquet("qrels.parquet"), spark.read.parquet("run.parquet"),
        ...              ["ndcg@10", "P@5"])  # doctest: +SKIP
        >>> r.mean  # doctest: +SKIP
        {'ndcg@10': 0.4321, 'precision@5': 0.3120}
    """
    require_pyspark()
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if isinstance(metrics, str):
        metrics = [metrics]
    measures = parse_measures(metrics or DEFAULT_METRICS)
    if missing not in ("zero", "skip"):
        raise InputError(f"missing must be 'zero' or 'skip', not {missing!r}", field="missing")
    check_depth(depth)
    _check_frame(qrels, "qrels", ["query_id", "doc_id", "relevance"])
    _check_frame(run, "run", ["query_id", "doc_id"])
    if "score" not in run.columns and "rank" not in run.columns:
        raise InputError(f"run has neither a 'score' nor a 'rank' column; columns: {run.columns}",
                         source="<spark run>", field="score")
    names = [m.name for m in measures]
    spark = run.sparkSession
    check_workers(spark)
    qcols = ["query_id", "doc_id", "relevance"] + ([PROBLEM] if PROBLEM in qrels.columns else [])
    rcols = ["query_id", "doc_id", "score" if "score" in run.columns else "rank"]
    rcols += [PROBLEM] if PROBLEM in run.columns else []
    q, r = qrels.select(*qcols), run.select(*rcols)
    if buckets == "query":
        key = "query_id"
    else:
        n_buckets = int(buckets or spark.conf.get("spark.sql.shuffle.partitions", "200"))
        if n_buckets < 1:
            raise InputError(f"buckets must be >= 1, not {n_buckets}", field="buckets")
        key = "_bucket"
        q = q.withColumn(key, F.pmod(F.xxhash64("query_id"), F.lit(n_buckets)))
        r = r.withColumn(key, F.pmod(F.xxhash64("query_id"), F.lit(n_buckets)))
    fn = bucket_evaluator(names, relevance_level, missing, depth)

    def drop_key(run_tbl: pa.Table, qrels_tbl: pa.Table) -> pa.Table:
        return fn(run_tbl.drop_columns([key]) if key == "_bucket" else run_tbl,
                  qrels_tbl.drop_columns([key]) if key == "_bucket" else qrels_tbl)

    out = r.groupBy(key).cogroup(q.groupBy(key)).applyInArrow(drop_key, _out_schema(len(names)))
    out = out.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        local = out.select("query_id", "_status", "_in_run", "_nrel_all", "_error", "_texts",
                           *[f"m{j}" for j in range(len(names))]).toArrow()
        result = _finish(local, measures, relevance_level, missing, run_name)
    except BaseException:
        out.unpersist()
        raise
    per_query = out.where(F.col("_status") == EVALUATED).select(
        "query_id", *[F.col(f"m{j}").alias(name) for j, name in enumerate(names)])
    return SparkEvalResult(measures, per_query, result.mean, result.summary, run_name, result.per_query.query_ids,
                           result.per_query.values, getattr(result, "texts", {}))


def _finish(local: pa.Table, measures: list[Measure], relevance_level: int, missing: str,
            run_name: str) -> EvalResult:
    """Means and summary on the driver, from every worker row, exactly as ``rankwise.evaluate``."""
    status = np.asarray(local.column("_status").to_numpy())
    errors = np.flatnonzero(status == ERROR)
    if len(errors):
        messages = sorted(local.column("_error").take(pa.array(errors)).to_pylist())
        message = messages[0]
        if "\x1f" in message:
            raise_problem(message)
        _reraise(message)
    ids = local.column("query_id").combine_chunks()
    in_run = np.asarray(local.column("_in_run").to_numpy(zero_copy_only=False), dtype=bool)

    def ids_of(mask: np.ndarray) -> list[str]:
        picked = ids.take(pa.array(np.flatnonzero(mask)))
        return picked.take(pc.sort_indices(picked)).to_pylist()

    evaluated = status == EVALUATED
    ignored = ids_of(status == IGNORED)
    missing_ids = ids_of(status == SKIPPED) if missing == "skip" else ids_of(evaluated & ~in_run)
    queries_in_run = int((evaluated & in_run).sum()) + len(ignored)
    if queries_in_run and len(ignored) == queries_in_run:
        raise InputError(
            f"the run and the qrels share no query id (run: {_examples(ignored)}; qrels: "
            f"{_examples(ids_of(evaluated | (status == SKIPPED)))}); ids are compared exactly, so '01' is not '1'",
            field="query_id")
    if not evaluated.any():
        raise InputError("no query to evaluate: the qrels hold no query", field="query_id")
    rows = np.flatnonzero(evaluated)
    order = rows[_byte_order(ids.take(pa.array(rows)))]
    query_ids = ids.take(pa.array(order)).to_pylist()
    values = np.empty((len(order), len(measures)), dtype=np.float64)
    for j in range(len(measures)):
        values[:, j] = np.asarray(local.column(f"m{j}").to_numpy(), dtype=np.float64)[order]
    summary: dict = {
        "queries_in_qrels": int(evaluated.sum() + (status == SKIPPED).sum()),
        "queries_in_run": queries_in_run,
        "evaluated": len(order),
        "missing_from_run": len(missing_ids),
        "ignored_not_in_qrels": len(ignored),
        "missing_queries": missing_ids,
        "ignored_queries": ignored,
        "missing": missing,
        "relevance_level": relevance_level,
    }
    if missing == "zero":
        summary["num_rel_all_trec_eval"] = int(np.asarray(local.column("_nrel_all").to_numpy())[evaluated].sum())
    mean, undefined = aggregate_columns(values, measures)
    if undefined:
        summary["undefined"] = undefined
    result = EvalResult(measures, PerQuery(query_ids, [m.name for m in measures], values), mean, summary, run_name)
    cells = local.column("_texts").take(pa.array(order)).to_pylist()
    if any(c is not None for c in cells):
        rows = [json.loads(c) if c is not None else {} for c in cells]
        result.texts = {m.name: [row[m.name] for row in rows] for m in measures if m.name in rows[0]}
    return result


def _reraise(message: str):
    """A worker's InputError comes back as its one-line text; raise it again as an InputError."""
    err = InputError("x")
    err.problem, err.source, err.line, err.field = message, None, None, None
    err.args = (message,)
    raise err
