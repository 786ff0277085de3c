"""Ranking: rows of (query, doc, score) into per-query blocks in rank order, checked for duplicates.

The one place that orders rows. :func:`rank_rows` is entered once per :class:`~rankwise.data.Run`;
:class:`~rankwise.data.Qrels` only groups by query with :func:`group_rows`. Order of a scored run:
query (byte order), score descending, then doc id in descending byte order (trec_eval's rule).

How: rows already in blocks per query and ranked inside (nearly every run file) move as whole
blocks, if at all, and only their tied neighbours are reordered. Anything else is sorted with one
``np.sort`` of packed 64-bit keys ``[query | high bits of the score | row within the query]`` (a
vectorised integer sort, several times faster than ``np.lexsort``); rows whose keys agree on query
and score bits (ties, and the rare scores that differ only below the kept bits) are then put in
exact order — score, then doc id — by one Arrow sort of just those rows. Rows not yet grouped by
query are grouped first by one more packed-key sort.
"""

from __future__ import annotations

import bisect
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.data.columns import (
    RowKeys,
    arrow_indices,
    duplicate_candidates,
    first_duplicate,
    np_empty,
    np_values,
    row_keys,
    single_array,
    string_hashes,
    take,
)
from rankwise.errors import InputError

__all__ = ["Ranked", "descending_keys", "group_by_query", "group_rows", "rank_rows", "permute", "permute_strings",
           "patch_strings_in_place", "MovePlan"]

Blocks = tuple[np.ndarray, np.ndarray]
_CHUNK = 1 << 20  # rows per step of the elementwise passes over packed keys  # (query code of each block, first row of each block)


@dataclass(frozen=True, eq=False)
class Ranked:
    """Rows grouped by query (byte order) and ranked; what :func:`rank_rows` and :func:`group_rows`
    return.

    ``keys`` (runs) are the rows' sorted (query, doc hash, row) keys, built for the duplicate check
    and kept for the join with qrels; ``hashes`` (qrels) the doc-id hashes in row order.
    """

    queries: list[str]
    offsets: np.ndarray
    docs: pa.Array
    values: np.ndarray | None
    keys: RowKeys | None = None
    hashes: np.ndarray | None = None


def _query_layout(qids, queries, blocks, n: int):
    """Queries (grouping the rows when no per-query blocks are known), blocks, row query codes, rows
    per query and offsets: what ranking and grouping both start from."""
    qcodes = None
    if blocks is None:
        queries, blocks, qcodes = group_by_query(qids)
    counts = np.zeros(len(queries), dtype=np.int64)
    if blocks is not None:
        counts[blocks[0]] = np.diff(np.append(blocks[1], n))
    elif n:
        counts = np.bincount(qcodes, minlength=len(queries)).astype(np.int64)
    offsets = np.zeros(len(queries) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return queries, blocks, qcodes, counts, offsets


def rank_rows(qids: pa.Array | pa.ChunkedArray | None, docs: pa.Array | pa.ChunkedArray,
              scores: np.ndarray | None, *, source: str, lines: np.ndarray | None = None,
              queries: list[str] | None = None, blocks: Blocks | None = None, owned: bool = False) -> Ranked:
    """Group rows by query and rank them: by score (then doc id, descending) when ``scores`` is
    given, else keeping the rows' order within each query. Raises :class:`InputError` on a doc
    repeated within a query.

    The query of each row comes from ``qids``, or from ``queries`` (byte order) with ``blocks`` =
    (query code, first row) of contiguous per-query blocks. ``owned``: the arrays were built for
    this call and may be changed in place. ``lines`` maps rows to file lines for error messages.

    Example:
        >>> import pyarrow as pa, numpy as np
        >>> r = rank_rows(pa.array(["q2", "q1", "q1"]), pa.array(["a", "b", "c"]),
        ...               np.array([1.0, 0.5, 0.5]), source="<run>")
        >>> r.queries, r.offsets.tolist(), r.docs.to_pylist()
        (['q1', 'q2'], [0, 2, 3], ['c', 'b', 'a'])
    """
    n = len(docs)
    queries, blocks, qcodes, counts, offsets = _query_layout(qids, queries, blocks, n)
    plan = _rank_order(qcodes, docs, scores, blocks, counts, offsets)
    if plan is not None and owned and plan.patch_only(n) and patch_strings_in_place(docs, *plan.patch):
        plan_done = True  # tied rows reordered in place; their scores are equal, nothing else moves
    else:
        plan_done = False
    if plan is not None and not plan_done:
        order, runs, patch = plan.order, plan.runs, plan.patch
        if runs is not None and len(runs[0]) > 4096:  # many small blocks: one gather beats a loop
            order, runs, patch = plan.full_order(), None, None
        if runs is None and n >= (1 << 20):
            # a big gather of strings (random access, single-threaded in Arrow): on a second core,
            # while this one hashes the doc ids in file order and moves the hashes and the scores
            with ThreadPoolExecutor(1) as pool:
                moved = pool.submit(permute_strings, docs, order)
                hashes = permute(string_hashes(single_array(docs)), order)
                if scores is not None:
                    scores = permute(scores, order)
                docs = moved.result()
        else:
            docs = permute_strings(docs, order, runs, patch)
            if scores is not None:
                scores = permute(scores, order, runs, patch)
            hashes = string_hashes(docs)
    else:
        docs = single_array(docs)
        hashes = string_hashes(docs)
    keys = row_keys(counts, hashes, in_place=True)
    _check_duplicates(keys, queries, offsets, docs, plan, source, lines, "run")
    return Ranked(queries, offsets, docs, scores, keys)


def group_rows(qids: pa.Array | pa.ChunkedArray | None, docs: pa.Array | pa.ChunkedArray, values: np.ndarray,
               *, source: str, lines: np.ndarray | None = None, queries: list[str] | None = None,
               blocks: Blocks | None = None) -> Ranked:
    """Group rows by query (byte order), keeping their order within a query (judgements: no
    ranking). Raises :class:`InputError` on a (query, doc) pair given twice. Arguments as
    :func:`rank_rows`.

    Example:
        >>> import pyarrow as pa, numpy as np
        >>> g = group_rows(
        ...     pa.array(["q2", "q1"]), pa.array(["a", "b"]), np.array([1, 0]), source="<qrels>"
        ... )
        >>> g.queries, g.values.tolist()
        (['q1', 'q2'], [0, 1])
    """
    n = len(docs)
    queries, blocks, qcodes, counts, offsets = _query_layout(qids, queries, blocks, n)
    plan = _rank_order(qcodes, docs, None, blocks, counts, offsets)
    if plan is not None:
        order, runs = plan.order, plan.runs
        if runs is not None and len(runs[0]) > 4096:
            order, runs = plan.full_order(), None
        docs = permute_strings(docs, order, runs)
        values = permute(values, order, runs)
    else:
        docs = single_array(docs)
    hashes = string_hashes(docs)
    _check_duplicates(row_keys(counts, hashes), queries, offsets, docs, plan, source, lines, "qrels")
    return Ranked(queries, offsets, docs, values, hashes=hashes)


def _check_duplicates(keys: RowKeys, queries: list[str], offsets: np.ndarray, docs: pa.Array, plan: MovePlan | None, source: str,
                      lines: np.ndarray | None, what: str) -> None:
    candidates = duplicate_candidates(keys)
    if not len(candidates):  # equal hashes (a few, by chance, in ten million rows): compare exactly
        return
    row_queries = np.searchsorted(offsets, candidates, side="right") - 1
    numbers = candidates if plan is None else plan.original_rows(candidates)
    dup = first_duplicate(candidates, row_queries, docs, numbers)
    if dup is None:
        return
    first, again, row = dup
    query = queries[int(np.searchsorted(offsets, row, side="right")) - 1]
    if what == "run":
        problem = f"doc '{docs[row].as_py()}' appears twice in query '{query}'"
    else:
        problem = f"pair (query '{query}', doc '{docs[row].as_py()}') is judged twice"
    raise InputError(f"{problem} (first at line {_line(lines, first)})", source=source,
                     line=_line(lines, again), field="doc_id")


def _line(lines: np.ndarray | None, row: int) -> int:
    return int(lines[row]) if lines is not None else row + 1


# ----------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class MovePlan:
    """How to move rows into rank order, as :func:`_rank_order` found it cheapest.

    Attributes:
        order: the row that goes to each position (a gather); None when the move is ``runs``.
        runs: (first rows, lengths) of whole blocks, laid end to end in their new order; None:
            ``order`` says it.
        patch: (positions, rows) set after the move: tied rows put in doc-id order; None: no tie to
            break.
    """

    order: np.ndarray | None = None
    runs: tuple[np.ndarray, np.ndarray] | None = None
    patch: tuple[np.ndarray, np.ndarray] | None = None

    def patch_only(self, n: int) -> bool:
        """Only tied rows change places: no block moves (one run over all ``n`` rows, from row 0).
        """
        return (self.order is None and self.patch is not None and self.runs is not None and len(self.runs[0]) == 1
                and int(self.runs[0][0]) == 0 and int(self.runs[1][0]) == n)

    def full_order(self) -> np.ndarray:
        """The plan written out as one gather: the row that goes to each position."""
        order = self.order
        if order is None:
            assert self.runs is not None
            firsts, lengths = self.runs
            new_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            order = np.arange(int(lengths.sum()), dtype=np.int64)
            order += np.repeat(firsts - new_starts, lengths)
        if self.patch is not None:
            order[self.patch[0]] = self.patch[1]
        return order

    def original_rows(self, positions: np.ndarray) -> np.ndarray:
        """The rows (before the move) that the plan puts at ``positions``."""
        if self.order is not None:
            return self.order[positions]
        assert self.runs is not None
        firsts, lengths = self.runs
        new_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        block = np.searchsorted(new_starts, positions, side="right") - 1
        rows = firsts[block] + (positions - new_starts[block])
        if self.patch is not None:
            where, moved = self.patch
            at = np.searchsorted(where, positions)
            hit = (at < len(where)) & (where[np.minimum(at, len(where) - 1)] == positions)
            rows[hit] = moved[at[hit]]
        return rows


def _rank_order(qcodes: np.ndarray | None, docs: pa.Array, scores: np.ndarray | None, blocks: Blocks | None,
                counts: np.ndarray, offsets: np.ndarray) -> MovePlan | None:
    """How to move the rows into rank order: None when they are in it already, else a
    :class:`MovePlan` (a gather ``order``, or block ``runs`` with a ``patch`` of tied rows).

    Rows are given by query code (``qcodes``) or as contiguous per-query ``blocks`` = (query code,
    first row).
    """
    n = len(docs)
    if n < 2:
        return None
    if blocks is None:
        change = qcodes[1:] != qcodes[:-1]
        heads = np.concatenate([[0], np.flatnonzero(change) + 1])
        if len(heads) == len(counts):  # each query's rows form one block
            blocks = (qcodes[heads], heads)
    if blocks is not None:
        codes, heads = blocks
        lengths = np.diff(np.append(heads, n))
        runs = None
        if len(codes) > 1 and not bool((codes[1:] > codes[:-1]).all()):
            by_code = np.argsort(codes, kind="stable")
            runs = (heads[by_code], lengths[by_code])
        if scores is None:
            return None if runs is None else MovePlan(runs=runs)
        boundary = heads[1:] - 1  # i where rows i and i + 1 belong to different queries
        ranked = scores[:-1] >= scores[1:]
        ranked[boundary] = True
        if bool(ranked.all()):
            # blocks already ranked inside: ties are neighbours within a block, wherever it goes
            tied = scores[:-1] == scores[1:]
            tied[boundary] = False
            fix = _break_ties(np.flatnonzero(tied), None, docs, None)
            if fix is None:
                return None if runs is None else MovePlan(runs=runs)
            if runs is None:
                runs = (np.zeros(1, dtype=np.int64), np.array([n], dtype=np.int64))
            positions = _new_positions(fix[0], runs)
            by_position = np.argsort(positions)
            return MovePlan(runs=runs, patch=(positions[by_position], fix[1][by_position]))
        if len(codes) == len(counts) and bool((lengths == lengths[0]).all()):
            order, near = _grid_score_order(scores, None, codes, int(lengths[0]))
            return MovePlan(order=_fix_near_ties(order, scores, docs, near))
        head_of = np.zeros(len(counts), dtype=np.int64)
        head_of[codes] = heads
        row_query = np.repeat(codes.astype(np.uint64), lengths)
        within = np.arange(n, dtype=np.uint64)
        within -= np.repeat(heads.astype(np.uint64), lengths)
        return MovePlan(order=_score_order(scores, docs, counts, row_query, within, head_of, None))
    grouped = _group_order(qcodes, counts, offsets)
    if scores is None:
        return MovePlan(order=grouped)
    if bool((counts == counts[0]).all()):
        order, near = _grid_score_order(scores, grouped, np.arange(len(counts)), int(counts[0]))
        return MovePlan(order=_fix_near_ties(grouped[order], scores, docs, near))
    row_query = np.repeat(np.arange(len(counts), dtype=np.uint64), counts)
    within = np.arange(n, dtype=np.uint64)
    within -= np.repeat(offsets[:-1].astype(np.uint64), counts)
    return MovePlan(order=_score_order(scores, docs, counts, row_query, within, offsets[:-1], grouped))


def _bits(value: int) -> int:
    return max(int(value).bit_length(), 0)


def _group_order(qcodes: np.ndarray, counts: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The stable order that groups rows by query code: one ``np.sort`` of ``[code | row]`` keys."""
    n = len(qcodes)
    row_bits = _bits(n - 1)
    if _bits(len(counts) - 1) + row_bits > 64:  # pragma: no cover - beyond 2**40 rows
        return np.argsort(qcodes, kind="stable")
    keys = qcodes.astype(np.uint64)
    keys <<= np.uint64(row_bits)
    keys |= np.arange(n, dtype=np.uint64)
    keys.sort()
    keys &= np.uint64((1 << row_bits) - 1)
    return keys.view(np.int64)


_SIGN = np.uint64(1 << 63)


def descending_keys(scores: np.ndarray) -> np.ndarray:
    """uint64 keys whose ascending order is ``scores``' descending order (-0.0 equal to 0.0).

    Example:
        >>> k = descending_keys(np.array([0.5, -1.0, 2.0, -0.0, 0.0]))
        >>> np.argsort(k, kind="stable").tolist()
        [2, 0, 3, 4, 1]
    """
    bits = (np.asarray(scores, dtype=np.float64) + 0.0).view(np.uint64)  # + 0.0 turns -0.0 into 0.0
    # non-negative: flip the 63 low bits (larger score, smaller key); negative: keep (sign bit set)
    flip = bits.view(np.int64) >> np.int64(63)
    flip = ~flip.view(np.uint64)
    flip >>= np.uint64(1)
    return bits ^ flip


def _score_order(scores: np.ndarray, docs: pa.Array, counts: np.ndarray, row_query: np.ndarray,
                 within: np.ndarray, head_of: np.ndarray, grouped: np.ndarray | None) -> np.ndarray:
    """The full rank order: ``[query | score bits | row in query]`` keys sorted once, then the rows
    whose keys tie on query and score bits put in exact order.

    Without ``grouped`` the rows are in per-query blocks, query q's starting at row ``head_of[q]``;
    with it, rows are taken in ``grouped`` order, where query q's start at ``head_of[q]``.
    ``row_query`` and ``within`` (uint64, consumed) are each row's query and place in its query.
    """
    q_bits = max(_bits(len(counts) - 1), 1)
    r_bits = _bits(int(counts.max()) - 1)
    if q_bits + r_bits > 48:  # pragma: no cover - beyond 2**48 rows: too few score bits to help
        rows = np.arange(len(scores)) if grouped is None else grouped
        order = rows[np.lexsort((-scores[rows], row_query))]
        same = np.flatnonzero((row_query[1:] == row_query[:-1]) & (scores[order][1:] == scores[order][:-1]))
        return _fix_near_ties(order, scores, docs, same)
    # keys built a chunk at a time, in place of row_query: temporaries stay small
    keys = row_query
    scores_in = scores if grouped is None else None
    for c0 in range(0, len(keys), _CHUNK):
        c1 = min(c0 + _CHUNK, len(keys))
        part = keys[c0:c1]
        part <<= np.uint64(64 - q_bits)
        score_keys = descending_keys(scores_in[c0:c1] if grouped is None else scores[grouped[c0:c1]])
        score_keys >>= np.uint64(q_bits + r_bits)
        score_keys <<= np.uint64(r_bits)
        part |= score_keys
        part |= within[c0:c1]
    del within, score_keys
    keys.sort()
    # decode: query and row within it -> the row it came from
    query_of = (keys >> np.uint64(64 - q_bits)).view(np.int64)
    order = (keys & np.uint64((1 << r_bits) - 1)).view(np.int64)
    order += head_of[query_of]
    del query_of
    if grouped is not None:
        order = grouped[order]
    keys >>= np.uint64(r_bits)  # query and score bits: equal neighbours need an exact look
    near = np.flatnonzero(keys[1:] == keys[:-1])
    del keys
    return _fix_near_ties(order, scores, docs, near)


def _grid_score_order(scores: np.ndarray, rows: np.ndarray | None, codes: np.ndarray,
                      depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The rank order of rows in equal blocks of ``depth`` rows, one block per query (block b is
    query ``codes[b]``), up to near ties: the blocks form a (queries x depth) grid of ``[high bits
    of the score | row in block]`` keys, each grid row sorted on its own (no query bits: more score
    bits, fewer near ties, and many short sorts beat one long one). ``rows``: the blocks are
    ``scores[rows]`` (None: the rows as they are). Returns the order (into the blocks' rows) and the
    positions ``near`` whose key ties with the next one's: :func:`_fix_near_ties` puts them in exact
    order.
    """
    n = len(scores) if rows is None else len(rows)
    r_bits = max(_bits(depth - 1), 1)
    keys = np_empty(n, np.uint64)
    within = np.tile(np.arange(depth, dtype=np.uint64), max(min(_CHUNK // depth, n // depth), 1))
    for c0 in range(0, n, len(within)):  # a whole number of blocks at a time: temporaries stay small
        c1 = min(c0 + len(within), n)
        part = keys[c0:c1]
        part[:] = descending_keys(scores[c0:c1] if rows is None else scores[rows[c0:c1]])
        part >>= np.uint64(r_bits)
        part <<= np.uint64(r_bits)
        part |= within[: c1 - c0]
    grid = keys.reshape(-1, depth)
    grid.sort(axis=1)
    if bool((codes[1:] < codes[:-1]).any()):  # blocks not in query order: move the grid's rows there
        moved = np.empty_like(grid)
        moved[codes] = grid
        grid, keys = moved, moved.reshape(-1)
        heads = np.zeros(len(codes), dtype=np.int64)
        heads[codes] = np.arange(len(codes), dtype=np.int64) * depth
    else:
        heads = np.arange(len(codes), dtype=np.int64) * depth
    order = (keys & np.uint64((1 << r_bits) - 1)).view(np.int64)
    order.reshape(-1, depth)[:] += heads[:, None]
    keys >>= np.uint64(r_bits)  # the score bits: equal neighbours within a query need an exact look
    same = keys[1:] == keys[:-1]
    same[depth - 1::depth] = False  # (neighbours across two queries)
    return order, np.flatnonzero(same)


def _fix_near_ties(order: np.ndarray, scores: np.ndarray, docs: pa.Array, near: np.ndarray) -> np.ndarray:
    """Order exactly (score descending, doc id descending) the groups of neighbours ``near``/``near
    + 1``."""
    fix = _break_ties(near, order, docs, scores)
    if fix is not None:
        order[fix[0]] = fix[1]
    return order


def _break_ties(tie: np.ndarray, base: np.ndarray | None, docs: pa.Array,
                scores: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
    """Put neighbours (positions ``tie`` and ``tie + 1``) in exact order: score descending when
    ``scores`` is given (else they are equal), then doc id descending.

    ``base`` maps positions to rows (None: the identity). Returns ``(positions, rows)``: the row
    that must go to each position of the groups, or None when every pair is already in that order.
    """
    if len(tie) == 0:
        return None
    rows_at = (lambda p: p) if base is None else (lambda p: base[p])
    upper, lower = rows_at(tie), rows_at(tie + 1)
    doc_greater = np_values(pc.greater(docs.take(arrow_indices(upper)), docs.take(arrow_indices(lower))))
    if scores is None:
        in_order = doc_greater
    else:
        su, sl = scores[upper], scores[lower]
        in_order = (su > sl) | ((su == sl) & doc_greater)
    if bool(in_order.all()):
        return None
    # np.union1d(tie, tie + 1), without its sort or hash table (seconds on a million tied rows)
    present = np.zeros(int(tie.max()) + 2, dtype=bool)
    present[tie] = True
    present[tie + 1] = True
    positions = np.flatnonzero(present).astype(tie.dtype, copy=False)
    starts_group = ~np.isin(positions - 1, tie)  # a position not tied with the one before it
    group = np.cumsum(starts_group)
    rows = rows_at(positions)
    columns = [arrow_indices(group)]
    sort_keys = [("g", "ascending")]
    if scores is not None:
        exact = scores[rows] + 0.0  # -0.0 equals 0.0
        columns.append(pa.Array.from_buffers(pa.float64(), len(exact), [None, pa.py_buffer(exact)]))
        sort_keys.append(("s", "descending"))
    columns.append(single_array(docs.take(arrow_indices(rows))))
    sort_keys.append(("d", "descending"))
    table = pa.Table.from_arrays(columns, names=[k for k, _ in sort_keys])
    perm = np_values(pc.sort_indices(table, sort_keys=sort_keys))
    return positions, rows[perm]


def _new_positions(rows: np.ndarray, runs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Where rows land when blocks ``runs`` (first rows, lengths; in new order) are laid end to end.
    """
    firsts, lengths = runs
    new_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    by_first = np.argsort(firsts)
    block = by_first[np.searchsorted(firsts[by_first], rows, side="right") - 1]
    return rows - firsts[block] + new_starts[block]


# ----------------------------------------------------------------------------- moving rows
def permute(values: np.ndarray, order: np.ndarray | None, runs=None, patch=None) -> np.ndarray:
    """``values`` moved into a new order: ``values[order]``, or whole blocks (``runs``: first rows
    and lengths, a :class:`MovePlan`'s ``runs``) laid end to end; then ``patch`` = (positions, rows)
    sets single rows.
    """
    if runs is None:
        out = np_empty(len(order), values.dtype)
        np.take(values, order, out=out)
    else:
        out = np_empty(int(runs[1].sum()), values.dtype)
        np.concatenate([values[a:a + k] for a, k in zip(runs[0].tolist(), runs[1].tolist(), strict=False)], out=out)
    if patch is not None:
        out[patch[0]] = values[patch[1]]
    return out


def permute_strings(strings: pa.Array | pa.ChunkedArray, order: np.ndarray | None, runs=None,
                    patch=None) -> pa.Array:
    """:func:`permute` for null-free strings (one array or the chunks a file reader returns), into
    one array: block copies of the bytes when ``runs`` is given.

    A ``patch`` may only reorder rows among its own positions (as tie-breaking does), so the bytes
    it moves fill exactly the space they leave.
    """
    chunks = strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]
    if runs is None or not all(pa.types.is_string(c.type) and c.null_count == 0 for c in chunks):
        if order is None:
            order = np.arange(len(strings)) if runs is None else np.concatenate(
                [np.arange(a, a + k) for a, k in zip(runs[0].tolist(), runs[1].tolist(), strict=False)])
        if patch is not None:
            order = order.copy()
            order[patch[0]] = patch[1]
        return single_array(take(single_array(strings), order))  # (a take across chunks is slower)
    n = len(strings)
    parts = [_string_buffers(c) for c in chunks]  # (offsets, bytes) per chunk
    chunk_starts = np.cumsum([0] + [len(c) for c in chunks]).tolist()
    offset_pieces, data_pieces = [], []
    written = 0
    for first, length in zip(runs[0].tolist(), runs[1].tolist(), strict=False):
        c = bisect.bisect_right(chunk_starts, first) - 1
        while length > 0:
            local = first - chunk_starts[c]
            take_n = min(length, chunk_starts[c + 1] - first)
            offsets, data = parts[c]
            a, b = int(offsets[local]), int(offsets[local + take_n])
            offset_pieces.append(offsets[local:local + take_n] + np.int32(written - a))
            data_pieces.append(data[a:b])
            written += b - a
            first, length, c = first + take_n, length - take_n, c + 1
    offset_pieces.append(np.array([written], dtype=np.int32))
    new_offsets = np_empty(n + 1, np.int32)
    np.concatenate(offset_pieces, out=new_offsets)
    new_data = np_empty(written, np.uint8)
    if data_pieces:
        np.concatenate(data_pieces, out=new_data)
    if patch is not None and len(patch[0]):
        _patch_strings(new_offsets, new_data, strings, *patch)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(new_offsets), pa.py_buffer(new_data)])


def _string_buffers(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, bytes) of a string array, as numpy views; offsets index into the bytes."""
    bufs = strings.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=len(strings) + 1, offset=strings.offset * 4)
    data = np.zeros(0, np.uint8) if bufs[2] is None else np.frombuffer(bufs[2], dtype=np.uint8)
    return offsets, data


def patch_strings_in_place(strings: pa.Array, positions: np.ndarray, rows: np.ndarray) -> bool:
    """Reorder rows of ``strings`` among ``positions`` (``strings[positions] = strings[rows]``) in
    its own buffers, when they are writable; False (and nothing done) when they are not.

    Only for arrays the caller built itself: Arrow arrays are otherwise immutable by convention.
    """
    bufs = strings.buffers()
    if (isinstance(strings, pa.ChunkedArray) or not pa.types.is_string(strings.type) or strings.null_count
            or bufs[2] is None or not bufs[1].is_mutable or not bufs[2].is_mutable):
        return False
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=len(strings) + 1, offset=strings.offset * 4)
    data = np.frombuffer(bufs[2], dtype=np.uint8)
    if not (offsets.flags.writeable and data.flags.writeable):
        return False
    source = take(strings, rows)  # a copy of the moved strings, taken before any write
    _patch_strings(offsets, data, source, positions, np.arange(len(rows)))
    return True


def _patch_strings(offsets: np.ndarray, data: np.ndarray, source: pa.Array, positions: np.ndarray,
                   rows: np.ndarray) -> None:
    """Write ``source[rows]`` at ``positions`` (sorted; runs of them hold the same strings) in
    place."""
    moved = single_array(take(source, rows))
    m_offsets = np.frombuffer(moved.buffers()[1], dtype=np.int32, count=len(moved) + 1, offset=moved.offset * 4)
    m_data = np.frombuffer(moved.buffers()[2], dtype=np.uint8) if moved.buffers()[2] is not None else None
    # contiguous stretches of positions: their byte span is the same before and after
    first_of_stretch = np.concatenate([[True], np.diff(positions) != 1])
    stretch = np.cumsum(first_of_stretch) - 1
    stretch_start = positions[first_of_stretch]
    base = offsets[stretch_start][stretch]  # byte where each position's stretch begins
    within = m_offsets[:-1] - m_offsets[:-1][first_of_stretch][stretch]
    offsets[positions] = base + within
    if m_data is not None:
        lengths = np.diff(m_offsets)
        dest = np.repeat(offsets[positions] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        dest += np.arange(len(dest))
        data[dest] = m_data[int(m_offsets[0]):int(m_offsets[-1])]


def group_by_query(qids: pa.Array | pa.ChunkedArray) -> tuple[list[str], Blocks | None, np.ndarray | None]:
    """The distinct query ids in byte order, and either ``blocks`` = (index into them, first row) of
    each block when each query's rows are contiguous (as in nearly every run file), or else each
    row's index into them (``qcodes``, int32).

    Example:
        >>> import pyarrow as pa
        >>> queries, (codes, heads), _ = group_by_query(pa.array(["b", "b", "a"]))
        >>> queries, codes.tolist(), heads.tolist()
        (['a', 'b'], [1, 0], [0, 2])
        >>> group_by_query(pa.array(["b", "a", "b"]))[2].tolist()
        [1, 0, 1]
    """
    n = len(qids)
    if n == 0:
        return [], (np.zeros(0, np.int32), np.zeros(0, np.int64)), None
    change = np_values(pc.not_equal(qids.slice(1), qids.slice(0, n - 1))) if n > 1 else np.zeros(0, bool)
    heads = np.concatenate([[0], np.flatnonzero(change) + 1]).astype(np.int64)
    if 4 * len(heads) <= n:  # few blocks: are their ids distinct?
        head_ids = qids.take(arrow_indices(heads))
        if pc.count_distinct(head_ids).as_py() == len(heads):
            order = np_values(pc.sort_indices(head_ids)).astype(np.int64)
            codes = np.empty(len(order), dtype=np.int32)
            codes[order] = np.arange(len(order), dtype=np.int32)
            return head_ids.take(arrow_indices(order)).to_pylist(), (codes, heads), None
    enc = pc.dictionary_encode(single_array(qids))
    dictionary = enc.dictionary
    order = np_values(pc.sort_indices(dictionary)).astype(np.int64)
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    queries = dictionary.take(arrow_indices(order)).to_pylist()
    indices = np_values(enc.indices)
    if len(dictionary) == len(heads):  # one row per query, or blocks of one or two rows
        return queries, (rank[indices[heads]], heads), None
    return queries, None, rank[indices]
