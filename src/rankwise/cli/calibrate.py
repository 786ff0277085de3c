"""``rankwise calibrate``, ``answer``, ``utility`` and ``position-curve``: the generator's side."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, fields

import click

from rankwise._words import count
from rankwise.cli._base import LLMOptions, _check_generator_outputs, _interrupt_code, _llm_options, main
from rankwise.errors import RankwiseError


@main.command("calibrate")
@click.argument("records", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--relevance", "--source", "source", default="llm", show_default=True,
              help="Verdict source of the metrics (llm, human, utility, containment, span, ids ...).")
@click.option("--answer-scores", type=click.Path(dir_okay=False),
              help="CSV/JSONL of query_id, answer_score (overrides the records' answer_score).")
@click.option("--score-answers", "method", type=click.Choice(["f1", "em"]), default=None,
              help="Score each record's response against its reference (token F1 or exact match) where it "
                   "has no answer score.")
@click.option("--name", "names", multiple=True, help="System name per RECORDS file (default: file stems).")
@click.option("--curve", type=click.Path(dir_okay=False), help="Position-curve JSON: adds wcp(decay=curve).")
@click.option("--min-cases", type=int, default=30, show_default=True,
              help="Fewest cases with answer scores for a recommendation.")
@click.option("--test-share", type=float, default=0.5, show_default=True, help="Share of cases held out.")
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Write a PNG of the ranking here.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--force", is_flag=True, help="Overwrite an existing --plot file that rankwise did not write.")
def calibrate_command(records, source, answer_scores, method, names, curve, min_cases, test_share, seed, plot_path,
                      fmt, force):
    """Which metric x K x discount predicts the generator's answer scores: ranked on a training
    split, reported on held-out cases with bootstrap intervals (and system-level agreement for
    several systems)."""
    import json

    from rankwise._outputs import check_outputs, check_plot_path
    from rankwise.analysis.answers import read_answer_scores, score_answers
    from rankwise.analysis.calibrate import calibrate
    from rankwise.analysis.compare import load_record_sets

    check_outputs({"--plot": plot_path}, [*records, answer_scores, curve], force=force)
    check_plot_path(plot_path)
    sets = load_record_sets(list(records), list(names) or None, source=source)
    given = read_answer_scores(answer_scores) if answer_scores else None
    for recs in sets.values():
        score_answers(recs, method or "f1", scores=given, source="labels") if (method or given) else None
    result = calibrate(sets if len(sets) > 1 else next(iter(sets.values())), source, answer_scores=given,
                       curve=curve, min_cases=min_cases, test_share=test_share, seed=seed)
    if plot_path:
        from rankwise.report.calibration import plot_calibration

        plot_calibration(result, plot_path)
    if fmt == "json":
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        from rankwise.report.calibration import print_calibration

        print_calibration(result)


def _generator_options(dry_run: str):
    """`answer`, `position-curve` and `utility`: the shared LLM options (the generator's model,
    given explicitly) and how the answers are scored."""
    llm = _llm_options(model="Generator", model_required=True, prompt="answer prompt (prompts/answer.toml)",
                       dry_run=dry_run)
    scoring = [
        click.option("--score", "score", type=click.Choice(["f1", "em", "llm"]), default=None,
                     help="Score answers against the reference: token F1, exact match, or an LLM "
                          "correctness verdict."),
        click.option("--judge-model", default=None, help="With --score llm: the model that checks answers "
                                                         "(default: --model)."),
        click.option("--graded-score", is_flag=True, help="With --score llm: grade 0-3 (score = grade/3)."),
        click.option("--force", is_flag=True, help="Overwrite existing output files that rankwise did not write."),
        click.option("--max-tokens", type=click.IntRange(min=1), default=None,
                     help="Cap each answer at this many output tokens (default 256); an answer cut there is "
                          "kept as it is."),
    ]

    def decorate(func):
        @functools.wraps(func)
        def packed(*args, **kwargs):  # how answers are scored, popped from click's keywords, as one object
            return func(*args, scoring=AnswerScoring(**{n: kwargs.pop(n) for n in _SCORING if n in kwargs}),
                        **kwargs)

        command = packed
        for option in reversed(scoring):
            command = option(command)
        return llm(command)

    return decorate


@dataclass(frozen=True)
class AnswerScoring:
    """How `answer`, `position-curve` and `utility` score answers and cap them (their shared
    options, typed)."""

    score: str | None = None
    judge_model: str | None = None
    graded_score: bool = False
    force: bool = False
    max_tokens: int | None = None


_SCORING = tuple(f.name for f in fields(AnswerScoring))


def _make_generators(llm: LLMOptions, scoring: AnswerScoring, *, need_checker: bool):
    """(answer Generator, checker Generator or None, endpoint url) from the shared options."""
    from rankwise.llm.client import Endpoint
    from rankwise.llm.generate import Generator, load_gen_prompt

    cfg = llm.config()
    gen = Generator.from_config(cfg, load_gen_prompt("answer", path=llm.prompt_file), max_cost=llm.max_cost,
                                max_tokens=scoring.max_tokens)
    checker = None
    if need_checker:
        ep = cfg.endpoint
        judge_ep = Endpoint(scoring.judge_model or ep.model, ep.base_url, ep.api_key)
        checker = Generator.from_config(cfg, load_gen_prompt("correctness", graded=scoring.graded_score),
                                        endpoint=judge_ep, cache=gen.cache, max_cost=llm.max_cost)
    return gen, checker, cfg.endpoint.url


def _plan_lines(plan, url: str, what: str) -> list[str]:
    cost = "cost unknown (give --price-in/--price-out)" if plan.cost is None else f"estimated cost ${plan.cost:.4f}"
    return [f"dry run: {what}", f"{plan.requests} requests to {plan.model} at {url} ({plan.prompt_version}): "
            f"{plan.cached} in the cache, {plan.calls} calls to make",
            f"estimated {plan.prompt_tokens:,} prompt + {plan.completion_tokens:,} completion tokens, {cost}"]


def _run_generator(call, records_to_save=None, save=None):
    """Run ``call()``; on Ctrl-C or a lost endpoint save what was had (``save``) and exit with one
    line."""
    from rankwise.llm.generate import GenerationInterrupted, GenerationStopped

    try:
        return call()
    except GenerationInterrupted as exc:
        if save is not None:
            save()
        click.echo(f"rankwise: interrupted; the {exc.result.summary.ok} replies had are in the cache: rerun the "
                   f"same command to resume", err=True)
        sys.exit(_interrupt_code())
    except GenerationStopped as exc:
        if save is not None and exc.result.summary.ok:
            save()
        raise RankwiseError(f"{exc}; the {exc.result.summary.ok} replies had are in the cache: rerun the same "
                            f"command to resume") from None


def _score_records(records, method, checker, quiet, echo=click.echo) -> None:
    from rankwise.progress import progress
    from rankwise.workflows.answer_run import apply_scores, method_source, score_responses

    items = [(r.id, r.question, r.reference, r.response) for r in records]
    with progress("checking answers", len(items), quiet=quiet or method != "llm", transient=True) as advance:
        scores, summary = _run_generator(lambda: score_responses(items, method, checker=checker, progress=advance))
    counts = apply_scores(records, scores, method_source(method, checker))
    if summary is not None:
        for line in summary.lines(checker.endpoint.url):
            echo(line)
    scored = [r.answer_score for r in records if r.answer_score is not None]
    mean = sum(scored) / len(scored) if scored else float("nan")
    echo(f"answer scores ({method_source(method, checker)}): {counts['scored']} cases, mean {mean:.3f}; "
         f"{counts['unscored']} without a score (no reference, or no answer)")


@main.command("answer")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("-k", "k", type=click.IntRange(min=1), default=5, show_default=True,
              help="Chunks fed to the generator (top K).")
@click.option("--max-context-tokens", type=click.IntRange(min=1), default=None,
              help="Token budget of the fed chunks (4 characters a token); the chunk crossing it is cut.")
@click.option("--records", "records_out", type=click.Path(dir_okay=False),
              help="Write per-case records with the answers (and scores) here.")
@_generator_options(dry_run="Print the calls and estimated tokens/cost, call nothing.")
def answer_command(testset, k, max_context_tokens, records_out, dry_run, quiet, llm, scoring):
    """Generate an answer for every case of TESTSET from its top-K retrieved chunks, in rank order,
    with any OpenAI-compatible endpoint (cached, resumable); optionally score the answers (--score).
    """
    from rankwise._signals import signals_held
    from rankwise.data.records import write_records
    from rankwise.errors import InputError
    from rankwise.progress import progress
    from rankwise.relevance.llm_judge import load_for_judging
    from rankwise.workflows.answer_run import answer_records

    if not dry_run and not records_out:
        raise InputError("give --records OUT.jsonl (where the answers go), or --dry-run", field="records")
    _check_generator_outputs({"--records": records_out}, testset, llm, scoring.force)
    records = load_for_judging(testset)
    gen, checker, url = _make_generators(llm, scoring, need_checker=scoring.score == "llm")
    try:
        if dry_run:
            plan = answer_records(records, gen, k, max_context_tokens=max_context_tokens, plan_only=True)
            for line in _plan_lines(plan, url, f"answer {count(len(records), 'case')} from their top {k} chunks"):
                click.echo(line)
            return

        def save() -> None:
            with signals_held():
                write_records(records, records_out)

        with progress("answering", len(records), quiet=quiet, transient=True, eta=True) as advance:
            result = _run_generator(lambda: answer_records(records, gen, k, max_context_tokens=max_context_tokens,
                                                           progress=advance), save=save)
        for line in result.summary.lines(url):
            click.echo(line)
        cut = sum(1 for r in records if (r.extra.get("answer") or {}).get("truncated"))
        if cut:
            click.echo(f"{count(cut, 'case')} had their context cut to --max-context-tokens {max_context_tokens}")
        if scoring.score:
            _score_records(records, scoring.score, checker, quiet)
        save()
        click.echo(f"records: {records_out} ({count(len(records), 'case')}; response, extra answer.fed_ranks)")
    finally:
        gen.close()


@main.command("position-curve")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("-k", "k", type=click.IntRange(min=2), default=10, show_default=True,
              help="Chunks per context (positions 1..K).")
@click.option("--relevance", "--source", "source", default="containment", show_default=True,
              help="Verdict source that names the supporting chunk (else the reference passage text is used).")
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="Filler draws per case (each planted at every position).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the filler draws.")
@click.option("--min-evidence-chars", type=click.IntRange(min=0), default=None,
              help="Containment/fuzzy: letters/digits a chunk lying inside a reference passage must hold to "
                   "count as the supporting chunk (0: any fragment counts; default 20). Given, it also re-judges "
                   "containment/fuzzy verdicts stored in the records.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help="Write the curve JSON here (for wcp(decay=curve,curve=FILE)).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Write a PNG of the curve here.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_generator_options(dry_run="Print the number of calls (cases x K x repeats) and the cost.")
def position_curve_command(testset, k, source, repeats, seed, min_evidence_chars, out_path, plot_path, dry_run, fmt,
                           quiet, llm, scoring):
    """How the generator uses position: plant each case's supporting chunk at every position 1..K
    among non-relevant chunks, ask the generator, score the answers (--score, default f1), and fit
    the families (flat, log, linear, RBP, power, cliff, U-shape) by maximum likelihood, ranked by
    AIC; when even the best fails the goodness-of-fit test, no family fits and --out writes no
    curve."""
    import json

    from rankwise.analysis.position import write_position_curve
    from rankwise.errors import InputError
    from rankwise.progress import progress
    from rankwise.relevance import SOURCES, TEXT_SOURCES, assign_verdicts
    from rankwise.relevance.llm_judge import load_for_judging
    from rankwise.relevance.text import rejudges_stored
    from rankwise.workflows.position_run import plant_contexts, position_requests, run_position_curve

    _check_generator_outputs({"--out": out_path, "--plot": plot_path}, testset, llm, scoring.force)
    method = scoring.score or "f1"
    records = load_for_judging(testset)
    if source in TEXT_SOURCES or source == "ids":
        stored = any(source in r.sources() for r in records) and not rejudges_stored(source, min_evidence_chars)
        if any(r.chunks for r in records) and not stored:
            assign_verdicts(records, source, min_evidence_chars=min_evidence_chars)
    elif source not in SOURCES and not any(source in r.sources() for r in records):
        raise InputError(f"no '{source}' verdicts in {testset}", source=testset, field="relevance")
    plan = plant_contexts(records, k, source=source, repeats=repeats, seed=seed)
    if not plan.contexts:
        why = ", ".join(f"{n} {reason}" for reason, n in plan.skipped.items()) or "no cases"
        raise InputError(f"no case can be planted ({why})", source=testset)
    gen, checker, url = _make_generators(llm, scoring, need_checker=method == "llm")
    try:
        header = plan.describe()
        if dry_run:
            for line in _plan_lines(gen.plan(position_requests(plan, gen.prompt)), url, header):
                click.echo(line)
            if method == "llm":
                click.echo(f"plus up to {len(plan.contexts)} correctness checks with {checker.endpoint.model}")
            return
        with progress("answering", len(plan.contexts), quiet=quiet, transient=True, eta=True) as advance, \
                progress("checking answers", len(plan.contexts), quiet=quiet or method != "llm",
                         transient=True) as check_advance:
            run = _run_generator(lambda: run_position_curve(plan, gen, score=method, checker=checker,
                                                            progress=advance, check_progress=check_advance))
        if out_path and run.fit.fitted:
            write_position_curve(run.fit, out_path)
        if plot_path:
            from rankwise.report.calibration import plot_position_fit

            plot_position_fit(run.fit, plot_path)
        if fmt == "json":
            click.echo(json.dumps(run.to_json(), indent=2))
        else:
            from rankwise.report.calibration import print_position_fit

            click.echo(header, err=True)
            for summary in (run.answers, run.checks):
                for line in summary.lines(url) if summary is not None else ():
                    click.echo(line, err=True)
            if run.unscored:
                click.echo(f"{run.unscored} contexts have no answer score (failed or missing answers) and are "
                           f"left out", err=True)
            print_position_fit(run.fit)
        for path, what in ((out_path if run.fit.fitted else None, "curve"), (plot_path, "plot")):
            if path:
                click.echo(f"{what}: {path}", err=True)
        if out_path and not run.fit.fitted:
            click.echo(f"no curve written to {out_path}: {run.fit.sentence()}", err=True)
    finally:
        gen.close()


@main.command("utility")
@click.argument("testset", type=click.Path(dir_okay=False))
@click.option("--records", "records_out", type=click.Path(dir_okay=False),
              help="Write per-case records with chunk.verdicts['utility'] here.")
@click.option("--threshold", type=float, default=0.5, show_default=True,
              help="A chunk is useful when its answer scores this much or more.")
@click.option("--graded", is_flag=True, help="Grade 0-3 = round(3 x score) instead of a binary verdict.")
@click.option("--relevant-from", type=int, default=2, show_default=True,
              help="With --graded: the grade from which a chunk counts as relevant.")
@click.option("--source", "source_name", default="utility", show_default=True, help="Verdict source name.")
@_generator_options(dry_run="Print the calls (one per chunk) and the cost, call nothing.")
def utility_command(testset, records_out, threshold, graded, relevant_from, source_name, dry_run, quiet, llm,
                    scoring):
    """Utility verdicts (eRAG): the generator answers each case from each retrieved chunk alone; the
    answer's score against the reference (--score, default f1) is that chunk's verdict."""
    from rankwise.data.records import write_records
    from rankwise.errors import InputError
    from rankwise.progress import progress
    from rankwise.relevance.llm_judge import load_for_judging
    from rankwise.relevance.utility import utility_requests
    from rankwise.workflows.answer_run import utility_verdicts

    if not dry_run and not records_out:
        raise InputError("give --records OUT.jsonl (where the verdicts go), or --dry-run", field="records")
    _check_generator_outputs({"--records": records_out}, testset, llm, scoring.force)
    method = scoring.score or "f1"
    records = load_for_judging(testset)
    if not any(r.reference for r in records):
        raise InputError("utility verdicts score answers against the reference answer and no case has one",
                         source=testset, field="reference")
    gen, checker, url = _make_generators(llm, scoring, need_checker=method == "llm")
    try:
        if dry_run:
            requests = utility_requests(records, gen.prompt)
            for line in _plan_lines(gen.plan(requests), url, f"one answer per chunk: {count(len(requests), 'chunk')}"):
                click.echo(line)
            return
        total = sum(1 for r in records for c in r.chunks if c.text and r.question and r.reference)

        def save() -> None:
            if any(source_name in c.verdicts for r in records for c in r.chunks):
                write_records(records, records_out)
                click.echo(f"records: {records_out} (verdict source '{source_name}', partial)", err=True)

        with progress("answering per chunk", total, quiet=quiet, transient=True, eta=True) as advance:
            run = _run_generator(lambda: utility_verdicts(records, gen, score=method, checker=checker,
                                                          threshold=threshold, graded=graded,
                                                          relevant_from=relevant_from, source=source_name,
                                                          progress=advance), save=save)
        write_records(records, records_out)
        for summary in (run.answers, run.checks):
            for line in summary.lines(url) if summary is not None else ():
                click.echo(line)
        c = run.counts
        click.echo(f"utility verdicts: {c['verdicts']} chunks, {c['useful']} useful, {c['failed']} failed; "
                   f"records: {records_out} (verdict source '{source_name}')")
    finally:
        gen.close()
