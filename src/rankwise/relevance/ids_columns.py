"""Verdicts from ids over columns: :func:`rankwise.relevance.ids.judge_ids`'s rule (a chunk is
relevant when its key is one of the case's reference ids) as sorted-array membership, one pass for
a whole block of cases.

Example:
    >>> import json, tempfile, pathlib
    >>> from rankwise.data.testset_columns import iter_case_columns
    >>> path = pathlib.Path(tempfile.mkdtemp(), "t.jsonl")
    >>> row = {"id": "q", "retrieved_context_ids": ["d1", "d2", "d3", "d4"],
    ...        "reference_context_ids": ["d1", "d4", "d5", "d6"]}
    >>> _ = path.write_text(json.dumps(row) + "\\n")
    >>> v = judge_ids_columns(next(iter_case_columns(path)))
    >>> v.grade.tolist(), v.n_relevant.tolist()
    ([1, 0, 0, 1], [4])
"""

from __future__ import annotations

import numpy as np

from rankwise.data.columns import distinct_sorted
from rankwise.data.testset_columns import CaseColumns
from rankwise.relevance.column_verdicts import ColumnVerdicts

__all__ = ["judge_ids_columns", "in_case_sets"]


def in_case_sets(case: np.ndarray, code: np.ndarray, set_case: np.ndarray, set_code: np.ndarray,
                 n_codes: int) -> np.ndarray:
    """Per (case, code): whether ``code`` is among the codes listed for the same case (codes >= 0;
    -1 is never a member).

    Example:
        >>> case, code = np.array([0, 0, 1]), np.array([5, 6, 5])
        >>> in_case_sets(case, code, np.array([0]), np.array([5]), 10).tolist()
        [True, False, False]
    """
    width = np.int64(n_codes + 1)
    members = distinct_sorted(set_case.astype(np.int64) * width + set_code)
    keys = case.astype(np.int64) * width + code
    if not len(members):
        return np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(members, keys), len(members) - 1)
    return (members[at] == keys) & (code >= 0)


def judge_ids_columns(cases: CaseColumns, *, id_field: str | None = None) -> ColumnVerdicts:
    """Each chunk's key (``id``, else ``doc_id``; or the field ``id_field`` names) looked up in its
    case's reference ids: grade 1 when listed, else 0; a chunk without a key has no verdict. R is
    the case's distinct reference ids; a case without any is unscorable (no ground truth)."""
    if id_field is None:
        key = np.where(cases.chunk_id >= 0, cases.chunk_id, cases.chunk_doc)
    elif id_field == "id":
        key = cases.chunk_id
    elif id_field == "doc_id":
        key = cases.chunk_doc
    else:
        raise ValueError(f"id_field must be 'id' or 'doc_id', not {id_field!r}")
    n, width = cases.n, cases.n_codes + 1
    ref_case = cases.ref_case()
    gold = distinct_sorted(ref_case * width + cases.ref_id)
    n_relevant = np.bincount(gold // width, minlength=n).astype(np.int64)
    chunk_case = cases.chunk_case()
    relevant = in_case_sets(chunk_case, key, ref_case, cases.ref_id, width - 1)
    ok = key >= 0
    # the matrix's key: the verdict's own (``meta["key"]``), else what ``_chunk_key`` falls back to
    matrix_key = key if id_field != "id" else np.where(key >= 0, key, cases.chunk_doc)
    items = np.flatnonzero(relevant)
    return ColumnVerdicts("ids", relevant.astype(np.int64), ok, matrix_key, items, key[items], n_relevant,
                          np.where(n_relevant == 0, 1, 0).astype(np.int8), cases.lengths, "reference ids")
