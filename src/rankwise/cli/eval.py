"""``rankwise eval`` (trec_eval-exact metrics) and ``rankwise metrics`` (the registry)."""

from __future__ import annotations

import click

from rankwise.cli._base import (
    FORMATS,
    _fail,
    _log_mlflow,
    _mlflow_options,
    _print_result,
    _split_metrics,
    main,
)


@main.command("eval")
@_mlflow_options
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument("run", type=click.Path(dir_okay=False))
@click.option("-m", "--metric", "metrics", multiple=True,
              help="Metric name, repeatable or comma-separated (ndcg@10, P_5, map ...).")
@click.option("--per-query", "-q", is_flag=True, help="Also print each query's values.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--relevance-level", "-l", type=int, default=1, show_default=True,
              help="Grade from which a judgement counts as relevant.")
@click.option("--missing", type=click.Choice(["zero", "skip"]), default="zero", show_default=True,
              help="Qrels queries absent from the run: score 0 (trec_eval -c) or skip them.")
@click.option("--stream", is_flag=True,
              help="Evaluate a run larger than memory (TREC or Parquet) block by block; same numbers.")
@click.option("--block-rows", type=click.IntRange(min=1), default=2_000_000, show_default=True,
              help="With --stream: run rows held in memory at a time.")
@click.option("--quiet", is_flag=True, help="No progress bar (--stream shows one for a run of 64 MB or more).")
@click.option("--engine", type=click.Choice(["local", "spark"]), default="local", show_default=True,
              help="spark: read and score on Apache Spark (Parquet, TREC or CSV files; the same numbers).")
@click.option("--master", default=None, help="With --engine spark: the Spark master, e.g. local[2] or yarn.")
@click.option("-R", "--rel-format", type=click.Choice(["qrels", "prefs", "qrels_prefs", "qrels_jg"]), default="qrels",
              show_default=True, help="How to read QRELS (trec_eval -R): preferences (qid jg jsg docno level), "
              "qrels as preferences, or qrels with judgement groups; default measures all_prefs / qrels_jg.")
@click.option("-Z", "--zscores", "zscores", type=click.Path(dir_okay=False), default=None,
              help="Print each value as a z-score against this table (qid measure mean std_dev; trec_eval -Z).")
@click.option("-M", "--max-docs", "depth", type=click.IntRange(min=1), default=None,
              help="Evaluate only the top N items of each query's ranking (trec_eval -M); num_ret counts them.")
def eval_command(qrels, run, metrics, per_query, fmt, relevance_level, missing, stream, block_rows, quiet, engine,
                 master, rel_format, zscores, depth, mlflow_opts):
    """Score RUN against QRELS (TREC, BEIR TSV, CSV, JSONL or Parquet files)."""
    if rel_format != "qrels":
        if stream or engine == "spark":
            _fail(f"-R {rel_format} is evaluated in memory only (no --stream, no --engine spark)")
        from rankwise.metrics.jg import evaluate_judgements

        result = evaluate_judgements(rel_format, qrels, run, _split_metrics(metrics) or None,
                                     relevance_level=relevance_level, missing=missing, depth=depth)
    elif engine == "spark":
        from rankwise.spark.submit import evaluate_files

        result = evaluate_files(qrels, run, _split_metrics(metrics) or None, relevance_level=relevance_level,
                                missing=missing, master=master, depth=depth).to_eval_result()
    elif stream:
        from rankwise.metrics.stream import evaluate_stream

        result = evaluate_stream(qrels, run, _split_metrics(metrics) or None, relevance_level=relevance_level,
                                 missing=missing, block_rows=block_rows, depth=depth, progress=not quiet)
    else:
        from rankwise.metrics.engine import evaluate

        result = evaluate(qrels, run, _split_metrics(metrics) or None, relevance_level=relevance_level,
                          missing=missing, depth=depth)
    if zscores is not None:
        from rankwise.data.prefs import read_zscores
        from rankwise.metrics.zscores import apply_zscores

        result = apply_zscores(result, read_zscores(zscores))
    _print_result(result, fmt, per_query)
    _log_mlflow(mlflow_opts, result)


@main.command("metrics")
@click.argument("name", required=False)
def metrics_command(name):
    """List every metric, its aliases and what it measures; with NAME (``ndcg``, ``P@5``, ``rbp``),
    that metric's parameters, formula and citation."""
    from rankwise.report.console import make_console, metric_card, metrics_table

    make_console().print(metrics_table() if name is None else metric_card(name))
