"""rankwise on Apache Spark: the same metrics, bit for bit, over runs too large for one machine.

Each group of queries runs rankwise's own engine inside a Spark Python worker (``applyInArrow``), so
ties, grades, missing queries and every registered metric behave exactly as in one process. The
means are never left to Spark: the per-query values are collected, put in query-id byte order and
summed by :func:`rankwise.metrics.engine.aggregate`, so they do not depend on the partitioning.

``pyspark`` is an optional dependency (``pip install 'rankwise[spark]'``, plus a Java runtime); it
is imported on first use, so ``import rankwise`` never needs it. See docs/spark.md.

Example:
    >>> import rankwise.spark as rs
    >>> spark = rs.session("local[2]")  # doctest: +SKIP
    >>> qrels = spark.read.parquet("qrels.parquet")  # query_id, doc_id, relevance  # doctest: +SKIP
    >>> run = spark.read.parquet("run.parquet")      # query_id, doc_id, score  # doctest: +SKIP
    >>> r = rs.evaluate(qrels, run, ["ndcg@10", "map"])  # doctest: +SKIP
    >>> r.mean, r.per_query.count()  # doctest: +SKIP
    ({'ndcg@10': 0.4321, 'map': 0.2345}, 10000)
"""

from __future__ import annotations

from rankwise._lazy import lazy_exports

__all__ = ["evaluate", "evaluate_rag", "session", "read_qrels", "read_run", "SparkEvalResult", "SparkRagResult"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "evaluate": ".ir", "SparkEvalResult": ".ir", "session": ".io", "read_qrels": ".io", "read_run": ".io",
    "evaluate_rag": ".rag", "SparkRagResult": ".rag",
}, globals())
