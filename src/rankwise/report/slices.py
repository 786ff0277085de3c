"""Renderings of per-slice results (:class:`rankwise.analysis.slices.Slices`): a terminal table,
CSV, Markdown and the HTML report's section. Rows go metric by metric, one row per slice; a
comparison has one mean column per system and, per candidate, its difference from the baseline with
the interval.

Example:
    >>> import numpy as np
    >>> from rankwise.analysis.slices import slice_values
    >>> s = slice_values(
    ...     {"run": np.array([[1.0], [0.0]])}, ["a", "b"], ["mrr"], {"a": "plain"}, by="style"
    ... )
    >>> slices_csv(s).splitlines()[1]
    'style,plain,1,mrr,run,1,1.0,1.0,1.0,,,'
"""

from __future__ import annotations

import csv
import io
from html import escape

from rich import box
from rich.console import Console
from rich.table import Table

from rankwise.analysis.slices import Slices, SliceStat
from rankwise.report.console import make_console
from rankwise.report.labels import signed

__all__ = ["slices_table", "slices_caption", "print_slices", "slices_csv", "slices_markdown", "slices_html",
           "emit_slices"]


def _mean(stat: SliceStat, digits: int = 4) -> str:
    return "-" if stat.mean is None else f"{stat.mean:.{digits}f}"


def _ci(stat: SliceStat, digits: int = 4, sign: bool = False) -> str:
    if stat.ci_low is None or stat.ci_high is None:
        return "-"
    if sign:
        return f"[{signed(stat.ci_low, digits)}, {signed(stat.ci_high, digits)}]"
    return f"[{stat.ci_low:.{digits}f}, {stat.ci_high:.{digits}f}]"


def _compared(slices: Slices) -> bool:
    return slices.baseline is not None


def _conf(slices: Slices) -> str:
    return f"{slices.settings.get('confidence', 0.95):.0%} CI"


def slices_caption(slices: Slices) -> str:
    """How the numbers were made, in one paragraph (under every rendering)."""
    s = slices.settings
    total = sum(len(c) for c in slices.cases.values())
    how = ("one slice per length of the list" if slices.kind == "length" else "one slice per value")
    parts = [f"{total} cases in {len(slices.names)} slices by {slices.by} ({how}; (none): the field is absent)",
             f"CI = {s.get('confidence', 0.95):.0%} percentile bootstrap interval of the slice's mean "
             f"({s.get('resamples', 0):,} resamples, seed {s.get('seed')})"]
    if _compared(slices):
        parts.append(f"delta = paired difference from the baseline {slices.baseline} over the slice's cases")
    parts.append("intervals are per slice, not corrected for the number of slices")
    return "; ".join(parts)


def _rows(slices: Slices, digits: int, *, every: bool = False) -> list[list[str]]:
    """Table cells, metric by metric and slice by slice (the metric named on its first row only,
    unless ``every``)."""
    rows = []
    candidates = list(slices.deltas)
    for metric in slices.metrics:
        for i, name in enumerate(slices.names):
            row = [metric if i == 0 or every else "", name, str(len(slices.cases[name]))]
            if _compared(slices):
                row += [_mean(slices.means[s][name][metric], digits) for s in slices.systems]
                for c in candidates:
                    d = slices.deltas[c][name][metric]
                    row += [signed(d.mean, digits), _ci(d, digits, sign=True)]
            else:
                stat = slices.means[slices.systems[0]][name][metric]
                row += [_mean(stat, digits), _ci(stat, digits)]
            rows.append(row)
    return rows


def _header(slices: Slices) -> list[str]:
    head = ["metric", slices.title, "cases"]
    if _compared(slices):
        head += list(slices.systems)
        for c in slices.deltas:
            head += [f"delta {c}", _conf(slices)]
    else:
        head += ["mean", _conf(slices)]
    return head


def slices_table(slices: Slices, *, digits: int = 4) -> Table:
    """A rich Table: per metric, one row per slice (mean and interval; in a comparison every
    system's mean and each candidate's difference from the baseline with its interval)."""
    from rich.markup import escape as rich_escape

    table = Table(title=f"by {rich_escape(slices.title)}", box=box.SIMPLE_HEAD)
    for i, col in enumerate(_header(slices)):
        table.add_column(rich_escape(col), justify="left" if i < 2 else "right", no_wrap=True,
                         style="bold" if i == 0 else None)
    rows = _rows(slices, digits)
    per_metric = len(slices.names)
    for i, row in enumerate(rows):
        table.add_row(*[rich_escape(x) for x in row],
                      end_section=(i + 1) % per_metric == 0 and i + 1 < len(rows))
    return table


def print_slices(slices: Slices, console: Console | None = None) -> None:
    """Print the slice table, then how it was computed."""
    console = console or make_console()
    console.print(slices_table(slices))
    console.print(slices_caption(slices), style="dim", highlight=False)


def slices_csv(slices: Slices) -> str:
    """One row per (slice, metric, system):
    ``by,slice,cases,metric,system,n,mean,ci_low,ci_high,delta, delta_ci_low,delta_ci_high`` (the
    delta columns for a comparison's candidates)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["by", "slice", "cases", "metric", "system", "n", "mean", "ci_low", "ci_high", "delta",
                "delta_ci_low", "delta_ci_high"])

    def num(x: float | None) -> str:
        return "" if x is None else repr(float(x))

    for name in slices.names:
        for metric in slices.metrics:
            for system in slices.systems:
                m = slices.means[system][name][metric]
                d = slices.deltas.get(system, {}).get(name, {}).get(metric)
                w.writerow([slices.by, name, len(slices.cases[name]), metric, system, m.n, num(m.mean),
                            num(m.ci_low), num(m.ci_high), "" if d is None else num(d.mean),
                            "" if d is None else num(d.ci_low), "" if d is None else num(d.ci_high)])
    return buf.getvalue()


def slices_markdown(slices: Slices, *, digits: int = 4) -> str:
    """A GitHub-flavoured table, then how it was computed."""
    head = _header(slices)

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(cell(h) for h in head) + " |",
             "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in _rows(slices, digits, every=True)]
    return f"**by {cell(slices.title)}**\n\n" + "\n".join(lines) + "\n\n" + slices_caption(slices) + "\n"


def slices_html(slices: Slices, *, digits: int = 4) -> str:
    """The HTML report's section: the slice table (one panel per metric, shown with the metric
    picker)."""
    head = _header(slices)[1:]
    panels = []
    candidates = list(slices.deltas)
    for metric in slices.metrics:
        body = []
        for name in slices.names:
            cells = [f'<th class="row">{escape(name)}</th>', f"<td>{len(slices.cases[name])}</td>"]
            if _compared(slices):
                cells += [f'<td data-system="{escape(s)}" data-mean="{slices.means[s][name][metric].mean!r}">'
                          f"{_mean(slices.means[s][name][metric], digits)}</td>" for s in slices.systems]
                for c in candidates:
                    d = slices.deltas[c][name][metric]
                    cells += [f'<td data-delta="{d.mean!r}">{signed(d.mean, digits)}</td>',
                              f"<td>{_ci(d, digits, sign=True)}</td>"]
            else:
                stat = slices.means[slices.systems[0]][name][metric]
                cells += [f'<td data-mean="{stat.mean!r}">{_mean(stat, digits)}</td>', f"<td>{_ci(stat, digits)}</td>"]
            body.append(f'<tr data-slice="{escape(name)}">' + "".join(cells) + "</tr>")
        panels.append(f'<div class="metric-panel" data-metric="{escape(metric)}"><div class="table-wrap">'
                      f'<table class="grid slices" data-by="{escape(slices.by)}"><caption>{escape(metric)} by '
                      f"{escape(slices.title)}</caption><thead><tr>"
                      + "".join(f"<th>{escape(h)}</th>" for h in head)
                      + f"</tr></thead><tbody>{''.join(body)}</tbody></table></div></div>")
    return (f'<section class="card" id="slices"><h2>By {escape(slices.title)}</h2>{"".join(panels)}'
            f'<p class="note">{escape(slices_caption(slices))}.</p></section>')


def emit_slices(slices: Slices, fmt: str = "table", console: Console | None = None) -> None:
    """Print the slices after a command's own output in ``fmt``: a table, CSV or Markdown after a
    blank line; nothing for JSON (the slices are in its summary)."""
    import click

    if fmt == "json":
        return
    if fmt == "csv":
        click.echo("")
        click.echo(slices_csv(slices), nl=False)
    elif fmt == "markdown":  # the comparison's Markdown ends with a blank line
        click.echo(slices_markdown(slices), nl=False)
    else:
        print_slices(slices, console)
