"""Everything a report shows besides the comparison, loaded and computed once: records, probes,
runs, qrels, query texts and document texts. Report modules only render what this module hands them.

Example:
    >>> from rankwise.analysis.compare import compare_records
    >>> from rankwise.metrics.rag import evaluate_rag
    >>> sets = {
    ...     name: evaluate_rag(
    ...         [
    ...             {
    ...                 "id": "q",
    ...                 "retrieved_contexts": chunks,
    ...                 "reference_contexts": ["paris is the capital"],
    ...             }
    ...         ],
    ...         k=2,
    ...         metrics=["mrr"],
    ...     ).records
    ...     for name, chunks in (
    ...         ("A", ["paris is the capital", "x"]),
    ...         ("B", ["x", "paris is the capital"]),
    ...     )
    ... }
    >>> inputs = report_inputs(compare_records(sets, "containment", ["mrr"]), records=sets)
    >>> inputs.verdict_source, sorted(inputs.probes), inputs.sources
    ('containment', ['A', 'B'], ['containment'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

from rankwise.errors import InputError

__all__ = ["ReportInputs", "report_inputs", "document_texts"]


@dataclass
class ReportInputs:
    """What the HTML report draws from, besides the comparison.

    Attributes:
        records: system -> per-case records (drill-down with chunk text, verdicts and reasons).
        sources: the verdict sources present in the records, the comparison's first.
        verdict_source: the source whose verdicts colour the chunks at first (the comparison's
            source).
        probe_sources: the one or two sources of the rank-vs-verdict probe.
        probes: system -> :class:`~rankwise.analysis.probe.SourceComparison` over ``probe_sources``.
        runs: system -> :class:`~rankwise.data.Run` (drill-down of top documents).
        qrels: the :class:`~rankwise.data.Qrels` grading those documents.
        queries: query id -> text.
        documents: document id -> text.
        highlights: system -> case id -> per chunk, the (start, end, passage) ranges of its text
            that hold reference text (:func:`rankwise.analysis.explain.highlights`).
        classes: system -> case id -> failure class (docs/failures.md).

    Example:
        >>> ReportInputs().verdict_source is None
        True
    """

    records: dict[str, list] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    verdict_source: str | None = None
    probe_sources: list[str] = field(default_factory=list)
    probes: dict[str, Any] = field(default_factory=dict)
    runs: dict[str, Any] = field(default_factory=dict)
    qrels: Any = None
    queries: dict[str, str] = field(default_factory=dict)
    documents: dict[str, str] = field(default_factory=dict)
    highlights: dict[str, dict[str, list]] = field(default_factory=dict)
    classes: dict[str, dict[str, str]] = field(default_factory=dict)


def document_texts(corpus: Any) -> dict[str, str]:
    """Document id -> text (title first when the text does not start with it) of a corpus or corpus
    path.

    Example:
        >>> document_texts({"d1": "BM25 ranks by term frequency."})
        {'d1': 'BM25 ranks by term frequency.'}
    """
    if isinstance(corpus, Mapping) and all(isinstance(v, str) for v in corpus.values()):
        return {str(k): v for k, v in corpus.items()}
    from rankwise.data.corpus import load_corpus

    docs = load_corpus(corpus) if isinstance(corpus, (str, PathLike)) else corpus
    return {d.id: (f"{d.title}\n{d.text}" if d.title and not d.text.startswith(d.title) else d.text)
            for d in docs}


def report_inputs(comparison: Any = None, *, records: Mapping[str, Sequence[Any]] | None = None,
                  probe_sources: Sequence[str] | None = None, verdict_source: str | None = None,
                  runs: Mapping[str, Any] | None = None, qrels: Any = None,
                  queries: Mapping[str, str] | str | PathLike | None = None,
                  documents: Mapping[str, str] | None = None,
                  corpus: str | PathLike | None = None) -> ReportInputs:
    """Load and compute what a report needs: parse records, probe them, load runs, qrels, texts.

    Args:
        comparison: the :class:`~rankwise.analysis.compare.ComparisonResult`; its verdict source is
            the default of ``verdict_source`` and ``probe_sources``.
        records: system -> records (``CaseRecord`` objects or their dicts).
        probe_sources: one or two verdict sources for the probe (default: the comparison's source).
        verdict_source: the source colouring the chunks at first (default: the comparison's source).
        runs: system -> run (anything :func:`~rankwise.data.load.load_run` reads).
        qrels: anything :func:`~rankwise.data.load.load_qrels` reads.
        queries: query id -> text, or a queries file.
        documents: document id -> text; ``corpus``: a corpus path to read them from instead.
    """
    out = ReportInputs()
    source = (comparison.summary.get("source") if comparison is not None else None) or None
    if records:
        from rankwise.analysis.probe import probe_records
        from rankwise.data.records import CaseRecord, record_from_dict

        out.records = {name: [r if isinstance(r, CaseRecord) else record_from_dict(r) for r in recs]
                       for name, recs in records.items()}
        present = sorted({s for recs in out.records.values() for r in recs for s in r.sources()})
        first = verdict_source or source
        if first is not None and first not in present:
            raise InputError(f"no {first!r} verdicts in the records (sources present: {present or 'none'})",
                             field="source")
        out.sources = ([first] if first else []) + [s for s in present if s != first]
        out.verdict_source = first or (present[0] if present else None)
        out.probe_sources = list(probe_sources or ([source] if source else []))
        probe_metrics = None
        if comparison is not None:
            from rankwise.metrics.registry import parse_measures

            # the comparison's metrics that verdicts alone define (not char_recall, which needs
            # spans)
            probe_metrics = [m.name for m in parse_measures(comparison.metrics) if not m.metric.requires] or None
        _drill_down(out, comparison)
        for name, recs in out.records.items():
            have = {s for r in recs for s in r.sources()}
            use = [s for s in out.probe_sources if s in have]
            if not use or not any(r.chunks for r in recs):
                continue
            try:
                out.probes[name] = probe_records(recs, use, probe_metrics)
            except InputError:
                continue
    if runs:
        from rankwise.data.load import load_run

        out.runs = {name: load_run(r, name=name) for name, r in runs.items()}
    if qrels is not None:
        from rankwise.data.load import load_qrels

        out.qrels = load_qrels(qrels)
    if queries is not None:
        if isinstance(queries, (str, PathLike)):
            from rankwise.data.corpus import load_queries

            queries = load_queries(queries)
        out.queries = {str(k): str(v) for k, v in queries.items()}
    if corpus is not None:
        out.documents = document_texts(corpus)
    elif documents is not None:
        out.documents = dict(documents)
    return out


def _drill_down(out: ReportInputs, comparison: Any) -> None:
    """The drill-down's reference highlights per chunk and failure class per case (the comparison's
    when it decided them, else decided here at its largest cutoff)."""
    from rankwise.analysis.explain import highlights
    from rankwise.analysis.failures import failure_classes

    decided = (comparison.summary.get("failure_classes") or {}) if comparison is not None else {}
    ks = [m.k for m in _measures(comparison) if getattr(m, "k", None)]
    for name, recs in out.records.items():
        out.highlights[name] = {r.id: [highlights(c, r.reference_contexts) for c in r.chunks] for r in recs}
        if name in decided and "by_case" in decided[name]:
            out.classes[name] = dict(decided[name]["by_case"])
        elif out.verdict_source is not None:
            out.classes[name] = failure_classes(recs, out.verdict_source, max(ks, default=10)).by_case


def _measures(comparison: Any) -> list:
    if comparison is None:
        return []
    from rankwise.metrics.registry import parse_measures

    try:
        return parse_measures(comparison.metrics)
    except InputError:
        return []
