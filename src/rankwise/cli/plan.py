"""``rankwise plan-testset``: how many questions a test set needs, before running it."""

from __future__ import annotations

import json

import click

from rankwise.cli._base import main


@main.command("plan-testset")
@click.option("--baseline", "baseline_path", type=click.Path(dir_okay=False),
              help="Pilot: the baseline's run, records or saved result.")
@click.option("--candidate", "candidate_path", type=click.Path(dir_okay=False),
              help="Pilot: the candidate's run, records or saved result (its paired differences are simulated).")
@click.option("--qrels", type=click.Path(dir_okay=False), help="Qrels, when the pilot is two runs.")
@click.option("--relevance", default=None, help="Verdict source, when the pilot is RAG records or test sets.")
@click.option("-m", "--metric", default="ndcg@10", show_default=True, help="The metric the difference is in.")
@click.option("--sd", type=float, default=None, help="Instead of a pilot: a guess of the differences' sd.")
@click.option("--effect", type=float, required=True, help="The mean difference to detect (metric units).")
@click.option("--alpha", type=float, default=0.05, show_default=True)
@click.option("--power", type=float, default=0.8, show_default=True)
@click.option("--test", type=click.Choice(["randomization", "t"]), default="randomization", show_default=True,
              help="The paired test (randomization: compare's and gate's default).")
@click.option("--n", "n_for_mde", type=click.IntRange(min=2), default=None,
              help="Also the minimum detectable effect of N questions (default: the pilot's size).")
@click.option("--sims", type=int, default=1000, show_default=True, help="Simulated sets per size.")
@click.option("--permutations", type=int, default=1000, show_default=True, help="Sign flips per simulated set.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def plan_testset_command(baseline_path, candidate_path, qrels, relevance, metric, sd, effect, alpha, power, test,
                         n_for_mde, sims, permutations, seed, fmt, quiet):
    """The questions needed to detect --effect in --metric with the given power at --alpha, by
    simulating the paired test rankwise uses from a pilot's per-question differences
    (--baseline/--candidate) or an --sd guess; and the minimum detectable effect of the pilot's size
    (or --n)."""
    from rankwise.analysis.plan import paired_pilot, plan_sample_size
    from rankwise.progress import progress
    from rankwise.report.plan_text import sample_plan_lines

    diffs = paired_pilot(baseline_path, candidate_path, metric, qrels=qrels, relevance=relevance)
    with progress("simulating sizes", None, quiet=quiet or fmt == "json", transient=True) as advance:
        plan = plan_sample_size(effect, diffs=diffs, sd=sd, alpha=alpha, power=power, test=test, sims=sims,
                                permutations=permutations, seed=seed, n_for_mde=n_for_mde, progress=advance)
    if fmt == "json":
        click.echo(json.dumps({"metric": metric if diffs is not None else None, **plan.to_dict()}, indent=2))
        return
    for line in sample_plan_lines(plan, metric if diffs is not None else None):
        click.echo(line)
