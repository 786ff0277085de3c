"""`rankwise.evaluate` as a user calls it: inputs of every kind, and query sets that do not line up.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import rankwise
from _extras import need
from rankwise.cli import main

QRELS = {"q1": {"a": 1, "b": 0, "c": 2, "d": 1}, "q2": {"x": 1}}
RUN = {"q1": {"a": 1.0, "b": 1.0, "z": 1.0, "c": 0.5}, "q3": {"x": 2.0}}


def test_missing_and_ignored_queries_are_counted_and_scored_as_specified():
    zero = rankwise.evaluate(QRELS, RUN, ["P@5", "map"])
    assert zero.summary["evaluated"] == 2
    assert zero.summary["missing_from_run"] == 1 and zero.summary["missing_queries"] == ["q2"]
    assert zero.summary["ignored_not_in_qrels"] == 1 and zero.summary["ignored_queries"] == ["q3"]
    assert zero.per_query["q2"] == {"precision@5": 0.0, "map": 0.0}
    assert zero.mean["precision@5"] == pytest.approx(0.4 / 2)
    skip = rankwise.evaluate(QRELS, RUN, ["P@5", "map"], missing="skip")
    assert list(skip.per_query) == ["q1"] and skip.mean["precision@5"] == pytest.approx(0.4)


def test_a_run_sharing_no_query_with_the_qrels_is_an_error_not_a_table_of_zeros():
    with pytest.raises(rankwise.InputError, match="share no query id.*'01' is not '1'"):
        rankwise.evaluate({"1": {"d": 1}}, {"01": {"d": 1.0}}, ["P@1"])


def test_cli_reports_disjoint_queries_in_one_line(tmp_path):
    (tmp_path / "qrels.txt").write_text("1 0 d 1\n")
    (tmp_path / "run.txt").write_text("01 Q0 d 1 1.0 sys\n")
    res = CliRunner().invoke(main, ["eval", str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt")])
    assert res.exit_code == 2
    assert res.output.startswith("rankwise: error:") and "share no query id" in res.output
    assert "Traceback" not in res.output


def test_dataframes_and_dicts_give_the_same_numbers():
    pd = need("pandas")
    pl = need("polars")
    rows = [(q, d, s) for q, docs in RUN.items() for d, s in docs.items()]
    qrows = [(q, d, g) for q, docs in QRELS.items() for d, g in docs.items()]
    run_pd = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])
    qrels_pl = pl.DataFrame(qrows, schema=["query_id", "doc_id", "relevance"], orient="row")
    from_frames = rankwise.evaluate(qrels_pl, run_pd, ["ndcg@3", "mrr"])
    from_dicts = rankwise.evaluate(QRELS, RUN, ["ndcg@3", "mrr"])
    assert from_frames.mean == from_dicts.mean
    frame = from_dicts.per_query.to_pandas()
    assert list(frame.columns) == ["query_id", "ndcg@3", "mrr"]
    assert frame.loc[frame.query_id == "q1", "mrr"].item() == pytest.approx(1 / 3)
