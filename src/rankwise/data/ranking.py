"""Ranking: rows of (query, doc, score) into per-query blocks in rank order, checked for duplicates.

The one place that orders rows. :func:`rank_rows` is entered once per :class:`~rankwise.data.Run`;
:class:`~rankwise.data.Qrels` only groups by query with :func:`group_rows`. Order of a scored run:
query (byte order), score descending, then doc id in descending byte order (trec_eval's rule).

How: rows already in blocks per query and ranked inside (nearly every run file) move as whole
blocks, if at all, and only their tied neighbours are reordered. Anything else, where the C
extension was built, is grouped and ranked by one C pass (``_walk.ranked_rows``; a shuffled
file's query ids numbered first by ``_walk.encode_ids``, a hash table a thread). Without it, by
numpy: one ``np.sort`` of packed 64-bit keys ``[query | high bits of the score | row within the
query]`` (a vectorised integer sort, several times faster than ``np.lexsort``); rows whose keys
agree on query and score bits (ties, and the rare scores that differ only below the kept bits)
are then put in exact order — score, then doc id — by one Arrow sort of just those rows. Rows
not yet grouped by query are grouped first by one more packed-key sort.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.data.columns import (
    arrow_indices,
    np_empty,
    np_values,
    patch_strings_in_place,
    permute,
    permute_strings,
    single_array,
    string_hashes,
    string_parts,
    take_ascending,
)
from rankwise.data.compiled import walk
from rankwise.errors import InputError

__all__ = ["Ranked", "descending_keys", "group_by_query", "group_rows", "rank_rows", "MovePlan", "RowKeys",
           "row_keys", "duplicate_candidates", "first_duplicate"]

Blocks = tuple[np.ndarray, np.ndarray]  # (query code of each block, first row of each block)
_CHUNK = 1 << 20  # rows per step of the elementwise passes over packed keys


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


def _block_codes(blocks: Blocks, n: int) -> np.ndarray:
    """Each row's query code, from contiguous per-query ``blocks`` = (query code, first row)."""
    codes, heads = blocks
    return np.repeat(codes, np.diff(np.append(heads, n)))


def _out_of_query_order(codes: np.ndarray) -> bool:
    """Whether blocks of query ``codes`` (in row order) must move to lie in query order."""
    return len(codes) > 1 and not bool((codes[1:] > codes[:-1]).all())


def _ranked_inside(scores: np.ndarray, heads: np.ndarray) -> bool:
    """Whether every block (first rows ``heads``, in row order) has its scores descending."""
    ranked = scores[:-1] >= scores[1:]
    ranked[heads[1:] - 1] = True  # (rows i and i + 1 of different blocks)
    return bool(ranked.all())


_THREADED_ROWS = 1 << 17  # from this many rows the C pass ranks on Arrow's CPU count of threads
_THREADED_ENCODE_ROWS = 1 << 20  # from this many, query ids are encoded on more than one thread


def _ranked_in_c(qcodes: np.ndarray, counts: np.ndarray, offsets: np.ndarray, docs: pa.Array | pa.ChunkedArray,
                 scores: np.ndarray) -> tuple[pa.Array, np.ndarray, np.ndarray, MovePlan] | None:
    """Rows in any order grouped by query and ranked in one C pass (``_walk.ranked_rows``): the doc
    ids, scores and their hashes in rank order, and the move that took them there; None where the
    extension was not built or the ids are not plain strings.

    The C pass sorts by the rule (score, then doc id, descending); :func:`_rank_order` then checks
    the result as it checks any input said to be ranked, and puts right any row out of order.
    """
    parts = string_parts(docs)
    if parts is None:
        return None
    threads = pa.cpu_count() if len(qcodes) >= _THREADED_ROWS else 1
    out = walk.ranked_rows(np.ascontiguousarray(qcodes, dtype=np.int32), np.ascontiguousarray(offsets, dtype=np.int64),
                           parts, np.ascontiguousarray(scores, dtype=np.float64), threads)
    if out is None:  # ids past 2 GiB, or rows past 2**31
        return None
    chars, str_offsets, ranked_scores, hashes, order = out
    n = len(qcodes)
    docs = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(str_offsets), pa.py_buffer(chars)])
    scores, hashes = np.frombuffer(ranked_scores, dtype=np.float64), np.frombuffer(hashes, dtype=np.uint64)
    order = np.frombuffer(order, dtype=np.int32)
    check = _rank_order(None, docs, scores, (np.arange(len(counts), dtype=np.int32), offsets[:-1]), counts, offsets)
    if check is not None:  # rows the C sort left out of the rule's order (equal doc ids, say): move them
        move = check.full_order()
        docs, scores, hashes, order = (permute_strings(docs, move), permute(scores, move), permute(hashes, move),
                                       order[move])
    return docs, scores, hashes, MovePlan(order=order)


def _query_layout(qids, queries, blocks, n: int):
    """Queries (grouping the rows when no per-query blocks are known), blocks, row query codes, rows
    per query and offsets: what ranking and grouping both start from."""
    qcodes = counts = None
    if blocks is None:
        queries, blocks, qcodes, counts = _grouped(qids)
    if blocks is not None:
        counts = np.zeros(len(queries), dtype=np.int64)
        counts[blocks[0]] = np.diff(np.append(blocks[1], n))
    elif counts is None:
        counts = np.bincount(qcodes, minlength=len(queries)).astype(np.int64)
    offsets = np.zeros(len(queries) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return queries, blocks, qcodes, counts, offsets


def rank_rows(qids: pa.Array | pa.ChunkedArray | None, docs: pa.Array | pa.ChunkedArray,
              scores: np.ndarray | None, *, source: str, lines: np.ndarray | None = None,
              queries: list[str] | None = None, blocks: Blocks | None = None, owned: bool = False,
              hashes: np.ndarray | None = None, compiled: bool = True) -> Ranked:
    """Group rows by query and rank them: by score (then doc id, descending) when ``scores`` is
    given, else keeping the rows' order within each query. Raises :class:`InputError` on a doc
    repeated within a query.

    The query of each row comes from ``qids``, or from ``queries`` (byte order) with ``blocks`` =
    (query code, first row) of contiguous per-query blocks. ``owned``: the arrays were built for
    this call and may be changed in place. ``lines`` maps rows to file lines for error messages.
    ``hashes``: ``string_hashes(docs)``, when the caller has them (the C walk of a dict).
    Rows not grouped by query are grouped and ranked by the compiled walk where it was built
    (``compiled=False``: by numpy alone; the same result).

    Example:
        >>> import pyarrow as pa, numpy as np
        >>> r = rank_rows(pa.array(["q2", "q1", "q1"]), pa.array(["a", "b", "c"]),
        ...               np.array([1.0, 0.5, 0.5]), source="<run>")
        >>> r.queries, r.offsets.tolist(), r.docs.to_pylist()
        (['q1', 'q2'], [0, 2, 3], ['c', 'b', 'a'])
    """
    n = len(docs)
    queries, blocks, qcodes, counts, offsets = _query_layout(qids, queries, blocks, n)
    in_c = None
    # grouped rows the C pass may move (the caller's own hashes would have to move with them)
    blocks_in_c = compiled and blocks is not None and scores is not None and hashes is None
    if compiled and qcodes is not None and scores is not None:  # rows not grouped by query
        in_c = _ranked_in_c(qcodes, counts, offsets, docs, scores)
    elif blocks_in_c and n > 1 and (not _ranked_inside(scores, blocks[1]) or _out_of_query_order(blocks[0])):
        # blocks unranked inside, or to be moved: the C pass ranks and moves them (numpy's plan
        # would be thrown away)
        in_c = _ranked_in_c(_block_codes(blocks, n), counts, offsets, docs, scores)
    plan = None if in_c is not None else _rank_order(qcodes, docs, scores, blocks, counts, offsets)
    if plan is not None and owned and plan.patch_only(n) and patch_strings_in_place(docs, *plan.patch):
        plan_done = True  # tied rows reordered in place; their scores are equal, nothing else moves
        if hashes is not None:  # (owned: the caller's to change too)
            hashes[plan.patch[0]] = hashes[plan.patch[1]]
    else:
        plan_done = False
    if plan is not None and not plan_done and blocks_in_c:
        # ties to break (the blocks are in place, ranked): one sequential C pass writes the doc
        # ids, scores and hashes in their places, instead of three gathers and a hash pass
        in_c = _ranked_in_c(_block_codes(blocks, n), counts, offsets, docs, scores)
    if in_c is not None:  # grouped and ranked by the compiled walk, its order checked
        docs, scores, hashes, plan = in_c
    elif plan is not None and not plan_done:
        order, runs, patch = plan.order, plan.runs, plan.patch
        if runs is not None and len(runs[0]) > 4096:  # many small blocks: one gather beats a loop
            order, runs, patch = plan.full_order(), None, None
        if runs is None and n >= (1 << 20):
            # a big gather of strings (random access, single-threaded in Arrow): on a second core,
            # while this one hashes the doc ids in file order and moves the hashes and the scores
            with ThreadPoolExecutor(1) as pool:
                moved = pool.submit(permute_strings, docs, order)
                hashes = permute(string_hashes(single_array(docs)) if hashes is None else hashes, order)
                if scores is not None:
                    scores = permute(scores, order)
                docs = moved.result()
        else:
            docs = permute_strings(docs, order, runs, patch)
            if scores is not None:
                scores = permute(scores, order, runs, patch)
            hashes = string_hashes(docs) if hashes is None else permute(hashes, order, runs, patch)
    else:
        docs = single_array(docs)
        if hashes is None:
            hashes = string_hashes(docs)
    keys = row_keys(counts, hashes, in_place=True)
    _check_duplicates(keys, queries, offsets, docs, plan, source, lines, "run")
    return Ranked(queries, offsets, docs, scores, keys)


def group_rows(qids: pa.Array | pa.ChunkedArray | None, docs: pa.Array | pa.ChunkedArray, values: np.ndarray,
               *, source: str, lines: np.ndarray | None = None, queries: list[str] | None = None,
               blocks: Blocks | None = None, hashes: np.ndarray | None = None) -> Ranked:
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
        if hashes is not None:
            hashes = permute(hashes, order, runs)
    else:
        docs = single_array(docs)
    if hashes is None:
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
            order = _runs_order(*self.runs)
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


def _runs_order(firsts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The gather that lays blocks (first rows, lengths) end to end: a running sum of steps of one,
    with a jump where each block starts (one array, no ``arange`` or ``repeat`` of the rows).

    Example:
        >>> _runs_order(np.array([3, 0]), np.array([2, 3])).tolist()
        [3, 4, 0, 1, 2]
    """
    n = int(lengths.sum())
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    firsts, lengths = firsts[lengths > 0], lengths[lengths > 0]
    order = np.ones(n, dtype=np.int64)
    order[0] = firsts[0]
    order[np.cumsum(lengths)[:-1]] = firsts[1:] - (firsts[:-1] + lengths[:-1] - 1)
    np.cumsum(order, out=order)
    return order


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
        if 1 + int(np.count_nonzero(change)) == len(counts):  # each query's rows form one block
            heads = np.concatenate([[0], np.flatnonzero(change) + 1])
            blocks = (qcodes[heads], heads)
    if blocks is not None:
        codes, heads = blocks
        lengths = np.diff(np.append(heads, n))
        runs = None
        if _out_of_query_order(codes):
            by_code = np.argsort(codes, kind="stable")
            runs = (heads[by_code], lengths[by_code])
        if scores is None:
            return None if runs is None else MovePlan(runs=runs)
        if _ranked_inside(scores, heads):
            # blocks already ranked inside: ties are neighbours within a block, wherever it goes
            tied = scores[:-1] == scores[1:]
            tied[heads[1:] - 1] = False
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
    take = take_ascending if base is None else (lambda values, rows: values.take(arrow_indices(rows)))  # (tie ascends)
    doc_greater = np_values(pc.greater(take(docs, upper), take(docs, lower)))
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
    columns.append(single_array(take(docs, rows)))
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
    return _grouped(qids)[:3]


def _grouped(qids: pa.Array | pa.ChunkedArray
             ) -> tuple[list[str], Blocks | None, np.ndarray | None, np.ndarray | None]:
    """:func:`group_by_query`, and the rows of each query where the C pass counted them (else
    None)."""
    n = len(qids)
    if n == 0:
        return [], (np.zeros(0, np.int32), np.zeros(0, np.int64)), None, None
    change = np_values(pc.not_equal(qids.slice(1), qids.slice(0, n - 1))) if n > 1 else np.zeros(0, bool)
    n_heads = 1 + int(np.count_nonzero(change))
    if 4 * n_heads <= n:  # few blocks: are their ids distinct?
        heads = np.concatenate([[0], np.flatnonzero(change) + 1]).astype(np.int64)
        head_ids = take_ascending(qids, heads)
        order = np_values(pc.sort_indices(head_ids)).astype(np.int64)
        in_order = head_ids.take(arrow_indices(order))
        if len(heads) < 2 or not np_values(pc.equal(in_order.slice(1), in_order.slice(0, len(heads) - 1))).any():
            codes = np.empty(len(order), dtype=np.int32)  # (distinct: no two neighbours equal once sorted)
            codes[order] = np.arange(len(order), dtype=np.int32)
            return in_order.to_pylist(), (codes, heads), None, None
    dictionary, indices, counts = _encoded(qids)
    order = np_values(pc.sort_indices(dictionary)).astype(np.int64)
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    queries = dictionary.take(arrow_indices(order)).to_pylist()
    if len(dictionary) == n_heads:  # one row per query, or blocks of one or two rows
        heads = np.concatenate([[0], np.flatnonzero(change) + 1]).astype(np.int64)
        return queries, (rank[indices[heads]], heads), None, None
    return queries, None, rank[indices], None if counts is None else counts[order]


def _encoded(qids: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray, np.ndarray | None]:
    """The distinct ids (in order of first appearance), each row's index into them and, from the
    C pass (``_walk.encode_ids``, one hash table a thread), each id's rows."""
    parts = string_parts(qids)
    if parts is not None:
        threads = pa.cpu_count() if len(qids) >= _THREADED_ENCODE_ROWS else 1
        out = walk.encode_ids(parts, threads)
        if out is not None:
            codes, firsts, counts = out
            return (take_ascending(qids, np.frombuffer(firsts, dtype=np.int64)), np.frombuffer(codes, dtype=np.int32),
                    np.frombuffer(counts, dtype=np.int64))
    return (*_dictionary_encode(qids), None)


def _dictionary_encode(qids: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """The distinct ids (in order of first appearance) and each row's index into them, by Arrow
    (where the C encoding was not built). A chunked column is encoded chunk by chunk against one
    dictionary (no concatenated copy of the ids)."""
    if isinstance(qids, pa.ChunkedArray) and qids.num_chunks > 1:
        enc = pc.dictionary_encode(qids)
        dictionary = enc.chunk(enc.num_chunks - 1).dictionary
        if all(len(c.dictionary) == len(dictionary) for c in enc.chunks):  # (one dictionary shared)
            return dictionary, np.concatenate([np_values(c.indices) for c in enc.chunks])
    enc = pc.dictionary_encode(single_array(qids))
    return enc.dictionary, np_values(enc.indices)


# ----------------------------------------------------------------- row keys and duplicates
@dataclass(frozen=True)
class RowKeys:
    """Sorted 64-bit keys, one per row of a query-grouped table, and how to read them.

    A key is ``[query code | hash bits of the doc id | row within the query]``, high bits first, so
    sorting puts each query's rows together and, inside, equal doc hashes next to each other: one
    sort serves the duplicate check (equal neighbours) and the join with qrels (a binary search by
    query and doc hash). The query code and the row are exact; only the hash part can collide, and
    every use confirms a match on the strings.
    """

    keys: np.ndarray
    offsets: np.ndarray  # rows of query q: offsets[q] .. offsets[q + 1]
    query_bits: int
    row_bits: int

    @property
    def query_shift(self) -> np.uint64:
        return np.uint64(64 - self.query_bits)

    def needles(self, qcodes: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """The smallest key a row with this query and doc hash can have."""
        out = qcodes.astype(np.uint64) << self.query_shift
        out |= (hashes >> np.uint64(self.query_bits + self.row_bits)) << np.uint64(self.row_bits)
        return out

    @cached_property
    def shared(self) -> np.ndarray:
        """Positions ``i`` whose key has the same query and hash bits as key ``i + 1`` (equal doc
        ids, or hashes that collide): nearly always none."""
        keys = self.keys
        if len(keys) < 2:
            return np.zeros(0, dtype=np.int64)
        limit = np.uint64(1 << self.row_bits)
        last = len(keys) - 1  # pairs (i, i + 1) for i < last, a chunk at a time
        return np.concatenate([
            np.flatnonzero((keys[c0 + 1:min(c0 + _CHUNK, last) + 1] ^ keys[c0:min(c0 + _CHUNK, last)]) < limit) + c0
            for c0 in range(0, last, _CHUNK)])

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """Table rows of keys."""
        q = (keys >> self.query_shift).astype(np.int64)
        return self.offsets[q] + (keys & np.uint64((1 << self.row_bits) - 1)).astype(np.int64)


def row_keys(counts: np.ndarray, hashes: np.ndarray, *, in_place: bool = False) -> RowKeys:
    """:class:`RowKeys` of a table whose rows are grouped by query code, ``counts[q]`` rows each.

    ``in_place=True`` turns ``hashes`` itself into the keys (saving a copy).

    Example:
        >>> import pyarrow as pa
        >>> rk = row_keys(np.array([2, 1]), string_hashes(pa.array(["a", "b", "a"])))
        >>> sorted(rk.rows(rk.keys).tolist())
        [0, 1, 2]
    """
    n = len(hashes)
    counts = np.asarray(counts, dtype=np.int64)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    layout = RowKeys(hashes if in_place else hashes.copy(), offsets,
                     max(int(len(counts) - 1).bit_length(), 1),
                     max(int(counts.max(initial=1) - 1).bit_length(), 1))
    keys = layout.keys
    hash_shift = np.uint64(layout.query_bits + layout.row_bits)
    if len(counts) and n == len(counts) * int(counts[0]) and bool((counts == counts[0]).all()):
        # equal-length blocks (a run cut at a fixed depth): a (queries x depth) grid; sort each row
        grid = keys.reshape(len(counts), int(counts[0]))
        grid >>= hash_shift
        grid <<= np.uint64(layout.row_bits)
        grid |= (np.arange(len(counts), dtype=np.uint64) << layout.query_shift)[:, None]
        grid |= np.arange(int(counts[0]), dtype=np.uint64)[None, :]
        grid.sort(axis=1)
        return layout
    q = 0
    for c0 in range(0, n, _CHUNK):
        c1 = min(c0 + _CHUNK, n)
        q_end = int(np.searchsorted(offsets, c1, side="left"))
        span = np.minimum(offsets[q + 1:q_end + 1], c1) - np.maximum(offsets[q:q_end], c0)
        chunk = keys[c0:c1]
        chunk >>= hash_shift
        chunk <<= np.uint64(layout.row_bits)
        chunk |= np.repeat(np.arange(q, q_end, dtype=np.uint64) << layout.query_shift, span)
        chunk |= (np.arange(c0, c1, dtype=np.int64) - np.repeat(offsets[q:q_end], span)).astype(np.uint64)
        q = max(q_end - 1, 0) if offsets[q_end] > c1 else q_end
    keys.sort()
    return layout


def duplicate_candidates(layout: RowKeys) -> np.ndarray:
    """Rows whose (query, doc) hash equals another row's (from :func:`row_keys`): check them
    exactly."""
    same = layout.shared
    if len(same) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.sort(layout.rows(layout.keys[np.unique(np.concatenate([same, same + 1]))]))


def first_duplicate(rows: np.ndarray, row_queries: np.ndarray, docs: pa.Array,
                    numbers: np.ndarray | None = None) -> tuple[int, int, int] | None:
    """Exact check of candidate ``rows`` (with their query codes): the earliest repeat, or None.

    ``numbers`` are the rows' numbers in the caller's order (file order: which repeat is "first");
    returns (number of the first occurrence, number of the repeat, row of the repeat).
    """
    if len(rows) == 0:
        return None
    numbers = rows if numbers is None else numbers
    by_number = np.argsort(numbers, kind="stable")
    first_seen: dict[tuple[int, str], int] = {}
    docs_of = docs.take(arrow_indices(rows[by_number])).to_pylist()
    for i, d in zip(by_number.tolist(), docs_of, strict=False):
        key = (int(row_queries[i]), d)
        if key in first_seen:
            return first_seen[key], int(numbers[i]), int(rows[i])
        first_seen[key] = int(numbers[i])
    return None
