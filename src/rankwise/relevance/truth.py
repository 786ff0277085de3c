"""What every verdict source shares: a case's :class:`GroundTruth` (what recall and nDCG divide by),
its status per source, the ground truth pooled from a source's own verdicts, and a progress helper.

Example:
    >>> GroundTruth(2, [3, 1]).to_dict()
    {'n_relevant': 2, 'ideal_gains': [3, 1], 'basis': 'reference passages'}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["GroundTruth", "case_status", "incomplete_words", "pooled_truth", "pooled_items", "with_progress"]


@dataclass
class GroundTruth:
    """What a case's recall and nDCG are measured against, for one verdict source.

    Attributes:
        n_relevant: R, the number of gold items (passages, ids; for human/LLM verdicts the chunks
            judged relevant, as trec_eval pools judgements).
        ideal_gains: positive grades of the gold items, descending (the ideal ranking for nDCG).
        pooled: True when R comes from the verdicts themselves (human, LLM), not from a reference.
        basis: where R came from: ``reference passages``, ``reference ids``, ``qrels`` or ``pooled
            verdicts``.
    """

    n_relevant: int
    ideal_gains: list[int]
    pooled: bool = False
    basis: str = "reference passages"

    def to_dict(self) -> dict:
        """As stored in a record's ``truth`` (so a records file is scored without re-judging)."""
        return {"n_relevant": self.n_relevant, "ideal_gains": list(self.ideal_gains), "basis": self.basis}


def with_progress(items: list, label: str, show: bool):
    """Iterate ``items``, with a transient rich progress bar on stderr when ``show`` and the list is
    long."""
    from rankwise.progress import track

    yield from track(items, label, quiet=not show, min_items=200)


def case_status(record, source: str, *, unscorable: str | None = None) -> str:
    """``ok``, ``unscorable: <why>`` or ``incomplete: n failed verdicts, m missing`` for one source.
    """
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
        return "incomplete: " + incomplete_words(failed, missing)
    return "ok"


def incomplete_words(failed: int, missing: int) -> str:
    """What an incomplete case lacks, in :func:`case_status`' words.

    Example:
        >>> incomplete_words(0, 2), incomplete_words(1, 1)
        ('2 missing verdicts', '1 failed verdict, 1 missing verdict')
    """
    parts = []
    if failed:
        parts.append(f"{failed} failed verdict{'s' if failed != 1 else ''}")
    if missing:
        parts.append(f"{missing} missing verdict{'s' if missing != 1 else ''}")
    return ", ".join(parts)


def pooled_truth(record, source: str) -> GroundTruth:
    """R and ideal gains from the source's own verdicts (human, LLM): the distinct chunks judged
    relevant (a chunk listed twice is one item, docs/context-metrics.md "Redundant chunks")."""
    all_grades = []
    for c in record.chunks:
        v = c.verdicts.get(source)
        ok = v is not None and v.ok and v.verdict == 1
        all_grades.append((v.grade if v.grade is not None and v.grade > 0 else 1) if ok else 0)
    grades = [g for g, new in zip(all_grades, pooled_items(record.chunks, all_grades), strict=True)
              if new and g > 0]
    return GroundTruth(len(grades), sorted(grades, reverse=True), pooled=True, basis="pooled verdicts")


def pooled_items(chunks: Sequence[Any], grades: Sequence[int]) -> list[bool]:
    """Per chunk, whether it is a new item under pooled verdicts (human, LLM): True unless a chunk
    above it with a positive grade is the same chunk (same id, else span, else text).

    Example:
        >>> from rankwise.data.records import ChunkRecord
        >>> pooled_items(
        ...     [
        ...         ChunkRecord(rank=1, id="a"),
        ...         ChunkRecord(rank=2, id="a"),
        ...         ChunkRecord(rank=3, id="b"),
        ...     ],
        ...     [1, 1, 0],
        ... )
        [True, False, True]
    """
    from rankwise.data.testset import chunk_key

    seen: set = set()
    out = []
    for c, g in zip(chunks, grades, strict=True):
        key = chunk_key(c)
        out.append(key is None or key not in seen)
        if key is not None and g > 0:
            seen.add(key)
    return out
