"""The verdict dispatcher: fill one source's verdicts into records and return each case's ground
truth.

Every source fills per-chunk :class:`~rankwise.data.records.Verdict` objects into per-case records
(``chunk.verdicts[source]``), the passages each chunk matched (``record.passages_found[source]``)
and a status per case; it returns, per case, the :class:`GroundTruth` that recall and nDCG divide
by.

Example:
    >>> from rankwise.data.records import records_from_testset
    >>> from rankwise.relevance.verdicts import assign_verdicts
    >>> recs = records_from_testset(
    ...     [
    ...         {
    ...             "id": "q1",
    ...             "retrieved_contexts": ["Paris is the capital.", "Rome."],
    ...             "reference_contexts": ["paris is the capital"],
    ...         }
    ...     ]
    ... )
    >>> truth = assign_verdicts(recs, "containment")
    >>> recs[0].verdicts("containment"), truth["q1"].n_relevant
    ([1, 0], 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankwise.relevance.truth import GroundTruth, case_status, pooled_truth, with_progress

__all__ = ["GroundTruth", "TEXT_SOURCES", "SOURCES", "assign_verdicts", "pooled_truth", "case_status", "with_progress"]

TEXT_SOURCES = ("containment", "span", "fuzzy")
SOURCES = ("containment", "span", "fuzzy", "ids", "human", "llm", "utility")


def assign_verdicts(records: list, source: str, *, labels: Any = None, min_overlap: float = 0.5,
          threshold: float = 0.8, id_field: str | None = None, qrels: Mapping | Any = None,
          relevance_level: int = 1, progress: bool = False,
          min_evidence_chars: int | None = None, system: str | None = None) -> dict[str, GroundTruth]:
    """Fill ``source``'s verdicts into ``records`` (in place) and return each case's ground truth.

    ``containment``/``span``/``fuzzy`` match chunk text or offsets against the reference passages
    (containment/fuzzy: a chunk lying inside a passage counts when it holds ``min_evidence_chars``
    letters/digits, default :data:`rankwise.relevance.text.MIN_EVIDENCE_CHARS`); ``ids`` looks
    retrieved ids up in the reference ids (or graded ``qrels``); ``human`` applies a labels file (of
    a sheet naming several systems, ``system``'s rows); ``llm`` (and any other name) reads verdicts
    already in the records.
    """
    if source in TEXT_SOURCES:
        from rankwise.relevance.text import judge_text

        extra = {} if min_evidence_chars is None else {"min_evidence_chars": min_evidence_chars}
        out = judge_text(records, source, min_overlap=min_overlap, threshold=threshold, progress=progress, **extra)
    elif source == "ids":
        from rankwise.relevance.ids import judge_ids

        out = judge_ids(records, qrels=qrels if qrels is not None else labels, id_field=id_field,
                        relevance_level=relevance_level)
    else:
        if source == "human" and labels is not None:
            from rankwise.relevance.human import apply_labels

            apply_labels(records, labels, system=system)
        out = {}
        for r in records:
            r.status[source] = case_status(r, source)
            out[r.id] = pooled_truth(r, source)
    for r in records:
        r.truth[source] = out[r.id].to_dict()
    if source in TEXT_SOURCES + ("ids",):
        _judge_call_extras(records, source, labels=labels, min_overlap=min_overlap, threshold=threshold,
                           id_field=id_field, qrels=qrels, relevance_level=relevance_level,
                           min_evidence_chars=min_evidence_chars)
    return out


def _judge_call_extras(records: list, source: str, **options: Any) -> None:
    """Judge the chunks of calls that the case's own list (``retrieved_contexts`` given beside
    ``calls``) does not hold, so the metrics over calls see a verdict for every chunk a call
    retrieved; the passages such a chunk matched go in its verdict's ``meta["passages"]``."""
    from rankwise.data.records import CaseRecord, ChunkRecord

    for r in records:
        extras = [c for call, index in zip(r.calls, r.call_index(), strict=True)
                  for c, i in zip(call.chunks, index, strict=True) if i is None and source not in c.verdicts]
        if not extras:
            continue
        shadow = CaseRecord(r.id, r.question, reference=r.reference, response=r.response,
                            reference_contexts=r.reference_contexts, reference_context_ids=r.reference_context_ids,
                            chunks=[ChunkRecord(rank=j + 1, id=c.id, text=c.text, doc_id=c.doc_id, start=c.start,
                                                end=c.end, score=c.score) for j, c in
                             enumerate(extras)])
        assign_verdicts([shadow], source, **options)
        found = shadow.passages_found.get(source) or [[] for _ in extras]
        for c, judged, passages in zip(extras, shadow.chunks, found, strict=True):
            v = judged.verdicts[source]
            v.meta = {**v.meta, "passages": list(passages)}
            c.verdicts[source] = v
