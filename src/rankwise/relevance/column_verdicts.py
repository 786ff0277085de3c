"""Verdicts over a block of cases read as columns
(:class:`~rankwise.data.testset_columns.CaseColumns`): one array per chunk and per case instead of
a :class:`~rankwise.data.records.Verdict` per chunk.

What :func:`~rankwise.relevance.column_sources.judge_columns` gives is what the object path's
verdicts give the relevance matrix, the case statuses and the failure classes: each chunk's grade
and whether it has a verdict, the key that makes two chunks of a case the same chunk, the gold items
each chunk matched (a passage, a reference id) and each case's R and status. The sources are
``ids`` (:mod:`rankwise.relevance.ids_columns`) and ``span``
(:mod:`rankwise.relevance.span_columns`), the same rules as :mod:`rankwise.relevance.ids` and
:mod:`rankwise.relevance.text`.

Example:
    >>> import json, tempfile, pathlib
    >>> from rankwise.data.testset_columns import iter_case_columns
    >>> from rankwise.relevance.column_sources import judge_columns
    >>> path = pathlib.Path(tempfile.mkdtemp(), "t.jsonl")
    >>> _ = path.write_text(json.dumps({"id": "q", "retrieved_context_ids": ["a", "b", "a"],
    ...                                 "reference_context_ids": ["a"]}) + "\\n")
    >>> v = judge_columns(next(iter_case_columns(path)), "ids")
    >>> v.grade.tolist(), v.n_relevant.tolist(), v.status_of(0)
    ([1, 0, 1], [1], 'ok')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankwise.relevance.truth import incomplete_words

__all__ = ["ColumnVerdicts", "UNSCORABLE"]

#: why a case is unscorable, by code (0: it is not); "no retrieved chunks" is read from the lengths
UNSCORABLE = ("", "no ground truth", "no reference passage with (doc_id, start, end)")


@dataclass(eq=False)
class ColumnVerdicts:
    """One source's verdicts over a block of cases.

    Attributes:
        source: ``ids`` or ``span``.
        grade: per chunk, the grade its verdict gives (0 when missing).
        ok: per chunk, a verdict was given (else it is missing: no key, no span).
        key: per chunk, the code (in the block's strings) that makes two chunks of a case the same
            chunk for the matrix's redundancy rule; -1: none.
        item_chunk, item: the gold items matched: the chunk (index in the block) and the item (a
            reference id's code, a passage's index in the block), one pair per match.
        n_relevant: per case, R.
        unscorable: per case, an index into :data:`UNSCORABLE`.
        lengths: per case, its chunks.
        basis: where R comes from (``reference ids``, ``reference passages``).
    """

    source: str
    grade: np.ndarray
    ok: np.ndarray
    key: np.ndarray
    item_chunk: np.ndarray
    item: np.ndarray
    n_relevant: np.ndarray
    unscorable: np.ndarray
    lengths: np.ndarray
    basis: str

    def missing(self) -> np.ndarray:
        """Per case, its chunks without a verdict."""
        return np.bincount(np.repeat(np.arange(len(self.lengths)), self.lengths)[~self.ok],
                           minlength=len(self.lengths))

    def status_codes(self) -> np.ndarray:
        """Per case: 0 ok, 1 unscorable (:data:`UNSCORABLE`, or no retrieved chunks), 2 incomplete
        (missing verdicts), as :func:`~rankwise.relevance.truth.case_status` decides."""
        out = np.where(self.missing() > 0, 2, 0)
        out[self.lengths == 0] = 1
        out[self.unscorable > 0] = 1
        return out

    def status_of(self, case: int) -> str:
        """One case's status in the object path's words (``ok``, ``unscorable: ...``,
        ``incomplete: ...``)."""
        if self.unscorable[case]:
            return f"unscorable: {UNSCORABLE[self.unscorable[case]]}"
        if self.lengths[case] == 0:
            return "unscorable: no retrieved chunks"
        missing = int(self.missing()[case])
        if missing:
            return f"incomplete: {incomplete_words(0, missing)}"
        return "ok"
