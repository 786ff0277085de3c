"""Headroom's best order over columns: :func:`rankwise.analysis.headroom.best_order` for a whole
block of cases at once (relevant chunks first, the one finding the most reference items not yet
found first, then the original order; the rest after them in their order).

Example:
    >>> import json, tempfile, pathlib
    >>> from rankwise.data.testset_columns import iter_case_columns
    >>> from rankwise.relevance.column_sources import judge_columns
    >>> path = pathlib.Path(tempfile.mkdtemp(), "t.jsonl")
    >>> _ = path.write_text(json.dumps({"id": "q", "retrieved_context_ids": ["x", "a", "a", "b"],
    ...                                 "reference_context_ids": ["a", "b"]}) + "\\n")
    >>> cases = next(iter_case_columns(path))
    >>> best_ranks(cases, judge_columns(cases, "ids")).tolist()
    [3, 0, 2, 1]
"""

from __future__ import annotations

import numpy as np

from rankwise.data.testset_columns import CaseColumns, NotColumnar
from rankwise.relevance.column_verdicts import ColumnVerdicts

__all__ = ["best_ranks", "moved_cases"]


def best_ranks(cases: CaseColumns, verdicts: ColumnVerdicts) -> np.ndarray:
    """Each chunk's 0-based rank in its case's best order."""
    case, rank = cases.chunk_case(), cases.chunk_rank()
    depth = int(verdicts.lengths.max(initial=0))
    relevant = verdicts.grade > 0
    if verdicts.source == "ids" or not len(verdicts.item):
        # one item per relevant chunk (its id): the first chunk of each id, then its repeats
        first = np.ones(len(case), dtype=bool)
        seen = np.zeros(len(case), dtype=bool)
        keyed = np.flatnonzero(relevant)
        if len(keyed):
            width = np.int64(cases.n_codes + 1)
            group = case[keyed] * width + verdicts.key[keyed]
            order = np.argsort(group * np.int64(depth + 1) + rank[keyed])
            repeat = np.zeros(len(order), dtype=bool)
            repeat[1:] = group[order][1:] == group[order][:-1]
            seen[keyed[order[repeat]]] = True
        first &= ~seen
        tier = np.where(relevant & first, 0, np.where(relevant, 1, 2))
        return _rank_within(case, tier * np.int64(depth + 1) + rank, cases.chunk_offsets)
    return _greedy(cases, verdicts, case, rank, depth)


def _rank_within(case: np.ndarray, key: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each chunk's 0-based position in its case when sorted by ``key`` (unique within a case);
    ``offsets``: where each case's chunks start."""
    order = np.argsort(case * np.int64(key.max(initial=0) + 1) + key)
    out = np.empty(len(case), dtype=np.int64)
    out[order] = np.arange(len(order)) - offsets[case[order]]
    return out


def _greedy(cases: CaseColumns, verdicts: ColumnVerdicts, case: np.ndarray, rank: np.ndarray,
            depth: int) -> np.ndarray:
    """Passages as items: at each step the relevant chunk adding the most passages not yet found
    (ties: the earlier chunk), one step for every case at once; passages as bits of a mask."""
    n = cases.n
    passage_case = cases.passage_case()
    local = verdicts.item - cases.passage_offsets[passage_case[verdicts.item]]
    if len(local) and local.max() >= 63:
        raise NotColumnar("a case with more than 63 reference passages (headroom's masks)")
    masks = np.zeros(len(case), dtype=np.uint64)
    np.bitwise_or.at(masks, verdicts.item_chunk, np.left_shift(np.uint64(1), local.astype(np.uint64)))
    grid = np.zeros((n, depth), dtype=np.uint64)
    grid[case, rank] = masks
    left = np.zeros((n, depth), dtype=bool)
    left[case, rank] = verdicts.grade > 0
    place = np.full((n, depth), -1, dtype=np.int64)
    seen = np.zeros(n, dtype=np.uint64)
    later = np.arange(depth, 0, -1, dtype=np.int64)  # ties: the earlier chunk
    for step in range(int(left.sum(axis=1).max(initial=0))):
        gain = np.bitwise_count(grid & ~seen[:, None]).astype(np.int64)
        score = np.where(left, gain * (depth + 1) + later, -1)
        pick = score.argmax(axis=1)
        rows = np.flatnonzero(score[np.arange(n), pick] >= 0)
        pick = pick[rows]
        place[rows, pick] = step
        seen[rows] |= grid[rows, pick]
        left[rows, pick] = False
    placed = place[case, rank]
    tier = np.where(placed >= 0, placed, depth + rank)
    return _rank_within(case, tier, cases.chunk_offsets)


def moved_cases(cases: CaseColumns, ranks: np.ndarray) -> np.ndarray:
    """Per case, whether its best order differs from its order.

    Example:
        >>> import json, tempfile, pathlib
        >>> from rankwise.data.testset_columns import iter_case_columns
        >>> from rankwise.relevance.column_sources import judge_columns
        >>> path = pathlib.Path(tempfile.mkdtemp(), "t.jsonl")
        >>> gold = {"reference_context_ids": ["y"]}
        >>> rows = [{"id": "a", "retrieved_context_ids": ["x", "y"], **gold},
        ...         {"id": "b", "retrieved_context_ids": ["y", "x"], **gold}]
        >>> _ = path.write_text("".join(json.dumps(r) + "\\n" for r in rows))
        >>> cases = next(iter_case_columns(path))
        >>> moved_cases(cases, best_ranks(cases, judge_columns(cases, "ids"))).tolist()
        [True, False]
    """
    return np.bincount(cases.chunk_case()[ranks != cases.chunk_rank()], minlength=cases.n) > 0
