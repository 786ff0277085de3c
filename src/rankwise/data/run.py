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
    find_duplicate_pair,
    group_queries,
    np_values,
    offsets_from_codes,
    string_hashes,
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
        dup = find_duplicate_pair(qcodes, docs, hashes)
        if dup is not None:
            first, again = dup
            raise InputError(
                f"doc '{docs[again].as_py()}' appears twice in query '{qids[again].as_py()}'"
                f" (first at line {_line(lines, first)})",
                source=src,
                line=_line(lines, again),
                field="doc_id",
            )
        order = _rank_order(qcodes, docs, score_arr)
        if order is not None:
            qcodes = qcodes[order]
            docs = docs.take(arrow_indices(order))
            hashes = hashes[order]
            if score_arr is not None:
                score_arr = score_arr[order]
        offsets = offsets_from_codes(qcodes, len(queries))
        run = cls(queries, offsets, docs, score_arr, kind, name)
        run.__dict__["_doc_hashes"] = hashes
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
            self.queries, offsets, self.doc_ids.take(arrow_indices(idx)),
            None if self.scores is None else self.scores[idx], self.kind, self.name,
        )
        if "_doc_hashes" in self.__dict__:
            run.__dict__["_doc_hashes"] = self._doc_hashes[idx]
        return run

    def __repr__(self) -> str:
        return f"Run(name={self.name!r}, kind={self.kind!r}, queries={self.n_queries}, rows={len(self)})"


def _line(lines: np.ndarray | None, row: int) -> int:
    return int(lines[row]) if lines is not None else row + 1


def _block_order(qcodes: np.ndarray, heads: np.ndarray, n: int) -> np.ndarray:
    """Row order putting contiguous per-query blocks in query-code order, keeping rows within a block."""
    lengths = np.diff(np.append(heads, n))
    by_code = np.argsort(qcodes[heads], kind="stable")
    starts, lengths = heads[by_code], lengths[by_code]
    new_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.arange(n, dtype=np.int64) + np.repeat(starts - new_starts, lengths)


def _rank_order(qcodes: np.ndarray, docs: pa.Array, scores: np.ndarray | None) -> np.ndarray | None:
    """Row order that ranks the run, or None when the rows are in rank order already.

    Scored: query, then score descending, then doc id in descending byte order (trec_eval). Only the
    rows inside groups of tied scores are ever compared as strings.
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
        return _block_order(qcodes, heads, n) if contiguous else np.argsort(qcodes, kind="stable")
    if contiguous and bool(((scores[:-1] >= scores[1:]) | change).all()):
        order = None if in_order else _block_order(qcodes, heads, n)
    else:
        order = np.lexsort((-scores, qcodes))  # stable: query, then score descending
    q_same = ~change if order is None else qcodes[order][1:] == qcodes[order][:-1]
    ranked = scores if order is None else scores[order]
    tie = np.flatnonzero(q_same & (ranked[:-1] == ranked[1:]))
    if len(tie) == 0:
        return order
    base = np.arange(n) if order is None else order
    later = docs.take(arrow_indices(base[tie + 1]))
    if np_values(pc.greater(docs.take(arrow_indices(base[tie])), later)).all():
        return order
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
