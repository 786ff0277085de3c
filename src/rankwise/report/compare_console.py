"""Terminal output for comparisons, k-sweeps and the gate (rich tables)."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from rankwise.analysis.compare import ComparisonResult
from rankwise.analysis.gate import GateResult
from rankwise.analysis.ksweep import KSweep
from rankwise.report.console import make_console
from rankwise.report.labels import CORRECTION_LABELS, TEST_LABELS, comparison_caption, fmt_p, p_phrase, signed

__all__ = ["comparison_table", "failure_notes", "comparison_caption", "ksweep_table", "print_comparison", "print_ksweep",
           "print_gate", "emit_comparison", "fmt_p", "TEST_LABELS"]


def comparison_table(result: ComparisonResult, *, digits: int = 4) -> Table:
    """One row per (metric, system): mean, delta, CI, p of each test, corrected p, mark, d, W/T/L.
    """
    from rich.markup import escape

    tests = result.settings["tests"]
    table = Table(title=f"rankwise compare (baseline: {result.baseline})", caption=comparison_caption(result),
                  caption_justify="left", box=box.SIMPLE_HEAD)
    columns = [("metric", "left"), ("system", "left"), ("mean", "right"), ("delta", "right"),
               (f"{result.settings['confidence']:.0%} CI", "right"), ("p", "right")]
    columns += [(f"p {t}", "right") for t in tests[1:]]
    columns += [("p adj", "right"), ("", "left"), ("d", "right"), ("W/T/L", "right")]
    for col, justify in columns:
        table.add_column(col, justify=justify, style="bold" if col == "metric" else None, no_wrap=True)
    blank = [""] * (len(columns) - 4)
    for m_i, metric in enumerate(result.metrics):
        for system in result.systems:
            mean = f"{result.means[system][metric]:.{digits}f}"
            if system == result.baseline:
                table.add_row(escape(metric), escape(system), mean, "baseline", *blank, style="dim")
                continue
            c = result.comparison(system, metric)
            style = ("green" if c.delta > 0 else "red") if c.significant else None
            last = system == result.candidates[-1] and m_i < len(result.metrics) - 1
            table.add_row("", escape(system), mean, signed(c.delta, digits),
                          escape(f"[{signed(c.ci_low, digits)}, {signed(c.ci_high, digits)}]"),
                          *[fmt_p(c.p_values[t]) for t in tests], fmt_p(c.p_adjusted),
                          "*" if c.significant else "",
                          "-" if c.effect_size is None else f"{c.effect_size:+.2f}",
                          f"{c.wins}/{c.ties}/{c.losses}", style=style, end_section=last)
    return table


def ksweep_table(sweep: KSweep, *, digits: int = 4) -> Table:
    """Rows K = 1..N, one column per system; the best K of each system in bold."""
    table = Table(title=f"{sweep.metric} at K = 1..{sweep.ks[-1]}")
    table.add_column("K", justify="right")
    for s in sweep.systems:
        table.add_column(s, justify="right")
    best = {s: sweep.best_k(s) for s in sweep.systems}
    for i, k in enumerate(sweep.ks):
        cells = []
        for s in sweep.systems:
            v = f"{sweep.values[s][i]:.{digits}f}"
            cells.append(f"[bold]{v}[/bold]" if best[s] == k else v)
        table.add_row(str(k), *cells)
    return table


def print_comparison(result: ComparisonResult, console: Console | None = None) -> None:
    console = console or make_console()
    console.print(comparison_table(result))
    if result.summary.get("r_basis"):
        console.print(f"R (recall, nDCG's ideal) from {result.summary['r_basis']} "
                      f"(source {result.summary.get('source')})", style="dim", highlight=False)
    notes = [f"{c.system} {c.metric}: {c.note}" for c in result.comparisons if c.note]
    for note in notes:
        console.print(f"note: {note}", style="dim", highlight=False)
    for line in failure_notes(result.summary):
        console.print(line, highlight=False)


def failure_notes(summary: dict) -> list[str]:
    """Per system: its failure-class counts (non-zero classes) and its headroom sentence
    (docs/failures.md).

    Example:
        >>> failure_notes(
        ...     {
        ...         "failure_classes": {"a": {"k": 5, "counts": {"hit": 2, "not retrieved": 0}}},
        ...         "headroom": {"a": {"sentence": "a reranker ..."}},
        ...     }
        ... )
        ['a: failure classes at K=5: hit 2', 'a: headroom: a reranker ...']
    """
    out = []
    for system, classes in (summary.get("failure_classes") or {}).items():
        # (cases without ground truth are said once, in the unscorable warning; their count stays in
        # the JSON)
        shown = "; ".join(f"{name} {n}" for name, n in classes["counts"].items() if n and name != "no ground truth")
        if shown:
            out.append(f"{system}: failure classes at K={classes['k']}: {shown}")
        room = (summary.get("headroom") or {}).get(system)
        if room and room.get("sentence"):
            out.append(f"{system}: headroom: {room['sentence']}")
    return out


def print_ksweep(sweep: KSweep, console: Console | None = None) -> None:
    console = console or make_console()
    console.print(ksweep_table(sweep))
    if len(sweep.systems) > 1:
        base = sweep.systems[0]
        for other in sweep.systems[1:]:
            ks = sweep.crossings(other, base)
            if ks:
                console.print(f"{other} and {base} swap places at K = {', '.join(map(str, ks))}")


def print_gate(result: GateResult, console: Console | None = None) -> None:
    """The verdict per metric, then the queries that dropped most."""
    from rich.markup import escape

    console = console or make_console()
    s = result.summary
    if s.get("untested"):
        console.print(f"rankwise gate: means compared; fail when a mean drops by more than {result.max_drop}")
        console.print(f"[yellow]no significance test: {escape(s['untested'])}[/yellow]")
    else:
        console.print(f"rankwise gate: {s.get('queries')} paired queries; fail when a mean drops by more than "
                      f"{result.max_drop} and the drop is significant (two-sided "
                      f"{TEST_LABELS.get(result.settings['test'], result.settings['test'])}, alpha {result.alpha}"
                      + (f", {CORRECTION_LABELS[result.settings['correction']]} correction"
                         if result.settings["correction"] != "none" else "") + ")")
    if s.get("verdict_source"):
        how = ("the default; --relevance names another" if s.get("verdict_source_from") == "default"
               else "--relevance")
        console.print(f"verdict source: {escape(s['verdict_source'])} ({how})", highlight=False)
    if s.get("only_in_baseline") or s.get("only_in_candidate"):
        console.print(f"[yellow]query sets differ: {s.get('only_in_baseline', 0)} only in the baseline, "
                      f"{s.get('only_in_candidate', 0)} only in the candidate (left out)[/yellow]")
    for note in s.get("notes", []):
        console.print(f"[yellow]{escape(note)}[/yellow]")
    for c in result.checks:
        p = "not tested" if c.untested else p_phrase(c.p_value)
        if c.below_floor:
            verdict = "[bold red]FAIL[/bold red]"
            why = f"{c.candidate_mean:.4f} is below the floor {c.floor} ({p})"
        elif c.failed and c.untested:
            verdict = "[bold red]FAIL[/bold red]"
            why = f"drop {-c.delta:.4f} > budget {result.max_drop} (not tested: no per-query values)"
        elif c.failed:
            verdict = "[bold red]FAIL[/bold red]"
            why = f"drop {-c.delta:.4f} > budget {result.max_drop} and {p} < alpha {result.alpha}"
        elif c.over_budget:
            verdict = "[yellow]pass[/yellow]"
            why = f"drop {-c.delta:.4f} > budget {result.max_drop} but not significant ({p})"
        else:
            verdict = "[green]pass[/green]"
            why = (f"change {signed(c.delta)} within budget {result.max_drop}" if c.delta < 0
                   else f"change {signed(c.delta)}") + f" ({p})"
        mde = "" if c.mde is None else f"; MDE {c.mde:.4f}"
        console.print(f"{verdict} {c.metric}: {c.baseline_mean:.4f} -> {c.candidate_mean:.4f}; {why}{mde}")
    from rankwise.report.gate_report import mde_sentence

    if mde_sentence(result):
        console.print(escape(mde_sentence(result)), highlight=False)
    for c in result.checks:
        if not c.worst:
            continue
        table = Table(title=f"{c.metric}: queries that dropped most", title_justify="left")
        for col in ("query", "baseline", "candidate", "delta"):
            table.add_column(col, justify="left" if col == "query" else "right")
        for qid, b, cand, d in c.worst:
            table.add_row(qid, f"{b:.4f}", f"{cand:.4f}", signed(d))
        console.print(table)
    console.print("[bold red]GATE FAILED[/bold red]: " + ", ".join(c.metric for c in result.failed)
                  if result.failed else "[bold green]GATE PASSED[/bold green]")


def emit_comparison(result: ComparisonResult, *, fmt: str = "table", sweeps: list[KSweep] | None = None,
                    per_query: bool = False, html: str | None = None, plot: str | None = None,
                    html_options: dict | None = None, console: Console | None = None) -> None:
    """Print a comparison in ``fmt`` (table, json, csv, markdown) and write the HTML report / PNG
    plot.

    Machine-readable formats go to stdout alone; notes about written files go to stderr.
    """
    import click

    sweeps = sweeps or []
    if fmt == "json":
        from rankwise.report.compare_text import comparison_json

        click.echo(comparison_json(result, per_query=per_query, sweeps=sweeps))
    elif fmt == "csv":
        from rankwise.report.compare_text import comparison_csv, ksweep_csv

        click.echo(comparison_csv(result), nl=False)
        for s in sweeps:
            click.echo("")
            click.echo(ksweep_csv(s), nl=False)
    elif fmt == "markdown":
        from rankwise.report.markdown import comparison_markdown, ksweep_markdown

        click.echo(comparison_markdown(result))
        for s in sweeps:
            click.echo(ksweep_markdown(s))
    else:
        console = console or make_console()
        print_comparison(result, console)
        for s in sweeps:
            print_ksweep(s, console)
    if html:
        from rankwise.report.html import write_html_report

        path = write_html_report(html, result, sweeps=sweeps, **(html_options or {}))
        click.echo(f"rankwise: wrote {path}", err=True)
    if plot:
        from rankwise.report.plots import plot_report

        path = plot_report(plot, comparison=result, sweeps=sweeps)
        click.echo(f"rankwise: wrote {path}", err=True)
