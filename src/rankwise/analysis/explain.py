"""One case, explained: its references, its ranked chunks with the reference text located inside
each chunk, every source's verdict and reason side by side, the first relevant rank and the failure
class (``rankwise explain RECORDS CASE_ID``; docs/failures.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rankwise.analysis.failures import classify_case, first_relevant_rank
from rankwise.errors import InputError

__all__ = ["ChunkExplanation", "CaseExplanation", "explain_case", "highlights", "items_found"]


@dataclass
class ChunkExplanation:
    """One retrieved chunk: where reference text lies inside it (character ranges of ``text``, with
    the passage's index) and each source's verdict as (verdict, grade, status, reason)."""

    rank: int
    id: str | None
    doc_id: str | None
    text: str | None
    highlights: list[tuple[int, int, int]] = field(default_factory=list)
    verdicts: dict[str, dict] = field(default_factory=dict)


@dataclass
class CaseExplanation:
    """Everything ``explain`` shows for one case (module docstring)."""

    id: str
    question: str | None
    references: list[dict]
    chunks: list[ChunkExplanation]
    sources: list[str]
    first_relevant: dict[str, int | None]
    failure_class: dict[str, str]
    k: int
    items_found: dict[str, list] = field(default_factory=dict)  #: source -> [found, total, rank of the last found]

    def to_json(self) -> dict:
        return {"id": self.id, "question": self.question, "k": self.k, "references": self.references,
                "sources": self.sources, "first_relevant": self.first_relevant,
                "items_found": self.items_found, "failure_class": self.failure_class,
                "chunks": [{"rank": c.rank, "id": c.id, "doc_id": c.doc_id, "text": c.text,
                            "highlights": [list(h) for h in c.highlights], "verdicts": c.verdicts}
                           for c in self.chunks]}


def _norm_find(haystack: str, needle: str) -> tuple[int, int] | None:
    """Where ``needle`` occurs in ``haystack``, ignoring case and runs of whitespace (offsets into
    haystack)."""
    words = needle.split()
    if not words:
        return None
    import re

    pattern = r"\s+".join(re.escape(w) for w in words)
    m = re.search(pattern, haystack, flags=re.IGNORECASE)
    return (m.start(), m.end()) if m else None


def highlights(chunk: Any, passages: Sequence[Any]) -> list[tuple[int, int, int]]:
    """Character ranges of ``chunk.text`` that hold reference text, as (start, end, passage index).

    By offsets where the chunk and the passage both have them in one document (the chunk's text read
    as document characters ``start``..``end``); else by text: the passage inside the chunk, or the
    whole chunk when it lies inside the passage.

    Example:
        >>> from rankwise.data.testset import Chunk, ReferencePassage
        >>> highlights(Chunk("abcdefghij", doc_id="d", start=100, end=110),
        ...            [ReferencePassage("efgxyz", doc_id="d", start=104, end=110)])
        [(4, 10, 0)]
        >>> highlights(Chunk("The capital is Paris."), [ReferencePassage("capital  is PARIS")])
        [(4, 20, 0)]
    """
    text = chunk.text or ""
    out: list[tuple[int, int, int]] = []
    for i, p in enumerate(passages):
        span, own = _span(p), _span(chunk)
        if span is not None and own is not None:
            if span[0] == own[0] and min(own[2], span[2]) > max(own[1], span[1]):
                lo, hi = max(own[1], span[1]) - own[1], min(own[2], span[2]) - own[1]
                if 0 <= lo < hi <= max(len(text), hi) and len(text) == own[2] - own[1]:
                    out.append((lo, hi, i))
            continue
        if not text or not p.text:
            continue
        where = _norm_find(text, p.text)
        if where is not None:
            out.append((*where, i))
        elif _norm_find(p.text, text) is not None:
            out.append((0, len(text), i))
    return sorted(out)


def _span(item: Any) -> tuple[str, int, int] | None:
    doc, start, end = getattr(item, "doc_id", None), getattr(item, "start", None), getattr(item, "end", None)
    return None if doc is None or start is None or end is None else (doc, start, end)


def items_found(record: Any, source: str) -> list | None:
    """[reference items found, reference items there are, rank at which the last found one was first
    found] under ``source`` (the K from which recall reaches its value on this list); None for a
    source without reference items.

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> r = CaseRecord(
        ...     "q",
        ...     reference_context_ids=["a", "b"],
        ...     passages_found={"ids": [[], [0], [0]]},
        ...     chunks=[
        ...         ChunkRecord(rank=1, id="x"),
        ...         ChunkRecord(rank=2, id="a"),
        ...         ChunkRecord(rank=3, id="a"),
        ...     ],
        ... )
        >>> items_found(r, "ids")
        [1, 2, 2]
    """
    from rankwise.metrics.matrix import record_truth

    lists = record.passages_found.get(source)
    truth = record_truth(record, source)
    if lists is None or truth["basis"] == "pooled verdicts":
        return None
    seen: set = set()
    last = None
    for rank, items in enumerate(lists, start=1):
        new = set(items) - seen
        if new:
            seen |= new
            last = rank
    return [len(seen), int(truth["n_relevant"]), last]


def _verdict_row(v: Any) -> dict:
    return {"verdict": v.verdict, "grade": v.grade, "status": v.status, "reason": v.reason or v.error}


def explain_case(records: Sequence[Any], case_id: str, *, k: int = 5, sources: Sequence[str] | None = None,
                 source: str | None = None) -> CaseExplanation:
    """Explain case ``case_id`` of judged ``records`` (module docstring); ``source`` is the one
    classified first.

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> recs = [CaseRecord("q1", question="Capital?", reference_context_ids=["c2"],
        ...                    chunks=[ChunkRecord(rank=1, id="c1", verdicts={"ids": Verdict(0)}),
        ...                            ChunkRecord(rank=2, id="c2", verdicts={"ids": Verdict(1)})])]
        >>> e = explain_case(recs, "q1", k=1)
        >>> e.first_relevant, e.failure_class
        ({'ids': 2}, {'ids': 'ranked too low'})
    """
    record = next((r for r in records if r.id == case_id), None)
    if record is None:
        shown = ", ".join(r.id for r in list(records)[:5])
        raise InputError(f"no case {case_id!r} in the records (cases: {shown}{' ...' if len(records) > 5 else ''})",
                         field="CASE_ID")
    present = record.sources()
    chosen = list(sources) if sources else present
    unknown = [s for s in chosen if s not in present]
    if unknown:
        raise InputError(f"no verdicts from {', '.join(unknown)} in case {case_id!r} (present: "
                         f"{', '.join(present) or 'none'})", field="--source")
    if source is not None and source in chosen:
        chosen = [source, *[s for s in chosen if s != source]]
    passages = list(record.reference_contexts)
    refs = [{"index": i, "text": p.text, "doc_id": p.doc_id, "start": p.start, "end": p.end}
            for i, p in enumerate(passages)]
    refs += [{"id": x} for x in record.reference_context_ids or []]
    chunks = [ChunkExplanation(c.rank, c.id, c.doc_id, c.text, highlights(c, passages),
                               {s: _verdict_row(c.verdicts[s]) for s in chosen if s in c.verdicts})
              for c in record.chunks]
    return CaseExplanation(record.id, record.question, refs, chunks, chosen,
                           {s: first_relevant_rank(record, s) for s in chosen},
                           {s: classify_case(record, s, k, others=[o for o in chosen if o != s]) for s in chosen},
                           k, {s: found for s in chosen if (found := items_found(record, s)) is not None})
