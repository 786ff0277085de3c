"""Span verdicts over columns: :func:`rankwise.relevance.text.span_match`'s rule (the chunk covers
at least ``min_overlap`` of a reference passage, or the passage that share of the chunk, in the same
document) as interval arithmetic on every (chunk, passage) pair of a block of cases at once.

Example:
    >>> import json, tempfile, pathlib
    >>> from rankwise.data.testset_columns import iter_case_columns
    >>> path = pathlib.Path(tempfile.mkdtemp(), "t.jsonl")
    >>> row = {"id": "q", "retrieved_contexts": [{"doc_id": "d1", "start": 0, "end": 500},
    ...                                          {"doc_id": "d1", "start": 0, "end": 130}],
    ...        "reference_contexts": [{"doc_id": "d1", "start": 100, "end": 200}]}
    >>> _ = path.write_text(json.dumps(row) + "\\n")
    >>> judge_span_columns(next(iter_case_columns(path))).grade.tolist()
    [1, 0]
"""

from __future__ import annotations

import numpy as np

from rankwise.data.columns import expand_ranges
from rankwise.data.testset_columns import CaseColumns
from rankwise.relevance.column_verdicts import ColumnVerdicts

__all__ = ["judge_span_columns", "case_pairs", "shared_chars"]


def case_pairs(left_case: np.ndarray, right_case: np.ndarray, n_cases: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (left, right) index pair of items in the same case (items of each side in case order).

    Example:
        >>> [a.tolist() for a in case_pairs(np.array([0, 0, 1]), np.array([0, 1, 1]), 2)]
        [[0, 1, 2, 2], [0, 0, 1, 2]]
    """
    right_count = np.bincount(right_case, minlength=n_cases)
    right_start = np.zeros(n_cases + 1, dtype=np.int64)
    np.cumsum(right_count, out=right_start[1:])
    times = right_count[left_case]
    left = np.repeat(np.arange(len(left_case), dtype=np.int64), times)
    return left, expand_ranges(right_start[left_case], times)


def shared_chars(a_doc, a_start, a_end, b_doc, b_start, b_end) -> np.ndarray:
    """Characters two spans share, pair by pair (0 across documents or with no span: -1).

    Example:
        >>> a = np.array
        >>> shared_chars(a([1, 1, -1]), a([0, 0, 0]), a([100, 100, 9]),
        ...              a([1, 2, 1]), a([80, 80, 0]), a([150, 150, 9])).tolist()
        [20, 0, 0]
    """
    shared = np.minimum(a_end, b_end) - np.maximum(a_start, b_start)
    known = (a_doc >= 0) & (b_doc >= 0) & (a_start >= 0) & (a_end >= 0) & (b_start >= 0) & (b_end >= 0)
    return np.where(known & (a_doc == b_doc), np.maximum(shared, 0), 0)


def judge_span_columns(cases: CaseColumns, *, min_overlap: float = 0.5, id_field: str | None = None) -> ColumnVerdicts:
    """Each chunk with (doc_id, start, end) against each reference passage with one of the same
    case; a chunk without a span has no verdict; R is the passages with a span, and a case with
    none is unscorable (no ground truth, or no passage with offsets). ``id_field`` only picks the
    matrix's key (as ``RelevanceMatrix.from_records`` reads it)."""
    n = cases.n
    spanned = (cases.chunk_doc >= 0) & (cases.chunk_start >= 0) & (cases.chunk_end >= 0)
    usable = (cases.passage_doc >= 0) & (cases.passage_start >= 0) & (cases.passage_end >= 0)
    passage_case = cases.passage_case()
    chunk_case = cases.chunk_case()
    chunks = np.flatnonzero(spanned)
    passages = np.flatnonzero(usable)
    left, right = case_pairs(chunk_case[chunks], passage_case[passages], n)
    c, p = chunks[left], passages[right]
    same_doc = cases.chunk_doc[c] == cases.passage_doc[p]
    c, p = c[same_doc], p[same_doc]
    c_start, c_end = cases.chunk_start[c], cases.chunk_end[c]
    p_start, p_end = cases.passage_start[p], cases.passage_end[p]
    shared = shared_chars(cases.chunk_doc[c], c_start, c_end, cases.passage_doc[p], p_start, p_end)
    p_len, c_len = p_end - p_start, c_end - c_start
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero length never decides (its side is False)
        match = (shared > 0) & (((p_len > 0) & (shared / np.where(p_len > 0, p_len, 1) >= min_overlap))
                                | ((c_len > 0) & (shared / np.where(c_len > 0, c_len, 1) >= min_overlap)))
    c, p = c[match], p[match]
    grade = np.zeros(len(cases.chunk_id), dtype=np.int64)
    grade[c] = 1
    n_relevant = np.bincount(passage_case[passages], minlength=n).astype(np.int64)
    has_passages = np.diff(cases.passage_offsets) > 0
    unscorable = np.where(n_relevant > 0, 0, np.where(has_passages, 2, 1)).astype(np.int8)
    key = cases.chunk_doc if id_field == "doc_id" else np.where(cases.chunk_id >= 0, cases.chunk_id, cases.chunk_doc)
    return ColumnVerdicts("span", grade, spanned, key, c, p, n_relevant, unscorable, cases.lengths,
                          "reference passages")
