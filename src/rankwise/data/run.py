"""A run: what a retrieval system returned for each query, in rank order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from operator import itemgetter, methodcaller
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.data._columns import (
    RowKeys,
    arrow_indices,
    arrow_strings,
    as_string_array,
    duplicate_candidates,
    first_duplicate,
    group_blocks,
    group_queries,
    np_values,
    patch_strings_in_place,
    permute,
    permute_strings,
    row_keys,
    single_array,
    string_hashes,
    take,
)
from rankwise.errors import InputError

__all__ = ["Run"]

RunKind = Literal["scored", "ordered"]


@dataclass(frozen=True, eq=False)
class Run:
    """Retrieved items per query, stored column-wise and already in rank order.

    ``queries`` are the query ids in byte order; the items of ``queries[i]`` are
    ``doc_ids[offsets[i]:offsets[i+1]]``, best first. A *scored* run keeps its scores (order: score
    descending, ties by doc id in descending byte order, as trec_eval); an *ordered* run is a list per
    query, as a RAG pipeline returns chunks.

    Example:
        >>> run = Run.from_dict({"q1": {"a": 1.0, "b": 1.0, "z": 1.0, "c": 0.5}})
        >>> run.ranking("q1")
        ['z', 'b', 'a', 'c']
    """

    queries: list[str]
    offsets: np.ndarray
    doc_ids: pa.Array
    scores: np.ndarray | None
    kind: RunKind = "scored"
    name: str = "run"

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_columns(
        cls,
        query_ids,
        doc_ids,
        scores=None,
        *,
        kind: RunKind | None = None,
        name: str = "run",
        source: str | None = None,
        lines: np.ndarray | None = None,
    ) -> Run:
        """Build from parallel columns (any sequences or Arrow arrays).

        With ``scores`` the run is scored and ranked by score; without, the rows' order within each
        query is the ranking. ``lines`` maps rows to file lines for error messages.

        Example:
            >>> Run.from_columns(["q1", "q1"], ["d2", "d1"]).ranking("q1")
            ['d2', 'd1']
        """
        src = source or "<run>"
        qids = as_string_array(query_ids, source=src, field="query_id", chunked=True)
        docs = as_string_array(doc_ids, source=src, field="doc_id", chunked=True)
        if len(qids) != len(docs):
            raise InputError("query_id and doc_id columns differ in length", source=src)
        kind = kind or ("ordered" if scores is None else "scored")
        score_arr = None
        if kind == "scored":
            if scores is None:
                raise InputError("a scored run needs scores", source=src, field="score")
            score_arr = np.asarray(scores, dtype=np.float64)
            if score_arr.shape != (len(docs),):
                raise InputError("score column differs in length", source=src, field="score")
            bad = ~np.isfinite(score_arr)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise InputError(
                    f"score is not a finite number: {score_arr[row]!r}",
                    source=src,
                    line=_line(lines, row),
                    field="score",
                )
        blocks = group_blocks(qids)
        if blocks is not None:  # each query's rows together (nearly every run file)
            queries, block_codes, heads = blocks
            return cls._build(queries, None, docs, score_arr, kind, name, src, lines, (block_codes, heads))
        queries, qcodes = group_queries(single_array(qids))
        return cls._build(queries, qcodes, docs, score_arr, kind, name, src, lines)

    @classmethod
    def _build(cls, queries: list[str], qcodes: np.ndarray | None, docs: pa.Array,
               score_arr: np.ndarray | None, kind: RunKind, name: str, src: str, lines: np.ndarray | None,
               blocks: tuple[np.ndarray, np.ndarray] | None = None, owned: bool = False) -> Run:
        """The run from validated columns: ``qcodes[i]`` indexes ``queries`` (byte order) for row i,
        or ``blocks`` = (query code, first row) of contiguous per-query blocks. ``owned``: the arrays
        were built for this run and may be changed in place."""
        n = len(docs)
        plan = _rank_order(qcodes, docs, score_arr, blocks)
        counts = np.zeros(len(queries), dtype=np.int64)
        if blocks is not None:
            counts[blocks[0]] = np.diff(np.append(blocks[1], n))
        elif n:
            counts = np.bincount(qcodes, minlength=len(queries)).astype(np.int64)
        offsets = np.zeros(len(queries) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        if plan is not None and owned and _patch_only(plan, n) and patch_strings_in_place(docs, *plan[2]):
            plan_done = True  # tied rows reordered in place; their scores are equal, nothing else moves
        else:
            plan_done = False
        if plan is not None and not plan_done:
            order, runs, patch = plan
            if runs is not None and len(runs[0]) > 4096:  # many small blocks: one gather beats a loop
                order, runs, patch = _full_order(plan), None, None
            docs = permute_strings(docs, order, runs, patch)
            if score_arr is not None:
                score_arr = permute(score_arr, order, runs, patch)
        else:
            docs = single_array(docs)
        keys = row_keys(counts, string_hashes(docs), in_place=True)
        candidates = duplicate_candidates(keys)
        dup = None
        if len(candidates):  # equal hashes (a few, by chance, in ten million rows): compare exactly
            row_queries = np.searchsorted(offsets, candidates, side="right") - 1
            numbers = candidates if plan is None else _original_rows(plan, candidates)
            dup = first_duplicate(candidates, row_queries, docs, numbers)
        if dup is not None:
            first, again, row = dup
            query = queries[int(np.searchsorted(offsets, row, side="right")) - 1]
            raise InputError(
                f"doc '{docs[row].as_py()}' appears twice in query '{query}' (first at line {_line(lines, first)})",
                source=src,
                line=_line(lines, again),
                field="doc_id",
            )
        run = cls(queries, offsets, docs, score_arr, kind, name)
        run.__dict__["_row_keys"] = keys
        return run

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, float] | Sequence[str]], *, name: str = "run") -> Run:
        """Build from ``{qid: {doc: score}}`` (scored) or ``{qid: [doc, ...]}`` (ordered).

        A query mapped to an empty ranking is kept: it was run and retrieved nothing (``num_ret`` 0),
        which is not the same as a query missing from the run.

        Example:
            >>> Run.from_dict({"q1": ["c3", "c1"]}).kind
            'ordered'
        """
        # queries in byte order from the start (code-point order is UTF-8 byte order): no block moves later
        items = sorted(((str(q), v) for q, v in data.items()), key=itemgetter(0))
        values = [v for _, v in items]
        counts = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        is_map = [type(v) is dict or isinstance(v, Mapping) for v in values]
        filled = (counts > 0).tolist()
        kinds = {("scored" if m else "ordered") for m, f in zip(is_map, filled, strict=True) if f}
        if len(kinds) > 1:
            raise InputError("mixes scored ({doc: score}) and ordered ([doc, ...]) queries", source="<dict>")
        empty_kinds = {("scored" if m else "ordered") for m, f in zip(is_map, filled, strict=True) if not f}
        kind = kinds.pop() if kinds else ("ordered" if empty_kinds == {"ordered"} else "scored")
        empty = []
        if not all(filled):
            empty = [q for (q, _), f in zip(items, filled, strict=True) if not f]
            items = [it for it, f in zip(items, filled, strict=True) if f]
            values = [v for _, v in items]
            counts = counts[counts > 0]
        total = int(counts.sum())
        docs = _strings(chain.from_iterable(values), total)  # a dict iterates its keys
        score_arr = None
        if kind == "scored":
            try:
                score_arr = np.fromiter(chain.from_iterable(map(methodcaller("values"), values)),
                                        dtype=np.float64, count=total)
            except (TypeError, ValueError) as exc:
                raise InputError(f"scores must be numbers ({exc})", source="<dict>", field="score") from None
            bad = ~np.isfinite(score_arr)
            if bad.any():
                raise InputError(f"score is not a finite number: {score_arr[np.flatnonzero(bad)[0]]!r}",
                                 source="<dict>", line=int(np.flatnonzero(bad)[0]) + 1, field="score")
        queries = [q for q, _ in items]
        if any(a == b for a, b in zip(queries, queries[1:], strict=False)):  # 1 and "1": merge them
            qcol = arrow_strings([q for q, c in zip(queries, counts.tolist(), strict=True) for _ in range(c)])
            run = cls.from_columns(qcol, docs, score_arr, kind=kind, name=name, source="<dict>")
        else:
            block_codes = np.arange(len(queries), dtype=np.int32)
            heads = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
            run = cls._build(queries, None, docs, score_arr, kind, name, "<dict>", None, (block_codes, heads),
                             owned=True)
        return run._with_queries(empty) if empty else run

    def _with_queries(self, query_ids: list[str]) -> Run:
        """The same run where ``query_ids`` also appear (with an empty ranking if they were absent)."""
        queries = sorted(set(self.queries).union(query_ids))  # code-point order == UTF-8 byte order
        if len(queries) == self.n_queries:
            return self
        position = {q: i for i, q in enumerate(queries)}
        counts = np.zeros(len(queries), dtype=np.int64)
        counts[[position[q] for q in self.queries]] = np.diff(self.offsets)
        offsets = np.zeros(len(queries) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        run = Run(queries, offsets, self.doc_ids, self.scores, self.kind, self.name)
        if "_doc_hashes" in self.__dict__:
            run.__dict__["_doc_hashes"] = self._doc_hashes
        return run

    # ----------------------------------------------------------------- access
    def __len__(self) -> int:
        return len(self.doc_ids)

    @property
    def n_queries(self) -> int:
        return len(self.queries)

    def ranking(self, query_id: str) -> list[str]:
        """The doc ids of one query, best first (empty if the query is absent)."""
        i = self._index(query_id)
        if i is None:
            return []
        return self.doc_ids[self.offsets[i] : self.offsets[i + 1]].to_pylist()

    @cached_property
    def _position(self) -> dict[str, int]:
        return {q: i for i, q in enumerate(self.queries)}

    @cached_property
    def _doc_hashes(self) -> np.ndarray:
        """64-bit hash of each doc id (see :func:`rankwise.data._columns.string_hashes`)."""
        return string_hashes(self.doc_ids)

    @cached_property
    def _row_keys(self) -> RowKeys:
        """Sorted (query, doc-hash, row) keys (see :class:`rankwise.data._columns.RowKeys`)."""
        return row_keys(np.diff(self.offsets), self._doc_hashes)

    def _index(self, query_id: str) -> int | None:
        return self._position.get(str(query_id))

    def query_codes(self) -> np.ndarray:
        """For each row, the index of its query in :attr:`queries`."""
        return np.repeat(np.arange(self.n_queries, dtype=np.int64), np.diff(self.offsets))

    def ranks(self) -> np.ndarray:
        """For each row, its 1-based rank within its query."""
        starts = np.repeat(self.offsets[:-1], np.diff(self.offsets))
        return np.arange(len(self), dtype=np.int64) - starts + 1

    def to_dict(self) -> dict:
        """``{qid: {doc: score}}`` for a scored run, ``{qid: [doc, ...]}`` for an ordered one."""
        docs = self.doc_ids.to_pylist()
        out: dict = {}
        for i, q in enumerate(self.queries):
            a, b = int(self.offsets[i]), int(self.offsets[i + 1])
            if self.scores is None:
                out[q] = docs[a:b]
            else:
                out[q] = dict(zip(docs[a:b], self.scores[a:b].tolist(), strict=False))
        return out

    def truncate(self, depth: int) -> Run:
        """The same run keeping only the top ``depth`` items of every query."""
        keep = self.ranks() <= depth
        idx = np.flatnonzero(keep)
        counts = np.minimum(np.diff(self.offsets), depth)
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        run = Run(
            self.queries, offsets, take(self.doc_ids, idx),
            None if self.scores is None else self.scores[idx], self.kind, self.name,
        )
        if "_doc_hashes" in self.__dict__:
            run.__dict__["_doc_hashes"] = self._doc_hashes[idx]
        return run

    def __repr__(self) -> str:
        return f"Run(name={self.name!r}, kind={self.kind!r}, queries={self.n_queries}, rows={len(self)})"


def _strings(values: Iterable, count: int) -> pa.Array:
    """An Arrow string array from an iterable of ids (str, or anything ``str()`` turns into one)."""
    return arrow_strings(list(values))


def _line(lines: np.ndarray | None, row: int) -> int:
    return int(lines[row]) if lines is not None else row + 1


def _patch_only(plan: tuple, n: int) -> bool:
    """True when a plan from :func:`_rank_order` only reorders tied rows (no block moves)."""
    order, runs, patch = plan
    return order is None and patch is not None and len(runs[0]) == 1 and int(runs[0][0]) == 0 and int(runs[1][0]) == n


def _full_order(plan: tuple) -> np.ndarray:
    """``order`` of a plan from :func:`_rank_order`, written out: the row that goes to each position."""
    order, runs, patch = plan
    if order is None:
        firsts, lengths = runs
        new_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        order = np.arange(int(lengths.sum()), dtype=np.int64)
        order += np.repeat(firsts - new_starts, lengths)
    if patch is not None:
        order[patch[0]] = patch[1]
    return order


def _original_rows(plan: tuple, positions: np.ndarray) -> np.ndarray:
    """The rows (before the move) that a plan from :func:`_rank_order` put at ``positions``."""
    order, runs, patch = plan
    if order is not None:
        return order[positions]
    firsts, lengths = runs
    new_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    block = np.searchsorted(new_starts, positions, side="right") - 1
    rows = firsts[block] + (positions - new_starts[block])
    if patch is not None:
        at = np.searchsorted(patch[0], positions)
        hit = (at < len(patch[0])) & (patch[0][np.minimum(at, len(patch[0]) - 1)] == positions)
        rows[hit] = patch[1][at[hit]]
    return rows


def _new_positions(rows: np.ndarray, runs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Where rows land when blocks ``runs`` (first rows, lengths; in new order) are laid end to end."""
    firsts, lengths = runs
    new_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    by_first = np.argsort(firsts)
    block = by_first[np.searchsorted(firsts[by_first], rows, side="right") - 1]
    return rows - firsts[block] + new_starts[block]


def _rank_order(qcodes: np.ndarray | None, docs: pa.Array, scores: np.ndarray | None,
                blocks: tuple[np.ndarray, np.ndarray] | None = None) -> tuple | None:
    """How to move the rows into rank order: None when they are in it already, else a plan
    ``(order, runs, patch)``.

    Rows are given by query code (``qcodes``) or as contiguous per-query ``blocks`` = (query code,
    first row). ``order[i]`` is the row that goes to position i. Usually the move is a few block
    copies: then ``order`` is None, ``runs`` = (first rows, lengths) of the blocks in their new order,
    and ``patch`` = (positions, rows) puts tied rows in doc-id order afterwards. Scored runs rank by
    query, score descending, then doc id in descending byte order (trec_eval); only rows in groups of
    tied scores are ever compared as strings.
    """
    n = len(docs)
    if n < 2:
        return None
    if blocks is None:
        change = qcodes[1:] != qcodes[:-1]
        heads = np.concatenate([[0], np.flatnonzero(change) + 1])
        if len(heads) == int(qcodes.max()) + 1:  # each query's rows form one block
            blocks = (qcodes[heads], heads)
    if blocks is not None:
        codes, heads = blocks
        lengths = np.diff(np.append(heads, n))
        runs = None
        if len(codes) > 1 and not bool((codes[1:] > codes[:-1]).all()):
            by_code = np.argsort(codes, kind="stable")
            runs = (heads[by_code], lengths[by_code])
        if scores is None:
            return None if runs is None else (None, runs, None)
        boundary = heads[1:] - 1  # i where rows i and i + 1 belong to different queries
        ranked = scores[:-1] >= scores[1:]
        ranked[boundary] = True
        if bool(ranked.all()):
            # blocks already ranked inside: ties are neighbours within a block, wherever it goes
            tied = scores[:-1] == scores[1:]
            tied[boundary] = False
            fix = _break_ties(np.flatnonzero(tied), None, docs)
            if fix is None:
                return None if runs is None else (None, runs, None)
            if runs is None:
                runs = (np.zeros(1, dtype=np.int64), np.array([n], dtype=np.int64))
            positions = _new_positions(fix[0], runs)
            by_position = np.argsort(positions)
            return None, runs, (positions[by_position], fix[1][by_position])
        if qcodes is None:
            qcodes = np.repeat(codes, lengths)
    elif scores is None:
        return np.argsort(qcodes, kind="stable"), None, None
    order = np.lexsort((-scores, qcodes))  # stable: query, then score descending
    ranked_scores = scores[order]
    ranked_q = qcodes[order]
    tie = np.flatnonzero((ranked_q[1:] == ranked_q[:-1]) & (ranked_scores[:-1] == ranked_scores[1:]))
    fix = _break_ties(tie, order, docs)
    if fix is not None:
        order[fix[0]] = fix[1]
    return order, None, None


def _break_ties(tie: np.ndarray, base: np.ndarray | None, docs: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """Put tied neighbours (positions ``tie`` and ``tie + 1``) in doc-id order, descending.

    ``base`` maps positions to rows (None: the identity). Returns ``(positions, rows)``: the row that
    must go to each position of the tied groups, or None when every tie is already in that order.
    """
    if len(tie) == 0:
        return None
    rows_at = (lambda p: p) if base is None else (lambda p: base[p])
    if np_values(pc.greater(docs.take(arrow_indices(rows_at(tie))),
                            docs.take(arrow_indices(rows_at(tie + 1))))).all():
        return None
    positions = np.union1d(tie, tie + 1)
    starts_group = ~np.isin(positions - 1, tie)  # a position not tied with the one before it
    group = np.cumsum(starts_group)
    rows = rows_at(positions)
    table = pa.Table.from_arrays([arrow_indices(group), single_array(docs.take(arrow_indices(rows)))],
                                 names=["g", "d"])
    perm = np_values(pc.sort_indices(table, sort_keys=[("g", "ascending"), ("d", "descending")]))
    return positions, rows[perm]


