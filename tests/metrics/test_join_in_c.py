"""The compiled join (``_walk.join_grades``) fills the relevance matrix exactly as numpy's join.

``join`` finds a run's judged rows with one C pass where the extension was built (each judgement
looked up among its run query's sorted row keys, confirmed on the doc id) and with numpy's
searchsorted otherwise (``compiled=False``). Held here: the same grades, judged and pooled cells on
any qrels and run (unjudged and negative grades, queries on one side only, a depth cut, either
``missing`` rule, on threads); and on hashes that all collide, where only the doc ids tell rows
apart, the matrix of the true hashes. The metrics that read the matrix without its running sums
(``RelevanceMatrix.within``, average precision) give what the running sums give.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankwise.data import Qrels, Run
from rankwise.data.compiled import walk
from rankwise.data.ranking import row_keys
from rankwise.metrics import matrix as matrix_module
from rankwise.metrics.ir import average_precision
from rankwise.metrics.matrix import RelevanceMatrix, join

pytestmark = pytest.mark.skipif(walk is None, reason="the C extension was not built")

_DOCS = st.sampled_from(["d1", "d2", "d3", "d10", "é", "a" * 9, "b" * 30, ""])
_QUERIES = st.sampled_from(["q1", "q2", "q10", "x"])
_QRELS = st.dictionaries(_QUERIES, st.dictionaries(_DOCS, st.integers(-2, 3), min_size=1, max_size=6), max_size=4)
_RUN = st.dictionaries(_QUERIES, st.dictionaries(_DOCS, st.sampled_from([0.0, 1.0, 2.5, -1.0]), min_size=1, max_size=8),
                       max_size=4)
_CELLS = ("grades", "judged", "pooled", "lengths", "n_relevant", "n_judged_nonrelevant", "ideal_gains")


def _same_matrix(a: RelevanceMatrix, b: RelevanceMatrix) -> None:
    assert a.query_ids == b.query_ids
    for name in _CELLS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name


@settings(max_examples=300, deadline=None)
@given(_QRELS, _RUN, st.sampled_from(["zero", "skip"]), st.sampled_from([None, 1, 2, 5]), st.booleans())
def test_the_c_join_fills_the_matrix_numpy_fills(qrels, run, missing, depth, threaded):
    if not qrels or not run:
        return
    if threaded:  # (every size on Arrow's CPU count of threads)
        matrix_module._THREADED_ROWS, saved = 0, matrix_module._THREADED_ROWS
    try:
        q, r = Qrels.from_dict(qrels), Run.from_dict(run)
        compiled, _ = join(q, r, missing=missing, depth=depth)
        plain, _ = join(q, r, missing=missing, depth=depth, compiled=False)
    finally:
        if threaded:
            matrix_module._THREADED_ROWS = saved
    _same_matrix(compiled, plain)


def test_hashes_that_all_collide_still_join_on_the_doc_ids():
    """Every doc hash 0: each judgement's key prefix matches every row of its query, and only the
    doc-id comparison finds its row. The matrix is the one the true hashes give."""
    rng = np.random.default_rng(3)
    qrels = {f"q{i}": {f"d{j}": int(rng.integers(-1, 3)) for j in rng.choice(60, 12, replace=False)} for i in range(30)}
    run = {f"q{i}": {f"d{j}": float(rng.integers(0, 5)) for j in rng.choice(60, 40, replace=False)} for i in range(30)}
    truth, _ = join(Qrels.from_dict(qrels), Run.from_dict(run), compiled=False)
    q, r = Qrels.from_dict(qrels), Run.from_dict(run)
    q.__dict__["doc_hashes"] = np.zeros(len(q), dtype=np.uint64)
    r.__dict__["sorted_keys"] = row_keys(np.diff(r.offsets), np.zeros(len(r), dtype=np.uint64))
    collided, _ = join(q, r)
    _same_matrix(collided, truth)
    assert int(collided.judged.sum()) > 100


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), max_size=12), min_size=1, max_size=6), st.booleans(),
       st.sampled_from([None, 0, 1, 3, 50]))
def test_counts_within_k_are_the_running_sums_column(rows, with_found, k):
    """``within(kind, k)`` is column k-1 of the running sums (``cum_relevant``,
    ``cum_chunk_relevant``, ``cum_found``), before the sums are made and after; average precision
    is trec_eval's sum of precision at each relevant rank, in rank order, over R."""
    found = [[g % 2 for g in row] for row in rows] if with_found else None
    earned = [[g != 1 for g in row] for row in rows]
    m = RelevanceMatrix.from_verdicts(rows, found=found, earned=earned)
    before = {kind: m.within(kind, k) for kind in ("relevant", "chunk", "found")}
    ap = average_precision(m, k)
    sums = {"relevant": m.cum_relevant(), "chunk": m.cum_chunk_relevant(), "found": m.cum_found()}
    for kind, cum in sums.items():
        assert before[kind].dtype == np.int64
        assert before[kind].tolist() == m.at(cum, k).tolist() == m.within(kind, k).tolist()
    for i, relevant in enumerate(m.relevant.tolist()):
        total, seen = 0.0, 0
        for rank, rel in enumerate(relevant[: len(relevant) if k is None else k], start=1):
            if rel:
                seen += 1
                total += seen / float(rank)
        assert ap[i] == (total / m.n_relevant[i] if m.n_relevant[i] else 0.0)


def test_the_c_passes_refuse_inconsistent_buffers_with_an_error():
    """The C passes check every index they will follow before following any: a chunk whose offsets
    run past its bytes, a negative length, columns of different lengths, a query code, matrix row
    or qrels query out of range, a matrix of the wrong size: a ValueError naming it, never a read or
    a write out of bounds."""
    docs = pa.array(["a", "bc", "d"])
    offsets_buf, data_buf = docs.buffers()[1], docs.buffers()[2]
    good = [(offsets_buf, data_buf, 0, 3)]
    with pytest.raises(ValueError, match="offsets past a chunk's data"):
        walk.encode_ids([(offsets_buf, b"ab", 0, 3)])
    with pytest.raises(ValueError, match="negative"):
        walk.encode_ids([(offsets_buf, data_buf, 0, -1)])
    scores = np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="columns of different lengths"):
        walk.ranked_rows(np.zeros(3, np.int32), np.array([0, 2], np.int64), good, scores)
    with pytest.raises(ValueError, match="a query code outside the offsets"):
        walk.ranked_rows(np.array([0, 1, 0], np.int32), np.array([0, 3], np.int64), good, scores)

    keys = np.sort(np.arange(3, dtype=np.uint64))
    run = (keys, np.array([0, 3], np.int64), 1, 2, good)
    qrels = (np.array([0, 1], np.int64), np.zeros(1, np.uint64), [(offsets_buf, data_buf, 0, 1)], np.ones(1, np.int64))

    def matrix(width: int = 3):
        return np.zeros((1, width), np.int64), np.zeros((1, width), bool), np.zeros((1, width), bool)

    per_query = (np.array([0], np.int64), np.array([0], np.int64), np.array([3], np.int64))
    grades, judged, pooled = matrix()
    assert walk.join_grades(run, per_query, qrels, (grades, judged, pooled)) is True
    assert grades.tolist() == [[1, 0, 0]] and judged.tolist() == pooled.tolist() == [[True, False, False]]
    split = (keys, run[1], 1, 2, [(offsets_buf, data_buf, 0, 1), (offsets_buf, data_buf, 1, 2)])
    grades, judged, pooled = matrix()
    assert walk.join_grades(split, per_query, qrels, (grades, judged, pooled)) is False  # (numpy's join then)
    assert not grades.any() and not judged.any() and not pooled.any()
    with pytest.raises(ValueError, match="out of range"):
        walk.join_grades(run, (np.array([1], np.int64), per_query[1], per_query[2]), qrels, matrix())
    with pytest.raises(ValueError, match="out of range"):
        walk.join_grades(run, (per_query[0], np.array([5], np.int64), per_query[2]), qrels, matrix())
    with pytest.raises(ValueError, match="out of range"):
        walk.join_grades(run, (per_query[0], per_query[1], np.array([9], np.int64)), qrels, matrix())
    with pytest.raises(ValueError, match="wrong length|different lengths"):
        grades, judged, pooled = matrix()
        walk.join_grades(run, per_query, qrels, (grades, judged[:, :2].copy(), pooled))
    with pytest.raises(ValueError, match="do not span"):
        walk.join_grades((keys, np.array([0, 2], np.int64), 1, 2, good), per_query, qrels, matrix())
