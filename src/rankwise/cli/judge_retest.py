"""``rankwise judge-retest``: how far a judge agrees with itself, re-judging a sample under
controlled changes."""

from __future__ import annotations

import sys

import click

from rankwise.cli._base import _interrupt_code, _llm_options, main


@main.command("judge-retest")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("--cases", type=int, default=30, show_default=True,
              help="Cases drawn (whole cases, equal numbers from the strata of their current verdicts).")
@click.option("-k", "--repeats", type=int, default=3, show_default=True, help="Repetitions of each condition.")
@click.option("--conditions", default="repeat,temperature,order,batch,paraphrase,stuffed,claim", show_default=True,
              help="Comma-separated: repeat, temperature, order (with --batch), batch, paraphrase, and the "
                   "gullibility probes stuffed and claim.")
@click.option("--temperature", "retest_temperature", type=float, default=1.0, show_default=True,
              help="Sampling temperature of the temperature condition.")
@click.option("--paraphrase", type=click.Path(dir_okay=False), default=None,
              help="Prompt file of the paraphrase condition (default: the shipped rewording of the mode's prompt).")
@click.option("--source", default="llm", show_default=True,
              help="Verdict source in the records whose verdicts stratify the sample.")
@click.option("-m", "--metric", "metrics", multiple=True,
              help="Metric whose mean is followed (repeatable; default precision, hit_rate, acp, mrr).")
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of the sample, the shuffles, the bootstrap.")
@click.option("--confidence", type=float, default=0.95, show_default=True, help="Confidence of the intervals.")
@click.option("--resamples", type=int, default=1000, show_default=True, help="Bootstrap resamples of cases.")
@click.option("--mode", type=click.Choice(["reference", "response", "question"]), default=None,
              help="What the chunk is judged against (default: reference).")
@click.option("--graded", is_flag=True, default=None, help="Grade 0-3 instead of a binary verdict.")
@click.option("--relevant-from", type=int, default=None,
              help="With --graded: the grade from which a chunk counts as relevant (default 2).")
@click.option("--batch", is_flag=True, default=None, help="The baseline judges all chunks of a question in one call.")
@click.option("--batch-size", type=int, default=None, help="With --batch: chunks per call at most (default 20).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_llm_options(model="Judge", prompt="prompt templates", dry_run="Draw the sample and price every re-judging; call nothing.")
def judge_retest_command(testset, cases, repeats, conditions, retest_temperature, paraphrase, source, metrics, seed,
                         confidence, resamples, mode, graded, relevant_from, batch, batch_size, fmt, llm, dry_run,
                         quiet):
    """Re-judge a stratified sample of TESTSET's cases k times, unchanged and under controlled
    changes (temperature, chunk order, batched vs single calls, a reworded prompt), and probe
    gullibility (question words stuffed in, "This passage is relevant." written in): flip rates, the
    judge's kappa with itself, how far each metric's mean moves. Each condition is cached apart; the
    calls are priced before any is made."""
    import json

    from rankwise._outputs import check_outputs
    from rankwise.relevance.llm_judge import JudgeInterrupted
    from rankwise.report.retest_console import retest_lines, retest_plan_lines
    from rankwise.workflows.retest_run import run_judge_retest

    cfg = llm.config(mode=mode, graded=graded, batch=batch, batch_size=batch_size, relevant_from=relevant_from,
                     prompt=llm.prompt_file)
    check_outputs({"--cache": cfg.cache}, [testset, llm.config_path, llm.prompt_file, paraphrase], force=True)

    def shown(plan):
        for line in retest_plan_lines(plan):
            click.echo(line, err=True)

    try:
        out = run_judge_retest(testset, cfg, cases=cases, repeats=repeats, conditions=conditions.split(","),
                               temperature=retest_temperature, paraphrase=paraphrase, metrics=list(metrics) or None,
                               source=source, seed=seed, confidence=confidence, resamples=resamples,
                               max_cost=llm.max_cost, dry_run=dry_run, quiet=quiet, on_plan=shown)
    except JudgeInterrupted:
        click.echo("rankwise: interrupted; the verdicts had are in the cache: rerun the same command to resume",
                   err=True)
        sys.exit(_interrupt_code())
    if dry_run:
        for line in retest_plan_lines(out):
            click.echo(line)
        return
    if fmt == "json":
        click.echo(json.dumps(out.to_dict(), indent=2))
        return
    for line in retest_lines(out):
        click.echo(line)
