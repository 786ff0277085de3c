"""Terminal tables with rich, and the one console every table printer uses.

A table is never cut short: piped output (not a terminal) is printed at full width, and on a
terminal a cell too wide for the screen folds onto the next line instead of ending in "…".
``set_width`` (the CLI's ``--width``) fixes the width of everything printed.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rankwise._words import count
from rankwise.metrics.engine import EvalResult

__all__ = ["eval_table", "summary_line", "print_eval", "make_console", "set_width", "metrics_table", "metric_card"]

#: the width used when stdout is not a terminal and no width is set: wide enough for any table
PIPE_WIDTH = 100_000
_width: int | None = None


def set_width(width: int | None) -> None:
    """Print every later table at ``width`` columns (None: the terminal's width; unlimited when
    piped).

    Example:
        >>> set_width(120); make_console().width
        120
        >>> set_width(None)
    """
    global _width
    if width is not None and width < 20:
        from rankwise.errors import InputError

        raise InputError(f"width must be at least 20 columns, got {width}", field="width")
    _width = width


class _WholeConsole(Console):
    """A console whose tables fold long cells instead of cutting them with an ellipsis."""

    def print(self, *objects: Any, **kwargs: Any) -> None:  # noqa: A003 - rich's name
        for obj in objects:
            if isinstance(obj, Table):
                for column in obj.columns:
                    column.overflow = "fold"
        super().print(*objects, **kwargs)


def make_console(*, width: int | None = None, stderr: bool = False) -> Console:
    """The console of every table printer: ``width`` (else :func:`set_width`'s, else
    $RANKWISE_WIDTH), the terminal's width on a terminal, and :data:`PIPE_WIDTH` when output is
    piped or redirected.

    Example:
        >>> import io
        >>> make_console(width=40).width
        40
    """
    env = os.environ.get("RANKWISE_WIDTH", "").strip()
    width = width or _width or (int(env) if env.isdigit() and int(env) >= 20 else None)
    if width:
        return _WholeConsole(width=width, stderr=stderr)
    console = _WholeConsole(stderr=stderr)
    if console.is_terminal or console.is_jupyter:
        return console
    return _WholeConsole(width=PIPE_WIDTH, stderr=stderr)


def metrics_table() -> Table:
    """``rankwise metrics``: every registered metric, its cutoff, parameters, aliases and
    definition. Long cells wrap at words within their column, so the table stays readable through a
    pipe (no 600-column lines) and nothing is cut."""
    from rankwise.metrics.registry import METRICS

    table = Table(title="rankwise metrics")
    for col, widest in (("name", 26), ("cutoff", 8), ("parameters", 38), ("aliases", 22), ("definition", 48)):
        table.add_column(col, max_width=widest, overflow="fold")
    for m in METRICS.values():
        params = "\n".join(p.describe() for p in m.params)
        table.add_row(m.name, m.cutoff, params, ", ".join(m.aliases), m.description)
    return table


def metric_card(name: str) -> Table:
    """``rankwise metrics NAME``: one metric's name, aliases, cutoff, parameters, definition,
    formula and citation (``NAME`` parsed as every command parses metric names: ``P@5`` is
    precision)."""
    from rankwise.metrics.registry import lookup_metric

    m = lookup_metric(name)
    table = Table(title=f"rankwise metric {m.name}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", max_width=90, overflow="fold")
    rows = [("name", m.name), ("aliases", ", ".join(m.aliases) or "-"), ("cutoff", m.cutoff),
            ("parameters", "\n".join(p.describe() for p in m.params) or "-"), ("definition", m.description),
            ("formula", m.formula or "-"), ("reference", m.reference or "-")]
    if m.undefined_when:
        rows.append(("undefined when", m.undefined_when + " (null, left out of the mean and counted)"))
    for field_name, value in rows:
        table.add_row(field_name, Text(value))  # plain text: a formula's [brackets] are not console markup
    return table


def summary_line(summary: dict) -> str:
    """One line: evaluated / missing from run / ignored queries (and undefined metric values)."""
    parts = [f"{count(summary.get('evaluated', 0), 'query', 'queries')} evaluated"]
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
    tag = f" (runid {result.runid})" if result.runid not in (None, result.run_name) else ""
    table = Table(title=f"rankwise: {result.run_name}{tag}")
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
    console = console or make_console()
    console.print(eval_table(result, per_query=per_query))
    console.print(summary_line(result.summary), style="dim")
