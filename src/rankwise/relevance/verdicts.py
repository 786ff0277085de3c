"""The verdict dispatcher: fill one source's verdicts into records and return each case's ground truth.

Every source fills per-chunk :class:`~rankwise.data.records.Verdict` objects into per-case records
(``chunk.verdicts[source]``), the passages each chunk matched (``record.passages_found[source]``) and a
status per case; it returns, per case, the :class:`GroundTruth` that recall and nDCG divide by.

Example:
    >>> from rankwise.data.records import records_from_testset
    >>> from rankwise.relevance.verdicts import judge
    >>> recs = records_from_testset([{"id": "q1", "retrieved_contexts": ["Paris is the capital.", "Rome."],
    ...                               "reference_contexts": ["paris is the capital"]}])
    >>> truth = judge(recs, "containment")
    >>> recs[0].verdicts("containment"), truth["q1"].n_relevant
    ([1, 0], 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["GroundTruth", "TEXT_SOURCES", "SOURCES", "judge", "pooled_truth", "case_status", "with_progress"]

TEXT_SOURCES = ("containment", "span", "fuzzy")
SOURCES = ("containment", "span", "fuzzy", "ids", "human", "llm", "utility")


@dataclass
class GroundTruth:
    """What a case's recall and nDCG are measured against, for one verdict source.

    Attributes:
        n_relevant: R, the number of gold items (passages, ids; for human/LLM verdicts the chunks judged
            relevant, as trec_eval pools judgements).
        ideal_gains: positive grades of the gold items, descending (the ideal ranking for nDCG).
        pooled: True when R comes from the verdicts themselves (human, LLM), not from a reference.
        basis: where R came from: ``reference passages``, ``reference ids``, ``qrels`` or ``pooled verdicts``.
    """

    n_relevant: int
    ideal_gains: list[int]
    pooled: bool = False
    basis: str = "reference passages"

    def to_dict(self) -> dict:
        """As stored in a record's ``truth`` (so a records file is scored without re-judging)."""
        return {"n_relevant": self.n_relevant, "ideal_gains": list(self.ideal_gains), "basis": self.basis}


def with_progress(items: list, label: str, show: bool):
    """Iterate ``items``, with a transient rich progress bar on stderr when ``show`` and the list is long."""
    from rankwise.progress import track

    yield from track(items, label, quiet=not show, min_items=200)


def case_status(record, source: str, *, unscorable: str | None = None) -> str:
    """``ok``, ``unscorable: <why>`` or ``incomplete: n failed verdicts, m missing`` for one source."""
    if unscorable:
        return f"unscorable: {unscorable}"
    if not record.chunks:
        return "unscorable: no retrieved chunks"
    failed = missing = 0
    for c in record.chunks:
        v = c.verdicts.get(source)
        if v is None or v.status == "missing":
            missing += 1
        elif v.status == "failed" or v.verdict is None:
            failed += 1
    if failed or missing:
        parts = []
        if failed:
            parts.append(f"{failed} failed verdict{'s' if failed != 1 else ''}")
        if missing:
            parts.append(f"{missing} missing verdict{'s' if missing != 1 else ''}")
        return "incomplete: " + ", ".join(parts)
    return "ok"


def pooled_truth(record, source: str) -> GroundTruth:
    """R and ideal gains from the source's own verdicts (human, LLM): the chunks judged relevant."""
    grades = []
    for c in record.chunks:
        v = c.verdicts.get(source)
        if v is not None and v.ok and v.verdict == 1:
            grades.append(v.grade if v.grade is not None and v.grade > 0 else 1)
    return GroundTruth(len(grades), sorted(grades, reverse=True), pooled=True, basis="pooled verdicts")


def judge(records: list, source: str, *, labels: Any = None, min_overlap: float = 0.5,
          threshold: float = 0.8, id_field: str | None = None, qrels: Mapping | Any = None,
          relevance_level: int = 1, progress: bool = False,
          min_evidence_chars: int | None = None) -> dict[str, GroundTruth]:
    """Fill ``source``'s verdicts into ``records`` (in place) and return each case's ground truth.

    ``containment``/``span``/``fuzzy`` match chunk text or offsets against the reference passages
    (containment/fuzzy: a chunk lying inside a passage counts when it holds ``min_evidence_chars``
    letters/digits, default :data:`rankwise.relevance.text.MIN_EVIDENCE_CHARS`);
    ``ids`` looks retrieved ids up in the reference ids (or graded ``qrels``); ``human`` applies a labels
    file; ``llm`` (and any other name) reads verdicts already in the records.
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

            apply_labels(records, labels)
        out = {}
        for r in records:
            r.status[source] = case_status(r, source)
            out[r.id] = pooled_truth(r, source)
    for r in records:
        r.truth[source] = out[r.id].to_dict()
    return out
