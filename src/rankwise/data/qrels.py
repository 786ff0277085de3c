"""Relevance judgements: a grade per (query, doc)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

from rankwise.data._columns import (
    arrow_indices,
    as_string_array,
    find_duplicate_pair,
    group_queries,
    offsets_from_codes,
    string_hashes,
)
from rankwise.errors import InputError

__all__ = ["Qrels"]


@dataclass(frozen=True, eq=False)
class Qrels:
    """Graded judgements per query, stored column-wise (queries in byte order).

    The judgements of ``queries[i]`` are rows ``offsets[i]:offsets[i+1]`` of ``doc_ids`` / ``grades``.
    A grade >= the relevance level is relevant; 0 is judged non-relevant; a negative grade means
    "pooled but unjudged" (never relevant, skipped by bpref).

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
        qids = as_string_array(query_ids, source=src, field="query_id")
        docs = as_string_array(doc_ids, source=src, field="doc_id")
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
        queries, qcodes = group_queries(qids)
        hashes = string_hashes(docs)
        dup = find_duplicate_pair(qcodes, docs, hashes)
        if dup is not None:
            first, again = dup
            raise InputError(
                f"pair (query '{qids[again].as_py()}', doc '{docs[again].as_py()}') is judged twice"
                f" (first at line {_line(lines, first)})",
                source=src, line=_line(lines, again), field="doc_id",
            )
        if len(qcodes) > 1 and not (qcodes[1:] >= qcodes[:-1]).all():
            order = np.argsort(qcodes, kind="stable")
            qcodes, docs = qcodes[order], docs.take(arrow_indices(order))
            grade_arr, hashes = grade_arr[order], hashes[order]
        offsets = offsets_from_codes(qcodes, len(queries))
        qrels = cls(queries, offsets, docs, grade_arr)
        qrels.__dict__["_doc_hashes"] = hashes
        return qrels

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, int]]) -> Qrels:
        """Build from ``{qid: {doc: grade}}``.

        Example:
            >>> Qrels.from_dict({"q1": {"d1": 2}}).grades.tolist()
            [2]
        """
        qids: list[str] = []
        docs: list[str] = []
        grades: list[int] = []
        for qid, judged in data.items():
            if not isinstance(judged, Mapping):
                raise InputError(f"query '{qid}': expected {{doc: grade}}", source="<dict>")
            qids.extend([str(qid)] * len(judged))
            docs.extend(map(str, judged.keys()))
            grades.extend(judged.values())
        try:
            grade_arr = np.asarray(grades, dtype=np.float64) if grades else np.zeros(0, np.int64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"grades must be integers ({exc})", source="<dict>", field="relevance") from None
        return cls.from_columns(pa.array(qids, pa.string()), pa.array(docs, pa.string()), grade_arr,
                                source="<dict>")

    def __len__(self) -> int:
        return len(self.doc_ids)

    @property
    def n_queries(self) -> int:
        return len(self.queries)

    @cached_property
    def _position(self) -> dict[str, int]:
        return {q: i for i, q in enumerate(self.queries)}

    @cached_property
    def _doc_hashes(self) -> np.ndarray:
        """64-bit hash of each doc id (see :func:`rankwise.data._columns.string_hashes`)."""
        return string_hashes(self.doc_ids)

    def judgements(self, query_id: str) -> dict[str, int]:
        """``{doc: grade}`` of one query (empty if it has none)."""
        i = self._position.get(str(query_id))
        if i is None:
            return {}
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return dict(zip(self.doc_ids[a:b].to_pylist(), self.grades[a:b].tolist()))

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
            q: dict(zip(docs[self.offsets[i] : self.offsets[i + 1]], grades[self.offsets[i] : self.offsets[i + 1]]))
            for i, q in enumerate(self.queries)
        }

    def __repr__(self) -> str:
        return f"Qrels(queries={self.n_queries}, judgements={len(self)})"


def _line(lines: np.ndarray | None, row: int) -> int:
    return int(lines[row]) if lines is not None else row + 1
