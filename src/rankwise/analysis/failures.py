"""Why a question failed: one failure class per case and system (docs/failures.md).

The classes, their order and the first stage: docs/failures.md, "The classes".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rankwise.metrics.matrix import verdict_grade

__all__ = ["FAILURE_CLASSES", "FailureClasses", "classify_case", "failure_classes", "relevant_ranks",
           "first_relevant_rank"]

FAILURE_CLASSES = ("no ground truth", "id mismatch", "sources disagree", "hit", "demoted by the reranker",
                   "ranked too low", "split by chunking", "right document, wrong chunk", "not retrieved")
_REFERENCE_SOURCES = ("containment", "span", "fuzzy", "ids")


def relevant_ranks(record: Any, source: str, *, relevance_level: int = 1) -> list[int]:
    """The 1-based ranks whose chunk ``source`` judged relevant (grade >= ``relevance_level``).

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> r = CaseRecord("q", chunks=[ChunkRecord(rank=1, verdicts={"llm": Verdict(0)}),
        ...                             ChunkRecord(rank=2, verdicts={"llm": Verdict(1)})])
        >>> relevant_ranks(r, "llm")
        [2]
    """
    level = max(1, relevance_level)
    return [c.rank if c.rank else i + 1 for i, c in enumerate(record.chunks)
            if verdict_grade(c.verdicts.get(source), source) >= level]


def first_relevant_rank(record: Any, source: str, *, relevance_level: int = 1) -> int | None:
    """The rank of the first relevant chunk, None when no chunk is relevant.

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> first_relevant_rank(
        ...     CaseRecord("q", chunks=[ChunkRecord(rank=1, verdicts={"ids": Verdict(0)})]), "ids"
        ... )
    """
    ranks = relevant_ranks(record, source, relevance_level=relevance_level)
    return ranks[0] if ranks else None


def _has_ground_truth(record: Any, source: str) -> bool:
    if record.reference_context_ids or (record.reference_contexts and source != "ids"):
        return True
    stored = record.truth.get(source)  # graded qrels given as labels: the truth the source judged with
    if stored is not None and int(stored.get("n_relevant") or 0) > 0:
        return True
    if source in _REFERENCE_SOURCES:
        return False
    return any(c.verdicts.get(source) is not None and c.verdicts[source].ok for c in record.chunks)


def _id_mismatch(record: Any, id_field: str | None, retrieved_anywhere: set[str]) -> bool:
    gold = {str(x) for x in record.reference_context_ids or []}
    if not gold:
        return False
    field_name = id_field or "id"
    other = "doc_id" if field_name == "id" else "id"
    mine = {getattr(c, field_name) for c in record.chunks} - {None}
    if id_field is None and not mine:  # the default compares id, else doc_id
        mine = {c.doc_id for c in record.chunks} - {None}
    if gold & mine:
        return False
    theirs = {getattr(c, other) for c in record.chunks} - {None}
    return bool(gold & theirs) or not retrieved_anywhere


def _overlap(chunk: Any, passage: Any) -> int:
    if None in (chunk.doc_id, chunk.start, chunk.end) or passage.span is None:
        return 0
    doc, start, end = passage.span
    if chunk.doc_id != doc:
        return 0
    return max(0, min(chunk.end, end) - max(chunk.start, start))


def _text_overlap(chunk: Any, passage: Any) -> bool:
    """A chunk holds a piece of the passage's text (>= 20 characters of it) or the passage holds the
    chunk."""
    if not chunk.text or not passage.text:
        return False
    a, b = " ".join(chunk.text.lower().split()), " ".join(passage.text.lower().split())
    if not a or not b:
        return False
    if a in b or b in a:
        return True
    window = 20
    return len(b) >= window and any(b[i:i + window] in a for i in range(0, len(b) - window + 1, window // 2))


def _split(record: Any) -> bool:
    return any(_overlap(c, p) > 0 or (p.span is None and _text_overlap(c, p))
               for p in record.reference_contexts for c in record.chunks)


def _same_document(record: Any) -> bool:
    docs = {p.doc_id for p in record.reference_contexts if p.doc_id is not None}
    return bool(docs & ({c.doc_id for c in record.chunks} - {None}))


def _hit(record: Any, source: str, k: int, level: int) -> bool | None:
    """Whether ``source`` has a relevant chunk within the top k; None when it gave no verdict there.
    """
    top = record.chunks[:k]
    if not any(c.verdicts.get(source) is not None and c.verdicts[source].ok for c in top):
        return None
    return any(verdict_grade(c.verdicts.get(source), source) >= level for c in top)


def classify_case(record: Any, source: str, k: int, *, before: Any = None, others: Sequence[str] = (),
                  id_field: str | None = None, relevance_level: int = 1,
                  retrieved_anywhere: set[str] | None = None) -> str:
    """The failure class of one judged case (module docstring: the rules and their order).

    Args:
        record: a :class:`~rankwise.data.records.CaseRecord` holding ``source``'s verdicts.
        source: the verdict source the case is scored with.
        k: the cutoff a hit must be within.
        before: the same case's record before reranking (first stage), judged by ``source``;
            optional.
        others: other verdict sources on the same chunks to compare hit-at-K with.
        id_field: ids source: the field compared (``id`` or ``doc_id``).
        retrieved_anywhere: ids source: every id retrieved in the run (None: taken as non-empty).

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> r = CaseRecord("q", reference_context_ids=["d1"],
        ...                chunks=[ChunkRecord(rank=1, id="x", verdicts={"ids": Verdict(0)}),
        ...                        ChunkRecord(rank=2, id="d1", verdicts={"ids": Verdict(1)})])
        >>> classify_case(r, "ids", 1), classify_case(r, "ids", 2)
        ('ranked too low', 'hit')
    """
    level = max(1, relevance_level)
    if not _has_ground_truth(record, source):
        return "no ground truth"
    if source == "ids" and _id_mismatch(record, id_field, {"?"} if retrieved_anywhere is None
                                        else retrieved_anywhere):
        return "id mismatch"
    hit = bool(_hit(record, source, k, level))
    for other in others:
        theirs = _hit(record, other, k, level)
        if other != source and theirs is not None and theirs != hit:
            return "sources disagree"
    if hit:
        return "hit"
    if before is not None and _hit(before, source, k, level):
        return "demoted by the reranker"
    if relevant_ranks(record, source, relevance_level=level):
        return "ranked too low"
    if _split(record):
        return "split by chunking"
    if _same_document(record):
        return "right document, wrong chunk"
    return "not retrieved"


@dataclass
class FailureClasses:
    """Each case's failure class under one source at one K, and the counts per class.

    Attributes:
        source: the verdict source.
        k: the cutoff.
        by_case: case id -> class.
        counts: class -> cases, every class listed (zeros included) in :data:`FAILURE_CLASSES`
            order.
    """

    source: str
    k: int
    by_case: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def cases(self, failure_class: str) -> list[str]:
        """The ids of the cases in ``failure_class``, in the records' order."""
        return [q for q, c in self.by_case.items() if c == failure_class]

    def to_json(self) -> dict:
        return {"source": self.source, "k": self.k, "counts": dict(self.counts), "by_case": dict(self.by_case)}


def failure_classes(records: Sequence[Any], source: str, k: int, *, before: Mapping[str, Any] | None = None,
                    others: Sequence[str] | None = None, id_field: str | None = None,
                    relevance_level: int = 1) -> FailureClasses:
    """Classify every judged case (module docstring); ``before`` maps case ids to first-stage
    records.

    ``others``: the sources to compare with (default: every other source with verdicts on the
        records).

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> recs = [
        ...     CaseRecord(
        ...         "a",
        ...         reference_context_ids=["d1"],
        ...         chunks=[ChunkRecord(rank=1, id="d1", verdicts={"ids": Verdict(1)})],
        ...     ),
        ...     CaseRecord(
        ...         "b", chunks=[ChunkRecord(rank=1, id="d2", verdicts={"ids": Verdict(0)})]
        ...     ),
        ... ]
        >>> failure_classes(recs, "ids", 5).by_case
        {'a': 'hit', 'b': 'no ground truth'}
    """
    if others is None:
        seen: dict[str, None] = {}
        for r in records:
            for s in r.sources():
                seen.setdefault(s, None)
        others = [s for s in seen if s != source]
    retrieved: set[str] = set()
    if source == "ids":
        gold_all = {str(x) for r in records for x in r.reference_context_ids or []}
        values = {v for r in records for c in r.chunks for v in (c.id, c.doc_id) if v is not None}
        field_values = {getattr(c, id_field or "id") for r in records for c in r.chunks} - {None}
        retrieved = gold_all & (field_values if id_field else values)
    by_case = {r.id: classify_case(r, source, k, before=(before or {}).get(r.id), others=others,
                                   id_field=id_field, relevance_level=relevance_level,
                                   retrieved_anywhere=retrieved)
               for r in records}
    tally = Counter(by_case.values())
    return FailureClasses(source, k, by_case, {c: tally.get(c, 0) for c in FAILURE_CLASSES})
