"""``load_both``: a big run file read while a second thread reads the qrels file gives what reading
them one after the other gives, and reports a bad qrels file first, as reading it first would."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pytest

from rankwise import evaluate
from rankwise.data.load import _BIG_FILE, load_both, load_qrels, load_run
from rankwise.errors import InputError


@pytest.fixture(scope="module")
def big_pair(tmp_path_factory):
    """A run file past the size from which the qrels are read beside it, and its qrels."""
    folder = tmp_path_factory.mktemp("big")
    rng = np.random.default_rng(2)
    n = 500_000
    q = pc.binary_join_element_wise("q", pa.array(rng.integers(0, 4000, n)).cast(pa.string()), "")
    docs = pc.binary_join_element_wise("doc-", pa.array(np.arange(n)).cast(pa.string()), "")
    table = pa.table({"q": q, "z": pa.array(np.full(n, "Q0")), "d": docs, "r": pa.array(np.arange(n) % 100),
                      "s": pa.array(np.round(rng.random(n), 3)), "t": pa.array(np.full(n, "a-run-tag-of-some-length"))})
    run = folder / "run.trec"
    pcsv.write_csv(table, run, pcsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))
    judged = rng.choice(n, 20_000, replace=False)
    qrels = folder / "qrels.txt"
    qrels.write_text("".join(f"{qid} 0 doc-{int(j)} {int(g)}\n" for qid, j, g in
                             zip(q.take(pa.array(judged)).to_pylist(), judged, rng.integers(0, 4, len(judged)),
                                 strict=True)))
    assert run.stat().st_size >= _BIG_FILE  # (the threaded path)
    return qrels, run


def test_both_read_beside_each_other_are_what_each_read_alone_is(big_pair):
    qrels, run = big_pair
    q, r = load_both(qrels, run)
    alone_q, alone_r = load_qrels(qrels), load_run(run)
    assert q.queries == alone_q.queries and q.doc_ids.equals(alone_q.doc_ids)
    assert np.array_equal(q.grades, alone_q.grades)
    assert r.queries == alone_r.queries and r.doc_ids.equals(alone_r.doc_ids)
    assert np.array_equal(r.scores, alone_r.scores) and np.array_equal(r.offsets, alone_r.offsets)
    assert r.tag == "a-run-tag-of-some-length" and len(r) == 500_000
    means = evaluate(qrels, run, ["map", "ndcg@10"]).mean
    assert means == evaluate(alone_q, alone_r, ["map", "ndcg@10"]).mean and means["map"] > 0


def test_a_bad_qrels_file_is_reported_before_a_bad_run(big_pair, tmp_path):
    qrels, run = big_pair
    bad_qrels = tmp_path / "bad_qrels.txt"
    bad_qrels.write_text("q1 0 d1 1\nq1 0 d2 high\n")
    bad_run = tmp_path / "bad_run.trec"
    bad_run.write_bytes(run.read_bytes() + b"q1 Q0 d9 1 not-a-score tag\n")
    with pytest.raises(InputError) as qrels_first:
        load_both(bad_qrels, bad_run)
    assert qrels_first.value.source == str(bad_qrels) and qrels_first.value.line == 2
    assert qrels_first.value.field == "relevance"
    with pytest.raises(InputError) as run_error:
        load_both(qrels, bad_run)
    assert run_error.value.source == str(bad_run) and run_error.value.line == 500_001
    assert run_error.value.field == "score"
