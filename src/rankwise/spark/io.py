"""A Spark session and qrels / runs read as Spark DataFrames (Parquet, TREC, CSV/TSV with a header).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from rankwise.data.load import headerless_trec
from rankwise.errors import InputError, RankwiseError

__all__ = ["session", "read_qrels", "read_run", "require_pyspark", "raise_problem", "check_workers", "PROBLEM",
           "spark_path", "line_of", "locate_error"]

PROBLEM = "_rankwise_problem"  # a column the TREC readers add: null, or what is wrong with the row's line
_WS = r"[ \t\n\r\f\v]+"
_FLOAT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"  # rankwise.data.text's score rule
_REMOTE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # s3://, dbfs:/, hdfs://, abfss:// ... (Spark reads them)


def require_pyspark():
    """Import pyspark, or raise a one-line :class:`InputError` saying how to install it.

    pyspark's warning that it "does not yet fully support pandas >= 3.0.0" is silenced: rankwise's
    Spark path exchanges Arrow tables, never pandas frames, so it would only be noise on every run.
    """
    import warnings

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputError("the Spark engine needs pyspark and a Java runtime: pip install 'rankwise[spark]' "
                         "(and e.g. apt-get install openjdk-17-jre-headless)", field="engine") from None
    return SparkSession


def session(master: str | None = None, *, app_name: str = "rankwise", conf: dict[str, Any] | None = None):
    """The active SparkSession, or a new one on ``master`` (``local[2]``, ``yarn``,
    ``spark://...``).

    In local mode the Python workers run this interpreter (``PYSPARK_PYTHON`` defaults to
    ``sys.executable``), so they import the same rankwise, and ``spark.sql.shuffle.partitions``
    defaults to the local threads (``local[4]``: 4) rather than Spark's 200, unless ``conf`` or
    ``spark-submit --conf`` sets it: on one machine 200 groups of queries cost 200 Python tasks
    (tens of seconds for a few queries).

    Example:
        >>> spark = session("local[2]", conf={"spark.sql.shuffle.partitions": 4})  # doctest: +SKIP
    """
    SparkSession = require_pyspark()
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    if master is None or master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in (conf or {}).items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    sc = spark.sparkContext
    if sc.master.startswith("local") and not sc.getConf().contains(_PARTITIONS) and _PARTITIONS not in (conf or {}):
        spark.conf.set(_PARTITIONS, str(sc.defaultParallelism))
    return spark


_PARTITIONS = "spark.sql.shuffle.partitions"


_CHECKED: set[str] = set()  # the Spark applications whose Python workers import this rankwise
_WHAT_TO_DO = ("install rankwise {version} on every worker (e.g. pip install 'rankwise[spark]=={version}' in the "
               "cluster's Python environment), point PYSPARK_PYTHON at a Python that has it, or start the session "
               "with rankwise.spark.session(), whose local workers run this Python ({driver})")


def check_workers(spark) -> None:
    """Once per Spark application, before its first job: that the Python workers import rankwise, at
    the driver's version. Otherwise a :class:`~rankwise.errors.RankwiseError` saying in one sentence
    what to do (the setup is at fault, not an input), instead of a JVM stack trace ending in
    ``ModuleNotFoundError: No module named 'rankwise'`` from the middle of the job. A user-built
    ``SparkSession.builder`` session on a cluster where rankwise is installed only on the driver is
    the usual case.

    Example:
        >>> check_workers(session("local[2]"))  # doctest: +SKIP
    """
    import rankwise

    try:
        context = spark.sparkContext
        app = str(context.applicationId)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: nothing to probe with, no check
        return
    if app in _CHECKED:
        return

    def probe(_rows):  # nested, so it is pickled by value: unpickling it needs nothing of rankwise
        import sys as worker_sys

        try:
            import rankwise as worker_rankwise

            yield ("ok", worker_sys.executable, str(getattr(worker_rankwise, "__version__", "?")))
        except Exception as exc:  # noqa: BLE001 - any failure to import is the answer
            yield ("error", worker_sys.executable, f"{type(exc).__name__}: {exc}")

    todo = _WHAT_TO_DO.format(version=rankwise.__version__, driver=sys.executable)
    try:
        status, python, detail = context.parallelize([0], 1).mapPartitions(probe).collect()[0]
    except Exception as exc:  # noqa: BLE001 - the worker did not even start (a wrong PYSPARK_PYTHON ...)
        last = next((line.strip() for line in reversed(str(exc).splitlines()) if line.strip()), type(exc).__name__)
        raise RankwiseError(f"Spark's Python workers failed to start ({last[:300]}); {todo}") from None
    if status != "ok":
        raise RankwiseError(f"Spark's Python workers ({python}) cannot import rankwise ({detail}); {todo}")
    if detail != rankwise.__version__:
        raise RankwiseError(f"Spark's Python workers ({python}) import rankwise {detail}, the driver "
                         f"{rankwise.__version__}: the numbers could differ; {todo}")
    _CHECKED.add(app)


def spark_path(path: str) -> str:
    """``path`` as Spark should be given it: a local path made absolute, since Spark resolves a
    relative one against its JVM's working directory (where the session started), not the current
    one; URIs unchanged.

    Example:
        >>> spark_path("s3://bucket/run/")
        's3://bucket/run/'
    """
    return path if _REMOTE.match(path) else os.path.abspath(path)


def _is_parquet(path: str) -> bool:
    p = Path(path)
    if p.suffix.lower() in (".parquet", ".pq"):
        return True
    if p.is_dir():  # a directory written by Spark: part-*.parquet files
        return any(x.suffix == ".parquet" for x in p.iterdir())
    # on cluster storage a directory (trailing slash or no suffix) is read as Parquet
    return bool(_REMOTE.match(path)) and (path.endswith("/") or p.suffix == "")


def _trec(spark, path: str, fields: list[str], minimum: int, exact: bool):
    """Split a TREC file into string fields; rows with too few (or, ``exact``, too many) fields keep
    a problem message naming the line's text."""
    from pyspark.sql import functions as F

    text = spark.read.text(spark_path(path))
    parts = F.split(F.trim(F.regexp_replace(F.col("value"), _WS, " ")), " ")
    df = text.select(F.col("value").alias("_line"), parts.alias("_f"))
    df = df.where((F.trim(F.col("_line")) != "") & ~F.col("_f")[0].startswith("#"))
    n = F.size("_f")
    bad = (n < minimum) | (n != minimum) if exact else (n < minimum)
    expected = f"{'' if exact else 'at least '}{minimum} fields ({' '.join(fields)})"
    field = F.when(n < minimum, F.element_at(F.array(*[F.lit(f) for f in fields]), n + 1)).otherwise(
        F.lit(fields[-1]))
    problem = F.when(bad, _problem(path, field, F.concat(F.lit(f"expected {expected}, got "), n.cast("string")),
                                   F.col("_line")))
    return df, problem


def _problem(path: str, field, message, line):
    """A problem cell: source, field, message and the line's text, joined by the unit separator."""
    from pyspark.sql import functions as F

    field = F.lit(field) if isinstance(field, str) else field
    return F.concat_ws("\x1f", F.lit(path), field, message, F.lit("") if line is None else F.coalesce(line, F.lit("")))


def raise_problem(cell: str) -> None:
    """Raise the :class:`InputError` a problem cell describes, naming the file's line when it is
    local."""
    source, field, message, line = (cell.split("\x1f") + ["", "", "", ""])[:4]
    number = line_of(source, line) if line else None
    raise InputError(message, source=source or None, line=number, field=field or None)


def read_qrels(spark, path: str | os.PathLike):
    """Qrels as a Spark DataFrame ``query_id, doc_id, relevance`` from Parquet (those columns), TREC
    qrels (``qid iter docno grade``) or CSV/TSV with a header.

    Example:
        >>> qrels = read_qrels(spark, "qrels.txt")  # doctest: +SKIP
    """
    from pyspark.sql import functions as F

    path = str(path)
    if not Path(path).exists() and not _REMOTE.match(path):
        raise InputError("no such file", source=path)
    if _is_parquet(path):
        return _check_columns(spark.read.parquet(spark_path(path)), ["query_id", "doc_id", "relevance"], path)
    if Path(path).suffix.lower() in (".csv", ".tsv") and not headerless_trec(path, "qrels"):
        df = spark.read.csv(spark_path(path), header=True, sep="\t" if path.lower().endswith(".tsv") else ",")
        df = _rename(df, {"query-id": "query_id", "corpus-id": "doc_id", "score": "relevance"})
        df = _check_columns(df, ["query_id", "doc_id", "relevance"], path)
        grade = F.expr("try_cast(relevance as bigint)")
        problem = F.when(grade.isNull(), _problem(path, "relevance", F.concat(
            F.lit("not an integer: '"), F.coalesce(F.col("relevance"), F.lit("")), F.lit("'")), None))
        return df.select("query_id", "doc_id", grade.alias("relevance"), problem.alias(PROBLEM))
    df, problem = _trec(spark, path, ["query_id", "iter", "doc_id", "relevance"], 4, exact=True)
    grade = F.expr("try_cast(_f[3] as bigint)")
    problem = F.coalesce(problem, F.when(grade.isNull(), _problem(path, "relevance", F.concat(
        F.lit("not an integer: '"), F.col("_f")[3], F.lit("'")), F.col("_line"))))
    return df.select(F.col("_f")[0].alias("query_id"), F.col("_f")[2].alias("doc_id"),
                     grade.alias("relevance"), problem.alias(PROBLEM))


def read_run(spark, path: str | os.PathLike):
    """A run as a Spark DataFrame ``query_id, doc_id, score`` from Parquet (those columns, or
    ``rank`` instead of ``score`` for an ordered run), a TREC run (``qid Q0 docno rank score tag``;
    the rank field is ignored, as trec_eval does) or CSV/TSV with a header.

    Example:
        >>> run = read_run(spark, "bm25.trec")  # doctest: +SKIP
    """
    from pyspark.sql import functions as F

    path = str(path)
    if not Path(path).exists() and not _REMOTE.match(path):
        raise InputError("no such file", source=path)
    if _is_parquet(path):
        df = spark.read.parquet(spark_path(path))
        wanted = ["query_id", "doc_id", "score"] if "score" in df.columns or "rank" not in df.columns \
            else ["query_id", "doc_id", "rank"]
        return _check_columns(df, wanted, path)
    if Path(path).suffix.lower() in (".csv", ".tsv") and not headerless_trec(path, "run"):
        df = spark.read.csv(spark_path(path), header=True, sep="\t" if path.lower().endswith(".tsv") else ",")
        df = _rename(df, {"query-id": "query_id", "qid": "query_id", "corpus-id": "doc_id", "docid": "doc_id"})
        df = _check_columns(df, ["query_id", "doc_id", "score"], path)
        score = F.expr("try_cast(score as double)")
        problem = F.when(score.isNull(), _problem(path, "score", F.concat(
            F.lit("not a number: '"), F.coalesce(F.col("score"), F.lit("")), F.lit("'")), None))
        return df.select("query_id", "doc_id", score.alias("score"), problem.alias(PROBLEM))
    df, problem = _trec(spark, path, ["query_id", "iter", "doc_id", "rank", "score", "run_id"], 6, exact=False)
    score = F.expr("try_cast(_f[4] as double)")
    # the local readers' rule: an ASCII decimal number ('1d', 'Infinity', 'nan' are not) within the
    # float range
    number = F.col("_f")[4].rlike(_FLOAT) & ~F.isnan(score) & (F.abs(score) != float("inf"))
    problem = F.coalesce(problem, F.when(score.isNull() | ~number, _problem(path, "score", F.concat(
        F.lit("not a number: '"), F.col("_f")[4], F.lit("'")), F.col("_line"))))
    return df.select(F.col("_f")[0].alias("query_id"), F.col("_f")[2].alias("doc_id"),
                     score.alias("score"), problem.alias(PROBLEM))


def _rename(df, names: dict[str, str]):
    for old, new in names.items():
        if old in df.columns and new not in df.columns:
            df = df.withColumnRenamed(old, new)
    return df


def _check_columns(df, wanted: list[str], source: str):
    missing = [c for c in wanted if c not in df.columns]
    if missing:
        raise InputError(f"no column {missing[0]!r}; columns: {df.columns}", source=source, field=missing[0])
    return df.select(*wanted)


def line_of(path: str, text: str) -> int | None:
    """The 1-based number of the first line of a local file equal to ``text`` (for error messages).
    """
    try:
        with open(path, "rb") as fh:
            target = text.encode("utf-8")
            for number, raw in enumerate(fh, start=1):
                if raw.rstrip(b"\r\n") == target:
                    return number
    except OSError:
        return None
    return None


def locate_error(exc: InputError, qrels: str, run: str) -> InputError:
    """A worker's error about ``<spark run>`` or ``<spark qrels>`` rows (a doc listed twice, a score
    that is not finite), found again in the local file by the local readers, so that it names the
    file and line; ``exc`` itself when the file is not local or the local readers find nothing
    wrong.

    Example:
        >>> err = InputError(
        ...     "doc 'd1' appears twice in query 'q1'", source="<spark run>", field="doc_id"
        ... )
        >>> locate_error(err, "qrels.txt", "s3://bucket/run.trec") is err
        True
    """
    text = str(exc)
    role = "run" if text.startswith("<spark run>") else "qrels" if text.startswith("<spark qrels>") else None
    path = Path(run if role == "run" else qrels)
    if role is None or _REMOTE.match(str(path)) or not path.is_file():
        return exc
    try:
        if role == "qrels":
            from rankwise.data.load import load_qrels

            load_qrels(path)
        elif path.suffix.lower() in (".csv", ".tsv", ".jsonl", ".json", ".ndjson"):
            from rankwise.data.load import load_run

            load_run(path)
        else:  # TREC or Parquet, perhaps larger than memory: read as --stream reads it
            from rankwise.data.stream import NotGrouped, iter_run_blocks

            try:
                for _ in iter_run_blocks(path):
                    pass
            except NotGrouped:
                for _ in iter_run_blocks(path, grouped=False):
                    pass
    except InputError as found:
        return found
    return exc
