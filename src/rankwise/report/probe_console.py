"""Terminal tables for ``rankwise probe``: rank effects and verdict effects side by side."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from rankwise._words import count
from rankwise.report.console import make_console

__all__ = ["probe_table", "probe_comparison_table", "print_probe", "print_probe_comparison", "probe_notes"]


def _num(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}f}"


def _signed(x: float, digits: int = 4) -> str:
    if abs(x) < 0.5 * 10 ** -digits:
        return f"{0:.{digits}f}"
    return f"{x:+.{digits}f}"


def _order(v: list[int]) -> str:
    return ",".join(str(x) for x in v)


def probe_table(result) -> Table:
    """One row per metric: score | rank effect (best, worst, range over re-orderings) | verdict
    effect (delta of flipping the verdict at each rank)."""
    v = result.verdicts
    table = Table(title=f"rankwise probe: verdicts {_order(v)}  (k={result.k}"
                        + (f", R={result.n_relevant}" if result.n_relevant is not None else "") + ")")
    table.add_column("metric", style="bold")
    table.add_column("score", justify="right")
    table.add_column("rank effect:\nbest", justify="right", style="cyan")
    table.add_column("rank effect:\nworst", justify="right", style="cyan")
    table.add_column("rank effect:\nrange", justify="right", style="cyan")
    for i, x in enumerate(v):
        to = 0 if x >= 1 else 1
        table.add_column(f"verdict effect:\nflip @{i + 1} {x}→{to}", justify="right", style="magenta")
    for m in result.metrics:
        table.add_row(m.name, _num(m.score), _num(m.best), _num(m.worst), _num(m.rank_range),
                      *[_signed(d) for d in m.flip_deltas])
    return table


def probe_notes(result) -> list[str]:
    lines = []
    for m in result.metrics:
        if m.rank_range > 0:
            lines.append(f"{m.name}: best order {_order(m.best_order)}, worst order {_order(m.worst_order)}")
    lines.append("rank effect = what re-ordering the same verdicts can do; verdict effect = change from "
                 "flipping one verdict in place, order kept.")
    return lines


def print_probe(result, console: Console | None = None) -> None:
    console = console or make_console()
    console.print(probe_table(result))
    for line in probe_notes(result):
        console.print(line, style="dim", highlight=False)


def probe_comparison_table(comp, *, per_case: bool = False) -> Table:
    """Means over cases: each source's score and re-ordering range, and the verdict-attributable
    difference (second source minus first). With ``per_case``, one row per case and metric."""
    srcs = comp.sources
    two = len(srcs) == 2
    title = f"rankwise probe: {' vs '.join(srcs)} over {count(len(comp.cases), 'case')}"
    table = Table(title=title)
    if per_case:
        table.add_column("case", style="bold")
    table.add_column("metric", style="bold")
    for s in srcs:
        table.add_column(s, justify="right")
    if two:
        table.add_column(f"verdict effect\n{srcs[1]} − {srcs[0]}", justify="right", style="magenta")
    for s in srcs:
        table.add_column(f"rank effect ({s}):\nbest − worst", justify="right", style="cyan")
    if two and per_case:
        table.add_column("ranks judged\ndifferently", justify="left")
    if per_case:
        for case in comp.cases:
            for n in comp.metrics:
                row = case["metrics"][n]
                cells = [case["id"], n, *[_num(row[s]) for s in srcs]]
                if two:
                    cells.append(_signed(row["verdict_effect"]))
                cells += [_num(row[f"{s}_rank_range"]) for s in srcs]
                if two:
                    cells.append(",".join(str(r) for r in case["differing_ranks"]) or "-")
                table.add_row(*cells)
    for n in comp.metrics:
        row = comp.mean[n]
        cells = (["mean"] if per_case else []) + [n, *[_num(row[s]) for s in srcs]]
        if two:
            cells.append(_signed(row["verdict_effect"]))
        cells += [_num(row[f"{s}_rank_range"]) for s in srcs]
        if two and per_case:
            cells.append("")
        table.add_row(*cells, style="bold" if per_case else None)
    return table


def print_probe_comparison(comp, *, per_case: bool = False, console: Console | None = None) -> None:
    console = console or make_console()
    console.print(probe_comparison_table(comp, per_case=per_case))
    if len(comp.sources) == 2:
        console.print("The two sources judge the same chunks in the same order, so the whole difference is "
                      "due to verdicts; the rank-effect columns show how far re-ordering alone could move "
                      "each source's score.", style="dim", highlight=False)
    if comp.r_basis:
        console.print("R (recall, nDCG's ideal): " + "; ".join(f"{s}: {b}" for s, b in comp.r_basis.items()),
                      style="dim", highlight=False)
    if comp.incomplete:
        shown = ", ".join(f"{q} ({why})" for q, why in list(comp.incomplete.items())[:5])
        n = len(comp.incomplete)
        console.print(f"{n} incomplete case{'s' if n != 1 else ''} (failed/missing verdicts counted as not "
                      f"relevant): {shown}", style="dim", highlight=False)
