"""Verdicts from ids (docs/metrics.md §4): retrieved ids looked up in the reference ids or in graded
qrels.

A chunk's key is its ``id`` (or its ``doc_id`` when it has no id; ``id_field="doc_id"`` always uses
the document). With qrels, the grade decides (relevant iff grade >= relevance_level) and feeds nDCG;
without, every reference id has grade 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankwise.data.records import CaseRecord, Verdict
from rankwise.errors import InputError
from rankwise.relevance.truth import GroundTruth, case_status

__all__ = ["judge_ids", "id_key", "gold_grades"]


def id_key(chunk, id_field: str | None = None) -> str | None:
    """The id compared with the gold ids: ``id`` (falling back to ``doc_id``), or the field named.
    """
    if id_field is None:
        return chunk.id if chunk.id is not None else chunk.doc_id
    if id_field not in ("id", "doc_id"):
        raise InputError(f"id_field must be 'id' or 'doc_id', not {id_field!r}", field="id_field")
    return getattr(chunk, id_field)


def _qrels_dict(qrels: Any) -> dict[str, dict[str, int]]:
    if qrels is None:
        return {}
    from rankwise.data.load import load_qrels

    q = load_qrels(qrels) if not isinstance(qrels, Mapping) else None
    if q is None:
        return {str(k): {str(d): int(g) for d, g in v.items()} for k, v in qrels.items()}
    return {qid: q.judgements(qid) for qid in q.queries}


def gold_grades(record: CaseRecord, qrels: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, int]:
    """The case's gold ids with grades: reference ids at grade 1, overridden by its qrels entries.
    """
    grades = {i: 1 for i in (record.reference_context_ids or [])}
    if qrels and record.id in qrels:
        grades.update(qrels[record.id])
    return grades


def _id_reason(key: str, listed: bool, grade: int, relevance_level: int) -> str:
    """Why a chunk got its ids verdict.

    Example:
        >>> _id_reason("d3", True, 2, 1), _id_reason("d9", False, 0, 1)
        ('id d3 in the reference ids (grade 2)', 'id d9 not in the reference ids')
    """
    if not listed:
        return f"id {key} not in the reference ids"
    if grade < relevance_level:
        return f"id {key} in the reference ids with grade {grade}, below the relevance level {relevance_level}"
    return f"id {key} in the reference ids (grade {grade})"


def judge_ids(records: list[CaseRecord], *, qrels: Any = None, id_field: str | None = None,
              relevance_level: int = 1) -> dict[str, GroundTruth]:
    """Judge every chunk by id; fills ``verdicts["ids"]`` and ``passages_found["ids"]`` in place.

    ``passages_found["ids"]`` holds, per rank, the index of the matched gold id in the case's gold
    list (reference ids in order, then qrels-only ids).

    Example:
        >>> from rankwise.data.records import records_from_testset
        >>> recs = records_from_testset(
        ...     [
        ...         {
        ...             "id": "q",
        ...             "retrieved_context_ids": ["d1", "d2", "d3", "d4"],
        ...             "reference_context_ids": ["d1", "d4", "d5", "d6"],
        ...         }
        ...     ]
        ... )
        >>> t = judge_ids(recs)
        >>> recs[0].verdicts("ids"), t["q"].n_relevant
        ([1, 0, 0, 1], 4)
    """
    table = _qrels_dict(qrels)
    if table:
        known = {r.id for r in records}
        unknown = sorted(set(table) - known)
        if unknown and not (set(table) & known):
            raise InputError(f"the qrels share no case id with the test set (qrels ids: {unknown[:5]})",
                             field="query_id")
    truth: dict[str, GroundTruth] = {}
    for rec in records:
        grades = gold_grades(rec, table)
        order = {g: i for i, g in enumerate(grades)}
        found = []
        for c in rec.chunks:
            key = (c.id if c.id is not None else c.doc_id) if id_field is None else id_key(c, id_field)
            if key is None:
                c.verdicts["ids"] = Verdict(None, status="missing", error="chunk has no id")
                found.append([])
                continue
            grade = grades.get(key, 0)
            rel = grade >= relevance_level
            c.verdicts["ids"] = Verdict(1 if rel else 0, grade=grade, meta={"key": key},
                                        reason=_id_reason(key, key in grades, grade, relevance_level))
            found.append([order[key]] if rel else [])
        rec.passages_found["ids"] = found
        relevant = [g for g in grades.values() if g >= relevance_level]
        rec.status["ids"] = case_status(rec, "ids", unscorable=None if relevant else "no ground truth")
        truth[rec.id] = GroundTruth(len(relevant), sorted((g for g in grades.values() if g > 0), reverse=True),
                                    basis="qrels" if table else "reference ids")
    return truth
