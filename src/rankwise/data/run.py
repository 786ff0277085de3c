"""A run: what a retrieval system returned for each query, in rank order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rankwise.data._columns import (
    arrow_indices,
    as_string_array,
    duplicate_candidates,
    first_duplicate,
    group_queries,
    np_values,
    offsets_from_codes,
    permute,
    permute_strings,
    row_keys,
    runs_of,
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
        qids = as_string_array(query_ids, source=src, field="query_id")
        docs = as_string_array(doc_ids, source=src, field="doc_id")
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
        queries, qcodes = group_queries(qids)
        hashes = string_hashes(docs)
        plan = _rank_order(qcodes, docs, score_arr)
        offsets = offsets_from_codes(qcodes, len(queries))  # counts per query: order-independent
        order = None
        if plan is not None:
            order, runs = plan
            docs = permute_strings(docs, order, runs)
            hashes = permute(hashes, order, runs)
            if score_arr is not None:
                score_arr = permute(score_arr, order, runs)
        keys, bits = row_keys(None, hashes, counts=np.diff(offsets))
        candidates = duplicate_candidates(keys, bits)
        dup = None
        if len(candidates):
            qcodes = np.repeat(np.arange(len(queries), dtype=np.int32), np.diff(offsets))
            if plan is not None and order is None:
                order = _runs_to_order(runs)
            dup = first_duplicate(candidates, qcodes, docs, order)
        if dup is not None:
            first, again = dup
            row = again if order is None else int(np.flatnonzero(order == again)[0])
            raise InputError(
                f"doc '{docs[row].as_py()}' appears twice in query '{queries[qcodes[row]]}'"
                f" (first at line {_line(lines, first)})",
                source=src,
                line=_line(lines, again),
                field="doc_id",
            )
        run = cls(queries, offsets, docs, score_arr, kind, name)
        run.__dict__["_doc_hashes"] = hashes
        run.__dict__["_row_keys"] = (keys, bits)
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
        qids: list[str] = []
        docs: list[str] = []
        scores: list[float] = []
        kinds = set()
        empty: list[str] = []
        empty_kinds = set()
        for qid, items in data.items():
            if len(items) == 0:
                empty.append(str(qid))
                empty_kinds.add("scored" if isinstance(items, Mapping) else "ordered")
                continue
            if isinstance(items, Mapping):
                kinds.add("scored")
                qids.extend([str(qid)] * len(items))
                docs.extend(map(str, items.keys()))
                scores.extend(items.values())
            else:
                kinds.add("ordered")
                items = list(items)
                qids.extend([str(qid)] * len(items))
                docs.extend(map(str, items))
        if len(kinds) > 1:
            raise InputError("mixes scored ({doc: score}) and ordered ([doc, ...]) queries", source="<dict>")
        kind = kinds.pop() if kinds else ("ordered" if empty_kinds == {"ordered"} else "scored")
        try:
            score_arr = np.asarray(scores, dtype=np.float64) if kind == "scored" else None
        except (TypeError, ValueError) as exc:
            raise InputError(f"scores must be numbers ({exc})", source="<dict>", field="score") from None
        run = cls.from_columns(
            pa.array(qids, pa.string()), pa.array(docs, pa.string()), score_arr, kind=kind, name=name,
            source="<dict>",
        )
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
    def _row_keys(self) -> tuple[np.ndarray, int]:
        """Sorted (query, doc)-hash keys carrying their row (see :func:`rankwise.data._columns.row_keys`)."""
        return row_keys(self.query_codes(), self._doc_hashes)

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
                out[q] = dict(zip(docs[a:b], self.scores[a:b].tolist()))
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


def _line(lines: np.ndarray | None, row: int) -> int:
    return int(lines[row]) if lines is not None else row + 1


def _block_runs(qcodes: np.ndarray, heads: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Contiguous per-query blocks put in query-code order: (first row, length) of each, in new order."""
    lengths = np.diff(np.append(heads, n))
    by_code = np.argsort(qcodes[heads], kind="stable")
    return heads[by_code], lengths[by_code]


def _runs_to_order(runs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    firsts, lengths = runs
    new_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(firsts - new_starts, lengths)


RankPlan = tuple  # (order or None, runs or None): how to move the rows into rank order


def _rank_order(qcodes: np.ndarray, docs: pa.Array, scores: np.ndarray | None) -> RankPlan | None:
    """How to move the rows into rank order: None when they are in it already, else ``(order, runs)``.

    ``order[i]`` is the row that goes to position i; ``runs`` = (first rows, lengths) of blocks of
    consecutive rows when the move is a few block copies (then ``order`` may be None). Scored runs
    rank by query, score descending, then doc id in descending byte order (trec_eval). Only rows in
    groups of tied scores are ever compared as strings.
    """
    n = len(qcodes)
    if n < 2:
        return None
    change = qcodes[1:] != qcodes[:-1]
    in_order = bool((qcodes[1:] >= qcodes[:-1]).all())
    heads = None if in_order else np.concatenate([[0], np.flatnonzero(change) + 1])
    contiguous = in_order or len(heads) == int(qcodes.max()) + 1  # each query's rows form one block
    if scores is None:
        if in_order:
            return None
        if contiguous:
            return None, _block_runs(qcodes, heads, n)
        return np.argsort(qcodes, kind="stable"), None
    if contiguous and bool(((scores[:-1] >= scores[1:]) | change).all()):
        # blocks already ranked inside: ties are neighbours within a block, wherever the block goes
        runs = None if in_order else _block_runs(qcodes, heads, n)
        tie = np.flatnonzero(~change & (scores[:-1] == scores[1:]))
        base = _break_ties(tie, None, docs, n)
        if base is None:
            return None if runs is None else (None, runs)
        order = base if runs is None else base[_runs_to_order(runs)]
        return order, runs_of(order)
    order = np.lexsort((-scores, qcodes))  # stable: query, then score descending
    ranked = scores[order]
    tie = np.flatnonzero((qcodes[order][1:] == qcodes[order][:-1]) & (ranked[:-1] == ranked[1:]))
    base = _break_ties(tie, order, docs, n)
    return (order if base is None else base), None


def _break_ties(tie: np.ndarray, base: np.ndarray | None, docs: pa.Array, n: int) -> np.ndarray | None:
    """Order tied neighbours (positions ``tie`` and ``tie + 1`` of ``base``) by doc id, descending.

    ``base`` maps positions to rows (None: the identity). Returns the corrected mapping, or None when
    every tie is already in that order.
    """
    if len(tie) == 0:
        return None
    if base is None:
        before, after = tie, tie + 1
    else:
        before, after = base[tie], base[tie + 1]
    if np_values(pc.greater(docs.take(arrow_indices(before)), docs.take(arrow_indices(after)))).all():
        return None
    if base is None:
        base = np.arange(n)
    # sort each tied group by doc id, descending
    member = np.zeros(n, dtype=bool)
    member[tie] = True
    member[tie + 1] = True
    positions = np.flatnonzero(member)
    tied_with_previous = np.zeros(n, dtype=bool)
    tied_with_previous[tie + 1] = True
    group = np.cumsum(~tied_with_previous[positions])
    table = pa.Table.from_arrays([arrow_indices(group), docs.take(arrow_indices(base[positions]))],
                                 names=["g", "d"])
    perm = np_values(pc.sort_indices(table, sort_keys=[("g", "ascending"), ("d", "descending")]))
    base = base.copy()
    base[positions] = base[positions[perm]]
    return base
