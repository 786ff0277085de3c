"""A run: what a retrieval system returned for each query, in rank order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter
from typing import Literal

import numpy as np
import pyarrow as pa

from rankwise.data.columns import arrow_strings, as_string_array, flat_items, string_hashes, take
from rankwise.data.ranking import RowKeys, rank_rows, row_keys
from rankwise.errors import InputError

__all__ = ["Run"]

RunKind = Literal["scored", "ordered"]


@dataclass(frozen=True, eq=False)
class Run:
    """Retrieved items per query, stored column-wise and already in rank order.

    ``queries`` are the query ids in byte order; the items of ``queries[i]`` are
    ``doc_ids[offsets[i]:offsets[i+1]]``, best first. A *scored* run keeps its scores (order: score
    descending, ties by doc id in descending byte order, as trec_eval); an *ordered* run is a list
    per query, as a RAG pipeline returns chunks.

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
    tag: str | None = None  # a TREC run file's tag column (its last line's, trec_eval's runid)

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
                    f"score is not a finite number: {float(score_arr[row])!r}",
                    source=src,
                    line=_line(lines, row),
                    field="score",
                )
        return cls._ranked(rank_rows(qids, docs, score_arr, source=src, lines=lines), kind, name)

    @classmethod
    def _ranked(cls, ranked, kind: RunKind, name: str) -> Run:
        run = cls(ranked.queries, ranked.offsets, ranked.docs, ranked.values, kind, name)
        run.__dict__["sorted_keys"] = ranked.keys
        return run

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, float] | Sequence[str]], *, name: str = "run") -> Run:
        """Build from ``{qid: {doc: score}}`` (scored) or ``{qid: [doc, ...]}`` (ordered).

        A query mapped to an empty ranking is kept: it was run and retrieved nothing (``num_ret``
        0), which is not the same as a query missing from the run.

        Example:
            >>> Run.from_dict({"q1": ["c3", "c1"]}).kind
            'ordered'
        """
        # queries in byte order from the start (code-point order is UTF-8 byte order): no block
        # moves later
        queries, values, distinct = _sorted_items(data)
        counts = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        if set(map(type, values)) <= {dict}:
            is_map = np.ones(len(values), dtype=bool)
        else:
            is_map = np.fromiter((type(v) is dict or isinstance(v, Mapping) for v in values), dtype=bool,
                                 count=len(values))
        filled = counts > 0
        kinds = {k for k, present in (("scored", is_map[filled].any()), ("ordered", (~is_map[filled]).any()))
                 if present}
        if len(kinds) > 1:
            raise InputError("mixes scored ({doc: score}) and ordered ([doc, ...]) queries", source="<dict>")
        kind = kinds.pop() if kinds else ("ordered" if len(values) and not is_map.any() else "scored")
        empty = []
        if not filled.all():
            keep = filled.tolist()
            empty = [q for q, f in zip(queries, keep, strict=True) if not f]
            queries = [q for q, f in zip(queries, keep, strict=True) if f]
            values = [v for v, f in zip(values, keep, strict=True) if f]
            counts = counts[filled]
        total = int(counts.sum())
        docs, score_arr, hashes = flat_items(values, total, field="score" if kind == "scored" else None,
                                             words="scores must be numbers", rank=True)
        if score_arr is not None:
            bad = ~np.isfinite(score_arr)
            if bad.any():
                raise InputError(f"score is not a finite number: {float(score_arr[np.flatnonzero(bad)[0]])!r}",
                                 source="<dict>", line=int(np.flatnonzero(bad)[0]) + 1, field="score")
        if not distinct and any(a == b for a, b in zip(queries, queries[1:], strict=False)):  # 1 and "1": merge
            qcol = arrow_strings([q for q, c in zip(queries, counts.tolist(), strict=True) for _ in range(c)])
            run = cls.from_columns(qcol, docs, score_arr, kind=kind, name=name, source="<dict>")
        else:
            block_codes = np.arange(len(queries), dtype=np.int32)
            heads = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
            run = cls._ranked(rank_rows(None, docs, score_arr, source="<dict>", queries=queries,
                                        blocks=(block_codes, heads), owned=True, hashes=hashes), kind, name)
        return run._with_queries(empty) if empty else run

    def _with_queries(self, query_ids: list[str]) -> Run:
        """The same run where ``query_ids`` also appear (with an empty ranking if they were absent).
        """
        queries = sorted(set(self.queries).union(query_ids))  # code-point order == UTF-8 byte order
        if len(queries) == self.n_queries:
            return self
        position = {q: i for i, q in enumerate(queries)}
        counts = np.zeros(len(queries), dtype=np.int64)
        counts[[position[q] for q in self.queries]] = np.diff(self.offsets)
        offsets = np.zeros(len(queries) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        run = Run(queries, offsets, self.doc_ids, self.scores, self.kind, self.name, self.tag)
        if "doc_hashes" in self.__dict__:
            run.__dict__["doc_hashes"] = self.doc_hashes
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
    def query_position(self) -> dict[str, int]:
        """Query id -> its index in ``queries``."""
        return {q: i for i, q in enumerate(self.queries)}

    @cached_property
    def doc_hashes(self) -> np.ndarray:
        """64-bit hash of each doc id (see :func:`rankwise.data.columns.string_hashes`)."""
        return string_hashes(self.doc_ids)

    @cached_property
    def sorted_keys(self) -> RowKeys:
        """Sorted (query, doc-hash, row) keys (see :class:`rankwise.data.columns.RowKeys`)."""
        return row_keys(np.diff(self.offsets), self.doc_hashes)

    def _index(self, query_id: str) -> int | None:
        return self.query_position.get(str(query_id))

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
            None if self.scores is None else self.scores[idx], self.kind, self.name, self.tag,
        )
        if "doc_hashes" in self.__dict__:
            run.__dict__["doc_hashes"] = self.doc_hashes[idx]
        return run

    def __repr__(self) -> str:
        return f"Run(name={self.name!r}, kind={self.kind!r}, queries={self.n_queries}, rows={len(self)})"


def _sorted_items(data: Mapping) -> tuple[list[str], list, bool]:
    """The ids of a ``{qid: ...}`` mapping as strings in byte order, their values, and whether the
    ids are distinct for sure (string keys: no ``1`` and ``"1"`` to merge)."""
    if set(map(type, data)) == {str}:  # (a C-level pass; nearly always)
        queries = sorted(data)
        return queries, list(map(data.__getitem__, queries)), True
    items = sorted(((str(q), v) for q, v in data.items()), key=itemgetter(0))
    return [q for q, _ in items], [v for _, v in items], False


def _line(lines: np.ndarray | None, row: int) -> int:
    return int(lines[row]) if lines is not None else row + 1
