"""The gate's verdict as Markdown (a CI job summary, a pull-request comment) and as a small HTML
page.

Example:
    >>> from rankwise.analysis.gate import gate
    >>> qrels = {f"q{i}": {"a": 1} for i in range(20)}
    >>> r = gate({q: ["a"] for q in qrels}, {q: ["x", "a"] for q in qrels}, ["mrr"], qrels=qrels)
    >>> print(gate_markdown(r).splitlines()[0])
    ## ❌ rankwise gate failed: mrr
"""

from __future__ import annotations

import math
from html import escape

from rankwise.analysis.gate import GateResult, MetricCheck
from rankwise.report.labels import fmt_p, signed

__all__ = ["gate_markdown", "gate_html", "how_tested", "mde_sentence"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _mark(c: MetricCheck, alpha: float) -> str:
    """▼ a significant drop, ▲ a significant gain, blank when not significant (or untested)."""
    if not c.significant:
        return ""
    return " ▼" if c.delta < 0 else " ▲"


def _verdict(c: MetricCheck, max_drop: float, alpha: float) -> str:
    if c.below_floor:
        return f"❌ below the floor {c.floor:g}"
    if c.failed and c.untested:
        return f"❌ drop > {max_drop:g} (untested)"
    if c.failed:
        return f"❌ drop > {max_drop:g}, p < {alpha:g}"
    if c.over_budget:
        return f"⚠️ drop > {max_drop:g}, not significant"
    return "✅ pass"


def _ci(c: MetricCheck) -> str:
    if c.ci_low is None or c.ci_high is None:
        return "-"
    return f"[{signed(c.ci_low)}, {signed(c.ci_high)}]"


def _rows(result: GateResult) -> list[tuple[str, ...]]:
    return [(c.metric, f"{c.baseline_mean:.4f}", f"{c.candidate_mean:.4f}", signed(c.delta) + _mark(c, result.alpha),
             _ci(c), "-" if c.untested or math.isnan(c.p_value) else fmt_p(c.p_value),
             "-" if c.mde is None else f"{c.mde:.4f}", "-" if c.floor is None else f"{c.floor:g}",
             _verdict(c, result.max_drop, result.alpha))
            for c in result.checks]


_HEAD = ("metric", "baseline", "candidate", "difference", "95% CI", "p", "MDE", "floor", "verdict")


def mde_sentence(result: GateResult) -> str | None:
    """What the MDE column means (how it was found), or why a metric has none; None when no metric
    has one nor a reason.

    Example:
        >>> from rankwise.analysis.gate import gate
        >>> r = gate(
        ...     {"q": ["a"], "r": ["a"]},
        ...     {"q": ["a"], "r": ["a"]},
        ...     "P@1",
        ...     qrels={"q": {"a": 1}, "r": {"a": 1}},
        ... )
        >>> mde_sentence(r)
        'No MDE for precision@1: every question has the same difference: no variance to simulate from.'
    """
    found = [c for c in result.checks if c.mde is not None]
    parts = []
    if found:
        parts.append(f"MDE: {found[0].mde_note}.")
    parts += [f"No MDE for {c.metric}: {c.mde_note}." for c in result.checks if c.mde is None and c.mde_note]
    return " ".join(parts) or None


def how_tested(result: GateResult) -> str:
    """One sentence: what was compared and how (or why no test ran).

    Example:
        >>> from rankwise.analysis.gate import gate
        >>> r = gate(
        ...     {"q": ["a"], "r": ["a"]},
        ...     {"q": ["a"], "r": ["a"]},
        ...     "P@1",
        ...     qrels={"q": {"a": 1}, "r": {"a": 1}},
        ... )
        >>> how_tested(r).split(";")[0]
        '2 paired queries'
    """
    s = result.summary
    if s.get("untested"):
        return f"Means compared, no significance test: {s['untested']}."
    corr = result.settings.get("correction", "none")
    return (f"{s.get('queries')} paired queries; a metric fails when its mean drops by more than "
            f"{result.max_drop:g} and a two-sided {result.settings.get('test')} test finds the drop significant at "
            f"alpha {result.alpha:g}" + (f" ({corr} correction)" if corr != "none" else "")
            + ", or when it falls below its floor. ▼/▲: significant drop/gain; CI: 95% bootstrap interval of the "
            "mean difference.")


def gate_markdown(result: GateResult, *, title: str = "rankwise gate") -> str:
    """A GitHub-flavoured summary: verdict heading, table with significance marks, the worst
    queries."""
    head = (f"## ✅ {title} passed" if result.passed
            else f"## ❌ {title} failed: {', '.join(c.metric for c in result.failed)}")
    lines = [head, "", "| " + " | ".join(_HEAD) + " |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines += ["| " + " | ".join(_cell(x) for x in row) + " |" for row in _rows(result)]
    lines += ["", how_tested(result)]
    if mde_sentence(result):
        lines += ["", _cell(mde_sentence(result))]
    lines += [f"> {n}" for n in result.summary.get("notes", [])]
    for c in result.checks:
        if not c.worst:
            continue
        lines += ["", f"### {_cell(c.metric)}: the queries that lost most", "",
                  "| query | baseline | candidate | difference |", "|---|---:|---:|---:|"]
        lines += [f"| {_cell(q)} | {b:.4f} | {v:.4f} | {signed(d)} |" for q, b, v, d in c.worst]
    return "\n".join(lines) + "\n"


def gate_html(result: GateResult, *, title: str = "rankwise gate") -> str:
    """The same as :func:`gate_markdown` as one self-contained HTML page (no script, no network).

    Example:
        >>> from rankwise.analysis.gate import gate
        >>> r = gate({"q": ["a"]}, {"q": ["a"]}, "P@1", qrels={"q": {"a": 1}})
        >>> "<h1>rankwise gate passed</h1>" in gate_html(r)
        True
    """
    verdict = "passed" if result.passed else "failed: " + ", ".join(c.metric for c in result.failed)
    table = "<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in _HEAD) + "</tr>"
    table += "".join("<tr>" + "".join(f"<td>{escape(x)}</td>" for x in row) + "</tr>" for row in _rows(result))
    table += "</table>"
    worst = ""
    for c in result.checks:
        if c.worst:
            worst += (f"<h2>{escape(c.metric)}: the queries that lost most</h2><table><tr><th>query</th>"
                      "<th>baseline</th><th>candidate</th><th>difference</th></tr>"
                      + "".join(f"<tr><td>{escape(q)}</td><td>{b:.4f}</td><td>{v:.4f}</td><td>{signed(d)}</td></tr>"
                                for q, b, v, d in c.worst) + "</table>")
    notes = "".join(f"<p>{escape(n)}</p>" for n in result.summary.get("notes", []))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>body{{font-family:sans-serif;margin:2em}}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
            "td:first-child,th:first-child{text-align:left}</style></head><body>"
            f"<h1>{escape(title)} {escape(verdict)}</h1>{table}<p>{escape(how_tested(result))}</p>"
            f"{'<p>' + escape(mde_sentence(result) or '') + '</p>' if mde_sentence(result) else ''}{notes}{worst}"
            "</body></html>\n")
