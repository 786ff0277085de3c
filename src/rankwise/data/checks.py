"""Checks on RAG cases that find input a user probably did not mean: each gives one message with a
count.

Example:
    >>> from rankwise.data.records import records_from_testset
    >>> recs = records_from_testset([{"id": "q", "retrieved_context_ids": ["d1", "d1", "d2"]}])
    >>> for message in case_warnings(recs, [5]):
    ...     print(message)
    1 case lists a chunk id more than once (case 'q': 'd1' 2 times); each copy is judged at its own rank, and a repeat earns no new relevant item
    K = 5 is larger than every retrieved list (the longest holds 3 chunks): at K = 5 the ranks past 3 count as not relevant
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["case_warnings", "duplicate_chunk_ids", "cutoffs_beyond_lists", "repeated_ids_message",
           "cutoffs_beyond_depth"]


def duplicate_chunk_ids(records: Sequence[Any]) -> str | None:
    """One message for the cases whose chunk list holds an id more than once, else None.

    Example:
        >>> from rankwise.data.records import records_from_testset
        >>> duplicate_chunk_ids(
        ...     records_from_testset([{"retrieved_context_ids": ["a", "b"]}])
        ... ) is None
        True
    """
    cases, example = 0, None
    for rec in records:
        counts = Counter(c.id for c in rec.chunks if c.id is not None)
        repeated = [(i, n) for i, n in counts.items() if n > 1]
        if repeated:
            cases += 1
            if example is None:
                example = (rec.id, *repeated[0])
    return repeated_ids_message(cases, example)


def repeated_ids_message(cases: int, example: tuple[str, str, int] | None) -> str | None:
    """:func:`duplicate_chunk_ids`' words for ``cases`` cases, ``example`` = (case id, chunk id,
    times) the first of them; None when no case repeats an id.

    Example:
        >>> repeated_ids_message(1, ("q", "d1", 2))[:44]
        '1 case lists a chunk id more than once (case'
    """
    if not cases:
        return None
    rid, cid, n = example
    return (f"{cases} case{'s list' if cases != 1 else ' lists'} a chunk id more than once (case {rid!r}: "
            f"{cid!r} {n} times); each copy is judged at its own rank, and a repeat earns no new relevant item")


def cutoffs_beyond_lists(records: Sequence[Any], cutoffs: Iterable[int | None]) -> str | None:
    """One message when a cutoff K exceeds the longest retrieved list of all cases, else None.

    Example:
        >>> from rankwise.data.records import records_from_testset
        >>> recs = records_from_testset([{"retrieved_context_ids": ["a", "b"]}])
        >>> cutoffs_beyond_lists(recs, [1, 2]) is None, cutoffs_beyond_lists(recs, [3])[:36]
        (True, 'K = 3 is larger than every retrieved')
    """
    return cutoffs_beyond_depth(max((len(r.chunks) for r in records), default=0), cutoffs)


def cutoffs_beyond_depth(deepest: int, cutoffs: Iterable[int | None]) -> str | None:
    """:func:`cutoffs_beyond_lists`' words when the longest list holds ``deepest`` chunks.

    Example:
        >>> cutoffs_beyond_depth(2, [1, 2]) is None, cutoffs_beyond_depth(2, [3])[:36]
        (True, 'K = 3 is larger than every retrieved')
    """
    beyond = sorted({int(k) for k in cutoffs if k is not None and int(k) > deepest})
    if not beyond or deepest == 0:
        return None
    ks = ", ".join(map(str, beyond))
    return (f"K = {ks} {'is' if len(beyond) == 1 else 'are'} larger than every retrieved list (the longest "
            f"holds {deepest} chunk{'s' if deepest != 1 else ''}): at K = {ks} the ranks past {deepest} count "
            f"as not relevant")


def case_warnings(records: Sequence[Any], cutoffs: Iterable[int | None] = ()) -> list[str]:
    """Every message of this module that applies to ``records`` and the cutoffs asked for.

    Example:
        >>> from rankwise.data.records import records_from_testset
        >>> case_warnings(records_from_testset([{"retrieved_context_ids": ["a", "b"]}]), [1, 2])
        []
    """
    return [m for m in (duplicate_chunk_ids(records), cutoffs_beyond_lists(records, cutoffs)) if m]
