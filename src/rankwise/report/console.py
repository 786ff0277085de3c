"""Terminal tables with rich."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from rankwise.metrics.evaluate import EvalResult

__all__ = ["eval_table", "summary_line", "print_eval"]


def summary_line(summary: dict) -> str:
    """One line: evaluated / missing from run / ignored queries (and undefined metric values)."""
    parts = [f"{summary.get('evaluated', 0)} queries evaluated"]
    if "missing_from_run" in summary:
        how = "scored 0" if summary.get("missing") == "zero" else "skipped"
        parts.append(f"{summary['missing_from_run']} missing from the run ({how})")
    if "ignored_not_in_qrels" in summary:
        parts.append(f"{summary['ignored_not_in_qrels']} in the run but not in the qrels (ignored)")
    for name, n in (summary.get("undefined") or {}).items():
        parts.append(f"{name} undefined for {n} (left out of its mean)")
    return "; ".join(parts)


def eval_table(result: EvalResult, *, per_query: bool = False, digits: int = 4) -> Table:
    """Means (and optionally per-query rows) as a rich Table."""
    table = Table(title=f"rankwise: {result.run_name}")
    table.add_column("query" if per_query else "metric", style="bold")
    if per_query:
        for name in result.names:
            table.add_column(name, justify="right")
        for qid in result.per_query:
            row = result.per_query[qid]
            table.add_row(qid, *["-" if row[n] is None else f"{row[n]:.{digits}f}" for n in result.names])
        table.add_row("all", *[_fmt(result, n, digits) for n in result.names], style="bold")
    else:
        table.add_column("value", justify="right")
        for name in result.names:
            table.add_row(name, _fmt(result, name, digits))
    return table


def _fmt(result: EvalResult, name: str, digits: int) -> str:
    measure = next(m for m in result.measures if m.name == name)
    value = result.mean[name]
    return str(int(value)) if measure.metric.aggregate == "sum" else f"{value:.{digits}f}"


def print_eval(result: EvalResult, *, per_query: bool = False, console: Console | None = None) -> None:
    console = console or Console()
    console.print(eval_table(result, per_query=per_query))
    console.print(summary_line(result.summary), style="dim")
