"""``rankwise judge``: the LLM judge over any OpenAI-compatible endpoint."""

from __future__ import annotations

import sys

import click

from rankwise.cli._base import _interrupt_code, _llm_options, main


# ------------------------------------------------------------------------------ judge / cache /
# agree
@main.command("judge")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("--mode", type=click.Choice(["reference", "response", "question"]), default=None,
              help="What the chunk is judged against (default: reference).")
@click.option("--graded", is_flag=True, default=None, help="Grade 0-3 instead of a binary verdict.")
@click.option("--relevant-from", type=int, default=None,
              help="With --graded: the grade from which a chunk counts as relevant (default 2).")
@click.option("--batch", is_flag=True, default=None, help="All chunks of a question in one call (fewer calls).")
@click.option("--batch-size", type=int, default=None, help="With --batch: chunks per call at most (default 20).")
@click.option("--source", default="llm", show_default=True, help="Verdict source name written in the records.")
@click.option("--records", "records_out", type=click.Path(),
              help="Write per-case records (JSONL) with the verdicts and reasons here.")
@click.option("--strict", is_flag=True, help="Exit 1 when any verdict failed or is missing.")
@click.option("--force", is_flag=True, help="Overwrite existing output files that rankwise did not write.")
@click.option("--batch-api", is_flag=True, help="Send the calls through the provider's Batch API (/v1/batches, "
              "half price, resumable: a rerun polls the same batches); what fails there is retried online.")
@click.option("--batch-poll", type=float, default=None, metavar="SECONDS", help="With --batch-api: seconds "
              "between polls (default 30; or $RANKWISE_BATCH_POLL, or batch_poll in [llm]).")
@click.option("--batch-discount", type=float, default=None, metavar="FRACTION", help="With --batch-api: the batch "
              "price as a fraction of the online price (default 0.5; or $RANKWISE_BATCH_DISCOUNT, or "
              "batch_discount in [llm]).")
@click.option("--batch-max-requests", type=int, default=None, metavar="N", help="With --batch-api: requests per "
              "batch at most; more are split into several batches (default 50000, OpenAI's limit).")
@click.option("--batch-max-bytes", type=int, default=None, metavar="BYTES", help="With --batch-api: bytes per "
              "batch input file at most (default 200000000, OpenAI's 200 MB).")
@click.option("--shard", default=None, metavar="I/N", help="Judge only shard I of N (by case id): one worker "
              "of N, each with its own --cache; merge with `rankwise cache merge`.")
@_llm_options(model="Judge", prompt="prompt templates",
              dry_run="Print the calls and estimated tokens/cost, call nothing.")
def judge_command(testset, llm, mode, graded, relevant_from, batch, batch_size, dry_run, source, records_out,
                  strict, quiet, force, batch_api, batch_poll, batch_discount, batch_max_requests, batch_max_bytes,
                  shard):
    """Judge every retrieved chunk of TESTSET with an LLM (any OpenAI-compatible endpoint): a
    verdict and a reason per chunk, cached (reruns are free), resumable after a kill."""
    from rankwise.errors import InputError, JudgeInterrupted
    from rankwise.relevance.judge_run import judge_testset
    from rankwise.relevance.llm_judge import JudgeStopped
    from rankwise.report.judge_console import judge_run_lines

    batch_flags = {"--batch-poll": batch_poll, "--batch-discount": batch_discount,
                   "--batch-max-requests": batch_max_requests, "--batch-max-bytes": batch_max_bytes}
    if not batch_api and any(v is not None for v in batch_flags.values()):
        raise InputError(f"{next(k for k, v in batch_flags.items() if v is not None)} needs --batch-api",
                         field="batch-api")
    cfg = llm.config(mode=mode, graded=graded, batch=batch, batch_size=batch_size, relevant_from=relevant_from,
                     prompt=llm.prompt_file)
    batch_settings = None
    if batch_api:
        from rankwise.llm.batch_api import resolve_batch_settings

        batch_settings = resolve_batch_settings(config=llm.config_path, poll_seconds=batch_poll, discount=batch_discount,
                                                max_requests=batch_max_requests, max_bytes=batch_max_bytes)
    try:
        run = judge_testset(testset, cfg, records_out=records_out, source=source, shard=shard,
                            batch_api=batch_settings, max_cost=llm.max_cost, dry_run=dry_run, force=force,
                            inputs=[llm.config_path, llm.prompt_file], quiet=quiet,
                            on_status=lambda m: click.echo(m, err=True))
    except JudgeInterrupted as exc:
        for line in judge_run_lines(exc.result):
            click.echo(line)
        click.echo(f"rankwise: {exc.message}", err=True)
        sys.exit(_interrupt_code())
    except JudgeStopped as exc:
        if getattr(exc, "run", None) is not None:
            for line in judge_run_lines(exc.run):
                click.echo(line)
        raise
    for line in judge_run_lines(run):
        click.echo(line)
    if strict and run.result is not None and not run.result.summary.complete:
        sys.exit(1)
