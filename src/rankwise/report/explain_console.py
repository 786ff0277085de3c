"""Terminal view of one explained case (``rankwise explain``): references, ranked chunks with the
reference text highlighted inside each, verdicts and reasons side by side, first relevant rank and
failure class."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rankwise.report.console import make_console

__all__ = ["chunk_text", "explain_table", "print_explanation"]

HIGHLIGHT = "bold black on yellow"


def chunk_text(text: str | None, spans: list, *, limit: int = 600) -> Text:
    """The chunk's text with each reference range styled :data:`HIGHLIGHT` (collapsed past ``limit``
    chars, keeping the highlighted part in view).

    Example:
        >>> t = chunk_text("The capital is Paris.", [(15, 20, 0)])
        >>> t.plain, [(s.start, s.end) for s in t.spans]
        ('The capital is Paris.', [(15, 20)])
    """
    text = (text or "").rstrip()
    full, offset = len(text), 0
    if len(text) > limit:
        first = min((s for s, _, _ in spans), default=0)
        offset = max(0, min(first - limit // 4, len(text) - limit))
        text = text[offset:offset + limit]
    out = Text("… " if offset else "")
    base = len(out.plain)
    out.append(text)
    for start, end, _ in spans:
        lo, hi = max(0, start - offset), min(len(text), end - offset)
        if lo < hi:
            out.stylize(HIGHLIGHT, base + lo, base + hi)
    if offset + len(text) < full:
        out.append(" …")
    return out


def _verdict_cell(row: dict | None) -> Text:
    if row is None:
        return Text("-", style="dim")
    if row["status"] != "ok":
        return Text(f"{row['status']}" + (f": {row['reason']}" if row.get("reason") else ""), style="red")
    mark = "relevant" if row["verdict"] == 1 else "not relevant"
    grade = f" (grade {row['grade']})" if row.get("grade") not in (None, 0, 1) else ""
    reason = f"\n{row['reason']}" if row.get("reason") else ""
    return Text(mark + grade + reason, style="green" if row["verdict"] == 1 else "")


def explain_table(explanation, *, top: int | None = None) -> Table:
    """The ranked chunks (the first ``top``; all when None) as a table: rank, id/document, the text
    with its highlights, one column per source."""
    table = Table(title=f"case {explanation.id}: ranked chunks", show_lines=True, expand=True)
    table.add_column("rank", justify="right", no_wrap=True)
    table.add_column("chunk", ratio=3)
    for source in explanation.sources:
        table.add_column(source, ratio=1)
    for c in explanation.chunks[:top]:
        where = " · ".join(x for x in (c.id, c.doc_id) if x)
        cell = Text(where + "\n", style="dim") if where else Text()
        cell.append_text(chunk_text(c.text, c.highlights))
        table.add_row(str(c.rank), cell, *[_verdict_cell(c.verdicts.get(s)) for s in explanation.sources])
    return table


def print_explanation(explanation, *, top: int | None = None, console: Console | None = None) -> None:
    """Print the case: question, references, the chunk table (the first ``top`` chunks; all when
    None), first relevant rank and class per source."""
    console = console or make_console()
    console.print(Text(f"question: {explanation.question or '-'}", style="bold"))
    if not explanation.references:
        console.print("references: none (no ground truth)", highlight=False)
    for ref in explanation.references:
        if "id" in ref:
            console.print(Text(f"reference id: {ref['id']}"))
        else:
            where = f" [{ref['doc_id']} {ref['start']}-{ref['end']}]" if ref.get("start") is not None else ""
            console.print(Text(f"reference passage {ref['index'] + 1}{where}: ", style="bold").append(
                Text(ref.get("text") or "", style=HIGHLIGHT)))
    console.print(explain_table(explanation, top=top))
    hidden = len(explanation.chunks) - (top if top is not None else len(explanation.chunks))
    if hidden > 0:
        console.print(f"... {hidden} more chunk{'s' if hidden != 1 else ''} (--top {len(explanation.chunks)} "
                      f"shows them all)", style="dim", highlight=False)
    for source in explanation.sources:
        first = explanation.first_relevant.get(source)
        found = (f"first relevant chunk at rank {first} (found by hit@K for K >= {first})" if first
                 else "no relevant chunk in the list")
        items = explanation.items_found.get(source)
        if items and items[0]:
            found += (f"; {items[0]} of {items[1]} reference item{'s' if items[1] != 1 else ''} found, the last at "
                      f"rank {items[2]} (recall@K reaches {items[0]}/{items[1]} for K >= {items[2]})")
        console.print(Text(f"{source}: {found}; failure class at K={explanation.k}: "
                           f"{explanation.failure_class[source]}"), highlight=False)
