"""``rankwise judge-check``: how far a judge's labels agree with human qrels, label by label and
system by system."""

from __future__ import annotations

import sys

import click

from rankwise.cli._base import _interrupt_code, _llm_options, main


def _reranked(values: tuple[str, ...]) -> dict[str, str]:
    from rankwise.errors import InputError

    out = {}
    for v in values:
        name, sep, model = v.partition("=")
        if not sep or not name or not model:
            raise InputError(f"expected RUN=MODEL (a run's name and the model that reranked it), got {v!r}",
                             field="reranked-by")
        out[name] = model
    return out


@main.command("judge-check")
@click.argument("qrels", type=click.Path(dir_okay=False))
@click.argument("runs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--labels", "judge_labels", type=click.Path(dir_okay=False),
              help="The judge's labels as qrels (any format `eval` reads): compare them, call no model.")
@click.option("--beir", "beir_dir", type=click.Path(file_okay=False),
              help="BEIR folder whose corpus.jsonl and queries.jsonl the judge reads.")
@click.option("--corpus", "corpus_path", type=click.Path(), help="Documents the judge reads (JSONL or folder).")
@click.option("--queries", "queries_path", type=click.Path(dir_okay=False), help="Queries the judge reads (JSONL, TSV).")
@click.option("--names", default=None, help="System names, comma-separated (default: file stems).")
@click.option("-m", "--metric", default="ndcg@10", show_default=True, help="Metric the systems are ranked by.")
@click.option("--depth", type=int, default=10, show_default=True, help="Top documents of each run pooled for the sample.")
@click.option("--topics", type=int, default=None, help="Topics drawn for the sample (default: every topic).")
@click.option("--per-grade", type=int, default=3, show_default=True,
              help="Pairs drawn per topic and human grade (stratified).")
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of the sample and the bootstrap.")
@click.option("--relevance-level", "human_level", type=int, default=1, show_default=True,
              help="Human grade from which a document is relevant.")
@click.option("--judge-level", type=int, default=None,
              help="Judge grade from which a document is relevant (default: --relevance-level; with --graded, "
                   "--relevant-from).")
@click.option("--top-k", type=int, default=3, show_default=True, help="Top systems (by the human labels) of top-k tau.")
@click.option("--resamples", type=int, default=1000, show_default=True, help="Bootstrap resamples of topics.")
@click.option("--confidence", type=float, default=0.95, show_default=True, help="Confidence of the intervals.")
@click.option("--test", type=click.Choice(["randomization", "t", "wilcoxon"]), default="randomization",
              show_default=True, help="Paired test of each pair of systems, under each label set.")
@click.option("--correction", type=click.Choice(["holm", "bonferroni", "none"]), default="holm", show_default=True)
@click.option("--alpha", type=float, default=0.05, show_default=True)
@click.option("--reranked-by", multiple=True, metavar="RUN=MODEL",
              help="RUN was reranked by MODEL (repeatable): warns when MODEL is the judge's model (circular).")
@click.option("--graded", is_flag=True, default=None, help="The judge grades 0-3 instead of a binary verdict.")
@click.option("--relevant-from", type=int, default=None,
              help="With --graded: the judge's grade from which a pair counts as relevant (default 2).")
@click.option("--batch", is_flag=True, default=None, help="All pairs of a topic in one call (fewer calls).")
@click.option("--judge-qrels", "judge_qrels_out", type=click.Path(dir_okay=False),
              help="Write the judge's labels here (TREC qrels).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--force", is_flag=True, help="Overwrite an existing --judge-qrels file that rankwise did not write.")
@_llm_options(model="Judge", prompt="prompt templates", dry_run="Draw the sample and price judging it; call nothing.")
def judge_check_command(qrels, runs, judge_labels, beir_dir, corpus_path, queries_path, names, metric, depth, topics,
                        per_grade, seed, human_level, judge_level, top_k, resamples, confidence, test, correction,
                        alpha, reranked_by, graded, relevant_from, batch, judge_qrels_out, fmt, force, llm, dry_run,
                        quiet):
    """Run a judge on a sample of QRELS' pairs pooled from RUNS (or take its --labels) and report
    how far it agrees with the humans: kappa, confusion, leniency; Kendall tau between the systems'
    orders, top-k tau, bootstrap intervals over topics; pairwise significance decisions that flip;
    circularity warnings."""
    import json
    from pathlib import Path

    from rankwise._outputs import check_outputs
    from rankwise.errors import InputError
    from rankwise.relevance.llm_judge import JudgeInterrupted
    from rankwise.report.judge_check_console import judge_check_lines, judge_check_plan_lines
    from rankwise.workflows.judge_check_run import run_judge_check

    labels = [n.strip() for n in names.split(",")] if names else None
    if beir_dir and (corpus_path or queries_path):
        raise InputError("give either --beir DIR or --corpus and --queries", field="beir")
    if beir_dir:
        corpus_path, queries_path = Path(beir_dir) / "corpus.jsonl", Path(beir_dir) / "queries.jsonl"
    inputs = [qrels, *runs, judge_labels, corpus_path, queries_path, llm.config_path, llm.prompt_file]
    check_outputs({"--judge-qrels": None if dry_run else judge_qrels_out}, inputs, force=force)
    cfg = None
    if judge_labels is None:
        cfg = llm.config(mode="question", graded=graded, batch=batch, relevant_from=relevant_from,
                         prompt=llm.prompt_file)
        check_outputs({"--cache": cfg.cache}, [*inputs, judge_qrels_out], force=True)
    elif llm.model or dry_run:
        raise InputError("--labels are the judge's labels: no model is called (drop --model / --dry-run)",
                         field="labels")
    try:
        out = run_judge_check(qrels, list(runs), names=labels, judge_labels=judge_labels, config=cfg,
                              corpus=corpus_path, queries=queries_path, depth=depth, topics=topics,
                              per_grade=per_grade, seed=seed, metric=metric, human_level=human_level,
                              judge_level=judge_level, reranked_by=_reranked(reranked_by),
                              judge_qrels_out=judge_qrels_out, max_cost=llm.max_cost, dry_run=dry_run, quiet=quiet,
                              top_k=top_k, resamples=resamples, confidence=confidence, test=test, alpha=alpha,
                              correction=correction)
    except JudgeInterrupted:
        click.echo("rankwise: interrupted; the verdicts had are in the cache: rerun the same command to resume",
                   err=True)
        sys.exit(_interrupt_code())
    if dry_run:
        for line in judge_check_plan_lines(out, cfg.endpoint.url):
            click.echo(line)
        return
    if fmt == "json":
        click.echo(json.dumps(out.to_dict(), indent=2))
        return
    for line in judge_check_lines(out):
        click.echo(line)
