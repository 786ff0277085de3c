"""Terminal tables for ``rankwise eval-rag``: means (or per-case values), counts of unscorable and
incomplete cases, and the reminder that acp divides by relevant retrieved chunks."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from rankwise.report.console import make_console

__all__ = ["rag_summary_lines", "failure_lines", "rag_table", "rag_notes", "print_rag", "ACP_FOOTNOTE"]

ACP_FOOTNOTE = ("† acp divides by the relevant chunks retrieved, not by what exists: one relevant chunk at rank 1 "
                "scores 1.0 however much was missed. Read it with recall.")


def rag_summary_lines(summary: dict) -> list[str]:
    """Human-readable lines: cases evaluated, unscorable and incomplete cases and how they were
    treated."""
    n_cases = summary.get("cases", 0)
    lines = [f"relevance: {summary.get('relevance')}; {n_cases} case{'s' if n_cases != 1 else ''}, "
             f"{summary.get('evaluated', 0)} in the means"]
    for kind in ("unscorable", "incomplete"):
        n = summary.get(kind, 0)
        if n:
            cases = summary.get(f"{kind}_cases", {})
            shown = ", ".join(f"{q} ({why})" for q, why in list(cases.items())[:5])
            more = f" and {n - 5} more" if n > 5 else ""
            lines.append(f"{n} {kind} case{'s' if n != 1 else ''}: {shown}{more} -> "
                         f"{summary.get(f'{kind}_treatment')}")
    v = summary.get("verdicts") or {}
    if v.get("failed") or v.get("missing"):
        lines.append(f"verdicts: {v.get('ok', 0)} ok, {v.get('failed', 0)} failed, {v.get('missing', 0)} missing")
    why = summary.get("undefined_why") or {}
    for name, n in (summary.get("undefined") or {}).items():
        lines.append(f"{name} undefined for {n} case{'s' if n != 1 else ''} ({why.get(name, 'empty denominator')}; "
                     f"left out of its mean)")
    lines.append(f"recall counts {summary.get('recall_basis')}")
    if summary.get("no_match"):  # why every verdict is 0: said once, with the fix
        lines.append(f"nothing can match: {summary['no_match']}")
    if summary.get("no_answer"):
        from rankwise.report.no_answer import no_answer_lines

        lines.extend(no_answer_lines(summary["no_answer"]))
    lines += failure_lines(summary)
    return lines


def failure_lines(summary: dict) -> list[str]:
    """The failure-class counts (non-zero classes) and the headroom sentence, when the summary has
    them.

    Example:
        >>> failure_lines(
        ...     {
        ...         "failure_classes": {
        ...             "k": 5,
        ...             "counts": {"hit": 3, "not retrieved": 1, "id mismatch": 0},
        ...         },
        ...         "headroom": {
        ...             "sentence": "a reranker could lift ndcg@5 from 0.50 to at most 0.75"
        ...         },
        ...     }
        ... )
        ['failure classes at K=5: hit 3; not retrieved 1 (rankwise explain RECORDS CASE_ID: one case)', 'headroom: a reranker could lift ndcg@5 from 0.50 to at most 0.75']
    """
    out = []
    classes = summary.get("failure_classes")
    if classes:
        # (cases without ground truth are said once, in the unscorable line; their count stays in
        # the JSON)
        shown = "; ".join(f"{name} {n}" for name, n in classes["counts"].items() if n and name != "no ground truth")
        if shown:
            out.append(f"failure classes at K={classes['k']}: {shown} (rankwise explain RECORDS CASE_ID: one case)")
    if (summary.get("headroom") or {}).get("sentence"):
        out.append(f"headroom: {summary['headroom']['sentence']}")
    return out


def _cell(value, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def rag_table(result, *, per_query: bool = False, digits: int = 4) -> Table:
    """A rich Table of an ``evaluate_rag`` result; acp columns are marked with a dagger and
    explained."""
    names = result.names
    label = {m.name: (m.name + " †" if m.metric.name == "acp" else m.name) for m in result.measures}
    table = Table(title=f"rankwise eval-rag ({result.summary.get('relevance')})")
    if per_query:
        table.add_column("case", style="bold")
        for n in names:
            table.add_column(label[n], justify="right")
        for qid in result.per_query:
            row = result.per_query[qid]
            table.add_row(qid, *[_cell(row[n], digits) for n in names])
        table.add_row("mean", *[_cell(result.mean[n], digits) for n in names], style="bold")
    else:
        table.add_column("metric", style="bold")
        table.add_column("mean", justify="right")
        for n in names:
            table.add_row(label[n], _cell(result.mean[n], digits))
    return table


def rag_notes(result) -> list[str]:
    """The lines printed under the table: counts, treatments, what recall counts, the acp caveat."""
    lines = rag_summary_lines(result.summary)
    if any(m.metric.name == "acp" for m in result.measures):
        lines.append(ACP_FOOTNOTE)
    return lines


def print_rag(result, *, per_query: bool = False, console: Console | None = None) -> None:
    """Print the table, then the notes (counts of unscorable/incomplete cases, the acp caveat)."""
    console = console or make_console()
    console.print(rag_table(result, per_query=per_query))
    for line in rag_notes(result):
        console.print(line, style="dim", highlight=False)
