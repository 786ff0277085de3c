"""``rankwise synth``, ``pool``, ``import-testset`` and ``export-testset``."""

from __future__ import annotations

import sys

import click

from rankwise.cli._base import _interrupt_code, _llm_options, main


# ------------------------------------------------------------------------------------- synth / pool
@main.command("synth")
@click.argument("corpus", type=click.Path())
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False), help="Test set to write (JSONL, appended).")
@click.option("-n", "n", type=int, default=50, show_default=True, help="Samples to plan (one call each).")
@click.option("--styles", default=None,
              help="Question styles and shares: factual, paraphrase, multi, conversational, multi-hop, "
                   "e.g. factual=0.5,paraphrase=0.3,multi=0.1,conversational=0.1.  [default: factual=1]")
@click.option("--style", "style", default=None,
              type=click.Choice(["factual", "paraphrase", "multi", "conversational", "multi-hop"]),
              help="One style for every sample (--styles STYLE=1); multi-hop: two-step questions over two "
                   "documents, each reference span tagged with its hop (0, 1).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the passage and style plan.")
@click.option("--passage-chars", type=int, default=1000, show_default=True, help="Characters per passage.")
@click.option("--critic", is_flag=True, help="A second call per sample rating answerability from the quotes.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--force", is_flag=True, help="Append to an existing --out file that rankwise did not write.")
@_llm_options(model="Generator", prompt="synth prompts (testsets/prompts/synth.toml)",
              dry_run="Print calls, tokens and money per phase; call nothing.")
def synth_command(corpus, out, n, styles, style, seed, passage_chars, critic, llm, dry_run, as_json, quiet, force):
    """Generate a test set from CORPUS (folder of .txt/.md, JSONL of documents, BEIR folder):
    questions whose reference contexts are verified character spans. Rerun the same command to
    resume."""
    import json

    from rankwise.data.corpus import load_corpus
    from rankwise.errors import InputError
    from rankwise.report.synth_console import estimate_lines, summary_lines
    from rankwise.testsets.synth_plan import parse_styles
    from rankwise.testsets.synth_prompts import load_synth_prompts
    from rankwise.testsets.synth_run import SynthSettings, estimate_synth, synth

    if style is not None and styles is not None:
        raise InputError("give --style or --styles, not both", field="--style")
    shares = {style: 1.0} if style is not None else parse_styles(styles or "factual=1")
    settings = SynthSettings(n=n, styles=shares, seed=seed, passage_chars=passage_chars, critic=critic)
    docs = load_corpus(corpus)
    if not dry_run and not out:
        raise InputError("give --out TESTSET.jsonl (where the samples go), or --dry-run", field="out")
    cfg = llm.config()
    if dry_run:
        est = estimate_synth(docs, settings, config=cfg, prompts=load_synth_prompts(llm.prompt_file), out=out)
        if as_json:
            click.echo(json.dumps({"samples": est.samples, "already_done": est.already_done, "calls": est.calls,
                                   "phases": est.phases}))
        else:
            for line in estimate_lines(est, cfg.endpoint.url, cfg.endpoint.model):
                click.echo(line)
        return
    from rankwise._outputs import check_outputs
    from rankwise.testsets.synth_resume import rejected_path

    inputs = [corpus, llm.config_path, llm.prompt_file]
    check_outputs({"--out": out, "--out (its rejected samples)": rejected_path(out)}, inputs, force=force)
    check_outputs({"--cache": llm.cache_path}, [*inputs, out, rejected_path(out)], force=True)
    try:
        summary = synth(docs, out=out, config=cfg, settings=settings, max_cost=llm.max_cost, prompt=llm.prompt_file,
                        quiet=quiet)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: every sample decided is in OUT, every reply in the cache
        click.echo(f"rankwise: interrupted; the samples decided are in {out} and every reply had is in the cache: "
                   f"rerun the same command to resume", err=True)
        sys.exit(_interrupt_code())
    if as_json:
        click.echo(json.dumps(summary.to_dict()))
    else:
        for line in summary_lines(summary):
            click.echo(line)


@main.command("pool")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.argument("runs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", "-o", "out", required=True, type=click.Path(dir_okay=False),
              help="The test set with the pooled labels added.")
@click.option("-k", "k", type=int, default=10, show_default=True, help="Top k of each system pooled.")
@click.option("--names", default=None, help="System names, comma-separated (default: file stems).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--force", is_flag=True, help="Overwrite an existing --out file that rankwise did not write.")
@_llm_options(model="Judge", prompt="prompt templates",
              dry_run="Count the pool and estimate the judge's calls and cost; call nothing.")
def pool_command(testset, runs, out, k, names, llm, dry_run, as_json, quiet, force):
    """Complete TESTSET's labels: judge the unlabelled chunks in the top k of each RUN (RAG test
    sets with retrieved spans, from `rankwise run --rag-out`) with the LLM judge and add the
    relevant ones."""
    import json

    from rankwise._outputs import check_outputs
    from rankwise.errors import InputError
    from rankwise.report.pool_console import pool_lines
    from rankwise.testsets.pool_run import pool

    inputs = [testset, *runs, llm.config_path, llm.prompt_file]
    check_outputs({"--out": None if dry_run else out}, inputs, force=force)
    check_outputs({"--cache": llm.cache_path}, [*inputs, out], force=True)
    labels = [n.strip() for n in names.split(",")] if names else None
    if labels is not None and len(labels) != len(runs):
        raise InputError(f"--names gives {len(labels)} names for {len(runs)} runs", field="names")
    from rankwise.relevance.llm_judge import JudgeInterrupted

    try:
        cfg = llm.config(mode="reference", prompt=llm.prompt_file)
        summary = pool(testset, list(runs), out=out, k=k, config=cfg, max_cost=llm.max_cost, names=labels, quiet=quiet,
                       dry_run=dry_run)
    except JudgeInterrupted as exc:
        click.echo(f"rankwise: interrupted; the {exc.result.summary.ok} verdicts had are in {out} and the cache: "
                   f"rerun the same command to resume", err=True)
        sys.exit(_interrupt_code())
    if as_json:
        click.echo(json.dumps(summary.to_dict()))
    else:
        for line in pool_lines(summary):
            click.echo(line)


@main.command("import-testset")
@click.argument("source", type=click.Path())
@click.option("--corpus", "corpus_path", required=True, type=click.Path(), help="The corpus the contexts come from.")
@click.option("--from", "fmt", type=click.Choice(["auto", "ragas", "deepeval", "llamaindex", "beir"]),
              default="auto", show_default=True, help="The generator that wrote SOURCE.")
@click.option("--out", "-o", "out", required=True, type=click.Path(dir_okay=False), help="Test set to write (JSONL).")
@click.option("--threshold", type=float, default=90.0, show_default=True,
              help="Fuzzy match: rapidfuzz partial-ratio a context needs (0-100); 101 = no fuzzy match.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--force", is_flag=True, help="Overwrite an existing --out file that rankwise did not write.")
def import_testset_command(source, corpus_path, fmt, out, threshold, as_json, force):
    """Read a test set generated by Ragas, DeepEval, LlamaIndex or a BEIR-style generator and map
    each text context to a span of the corpus (exact, normalised, fuzzy); unmapped contexts are kept
    and counted."""
    import json

    from rankwise._outputs import check_outputs
    from rankwise.data.corpus import load_corpus
    from rankwise.report.import_console import import_lines
    from rankwise.testsets.importers import import_testset

    check_outputs({"--out": out}, [source, corpus_path], force=force)
    summary = import_testset(source, load_corpus(corpus_path), out=out, fmt=fmt,
                             threshold=None if threshold > 100 else threshold)
    if as_json:
        click.echo(json.dumps(summary.to_dict()))
    else:
        for line in import_lines(summary):
            click.echo(line)


@main.command("export-testset")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("--to", "to", required=True, type=click.Choice(["ragas", "deepeval"]), help="The target's shape.")
@click.option("--out", "-o", "out", required=True, type=click.Path(dir_okay=False),
              help="Ragas: JSONL of samples; DeepEval: JSON list of goldens.")
@click.option("--force", is_flag=True, help="Overwrite an existing --out file that rankwise did not write.")
def export_testset_command(testset, to, out, force):
    """Write a rankwise test set as Ragas samples or DeepEval goldens, span ids filled in."""
    from rankwise._outputs import check_outputs
    from rankwise.testsets.importers import export_testset

    check_outputs({"--out": out}, [testset], force=force)
    n = export_testset(testset, to=to, out=out)
    click.echo(f"{n} samples written to {out} ({to})")
