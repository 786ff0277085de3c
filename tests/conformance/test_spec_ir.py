"""docs/metrics.md §2: the worked example (printed by trec_eval 9.0.8), at relevance levels 1 and 2,
plus the tie rule, ordered runs, the `missing` policies and other definitions docs/metrics.md spells
out."""

from __future__ import annotations

import math

import pytest

from rankwise import evaluate
from rankwise.data import Run
from rankwise.errors import InputError
from rankwise.metrics import RelevanceMatrix, parse_measure

QRELS = {"q1": {"a": 1, "b": 0, "c": 2, "d": 1}}
RUN = {"q1": {"a": 1.0, "b": 1.0, "z": 1.0, "c": 0.5}}

LEVEL_1 = {
    "P@1": 0.0, "P@3": 0.3333, "P@5": 0.4000, "recall@5": 0.6667, "map": 0.2778, "map@3": 0.1111,
    "mrr": 0.3333, "Rprec": 0.3333, "bpref": 0.0000, "ndcg": 0.4348, "ndcg@3": 0.1597, "success@3": 1.0,
}
LEVEL_2 = {"map": 0.2500, "P@5": 0.2000, "recall@5": 1.0000, "Rprec": 0.0, "mrr": 0.2500, "ndcg": 0.4348,
           "ndcg@3": 0.1597}


def _rounded(result) -> dict[str, str]:
    return {name: f"{value:.4f}" for name, value in result.mean.items()}


def test_ties_rank_by_doc_id_descending():
    assert Run.from_dict(RUN).ranking("q1") == ["z", "b", "a", "c"]


@pytest.mark.parametrize(("level", "expected"), [(1, LEVEL_1), (2, LEVEL_2)])
def test_hand_checked_case(level, expected):
    result = evaluate(QRELS, RUN, list(expected), relevance_level=level)
    canon = [parse_measure(n).name for n in expected]
    assert _rounded(result) == {c: f"{v:.4f}" for c, v in zip(canon, expected.values(), strict=False)}


def test_hand_checked_exact_fractions():
    r = evaluate(QRELS, RUN, ["map", "map@3", "P@3", "recall@5", "mrr"]).mean
    # relevant at ranks 3 (a) and 4 (c); R = 3
    assert r["map"] == pytest.approx((1 / 3 + 2 / 4) / 3, abs=1e-15)
    assert r["map@3"] == pytest.approx((1 / 3) / 3, abs=1e-15)
    assert r["precision@3"] == pytest.approx(1 / 3, abs=1e-15)
    assert r["recall@5"] == pytest.approx(2 / 3, abs=1e-15)
    assert r["mrr"] == pytest.approx(1 / 3, abs=1e-15)
    nd = evaluate(QRELS, RUN, ["ndcg", "ndcg@3"]).mean
    dcg = 1 / math.log2(4) + 2 / math.log2(5)  # a (grade 1) at rank 3, c (grade 2) at rank 4
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert nd["ndcg"] == pytest.approx(dcg / idcg, abs=1e-15)
    assert nd["ndcg@3"] == pytest.approx((1 / math.log2(4)) / idcg, abs=1e-15)


def test_ndcg_exp_uses_two_to_the_grade():
    r = evaluate(QRELS, RUN, ["ndcg_exp"]).mean["ndcg_exp"]
    dcg = 1 / math.log2(4) + 3 / math.log2(5)
    idcg = 3 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert r == pytest.approx(dcg / idcg, abs=1e-15)


def test_f1_is_harmonic_mean_and_zero_when_both_zero():
    r = evaluate(QRELS, RUN, ["f1@5", "f1@1"]).mean
    p, rec = 0.4, 2 / 3
    assert r["f1@5"] == pytest.approx(2 * p * rec / (p + rec), abs=1e-15)
    assert r["f1@1"] == 0.0


def test_mrr_with_cutoff():
    r = evaluate(QRELS, RUN, ["mrr@2", "mrr@3"]).mean
    assert r == {"mrr@2": 0.0, "mrr@3": pytest.approx(1 / 3)}


def test_precision_counts_missing_ranks_as_nonrelevant():
    r = evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["P@10", "P@1"]).mean
    assert r == {"precision@10": 0.1, "precision@1": 1.0}


def test_r_precision_when_fewer_retrieved_than_r():
    # R = 3, one retrieved (relevant): relevant in the top min(N, R) = 1, divided by R = 3
    r = evaluate({"q": {"a": 1, "b": 1, "c": 1}}, {"q": {"a": 1.0}}, ["Rprec"]).mean
    assert r["r_precision"] == pytest.approx(1 / 3)


def test_negative_grade_is_never_relevant_and_skipped_by_bpref():
    qrels = {"q": {"a": -1, "b": 0, "c": 1}}
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    r = evaluate(qrels, run, ["P@1", "num_rel", "bpref", "map"], relevance_level=1).mean
    assert r["precision@1"] == 0.0
    assert r["num_rel"] == 1
    # c is preceded by one judged non-relevant (b); min(R, N) = 1 -> 1 - 1/1 = 0
    assert r["bpref"] == 0.0
    assert r["map"] == pytest.approx(1 / 3)
    # without b, only the unjudged a is above c: bpref 1
    r2 = evaluate({"q": {"a": -1, "c": 1}}, run, ["bpref"]).mean
    assert r2["bpref"] == 1.0


def test_ndcg_ideal_ignores_relevance_level():
    # grade-1 docs count in the ideal DCG even at relevance level 2 (trec_eval)
    qrels = {"q": {"a": 2, "b": 1}}
    run = {"q": {"a": 2.0, "b": 1.0}}
    assert evaluate(qrels, run, ["ndcg"], relevance_level=2).mean["ndcg"] == 1.0
    run2 = {"q": {"a": 2.0}}
    expected = 2 / (2 + 1 / math.log2(3))
    assert evaluate(qrels, run2, ["ndcg"], relevance_level=2).mean["ndcg"] == pytest.approx(expected)


def test_ordered_run_keeps_list_order():
    qrels = {"q": {"c1": 1, "c3": 1}}
    r = evaluate(qrels, {"q": ["c3", "c2", "c1"]}, ["P@1", "mrr", "map"]).mean
    assert r["precision@1"] == 1.0
    assert r["map"] == pytest.approx((1 + 2 / 3) / 2)


def test_ids_compared_exactly():
    r = evaluate({"1": {"01": 1}}, {"1": {"1": 1.0, "01": 0.5}}, ["mrr"]).mean
    assert r["mrr"] == 0.5
    with pytest.raises(InputError, match="share no query id"):
        evaluate({"01": {"a": 1}}, {"1": {"a": 1.0}}, ["mrr"])
    r = evaluate({"01": {"a": 1}, "1": {"a": 1}}, {"1": {"a": 1.0}}, ["mrr"])
    assert r.summary["missing_from_run"] == 1 and r.summary["missing_queries"] == ["01"]
    assert r.per_query["01"]["mrr"] == 0.0 and r.per_query["1"]["mrr"] == 1.0


def test_missing_zero_versus_skip_and_summary():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    run = {"q1": {"a": 1.0}, "q9": {"x": 1.0}}
    zero = evaluate(qrels, run, ["P@1", "num_q"])
    assert zero.mean == {"precision@1": pytest.approx(1 / 3), "num_q": 3}
    assert zero.summary["evaluated"] == 3 and zero.summary["missing_from_run"] == 2
    assert zero.summary["ignored_not_in_qrels"] == 1
    assert zero.summary["missing_queries"] == ["q2", "q3"] and zero.summary["ignored_queries"] == ["q9"]
    skip = evaluate(qrels, run, ["P@1", "num_q"], missing="skip")
    assert skip.mean == {"precision@1": 1.0, "num_q": 1}
    assert list(skip.per_query) == ["q1"]


def test_query_without_relevant_doc_scores_zero_and_counts():
    r = evaluate({"q1": {"a": 1}, "q2": {"b": 0}}, {"q1": {"a": 1.0}, "q2": {"b": 1.0}},
                 ["recall@1", "map", "ndcg", "Rprec", "bpref"])
    assert r.per_query["q2"] == {"recall@1": 0.0, "map": 0.0, "ndcg": 0.0, "r_precision": 0.0, "bpref": 0.0}
    assert r.mean["map"] == 0.5


def test_mean_sums_in_query_byte_order():
    # values whose floating-point sum depends on the order; trec_eval adds in query-id byte order
    qrels = {q: {"a": 1, "b": 1, "c": 1} for q in ("b", "a", "C")}
    run = {"b": {"a": 1.0}, "a": {"x": 1.0, "a": 0.5}, "C": {"x": 1.0, "y": 0.9, "a": 0.5}}
    r = evaluate(qrels, run, ["map"])
    assert list(r.per_query) == ["C", "a", "b"]
    vals = [r.per_query[q]["map"] for q in ("C", "a", "b")]
    total = 0.0
    for v in vals:
        total += v
    assert r.mean["map"] == total / 3


def test_matrix_from_verdicts_metrics():
    m = RelevanceMatrix.from_verdicts([[1, 0, 1], [0, 1, 1]])
    assert parse_measure("P@3")(m).tolist() == pytest.approx([2 / 3, 2 / 3])
    assert parse_measure("mrr")(m).tolist() == [1.0, 0.5]


def test_unknown_metric_suggests_close_names():
    with pytest.raises(InputError) as err:
        evaluate(QRELS, RUN, ["ndgc@10"])
    msg = str(err.value)
    assert "unknown metric 'ndgc@10'" in msg and "ndcg@10" in msg
    with pytest.raises(InputError, match="takes no cutoff"):
        parse_measure("bpref@5")


@pytest.mark.parametrize(("alias", "canonical"), [
    ("P_5", "precision@5"), ("P@5", "precision@5"), ("ndcg_cut_10", "ndcg@10"), ("nDCG@10", "ndcg@10"),
    ("recip_rank", "mrr"), ("success_3", "hit_rate@3"), ("Rprec", "r_precision"), ("map_cut_100", "map@100"),
    ("AP", "map"), ("recall_20", "recall@20"), ("R@5", "recall@5"), ("ndcg_cut.10", "ndcg@10"),
])
def test_aliases(alias, canonical):
    assert parse_measure(alias).name == canonical
