"""One self-contained HTML report of a comparison: opens offline, no CDN, charts are inline SVG.

Sections: summary table with significance marks, per-slice means and differences (when sliced),
metric-vs-K curves, per-query delta charts, score distributions, the rank-vs-verdict probe (with
records), and a per-question drill-down (chunk text, verdicts and reasons with records; retrieved
documents and their qrels grades with runs).

Example:
    >>> from rankwise.analysis.compare import compare
    >>> r = compare(
    ...     {"q1": {"a": 1}, "q2": {"b": 1}},
    ...     [{"q1": ["a"], "q2": ["x"]}, {"q1": ["a"], "q2": ["b"]}],
    ...     ["P@1"],
    ...     names=["A", "B"],
    ... )
    >>> html = render_html_report(r)
    >>> html.startswith(
    ...     "<!DOCTYPE html>"
    ... ) and 'data-system="B"' in html and "http" not in html.split("<body")[0]
    True
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping, Sequence
from html import escape
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from rankwise._outputs import HTML_GENERATOR
from rankwise._words import count
from rankwise.analysis.compare import ComparisonResult
from rankwise.analysis.failures import FAILURE_CLASSES
from rankwise.analysis.ksweep import KSweep
from rankwise.analysis.report_inputs import ReportInputs, report_inputs
from rankwise.errors import InputError
from rankwise.report.labels import CORRECTION_LABELS, TEST_LABELS, comparison_caption, fmt_p, signed
from rankwise.report.svg import box_plot, color_of, delta_bars, heat_color, line_chart

__all__ = ["render_html_report", "write_html_report", "script_json"]


def _asset(name: str) -> str:
    return resources.files("rankwise.report").joinpath("assets", name).read_text(encoding="utf-8")


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _f(x: float | None, digits: int = 4) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _signed(x: float) -> str:
    return signed(x)


_DOT = " \u00b7 "


# ---------------------------------------------------------------------------------------------
# summary
def _summary_cell(cmp: ComparisonResult, s: str, metric: str, best: str) -> str:
    mean = cmp.means[s][metric]
    attrs = (f'data-system="{escape(s)}" data-metric="{escape(metric)}" data-mean="{mean!r}"')
    klass = "best" if s == best else ""
    if s == cmp.baseline:
        return (f'<td class="{klass}" {attrs}><span class="mean">{mean:.4f}</span>'
                f'<span class="detail">baseline</span></td>')
    c = cmp.comparison(s, metric)
    direction = "gain" if c.delta > 0 else "loss" if c.delta < 0 else "ns"
    if c.significant:
        mark = ("\u25B2" if c.delta > 0 else "\u25BC") + "*"
        delta_class = f"delta {direction} sig"
    else:
        mark = "n.s."
        delta_class = "delta ns"
    title = (f"p = {fmt_p(c.p_value)} ({TEST_LABELS[cmp.test]}), corrected {fmt_p(c.p_adjusted)}; "
             f"Cohen's d {_f(c.effect_size, 2)}; W/T/L {c.wins}/{c.ties}/{c.losses}")
    return (f'<td class="{klass}" {attrs} data-delta="{c.delta!r}" data-p-adjusted="{c.p_adjusted!r}" '
            f'data-significant="{str(c.significant).lower()}" title="{escape(title)}">'
            f'<span class="mean">{mean:.4f}</span>'
            f'<span class="{delta_class}">{signed(c.delta)} <span class="mark">{mark}</span></span>'
            f'<span class="detail">CI [{signed(c.ci_low)}, {signed(c.ci_high)}]</span>'
            f'<span class="detail">p adj {fmt_p(c.p_adjusted)}</span>'
            f"<span class=\"detail\">W/T/L {c.wins}/{c.ties}/{c.losses} \u00b7 d\u00a0{_f(c.effect_size, 2)}</span></td>")


def _system_th(cmp: ComparisonResult, s: str, tag: str = "th") -> str:
    base = " <span class=ns>(baseline)</span>" if s == cmp.baseline else ""
    return f'<{tag} class="sys-name" data-system="{escape(s)}">{escape(s)}{base}</{tag}>'


def _summary_section(cmp: ComparisonResult) -> str:
    """Metrics as rows and systems as columns; with many systems (a sweep) transposed, one row per
    system, so the table stays as wide as its card."""
    best = {m: max(cmp.systems, key=lambda s: cmp.means[s][m]) for m in cmp.metrics}
    if len(cmp.systems) > max(6, len(cmp.metrics)):
        head = "<th>system</th>" + "".join(f'<th data-metric="{escape(m)}">{escape(m)}</th>' for m in cmp.metrics)
        rows = ["<tr>" + _system_th(cmp, s) + "".join(_summary_cell(cmp, s, m, best[m]) for m in cmp.metrics)
                + "</tr>" for s in cmp.systems]
        layout = "systems"
    else:
        head = "<th>metric</th>" + "".join(_system_th(cmp, s) for s in cmp.systems)
        rows = [f'<tr><td class="metric">{escape(m)}</td>'
                + "".join(_summary_cell(cmp, s, m, best[m]) for s in cmp.systems) + "</tr>" for m in cmp.metrics]
        layout = "metrics"
    detail = _detail_table(cmp)
    return (f'<section class="card" id="summary"><h2>Summary</h2><div class="table-wrap">'
            f'<table class="summary" id="summary-table" data-rows="{layout}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>'
            f'<p class="note">\u25B2* / \u25BC* significantly better / worse than the baseline after correction; '
            f"n.s. not significant; underlined = best mean. {escape(comparison_caption(cmp))}.</p>"
            f'<details><summary>All tests</summary><div class="table-wrap">{detail}</div></details></section>')


def _detail_table(cmp: ComparisonResult) -> str:
    tests = cmp.settings["tests"]
    head = ("<tr><th>metric</th><th>system</th><th>mean</th><th>delta</th><th>CI low</th><th>CI high</th>"
            + "".join(f"<th>p ({escape(TEST_LABELS[t])})</th>" for t in tests)
            + "<th>p adj</th><th>d</th><th>W/T/L</th><th>n</th></tr>")
    rows = []
    for c in cmp.comparisons:
        rows.append(
            f"<tr><td>{escape(c.metric)}</td><td>{escape(c.system)}</td><td>{c.mean:.4f}</td>"
            f"<td>{signed(c.delta)}</td><td>{signed(c.ci_low)}</td><td>{signed(c.ci_high)}</td>"
            + "".join(f"<td>{fmt_p(c.p_values[t])}</td>" for t in tests)
            + f"<td>{fmt_p(c.p_adjusted)}{' *' if c.significant else ''}</td><td>{_f(c.effect_size, 2)}</td>"
            f"<td>{c.wins}/{c.ties}/{c.losses}</td><td>{c.n}</td></tr>")
    return f'<table class="grid"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


# ------------------------------------------------------------------------------------------- grid
# heat map
def _heat_cell(cmp: ComparisonResult, label: str | None, metric: str, lo: float, hi: float) -> str:
    if label is None or label not in cmp.means:
        return '<td class="empty" title="not run">\u2014</td>'
    mean = cmp.means[label][metric]
    bg, fg = heat_color(0.5 if hi <= lo else (mean - lo) / (hi - lo))
    attrs = (f'data-system="{escape(label)}" data-metric="{escape(metric)}" data-mean="{mean!r}" '
             f'style="background:{bg};color:{fg}"')
    if label == cmp.baseline:
        return (f'<td class="baseline" {attrs} title="{escape(label)}: {mean:.4f} (baseline)">{mean:.4f}'
                f'<span class="mark">base</span></td>')
    c = cmp.comparison(label, metric)
    mark = (("\u25B2" if c.delta > 0 else "\u25BC") + "*") if c.significant else ""
    direction = "gain" if c.significant and c.delta > 0 else "loss" if c.significant else "ns"
    title = f"{label}: {mean:.4f}, {signed(c.delta)} vs the baseline, corrected p {fmt_p(c.p_adjusted)}"
    return (f'<td class="{direction}" {attrs} data-significant="{str(c.significant).lower()}" '
            f'title="{escape(title)}">{mean:.4f}<span class="mark">{mark}</span></td>')


def _grid_section(cmp: ComparisonResult, grid: Mapping[str, Any] | None) -> str:
    """A heat map per metric: rows and columns of the grid (chunking x retriever), each cell the
    mean, marked when it differs from the baseline by the corrected test."""
    if not grid:
        return ""
    rows, cols, cells = list(grid["rows"]), list(grid["columns"]), grid["cells"]
    corner = f'{escape(grid.get("row_title", "row"))} \\ {escape(grid.get("column_title", "column"))}'
    panels = []
    for metric in cmp.metrics:
        values = [cmp.means[lab][metric] for lab in cmp.systems]
        lo, hi = min(values), max(values)
        head = f'<th class="corner">{corner}</th>' + "".join(f"<th>{escape(c)}</th>" for c in cols)
        body = "".join(
            f'<tr><th class="row">{escape(r)}</th>'
            + "".join(_heat_cell(cmp, cells.get(r, {}).get(c), metric, lo, hi) for c in cols) + "</tr>"
            for r in rows)
        panels.append(f'<div class="metric-panel" data-metric="{escape(metric)}"><div class="table-wrap">'
                      f'<table class="heatmap"><caption>{escape(metric)}: mean over '
                      f'{len(cmp.query_ids)} {"cases" if cmp.summary.get("source") else "queries"}</caption>'
                      f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div></div>")
    s = cmp.settings
    return (f'<section class="card" id="grid"><h2>{escape(grid.get("title", "Grid"))}</h2>{"".join(panels)}'
            f'<p class="note">Colour: the mean of the selected metric, light = lowest and dark = highest in the '
            f"grid. \u25B2* / \u25BC*: significantly better / worse than the baseline (base, outlined) by the "
            f"{escape(TEST_LABELS[cmp.test])} after {CORRECTION_LABELS[s['correction']]} correction at alpha "
            f"{s['alpha']}; unmarked: no significant difference; \u2014: not run.</p></section>")


# ----------------------------------------------------------------------------------------------
# slices
def _slices_section(slices: Any) -> str:
    """Per-slice means and differences (:class:`rankwise.analysis.slices.Slices`), when the cases
    were sliced."""
    if slices is None:
        return ""
    from rankwise.report.slices import slices_html

    return slices_html(slices)


# ----------------------------------------------------------------------------------------------
# charts
def _sweep_section(sweeps: Sequence[KSweep], colors: Mapping[str, str]) -> str:
    if not sweeps:
        return ""
    charts = []
    for s in sweeps:
        svg = line_chart({name: s.values[name].tolist() for name in s.systems}, s.ks,
                         title=f"{s.metric} at K = 1..{s.ks[-1]}", y_label=s.metric, colors=colors)
        rows = "".join(f"<tr><td>{k}</td>" + "".join(f"<td>{s.values[n][i]:.4f}</td>" for n in s.systems)
                       + "</tr>" for i, k in enumerate(s.ks))
        table = ('<details><summary>table</summary><table class="grid"><thead><tr><th>K</th>'
                 + "".join(f"<th>{escape(n)}</th>" for n in s.systems)
                 + f"</tr></thead><tbody>{rows}</tbody></table></details>")
        charts.append(f'<div class="sweep" data-metric="{escape(s.metric)}">{svg}{table}</div>')
    return (f'<section class="card" id="ksweep"><h2>Metric vs K</h2><div class="charts">{"".join(charts)}</div>'
            f'<p class="note">Mean over all queries at each cutoff K; where lines cross, the better system '
            f"depends on how many results the generator reads.</p></section>")


def _delta_section(cmp: ComparisonResult) -> str:
    panels = []
    for metric in cmp.metrics:
        charts = []
        for s in cmp.candidates:
            d = cmp.deltas(s, metric)
            c = cmp.comparison(s, metric)
            mark = " *" if c.significant else ""
            charts.append(delta_bars(cmp.query_ids, d.tolist(), y_label=f"\u0394 {metric}",
                                     title=f"{s} \u2212 {cmp.baseline}: {metric} per query "
                                           f"(mean {signed(c.delta)}{mark})"))
        panels.append(f'<div class="metric-panel charts" data-metric="{escape(metric)}">{"".join(charts)}</div>')
    return (f'<section class="card" id="deltas"><h2>Per-query differences</h2>{"".join(panels)}'
            f'<p class="note">Each bar is one query: the candidate\'s value minus the baseline\'s, sorted. A mean '
            f"gain carried by a few queries looks very different from a broad one.</p></section>")


def _distribution_section(cmp: ComparisonResult, colors: Mapping[str, str]) -> str:
    panels = []
    for metric in cmp.metrics:
        groups = {s: cmp.per_query(s, metric).tolist() for s in cmp.systems}
        svg = box_plot(groups, title=f"{metric}: distribution over queries", y_label=metric, colors=colors)
        panels.append(f'<div class="metric-panel charts" data-metric="{escape(metric)}">{svg}</div>')
    return (f'<section class="card" id="distributions"><h2>Score distributions</h2>{"".join(panels)}'
            f'<p class="note">Box: quartiles and median; whiskers: 1.5 IQR; diamond: mean; dots: queries.</p>'
            f"</section>")


# -----------------------------------------------------------------------------------------------
# probe
def _probe_section(probes: Mapping[str, Any]) -> str:
    blocks = []
    for system, probe in probes.items():
        use = list(probe.sources)
        head = "<tr><th>metric</th>"
        keys: list[tuple[str, str]] = []
        for s in use:
            keys += [(s, f"{s} score"), (f"{s}_best", "best order"), (f"{s}_worst", "worst order"),
                     (f"{s}_rank_range", "rank range")]
        if len(use) == 2:
            keys.append(("verdict_effect", f"verdict effect ({use[1]} \u2212 {use[0]})"))
        head += "".join(f"<th>{escape(label)}</th>" for _, label in keys) + "</tr>"
        rows = "".join(
            f"<tr><td>{escape(m)}</td>" + "".join(f"<td>{_f(probe.mean[m].get(k))}</td>" for k, _ in keys)
            + "</tr>" for m in probe.metrics)
        note = count(len(probe.cases), "case")
        if probe.incomplete:
            note += f"; {len(probe.incomplete)} with failed/missing verdicts (counted as not relevant)"
        blocks.append(f'<h3>{escape(system)}</h3><table class="grid probe" data-system="{escape(system)}">'
                      f"<thead>{head}</thead><tbody>{rows}</tbody></table><p class=note>{escape(note)}</p>")
    if not blocks:
        return ""
    return (f'<section class="card" id="probe"><h2>Rank effect vs verdict effect</h2>{"".join(blocks)}'
            f'<p class="note">Means over cases. Best/worst order: the metric if the same verdicts were re-ordered '
            f"best-first / worst-first; rank range = best \u2212 worst, how much ranking alone can move the "
            f"score. A verdict effect compares two verdict sources on the same chunks.</p></section>")


# ------------------------------------------------------------------------------------------
# drill-down
_STRIPE = {"v1": "rel", "v0": "nonrel", "vfailed": "failed"}


def _verdict_badges(chunk: Any, source: str | None) -> tuple[str, str, dict[str, str]]:
    """(badges html, css class of ``source``'s verdict, source -> css class of every verdict)."""
    out, stripes = [], {}
    for name, v in (_get(chunk, "verdicts") or {}).items():
        status = _get(v, "status", "ok")
        value = _get(v, "verdict")
        if status != "ok" or value is None:
            label, cls = f"{name}: {status}", "vfailed"
        else:
            label, cls = f"{name}: {value}", f"v{1 if value else 0}"
        extra = [x for x in (_get(v, "type"), ) if x]
        if extra:
            label += f" ({', '.join(extra)})"
        reason = _get(v, "reason") or _get(v, "error")
        out.append(f'<span class="badge {cls}" data-source="{escape(name)}">{escape(label)}</span>'
                   + (f'<span class="reason">{escape(reason)}</span> ' if reason else ""))
        stripes[name] = _STRIPE[cls]
    # a chunk without a verdict from the selected source is unjudged by it: no colour
    return "".join(out), stripes.get(source, "") if source else "", stripes


def _clip(text: str | None, limit: int) -> str:
    if not text:
        return ""
    return escape(text if len(text) <= limit else text[:limit] + f" \u2026 [{len(text) - limit} more characters]")


_COLLAPSE = 700  # characters from which a chunk shows its first lines and a "show the whole chunk" button


def _marked(text: str | None, ranges: Sequence[Sequence[int]], limit: int) -> str:
    """The text escaped, each reference range in a ``<mark>`` (titled with its passage), cut at
    ``limit``."""
    if not text:
        return ""
    cut = text[:limit]
    out, at = [], 0
    for start, end, passage in sorted((int(a), int(b), int(p)) for a, b, p in ranges):
        start, end = max(start, at), min(end, len(cut))
        if start >= end:
            continue
        out.append(escape(cut[at:start]))
        out.append(f'<mark data-passage="{passage + 1}" title="reference passage {passage + 1}">'
                   f"{escape(cut[start:end])}</mark>")
        at = end
    out.append(escape(cut[at:]))
    if len(text) > limit:
        out.append(f" \u2026 [{len(text) - limit} more characters]")
    return "".join(out)


def _chunk_text(chunk: Any, ranges: Sequence[Sequence[int]], max_text: int) -> str:
    text = (_get(chunk, "text") or "").rstrip()
    body = _marked(text, ranges, max_text)
    if len(text) <= _COLLAPSE:
        return f'<div class="chunk-text">{body}</div>'
    return (f'<div class="chunk-text long">{body}</div><button type="button" class="more">show the whole chunk '
            f"({len(text):,} characters)</button>")


def _records_block(rec: Any, max_chunks: int, max_text: int, source: str | None,
                   marks: Sequence[Sequence[Any]] = ()) -> str:
    items = []
    chunks = list(_get(rec, "chunks") or [])
    for i, chunk in enumerate(chunks[:max_chunks]):
        badges, klass, stripes = _verdict_badges(chunk, source)
        meta = [f"#{_get(chunk, 'rank')}"]
        for key in ("id", "doc_id"):
            if _get(chunk, key) is not None:
                meta.append(f"{key} {escape(str(_get(chunk, key)))}")
        if _get(chunk, "score") is not None:
            meta.append(f"score {_get(chunk, 'score'):.4g}")
        items.append(f'<li class="{klass}" data-verdicts="{escape(json.dumps(stripes))}">'
                     f'<div class="chunk-head">{_DOT.join(meta)} {badges}</div>'
                     f'{_chunk_text(chunk, marks[i] if i < len(marks) else (), max_text)}</li>')
    more = f"<p class=note>{len(chunks) - max_chunks} more chunks not shown</p>" if len(chunks) > max_chunks else ""
    response = _get(rec, "response")
    resp = f'<div class="ref"><b>Response:</b> {_clip(response, max_text)}</div>' if response else ""
    return f'{resp}<ol class="chunks">{"".join(items)}</ol>{more}'


def _case_header(rec: Any, max_text: int) -> str:
    parts = []
    if _get(rec, "reference"):
        parts.append(f'<div class="ref"><b>Reference answer:</b> {_clip(_get(rec, "reference"), max_text)}</div>')
    passages = _get(rec, "reference_contexts") or []
    if passages:
        lis = "".join(f'<li><mark data-passage="{i}">{_clip(_get(p, "text") if not isinstance(p, str) else p, max_text)}'
                      f"</mark></li>" for i, p in enumerate(passages, start=1))
        parts.append(f'<div class="ref"><b>Reference passages:</b><ol>{lis}</ol></div>')
    ids = _get(rec, "reference_context_ids")
    if ids:
        parts.append(f'<div class="ref"><b>Reference ids:</b> {escape(", ".join(map(str, ids)))}</div>')
    return "".join(parts)


def _run_block(run: Any, qid: str, judgements: Mapping[str, int], documents: Mapping[str, str] | None,
               max_chunks: int, needed: set[str]) -> str:
    """Top documents of one query; their text is filled in from one shared store when the query
    opens."""
    i = run.query_position.get(qid) if hasattr(run, "query_position") else None
    if i is None:
        return '<p class="note">no results for this query</p>'
    a, b = int(run.offsets[i]), int(run.offsets[i + 1])
    docs = run.doc_ids[a:min(b, a + max_chunks)].to_pylist()
    scores = run.scores[a:a + len(docs)].tolist() if run.scores is not None else [None] * len(docs)
    items = []
    for rank, (doc, score) in enumerate(zip(docs, scores, strict=True), start=1):
        grade = judgements.get(doc)
        if grade is None:
            badge, klass = '<span class="badge">unjudged</span>', ""
        else:
            cls = "v1" if grade >= 1 else "v0"
            badge, klass = f'<span class="badge {cls}">qrels: {grade}</span>', "rel" if grade >= 1 else "nonrel"
        has_text = bool(documents) and doc in documents
        if has_text:
            needed.add(doc)
        head = f"#{rank} \u00b7 {escape(doc)}" + (f" \u00b7 score {score:.4g}" if score is not None else "")
        items.append(f'<li class="{klass}"><div class="chunk-head">{head} {badge}</div>'
                     + (f'<div class="chunk-text" data-doc="{escape(doc)}"></div>' if has_text else "") + "</li>")
    more = f"<p class=note>{b - a - len(docs)} more results not shown</p>" if b - a > len(docs) else ""
    return f'<ol class="chunks">{"".join(items)}</ol>{more}'


def _query_table(cmp: ComparisonResult, qi: int) -> str:
    """One question's values: metrics x systems, or systems x metrics when there are many systems.
    """
    def val(s: str, m: str) -> str:
        return f"<td>{_f(float(cmp.per_query(s, m)[qi]))}</td>"

    if len(cmp.systems) > max(6, len(cmp.metrics)):
        head = "<th>system</th>" + "".join(f"<th>{escape(m)}</th>" for m in cmp.metrics)
        rows = "".join(f"<tr><td>{escape(s)}</td>" + "".join(val(s, m) for m in cmp.metrics) + "</tr>"
                       for s in cmp.systems)
    else:
        head = "<th>metric</th>" + "".join(f"<th>{escape(s)}</th>" for s in cmp.systems)
        rows = "".join(f"<tr><td>{escape(m)}</td>" + "".join(val(s, m) for s in cmp.systems) + "</tr>"
                       for m in cmp.metrics)
    return f'<div class="table-wrap"><table class="grid"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'


def _system_records(system: str, rec: Any, qid: str, inputs: ReportInputs, max_chunks: int, max_text: int) -> str:
    """One system's chunks for one case, headed by its name and the case's failure class there."""
    cls = inputs.classes.get(system, {}).get(qid)
    tag = f' <span class="fclass" data-class="{escape(cls)}">{escape(cls)}</span>' if cls else ""
    marks = inputs.highlights.get(system, {}).get(qid, ())
    return (f'<div class="system" data-system="{escape(system)}"><h4>{escape(system)}{tag}</h4>'
            f"{_records_block(rec, max_chunks, max_text, inputs.verdict_source, marks)}</div>")


def _class_attributes(classes: Mapping[str, str]) -> str:
    """The case's failure class per system (the class filter reads it); ``data-nogt`` where one has
    no ground truth."""
    nogt = ' data-nogt="1"' if "no ground truth" in classes.values() else ""
    return f'data-classes="{escape(json.dumps(classes))}"{nogt}'


def _class_tags(classes: Mapping[str, str]) -> str:
    return "".join(f'<span class="fclass" data-class="{escape(c)}" title="{escape(s)}">{escape(s)}: {escape(c)}'
                   f"</span>" for s, c in classes.items())


def _queries_section(cmp: ComparisonResult, inputs: ReportInputs, *, max_chunks: int, max_text: int,
                     max_queries: int | None, needed: set[str]) -> str:
    records, runs, qrels = inputs.records, inputs.runs, inputs.qrels
    queries, documents = inputs.queries, inputs.documents
    by_id: dict[str, dict[str, Any]] = {}
    for system, recs in (records or {}).items():
        by_id[system] = {str(_get(r, "id")): r for r in recs}
    primary = cmp.metrics[0]
    first = cmp.candidates[0]
    size = {m: np.abs(np.nan_to_num(cmp.deltas(first, m))) for m in cmp.metrics}
    order = np.argsort(-size[primary], kind="stable")
    if max_queries is not None:
        order = order[:max_queries]
    items = []
    for qi in order.tolist():
        qid = cmp.query_ids[qi]
        question = (queries or {}).get(qid)
        if question is None:
            for recs in by_id.values():
                if qid in recs and _get(recs[qid], "question"):
                    question = _get(recs[qid], "question")
                    break
        vals = []
        for metric in cmp.metrics:
            cells = []
            for s in cmp.systems:
                v = cmp.per_query(s, metric)[qi]
                cells.append(f"{escape(s)} {_f(float(v))}")
            d = cmp.deltas(first, metric)[qi]
            dcls = "gain" if d > 1e-12 else "loss" if d < -1e-12 else "ns"
            vals.append(f'<span class="vals" data-metric="{escape(metric)}">{escape(metric)}: '
                        f'{_DOT.join(cells)} <b class="{dcls}">{_signed(float(d))}'
                        f"</b></span>")
        table = _query_table(cmp, qi)
        body = [table]
        if by_id:
            header_rec = next((recs[qid] for recs in by_id.values() if qid in recs), None)
            if header_rec is not None:
                body.append(_case_header(header_rec, max_text))
            cols = [_system_records(s, by_id[s][qid], qid, inputs, max_chunks, max_text) for s in cmp.systems
                    if qid in by_id.get(s, {})]
            body.append(f'<div class="systems">{"".join(cols)}</div>')
        elif runs:
            judgements = qrels.judgements(qid) if qrels is not None else {}
            cols = [f'<div class="system" data-system="{escape(s)}"><h4>{escape(s)}</h4>'
                    f"{_run_block(run, qid, judgements, documents, max_chunks, needed)}</div>"
                    for s, run in runs.items()]
            body.append(f'<div class="systems">{"".join(cols)}</div>')
        search = f"{qid} {question or ''}".lower()
        sort_keys = json.dumps({m: float(size[m][qi]) for m in cmp.metrics})
        worst = json.dumps({m: float(np.nan_to_num(cmp.per_query(cmp.baseline, m)[qi])) for m in cmp.metrics})
        classes = {s: inputs.classes[s][qid] for s in cmp.systems if qid in inputs.classes.get(s, {})}
        items.append(f'<details class="query" data-qid="{escape(qid)}" data-search="{escape(search)}" '
                     f'data-index="{qi}" data-size="{escape(sort_keys)}" data-value="{escape(worst)}" '
                     f'{_class_attributes(classes)}><summary><span class="qid">{escape(qid)}</span>'
                     f'<span class="question">{escape(question or "")}</span>{"".join(vals)}{_class_tags(classes)}'
                     f'</summary><div class="body">{"".join(body)}</div></details>')
    shown = len(items)
    note = (f"{shown} of {len(cmp.query_ids)} queries" if shown < len(cmp.query_ids) else count(shown, "query", "queries"))
    note = (f'{escape(note)}, largest |{escape(first)} \u2212 {escape(cmp.baseline)}| on '
            f'<span id="order-metric">{escape(primary)}</span> first')
    present = {c for per in inputs.classes.values() for c in per.values()}
    options = "".join(f'<option value="{escape(c)}">{escape(c)}</option>' for c in FAILURE_CLASSES if c in present)
    picker = (f'<label>failure class <select id="class-filter"><option value="">all</option>{options}</select>'
              f"</label>" if options else "")
    return (f'<section class="card" id="queries"><h2>Per-question drill-down</h2>'
            f'<div class="controls"><input id="query-filter" type="search" placeholder="filter by id or text">'
            f'{picker}<span id="query-count" class="note">{note}</span>'
            f'<button id="expand-all" type="button">expand all</button>'
            f'<button id="collapse-all" type="button">collapse all</button></div>'
            f'<div id="query-list">{"".join(items)}</div></section>')


# --------------------------------------------------------------------------------------------
# assemble
def script_json(obj: Any) -> str:
    """JSON that is safe inside a ``<script>`` element, whatever the strings hold.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e``, ``\\u0026`` (no ``</script>``, ``<!--``
    or ``<script`` can end or re-open the element), and U+2028/U+2029 are escaped too.

    Example:
        >>> script_json({"d": "<!--<script>"})
        '{"d": "\\\\u003c!--\\\\u003cscript\\\\u003e"}'
    """
    text = json.dumps(obj, ensure_ascii=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render_html_report(
    comparison: ComparisonResult,
    *,
    sweeps: Sequence[KSweep] = (),
    grid: Mapping[str, Any] | None = None,
    records: Mapping[str, Sequence[Any]] | None = None,
    probe_sources: Sequence[str] | None = None,
    runs: Mapping[str, Any] | None = None,
    qrels: Any = None,
    queries: Mapping[str, str] | None = None,
    documents: Mapping[str, str] | None = None,
    corpus: str | PathLike | None = None,
    verdict_source: str | None = None,
    inputs: ReportInputs | None = None,
    title: str = "rankwise comparison",
    notes: Sequence[str] = (),
    max_chunks: int = 10,
    max_text: int = 1200,
    max_queries: int | None = None,
    slices: Any = None,
) -> str:
    """The report as one HTML string (see :func:`write_html_report`)."""
    if inputs is None:
        inputs = report_inputs(comparison, records=records, probe_sources=probe_sources,
                               verdict_source=verdict_source, runs=runs, qrels=qrels, queries=queries,
                               documents=documents, corpus=corpus)
    colors = {s: color_of(i) for i, s in enumerate(comparison.systems)}
    for sw in sweeps:
        for s in sw.systems:
            colors.setdefault(s, color_of(len(colors)))
    meta = _meta_line(comparison)
    needed: set[str] = set()
    probe = _probe_section(inputs.probes) if inputs.probes else ""
    sections = [
        _grid_section(comparison, grid),
        _summary_section(comparison),
        _slices_section(slices),
        _sweep_section(sweeps, colors),
        _delta_section(comparison),
        _distribution_section(comparison, colors),
        probe,
        _queries_section(comparison, inputs, max_chunks=max_chunks, max_text=max_text, max_queries=max_queries,
                         needed=needed),
    ]
    store = {d: inputs.documents[d][:max_text * 2] for d in sorted(needed)} if inputs.documents else {}
    doc_json = script_json(store)
    nav = ([("grid", "Grid")] if grid else []) + [("summary", "Summary")]
    if slices is not None:
        nav.append(("slices", f"By {slices.title}"))
    if sweeps:
        nav.append(("ksweep", "Metric vs K"))
    nav += [("deltas", "Per-query differences"), ("distributions", "Distributions")]
    if probe:
        nav.append(("probe", "Rank vs verdict"))
    nav.append(("queries", "Drill-down"))
    pickers = _pickers(comparison, inputs)
    notes_html = "".join(f'<p class="note">{escape(n)}</p>' for n in notes)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">" + HTML_GENERATOR +
        f"<title>{escape(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f'<header><h1>{escape(title)}</h1><div class="meta">{meta}</div>{notes_html}</header>'
        "<nav>" + "".join(f'<a href="#{a}">{escape(t)}</a>' for a, t in nav)
        + f'<span class="pickers">{pickers}</span></nav>'
        f'<main>{"".join(x for x in sections if x)}</main>'
        f'<script type="application/json" id="doc-texts">{doc_json}</script>'
        f"<script>{_asset('report.js')}</script></body></html>\n"
    )


def _meta_line(comparison: ComparisonResult) -> str:
    """The header's line under the title: systems, baseline, cases, test, correction, alpha, date,
    source."""
    s = comparison.settings
    test = TEST_LABELS[comparison.test]
    if comparison.test == "randomization":
        test += f", {s['permutations']:,} sign flips, seed {s['seed']}"
    meta = (f"{len(comparison.systems)} systems \u00b7 baseline <b>{escape(comparison.baseline)}</b> \u00b7 "
            f"{len(comparison.query_ids)} {'cases' if comparison.summary.get('source') else 'queries'} \u00b7 "
            f"{escape(test)} \u00b7 "
            f"{CORRECTION_LABELS[s['correction']]} correction \u00b7 alpha {s['alpha']} \u00b7 generated "
            f"{_dt.datetime.now().strftime('%Y-%m-%d %H:%M')}")
    source = comparison.summary.get("source")
    if source:
        meta += f" \u00b7 verdict source <b>{escape(source)}</b>"
        if comparison.summary.get("r_basis"):
            meta += f" \u00b7 R from {escape(str(comparison.summary['r_basis']))}"
    return meta


def _pickers(comparison: ComparisonResult, inputs: ReportInputs) -> str:
    """The navigation bar's metric picker, and the verdict-source picker when there are sources."""
    options = "".join(f'<option value="{escape(m)}">{escape(m)}</option>' for m in comparison.metrics)
    pickers = f'<label>metric <select id="metric-select">{options}</select></label>'
    if inputs.sources:
        choices = "".join(f'<option value="{escape(x)}"{" selected" if x == inputs.verdict_source else ""}>'
                          f"{escape(x)}</option>" for x in inputs.sources)
        pickers += f'<label>verdicts <select id="source-select">{choices}</select></label>'
    return pickers


def write_html_report(path: str | PathLike, comparison: ComparisonResult, **options: Any) -> Path:
    """Write the self-contained report to ``path`` and return it.

    Args:
        path: the ``.html`` file to write.
        comparison: a :class:`~rankwise.analysis.compare.ComparisonResult` (``rankwise.compare`` or
            ``compare_records``).
        **options: ``sweeps`` (k-sweeps to draw), ``grid`` (a heat map above the tables: ``{"rows":
            [...], "columns": [...], "cells": {row: {column: system}}, "row_title", "column_title",
            "title"}``, as :meth:`rankwise.workflows.sweep_run.SweepResult.grid` gives), ``records``
            (system -> per-case records: drill-down with chunk text, verdicts and reasons, and the
            rank-vs-verdict probe), ``probe_sources`` (one or two verdict sources for the probe;
            default the comparison's source), ``runs`` (system -> run: top documents per query) with
            ``qrels`` (their grades) and ``documents`` (doc id -> text) or ``corpus`` (a corpus
            path), ``queries`` (query id -> text, or a queries file), ``verdict_source`` (the source
            whose verdicts colour the chunks at first; the report lets the reader switch),
            ``inputs`` (a :class:`~rankwise.analysis.report_inputs.ReportInputs` built already,
            instead of the options above), ``title``, ``notes``, ``max_chunks``, ``max_text``,
            ``max_queries``, ``slices`` (a :class:`~rankwise.analysis.slices.Slices` of the
            comparison: a table of per-slice means and differences under the summary). Loading and
            probing happen in :func:`~rankwise.analysis.report_inputs.report_inputs`; this module
            only renders.

    Example:
        >>> import os, shutil, tempfile
        >>> from rankwise.analysis.compare import compare
        >>> qrels = {f"q{i}": {f"d{i}": 1} for i in range(4)}
        >>> a = {f"q{i}": {f"d{i}": 2.0, "x": 1.0} for i in range(4)}
        >>> b = {f"q{i}": {"x": 2.0, f"d{i}": 1.0} for i in range(4)}
        >>> tmp = tempfile.mkdtemp()
        >>> path = write_html_report(
        ...     os.path.join(tmp, "report.html"), compare(qrels, [a, b], ["mrr"], names=["a", "b"])
        ... )
        >>> path.name, path.read_text().startswith("<!DOCTYPE html>")
        ('report.html', True)
        >>> shutil.rmtree(tmp)
    """
    out = Path(path)
    text = render_html_report(comparison, **options)
    try:
        from rankwise._atomic import atomic_write_text

        if out.parent and not out.parent.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, text)
    except OSError as exc:
        raise InputError(f"cannot write the report: {exc.strerror}", source=out) from None
    return out
