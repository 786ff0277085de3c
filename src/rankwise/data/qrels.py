"""Relevance judgements: a grade per (query, doc)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

from rankwise.data.columns import arrow_strings, as_string_array, flat_items, string_hashes
from rankwise.data.ranking import group_rows
from rankwise.data.run import _sorted_items
from rankwise.errors import InputError

__all__ = ["Qrels"]


@dataclass(frozen=True, eq=False)
class Qrels:
    """Graded judgements per query, stored column-wise (queries in byte order).

    The judgements of ``queries[i]`` are rows ``offsets[i]:offsets[i+1]`` of ``doc_ids`` /
    ``grades``. A grade >= the relevance level is relevant; 0 is judged non-relevant; a negative
    grade means "pooled but unjudged" (never relevant, skipped by bpref).

    Example:
        >>> qrels = Qrels.from_dict({"q1": {"a": 1, "b": 0, "c": 2}})
        >>> qrels.judgements("q1")
        {'a': 1, 'b': 0, 'c': 2}
    """

    queries: list[str]
    offsets: np.ndarray
    doc_ids: pa.Array
    grades: np.ndarray

    @classmethod
    def from_columns(
        cls, query_ids, doc_ids, grades, *, source: str | None = None, lines: np.ndarray | None = None
    ) -> Qrels:
        """Build from parallel columns of query ids, doc ids and integer grades.

        Example:
            >>> Qrels.from_columns(["q1", "q1"], ["a", "b"], [1, 0]).n_queries
            1
        """
        src = source or "<qrels>"
        qids = as_string_array(query_ids, source=src, field="query_id", chunked=True)
        docs = as_string_array(doc_ids, source=src, field="doc_id", chunked=True)
        grade_arr = np.asarray(grades)
        if grade_arr.shape != (len(docs),) or len(qids) != len(docs):
            raise InputError("columns differ in length", source=src)
        if grade_arr.dtype.kind == "f":
            bad = ~np.isfinite(grade_arr) | (grade_arr != np.round(grade_arr))
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise InputError(
                    f"grade must be an integer, got {grade_arr[row]!r}",
                    source=src, line=_line(lines, row), field="relevance",
                )
        elif grade_arr.dtype.kind not in "iub":
            raise InputError(f"grades must be integers, got {grade_arr.dtype}", source=src, field="relevance")
        grade_arr = grade_arr.astype(np.int64)
        return cls._grouped(group_rows(qids, docs, grade_arr, source=src, lines=lines))

    @classmethod
    def _grouped(cls, grouped) -> Qrels:
        qrels = cls(grouped.queries, grouped.offsets, grouped.docs, grouped.values)
        qrels.__dict__["doc_hashes"] = grouped.hashes
        return qrels

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, int]]) -> Qrels:
        """Build from ``{qid: {doc: grade}}``.

        Example:
            >>> Qrels.from_dict({"q1": {"d1": 2}}).grades.tolist()
            [2]
        """
        queries, values, distinct = _sorted_items(data)  # byte order from the start
        if not set(map(type, values)) <= {dict}:
            for qid, judged in zip(queries, values, strict=True):
                if type(judged) is not dict and not isinstance(judged, Mapping):
                    raise InputError(f"query '{qid}': expected {{doc: grade}}", source="<dict>")
        counts = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        if not counts.all():
            keep = (counts > 0).tolist()
            queries = [q for q, f in zip(queries, keep, strict=True) if f]
            values = [v for v, f in zip(values, keep, strict=True) if f]
            counts = counts[counts > 0]
        total = int(counts.sum())
        docs, grade_arr, hashes = flat_items(values, total, field="relevance", words="grades must be integers")
        bad = ~np.isfinite(grade_arr) | (grade_arr != np.round(grade_arr))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(f"grade must be an integer, got {grade_arr[row]!r}", source="<dict>",
                             line=row + 1, field="relevance")
        grade_arr = grade_arr.astype(np.int64)
        if not distinct and any(a == b for a, b in zip(queries, queries[1:], strict=False)):  # 1 and "1": merge them
            qcol = arrow_strings([q for q, c in zip(queries, counts.tolist(), strict=True) for _ in range(c)])
            return cls.from_columns(qcol, docs, grade_arr, source="<dict>")
        block_codes = np.arange(len(queries), dtype=np.int32)
        heads = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        return cls._grouped(group_rows(None, docs, grade_arr, source="<dict>", queries=queries,
                                       blocks=(block_codes, heads), hashes=hashes))

    def __len__(self) -> int:
        return len(self.doc_ids)

    @property
    def n_queries(self) -> int:
        return len(self.queries)

    @cached_property
    def query_position(self) -> dict[str, int]:
        """Query id -> its index in ``queries``."""
        return {q: i for i, q in enumerate(self.queries)}

    @cached_property
    def doc_hashes(self) -> np.ndarray:
        """64-bit hash of each doc id (see :func:`rankwise.data.columns.string_hashes`)."""
        return string_hashes(self.doc_ids)

    def judgements(self, query_id: str) -> dict[str, int]:
        """``{doc: grade}`` of one query (empty if it has none)."""
        i = self.query_position.get(str(query_id))
        if i is None:
            return {}
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return dict(zip(self.doc_ids[a:b].to_pylist(), self.grades[a:b].tolist(), strict=False))

    def query_codes(self) -> np.ndarray:
        """For each row, the index of its query in :attr:`queries`."""
        return np.repeat(np.arange(self.n_queries, dtype=np.int64), np.diff(self.offsets))

    def n_relevant(self, relevance_level: int = 1) -> np.ndarray:
        """R per query: judgements with grade >= ``relevance_level``."""
        return np.bincount(self.query_codes()[self.grades >= relevance_level], minlength=self.n_queries)

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{qid: {doc: grade}}``."""
        docs = self.doc_ids.to_pylist()
        grades = self.grades.tolist()
        return {
            q: dict(zip(docs[self.offsets[i] : self.offsets[i + 1]], grades[self.offsets[i] : self.offsets[i + 1]], strict=False))
            for i, q in enumerate(self.queries)
        }

    def __repr__(self) -> str:
        return f"Qrels(queries={self.n_queries}, judgements={len(self)})"


def _line(lines: np.ndarray | None, row: int) -> int:
    return int(lines[row]) if lines is not None else row + 1
