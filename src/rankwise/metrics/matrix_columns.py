"""The relevance matrix from columns: :meth:`RelevanceMatrix.from_records`' matrix built from a
block of cases and their column verdicts (:mod:`rankwise.relevance.column_verdicts`), with array
operations instead of a pass over Python objects per chunk.

Every array holds what ``from_records`` puts there, to the bit: grades (the redundancy rule
applied: a chunk keeps its grade only where it earns a gold item no chunk above it matched), the
gold items first found at each rank, the first occurrence of each key, the chunks with a verdict,
the chunks' lengths in characters and, for span ground truth, the reference characters first
covered at each rank. ``rank`` lays the same chunks out in another order (headroom's best order).

Example:
    >>> import json, tempfile, pathlib
    >>> import numpy as np
    >>> from rankwise.data.testset_columns import iter_case_columns
    >>> from rankwise.relevance.column_sources import judge_columns
    >>> path = pathlib.Path(tempfile.mkdtemp(), "t.jsonl")
    >>> _ = path.write_text(json.dumps({"id": "q", "retrieved_context_ids": ["a", "b", "a"],
    ...                                 "reference_context_ids": ["a", "c"]}) + "\\n")
    >>> cases = next(iter_case_columns(path))
    >>> m = matrix_from_columns(cases, judge_columns(cases, "ids"), np.array([0]))
    >>> m.grades.tolist(), m.chunk_grades.tolist(), m.n_relevant.tolist(), m.r_basis
    ([[1, 0, 0]], [[1, 0, 1]], [2], 'reference ids')
"""

from __future__ import annotations

import numpy as np

from rankwise.data.columns import distinct_sorted, expand_ranges
from rankwise.data.testset_columns import CaseColumns
from rankwise.metrics.matrix import RelevanceMatrix
from rankwise.relevance.column_verdicts import ColumnVerdicts

__all__ = ["matrix_from_columns", "first_in_group", "char_coverage"]

_SHIFT = np.int64(1 << 41)  # above every offset the columnar reader accepts (< 2**40)


def first_in_group(group: np.ndarray, position: np.ndarray, width: int) -> np.ndarray:
    """Per item, whether it has the lowest ``position`` among the items of its ``group`` (groups
    and positions >= 0, positions < ``width``, unique within a group).

    Example:
        >>> first_in_group(np.array([4, 4, 7]), np.array([2, 0, 1]), 3).tolist()
        [False, True, True]
    """
    if not len(group):
        return np.zeros(0, dtype=bool)
    order = np.argsort(group.astype(np.int64) * np.int64(width) + position)
    ordered = group[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    out = np.empty(len(order), dtype=bool)
    out[order] = first
    return out


def _merged_gold(row: np.ndarray, doc: np.ndarray, start: np.ndarray, end: np.ndarray):
    """The reference spans of each row, merged per document as ``merge_intervals`` merges them
    (empty ones dropped, overlapping or touching ones joined): rows, docs, starts, ends, sorted."""
    keep = end > start
    row, doc, start, end = row[keep], doc[keep], start[keep], end[keep]
    order = np.lexsort((start, doc, row))
    row, doc, start, end = row[order], doc[order], start[order], end[order]
    if not len(row):
        return row, doc, start, end
    group_start = np.ones(len(row), dtype=bool)
    group_start[1:] = (row[1:] != row[:-1]) | (doc[1:] != doc[:-1])
    gid = np.cumsum(group_start) - 1
    reach = np.maximum.accumulate(end + gid * _SHIFT) - gid * _SHIFT  # furthest end so far in the group
    new = group_start.copy()
    new[1:] |= start[1:] > reach[:-1]
    at = np.flatnonzero(new)
    return row[at], doc[at], start[at], np.maximum.reduceat(end, at)


def char_coverage(n_rows: int, depth: int, chunk_row, chunk_col, chunk_doc, chunk_start, chunk_end,
                  passage_row, passage_doc, passage_start, passage_end) -> tuple[np.ndarray, np.ndarray]:
    """Reference characters per row, and those first covered by each rank's chunk span:
    ``RelevanceMatrix.from_records``' character coverage, by elementary segments (each piece of a
    merged reference span is credited to the first rank whose chunk covers it).

    Example:
        >>> a = np.array  # one row: chunks [0, 50), [150, 200); references [40, 60), [140, 160)
        >>> chunks = a([0, 0]), a([0, 1]), a([5, 5]), a([0, 150]), a([50, 200])
        >>> refs = a([0, 0]), a([5, 5]), a([40, 140]), a([60, 160])
        >>> total, found = char_coverage(1, 2, *chunks, *refs)
        >>> total.tolist(), found.tolist()
        ([40.0], [[10.0, 10.0]])
    """
    spans = (passage_doc >= 0) & (passage_start >= 0) & (passage_end >= 0)  # passages without offsets: none
    m_row, m_doc, m_start, m_end = _merged_gold(passage_row[spans], passage_doc[spans], passage_start[spans],
                                                passage_end[spans])
    total = np.bincount(m_row, weights=(m_end - m_start).astype(np.float64), minlength=n_rows).astype(np.float64)
    found = np.zeros((n_rows, depth), dtype=np.float64)
    spanned = (chunk_doc >= 0) & (chunk_start >= 0) & (chunk_end >= 0)
    if not len(m_row) or not spanned.any():
        return total, found
    width = np.int64(max(int(chunk_doc.max(initial=0)), int(m_doc.max(initial=0))) + 1)
    group = m_row.astype(np.int64) * width + m_doc  # ascending: the merged spans are sorted by row, doc
    c = np.flatnonzero(spanned)
    key = chunk_row[c].astype(np.int64) * width + chunk_doc[c]
    lo, hi = np.searchsorted(group, key, "left"), np.searchsorted(group, key, "right")
    times = hi - lo
    piece_chunk = np.repeat(c, times)
    piece_span = expand_ranges(lo, times)
    start = np.maximum(chunk_start[piece_chunk], m_start[piece_span])
    end = np.minimum(chunk_end[piece_chunk], m_end[piece_span])
    keep = end > start
    piece_chunk, piece_span, start, end = piece_chunk[keep], piece_span[keep], start[keep], end[keep]
    if not len(start):
        return total, found
    # elementary segments of each merged span: between consecutive piece ends; a piece covers a run
    base = piece_span.astype(np.int64) * _SHIFT
    bounds = distinct_sorted(np.concatenate((base + start, base + end)))
    first = np.searchsorted(bounds, base + start)
    count = np.searchsorted(bounds, base + end) - first
    seg = expand_ranges(first, count)
    col = np.repeat(chunk_col[piece_chunk], count)
    earliest = first_in_group(seg, col, depth)
    seg, col = seg[earliest], col[earliest]
    rows = np.repeat(chunk_row[piece_chunk], count)[earliest]
    np.add.at(found, (rows, col), (bounds[seg + 1] - bounds[seg]).astype(np.float64))
    return total, found


def matrix_from_columns(cases: CaseColumns, verdicts: ColumnVerdicts, rows: np.ndarray, *,
                        rank: np.ndarray | None = None, relevance_level: int = 1,
                        id_field: str | None = None, query_ids: list[str] | None = None) -> RelevanceMatrix:
    """The matrix of the cases ``rows`` (indices into the block, one matrix row each, in that
    order), their chunks at ``rank`` (0-based, per chunk; default their own rank), as
    ``RelevanceMatrix.from_records`` builds it from the same cases' records."""
    n = len(rows)
    row_of = np.full(cases.n, -1, dtype=np.int64)
    row_of[rows] = np.arange(n)
    chunk_case = cases.chunk_case()
    lengths = verdicts.lengths[rows].astype(np.int64)
    depth = int(lengths.max()) if n else 0
    if n == cases.n and (rows == np.arange(n)).all():  # every case, in order: no chunk to leave out
        take, chunk_row = np.arange(len(chunk_case)), chunk_case
    else:
        chunk_row = row_of[chunk_case]
        take = np.flatnonzero(chunk_row >= 0)
        chunk_row = chunk_row[take]
    col = (cases.chunk_rank() if rank is None else rank)[take]
    flat = chunk_row * depth + col  # each chunk's cell in the (rows x depth) arrays
    grades = np.zeros((n, depth), dtype=np.int64)
    grades.ravel()[flat] = verdicts.grade[take]
    judged = np.arange(depth) < lengths[:, None]
    pooled = np.zeros((n, depth), dtype=bool)
    pooled.ravel()[flat] = verdicts.ok[take]
    key = verdicts.key[take]
    distinct = np.zeros((n, depth), dtype=bool)
    keyed = key >= 0
    first = np.ones(len(take), dtype=bool)
    first[keyed] = first_in_group(chunk_row[keyed] * np.int64(cases.n_codes + 1) + key[keyed], col[keyed],
                                  max(depth, 1))
    distinct.ravel()[flat] = first
    # gold items first found at each rank
    where = np.full(len(cases.chunk_id), -1, dtype=np.int64)
    where[take] = np.arange(len(take))
    pair = where[verdicts.item_chunk]
    pair_items = verdicts.item[pair >= 0]
    pair = pair[pair >= 0]
    found = np.zeros((n, depth), dtype=np.int64)
    if len(pair):
        new = first_in_group(chunk_row[pair] * np.int64(pair_items.max() + 1) + pair_items, col[pair], max(depth, 1))
        found.ravel()[:] = np.bincount(flat[pair[new]], minlength=n * depth)
    earned = distinct if verdicts.source == "ids" else found > 0
    chunk_grades = None
    if not (earned | (grades == 0)).all():  # redundant chunks: no grade where they earn nothing new
        chunk_grades, grades = grades, np.where(earned, grades, 0)
    n_rel = verdicts.n_relevant[rows].astype(np.int64)
    width = int(n_rel.max()) if n else 0
    ideal = (np.arange(width) < n_rel[:, None]).astype(np.int64)
    rel = judged & (grades >= relevance_level)
    char_found = char_total = None
    if verdicts.source == "span":
        passage_case = cases.passage_case()
        p = np.flatnonzero(row_of[passage_case] >= 0)
        char_total, char_found = char_coverage(
            n, depth, chunk_row, col, cases.chunk_doc[take], cases.chunk_start[take], cases.chunk_end[take],
            row_of[passage_case[p]], cases.passage_doc[p], cases.passage_start[p], cases.passage_end[p])
    chars = _chunk_chars(cases, take, flat, n, depth)
    ids = query_ids if query_ids is not None else [cases.ids[i] for i in rows.tolist()]
    basis = verdicts.basis if n else "reference passages"
    return RelevanceMatrix(ids, grades, judged, lengths, n_rel, (judged & ~rel).sum(axis=1), ideal, relevance_level,
                           found, lengths > 0, basis, distinct, char_found, char_total, pooled, None,
                           verdicts.source, id_field, chunk_grades, chars)


def _chunk_chars(cases: CaseColumns, take: np.ndarray, flat: np.ndarray, n: int, depth: int) -> np.ndarray | None:
    """Each chunk's length in characters (its text's, else end - start), or None when some chunk
    has neither."""
    text = cases.chunk_text[take]
    start, end = cases.chunk_start[take], cases.chunk_end[take]
    if ((text < 0) & ((start < 0) | (end < 0))).any():
        return None
    chars = np.zeros((n, depth), dtype=np.int64)
    chars.ravel()[flat] = np.where(text >= 0, text, np.maximum(end - start, 0))
    return chars
