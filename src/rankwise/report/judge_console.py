"""Terminal output of ``rankwise judge``, ``rankwise cache`` and ``rankwise agree``."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from rankwise._words import count
from rankwise.report.console import make_console

__all__ = ["judge_summary_lines", "plan_lines", "print_cache_stats", "print_agreement", "judge_run_lines"]


def _money(x: float | None) -> str:
    if x is None:
        return "unknown (give --price-in/--price-out, per 1M tokens)"
    return f"${x:,.4f}" if x < 1 else f"${x:,.2f}"


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))


def judge_summary_lines(s: Any, url: str) -> list[str]:
    """The end-of-run summary of a :class:`~rankwise.relevance.llm_judge.JudgeSummary`."""
    lines = [f"judged {count(s.chunks, 'chunk')} of {count(s.cases, 'case')} with {s.model} at {url} "
             f"(mode {s.mode}, {s.scale}, prompt {s.prompt_version})",
             f"  verdicts: {s.ok} ok ({s.cached} from cache, {s.ok - s.cached} new), {s.failed} failed, "
             f"{s.missing} missing"]
    if s.failures:
        lines.append(f"  not had: {_counts(s.failures)} (not cached: the same command tries them again)")
    if getattr(s, "bad_cache_rows", 0):
        lines.append(f"  cache: {s.bad_cache_rows} unusable rows (a verdict no judge gives) not served: judged "
                     "again")
    calls = f"  calls: {s.requests} requests made, {s.cached} cache hits, {s.retries} retries, {s.repairs} repairs"
    if getattr(s, "fresh_calls", 0):
        calls += f", {s.fresh_calls} fresh calls after a failed repair"
    if s.batch_calls:
        calls += f"; {s.batch_calls} batch calls, {s.batch_fallbacks} fell back to per-chunk calls"
    lines.append(calls)
    if s.http_errors:
        lines.append(f"  errors seen: {_counts(s.http_errors)}")
    cached = getattr(s, "cached_prompt_tokens", 0)
    lines.append(f"  tokens: {s.prompt_tokens:,} in + {s.completion_tokens:,} out = "
                 f"{s.prompt_tokens + s.completion_tokens:,}"
                 + (f" ({cached:,} of the tokens in from the server's prompt cache)" if cached else "")
                 + f"; cost {_money(s.cost)}")
    if s.requests and getattr(s, "response_format", "json_schema") not in ("", "json_schema"):
        lines.append(f"  replies asked as {s.response_format}: the endpoint refused json_schema"
                     + (" and json_object, so replies are read as text (with repair)" if s.response_format == "text"
                        else ""))
    if s.concurrency and s.concurrency_lowest < s.concurrency:
        lines.append(f"  concurrency: lowered from {s.concurrency} to {s.concurrency_lowest} in flight after "
                     f"overload signals (429/503/timeouts); set --concurrency or --rpm to start there")
    rate = f" ({s.requests / s.seconds:,.0f} requests/s)" if s.requests and s.seconds > 0 else ""
    lines.append(f"  time: {s.seconds:.2f} s{rate}; transport {s.transport}")
    if getattr(s, "stopped", None):
        lines.append(f"  stopped early: {s.stopped}")
    if getattr(s, "capped", None):
        lines.append(f"  {s.capped}")
    return lines


def plan_lines(p: Any, url: str) -> list[str]:
    """What ``--dry-run`` prints for a :class:`~rankwise.relevance.llm_judge.JudgePlan`."""
    lines = [f"dry run: {count(p.cases, 'case')}, {count(p.chunks, 'chunk')}; {p.cached} already in the cache, "
             f"{p.unjudgeable} cannot be judged (no text / question / reference)",
             f"would make {p.calls} calls to {p.model} at {url} (prompt {p.prompt_version})"
             + (f", capped by --max-calls {p.max_calls}" if p.max_calls is not None else ""),
             f"estimated tokens: ~{p.prompt_tokens:,} in + ~{p.completion_tokens:,} out "
             f"(4 characters per token; retries and repairs not counted)",
             f"estimated cost: {_money(p.cost)}"]
    return lines


def judge_run_lines(run: Any) -> list[str]:
    """What ``rankwise judge`` prints for a :class:`~rankwise.relevance.judge_run.JudgeRun`: the
    plan (dry run), the Batch-API plan or report, the summary and where the records are."""
    lines: list[str] = []
    if run.plan is not None:
        lines += plan_lines(run.plan, run.url)
        if run.batch_plan is not None:
            lines.append(run.batch_plan.line(run.plan.cost))
        return lines
    if run.batch_report is not None:
        lines += run.batch_report.lines()
    if run.result is not None:
        lines += judge_summary_lines(run.result.summary, run.url)
        lines.append(f"records: {run.records_out} ({count(len(run.records), 'case')}, verdict source "
                     f"'{run.source}')")
    return lines


def print_cache_stats(stats: Any, console: Console | None = None) -> None:
    """One row per (model, mode, scale, prompt version, call style) in the cache file."""
    console = console or make_console()
    console.print(f"cache: {stats.path} ({stats.size_bytes / 1024:,.0f} KiB), {stats.verdicts} verdicts, "
                  f"{stats.prompt_tokens + stats.completion_tokens:,} tokens spent on them")
    if not stats.groups:
        return
    table = Table()
    for col in ("model", "mode", "scale", "prompt version", "style", "verdicts", "relevant", "tokens"):
        table.add_column(col, justify="right" if col in ("verdicts", "relevant", "tokens") else "left")
    for g in stats.groups:
        table.add_row(g["model"], g["mode"], g["scale"], g["prompt_version"], g["style"], str(g["verdicts"]),
                      str(g["relevant"]), f"{g['prompt_tokens'] + g['completion_tokens']:,}")
    console.print(table)


def _f(x: float | None, digits: int = 3) -> str:
    return "undefined" if x is None else f"{x:.{digits}f}"


def _short(text: str | None, width: int = 70) -> str:
    if not text:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def print_agreement(agr: Any, effects: dict[str, dict[str, float]] | None = None, *, show: int = 20,
                    console: Console | None = None) -> None:
    """Accuracy, kappa, confusion matrix, per-type breakdown, verdict effects and disagreements."""
    console = console or make_console()
    a, b = agr.a, agr.b
    ci = f" (95% CI {agr.kappa_ci[0]:.3f} to {agr.kappa_ci[1]:.3f})" if agr.kappa_ci else ""
    console.print(f"[bold]agreement of {b} with {a}[/bold]: {count(agr.n, 'chunk')} in {count(agr.cases, 'case')}")
    console.print(f"  accuracy {_f(agr.accuracy)}, Cohen's kappa {_f(agr.kappa)}{ci}")
    if agr.graded_kappa is not None:
        console.print(f"  graded: quadratic-weighted kappa {_f(agr.graded_kappa)} over {count(agr.graded_n, 'chunk')}")
    console.print(f"  relevant: {a} {_f(agr.a_relevant_rate)}, {b} {_f(agr.b_relevant_rate)}; "
                  f"{b} precision {_f(agr.b_precision)}, recall {_f(agr.b_recall)} (taking {a} as truth)")
    if agr.skipped:
        console.print("  not compared: " + ", ".join(f"{k} {v}" for k, v in agr.skipped.items()))
    conf = Table(title="confusion matrix (chunks)")
    conf.add_column(f"{a} \\ {b}")
    conf.add_column(f"{b} 0", justify="right")
    conf.add_column(f"{b} 1", justify="right")
    conf.add_row(f"{a} 0", str(agr.confusion[0][0]), str(agr.confusion[0][1]))
    conf.add_row(f"{a} 1", str(agr.confusion[1][0]), str(agr.confusion[1][1]))
    console.print(conf)
    types = Table(title="by type label")
    for col in ("type", "chunks", "agree", "accuracy", f"{a} relevant", f"{b} relevant"):
        types.add_column(col, justify="left" if col == "type" else "right", no_wrap=col == "type")
    for t in agr.by_type:
        types.add_row(t.type, str(t.n), str(t.agree), _f(t.accuracy), str(t.a_relevant), str(t.b_relevant))
    console.print(types)
    if effects:
        eff = Table(title=f"score difference due to verdicts (mean over cases, same chunk order: {b} - {a})")
        for col in ("metric", a, b, "verdict effect"):
            eff.add_column(col, justify="left" if col == "metric" else "right")
        for name, row in effects.items():
            eff.add_row(name, _f(row.get(a), 4), _f(row.get(b), 4), f"{row.get('verdict_effect', 0.0):+.4f}")
        console.print(eff)
    if agr.disagreements:
        dis = Table(title=f"disagreements ({len(agr.disagreements)}"
                          + (f", first {show} shown" if len(agr.disagreements) > show else "") + ")")
        for col in ("case", "rank", "type", a, b, f"{a} reason", f"{b} reason", "chunk"):
            dis.add_column(col, overflow="fold", no_wrap=col == "type")
        for d in agr.disagreements[:show]:
            dis.add_row(d.case_id, str(d.rank), d.type or "", str(d.a), str(d.b), _short(d.a_reason, 50),
                        _short(d.b_reason, 50), _short(d.text, 60))
        console.print(dis)
