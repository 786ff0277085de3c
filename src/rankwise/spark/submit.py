"""The Spark job: ``spark-submit .../rankwise/spark/submit.py eval QRELS RUN ...`` (or ``python -m
rankwise.spark``, or the ``rankwise-spark`` console script, e.g. as a Databricks Python-wheel task).

Subcommands:
    eval QRELS RUN      qrels + run (Parquet files or directories, TREC, CSV/TSV) -> means, summary
    eval-rag CASES      a test set or records JSONL (or Parquet test set) -> means, summary

``--output FILE`` writes the JSON result (summary + means) to FILE; ``--per-query-out DIR`` writes
the per-query values as Parquet (for eval-rag, ``--records-out DIR`` writes the records as JSON
lines).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from rankwise.errors import RankwiseError

__all__ = ["main", "evaluate_files", "eval_job", "eval_rag_job"]

_QUIET = {"spark.ui.showConsoleProgress": "false"}


def _session(master: str | None):
    from rankwise.spark.io import session

    spark = session(master, app_name="rankwise", conf=_QUIET)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def evaluate_files(qrels: str, run: str, metrics: list[str] | None, *, relevance_level: int = 1,
                   missing: str = "zero", master: str | None = None, buckets: int | None = None,
                   depth: int | None = None):
    """``rankwise eval --engine spark``: read both files with Spark and evaluate there.

    Example:
        >>> r = evaluate_files(
        ...     "qrels.txt", "run.parquet", ["ndcg@10"], master="local[2]"
        ... )  # doctest: +SKIP
    """
    from rankwise.errors import InputError
    from rankwise.metrics.registry import asks_runid
    from rankwise.spark.io import locate_error, read_qrels, read_run, require_pyspark
    from rankwise.spark.ir import evaluate

    require_pyspark()
    spark = _session(master)
    try:
        result = evaluate(read_qrels(spark, qrels), read_run(spark, run), metrics, relevance_level=relevance_level,
                          missing=missing, buckets=buckets, run_name=Path(run).stem, depth=depth)
    except InputError as exc:  # rows a worker refused: named by file and line when the file is local
        raise locate_error(exc, qrels, run) from None
    if asks_runid(metrics):  # as rankwise.evaluate: a local TREC file's tag, else the run's name
        from rankwise.data.trec import run_tag

        local = Path(run)
        trec_file = local.is_file() and local.suffix.lower() not in (".parquet", ".pq", ".csv", ".tsv")
        result.runid = (run_tag(local) if trec_file else None) or result.run_name
    return result


def _write_json(payload: dict, output: str | None) -> None:
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    if output:
        from rankwise._atomic import atomic_write_text

        atomic_write_text(output, text + "\n")
    else:
        click.echo(text)


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except RankwiseError as exc:
            click.echo(f"rankwise-spark: error: {exc}", err=True)
            sys.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """rankwise's metrics as a Spark job (run it with spark-submit, or python -m rankwise.spark)."""


@main.command("eval")
@click.argument("qrels")
@click.argument("run")
@click.option("-m", "--metric", "metrics", multiple=True, help="Metric name, repeatable or comma-separated.")
@click.option("--relevance-level", "-l", type=int, default=1, show_default=True)
@click.option("--missing", type=click.Choice(["zero", "skip"]), default="zero", show_default=True)
@click.option("--master", default=None, help="Spark master; default: what spark-submit (or the cluster) sets.")
@click.option("--buckets", type=int, default=None, help="Groups of queries (default: spark.sql.shuffle.partitions).")
@click.option("--output", default=None, help="Write the JSON result (summary, means) here instead of stdout.")
@click.option("--per-query-out", default=None, help="Write the per-query values here as Parquet.")
@click.option("-M", "--max-docs", "depth", type=click.IntRange(min=1), default=None,
              help="Evaluate only the top N items of each query's ranking (trec_eval -M).")
def eval_job(qrels, run, metrics, relevance_level, missing, master, buckets, output, per_query_out, depth):
    """Score RUN against QRELS on Spark; prints (or writes) the JSON summary and means."""
    from rankwise.metrics.registry import split_metric_list
    from rankwise.spark.io import spark_path

    names = [n for v in metrics for n in split_metric_list(v)] or None
    result = evaluate_files(qrels, run, names, relevance_level=relevance_level, missing=missing, master=master,
                            buckets=buckets, depth=depth)
    if per_query_out:
        result.per_query.write.mode("overwrite").parquet(spark_path(per_query_out))
    _write_json(result.to_json(), output)


@main.command("eval-rag")
@click.argument("cases")
@click.option("--relevance", "-r", default="containment", show_default=True,
              help="containment, span, fuzzy, ids, or a source stored in the records (llm, human ...).")
@click.option("-k", "ks", multiple=True, type=int, help="Cutoffs for the default metrics (default 1 3 5 10).")
@click.option("-m", "--metric", "metrics", multiple=True, help="Metric name, repeatable or comma-separated.")
@click.option("--unscorable", type=click.Choice(["zero", "skip"]), default="skip", show_default=True)
@click.option("--incomplete", type=click.Choice(["zero", "skip"]), default="zero", show_default=True)
@click.option("--master", default=None, help="Spark master; default: what spark-submit (or the cluster) sets.")
@click.option("--output", default=None, help="Write the JSON result (summary, means) here instead of stdout.")
@click.option("--records-out", default=None, help="Write each case's record (JSON lines) to this directory.")
def eval_rag_job(cases, relevance, ks, metrics, unscorable, incomplete, master, output, records_out):
    """Score a RAG test set or records (JSONL; or a Parquet test set) on Spark."""
    from rankwise.metrics.registry import split_metric_list
    from rankwise.spark.io import _is_parquet, require_pyspark, spark_path
    from rankwise.spark.rag import evaluate_rag

    require_pyspark()
    spark = _session(master)
    frame = spark.read.parquet(spark_path(cases)) if _is_parquet(cases) else spark.read.text(spark_path(cases))
    names = [n for v in metrics for n in split_metric_list(v)] or None
    result = evaluate_rag(frame, relevance, k=list(ks) or None, metrics=names, unscorable=unscorable,
                          incomplete=incomplete)
    if records_out:
        result.records.write.mode("overwrite").text(spark_path(records_out))
    _write_json(result.to_eval_result().to_json(), output)


if __name__ == "__main__":  # spark-submit runs this file as a script
    main()
