"""Failure classes over columns: :func:`rankwise.analysis.failures.classify_case`'s rules, in its
order, for a whole block of cases judged by one source (a test set's cases carry no other source
and no first stage, so ``sources disagree`` and ``demoted by the reranker`` cannot occur here).

Example:
    >>> import json, tempfile, pathlib
    >>> from rankwise.data.testset_columns import iter_case_columns
    >>> from rankwise.relevance.column_sources import judge_columns
    >>> path = pathlib.Path(tempfile.mkdtemp(), "t.jsonl")
    >>> rows = [{"id": "a", "retrieved_context_ids": ["x", "d1"], "reference_context_ids": ["d1"]},
    ...         {"id": "b", "retrieved_context_ids": ["x"]}]
    >>> _ = path.write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> cases = next(iter_case_columns(path))
    >>> [FAILURE_CLASSES[c] for c in classify_columns(cases, judge_columns(cases, "ids"), 1)]
    ['ranked too low', 'no ground truth']
"""

from __future__ import annotations

import numpy as np

from rankwise.analysis.failures import FAILURE_CLASSES
from rankwise.data.testset_columns import CaseColumns, NotColumnar
from rankwise.relevance.column_verdicts import ColumnVerdicts
from rankwise.relevance.ids_columns import in_case_sets
from rankwise.relevance.span_columns import case_pairs, shared_chars

__all__ = ["classify_columns", "FAILURE_CLASSES"]

_CODE = {name: i for i, name in enumerate(FAILURE_CLASSES)}


def _any_per_case(case: np.ndarray, flag: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(case[flag], minlength=n) > 0


def _in_case(case, code, set_case, set_code, n_codes: int, n: int) -> np.ndarray:
    """Per case: some ``code`` of it is among its set's codes."""
    if not len(set_code) or not (code >= 0).any():
        return np.zeros(n, dtype=bool)
    return _any_per_case(case, in_case_sets(case, code, set_case, set_code, n_codes), n)


def classify_columns(cases: CaseColumns, verdicts: ColumnVerdicts, k: int, *, id_field: str | None = None,
                     relevance_level: int = 1) -> np.ndarray:
    """Each case's failure class at ``k``, as an index into :data:`FAILURE_CLASSES`.

    ``id mismatch`` takes the run-wide condition (some reference id retrieved anywhere) as met: when
    it is not, no verdict matched anywhere and the caller has handed the run to the object path.
    :class:`~rankwise.data.testset_columns.NotColumnar` when a case would need its texts compared
    (a passage without offsets beside chunks with text: ``split by chunking`` by text).
    """
    n = cases.n
    level = max(1, relevance_level)
    case = cases.chunk_case()
    rank = cases.chunk_rank()
    n_refs = np.diff(cases.ref_offsets)
    n_passages = np.diff(cases.passage_offsets)
    if verdicts.source == "ids":
        truth = verdicts.n_relevant > 0
    else:
        truth = (n_passages > 0) | (n_refs > 0)
    relevant = verdicts.grade >= level
    hit = _any_per_case(case, relevant & (rank < k), n)
    anywhere = _any_per_case(case, relevant, n)
    out = np.full(n, _CODE["not retrieved"], dtype=np.int8)
    open_ = truth & ~hit & ~anywhere  # cases the later rules decide
    if open_.any():
        passage_case = cases.passage_case()
        out[_split(cases, case, passage_case, open_)] = _CODE["split by chunking"]
        same_doc = _in_case(case, cases.chunk_doc, passage_case, cases.passage_doc, cases.n_codes, n)
        out[open_ & same_doc & (out != _CODE["split by chunking"])] = _CODE["right document, wrong chunk"]
    out[anywhere] = _CODE["ranked too low"]
    out[hit] = _CODE["hit"]
    if verdicts.source == "ids":
        out[truth & _id_mismatch(cases, case, id_field)] = _CODE["id mismatch"]
    out[~truth] = _CODE["no ground truth"]
    return out


def _id_mismatch(cases: CaseColumns, case: np.ndarray, id_field: str | None) -> np.ndarray:
    """No chunk's compared field is a reference id of its case, but the other field is."""
    n = cases.n
    ref_case = cases.ref_case()
    width = cases.n_codes
    by_id = _in_case(case, cases.chunk_id, ref_case, cases.ref_id, width, n)
    by_doc = _in_case(case, cases.chunk_doc, ref_case, cases.ref_id, width, n)
    if id_field == "doc_id":
        return ~by_doc & by_id
    if id_field == "id":
        return ~by_id & by_doc
    has_id = _any_per_case(case, cases.chunk_id >= 0, n)
    mine = np.where(has_id, by_id, by_doc)  # the default compares id, else doc_id
    return ~mine & by_doc


def _split(cases: CaseColumns, case: np.ndarray, passage_case: np.ndarray, open_: np.ndarray) -> np.ndarray:
    """Among the ``open_`` cases, those where a chunk's span overlaps a reference passage's span."""
    n = cases.n
    chunks = np.flatnonzero(open_[case])
    passages = np.flatnonzero(open_[passage_case])
    unspanned = ~((cases.passage_doc >= 0) & (cases.passage_start >= 0) & (cases.passage_end >= 0))
    by_text = _any_per_case(passage_case, unspanned & cases.passage_text, n)
    texts = _any_per_case(case, cases.chunk_text > 0, n)
    if (open_ & by_text & texts).any():
        raise NotColumnar("a case whose passages would be compared with its chunks by text")
    left, right = case_pairs(case[chunks], passage_case[passages], n)
    c, p = chunks[left], passages[right]
    shared = shared_chars(cases.chunk_doc[c], cases.chunk_start[c], cases.chunk_end[c],
                          cases.passage_doc[p], cases.passage_start[p], cases.passage_end[p])
    return _any_per_case(case[c], shared > 0, n)
