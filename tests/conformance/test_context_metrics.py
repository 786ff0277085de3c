"""Every test vector of docs/metrics.md §3, through the plain functions and through the
registry/engine."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rankwise.metrics import (
    RelevanceMatrix,
    average_context_precision,
    evaluate_matrix,
    harmonic_mean,
    parse_measure,
    set_precision,
    set_recall,
    weighted_context_precision,
)

WCP_VECTORS = [  # (decay, verdicts, K, expected) — docs/metrics.md §3
    ("log", [1, 0, 1], 3, 0.7039),
    ("log", [0, 1, 1], 3, 0.5307),
    ("linear", [1, 0, 1], 3, 0.7273),
    ("linear", [0, 1, 1], 3, 0.4545),
]

ACP_VECTORS = [
    ([1, 0, 1], 5 / 6),
    ([0, 1, 1], 7 / 12),
    ([1, 1, 0], 1.0),
    ([1, 1, 1], 1.0),
    ([1, 1, 0, 1], 11 / 12),
    ([0, 0, 1, 1, 1], 0.4778),
    ([0, 1], 0.5),
    ([], 0.0),
    ([0, 0], 0.0),
]


@pytest.mark.parametrize(("decay", "verdicts", "k", "expected"), WCP_VECTORS)
def test_wcp_vectors(decay, verdicts, k, expected):
    assert round(weighted_context_precision(verdicts, k=k, decay=decay), 4) == expected
    # the same through the registry name and the vectorised engine
    name = f"wcp@{k}" if decay == "log" else f"wcp(decay={decay})@{k}"
    r = evaluate_matrix(RelevanceMatrix.from_verdicts([verdicts]), [name])
    assert round(r.mean[name], 4) == expected


def test_wcp_fractions_exact():
    w = [1 / math.log2(i + 1) for i in (1, 2, 3)]
    assert weighted_context_precision([1, 0, 1], 3) == pytest.approx((w[0] + w[2]) / sum(w), abs=1e-15)
    assert weighted_context_precision([0, 1, 1], 3, decay="linear") == pytest.approx(
        (1 / 2 + 1 / 3) / (1 + 1 / 2 + 1 / 3), abs=1e-15)


def test_precision_at_3_is_blind_to_the_order_wcp_sees():
    r = evaluate_matrix(RelevanceMatrix.from_verdicts([[1, 0, 1], [0, 1, 1]]), ["precision@3", "wcp@3"])
    p = r.per_query.column("precision@3")
    assert np.round(p, 4).tolist() == [0.6667, 0.6667]
    w = r.per_query.column("wcp@3")
    assert round(w[0] - w[1], 2) == 0.17  # "same hits, different order: 0.17 apart under log decay"


def test_wcp_callable_decay_and_missing_ranks():
    # callable decay: constant weights give plain precision@K
    assert weighted_context_precision([1, 0, 1], k=3, decay=lambda i: 1.0) == pytest.approx(2 / 3)
    # fewer than K retrieved: missing ranks are non-relevant, the denominator still runs to K
    w = [1 / math.log2(i + 1) for i in range(1, 6)]
    assert weighted_context_precision([1], k=5) == pytest.approx(1 / sum(w))
    assert weighted_context_precision([1, 1], k=1) == 1.0


def test_wcp_ideal_attainable_is_binary_ndcg():
    verdicts = [0, 1, 0, 1, 0]
    m = RelevanceMatrix.from_verdicts([verdicts], n_relevant=[3])
    # binary nDCG@5 with R = 3: ideal DCG sums the first 3 discounts
    disc = [1 / math.log2(i + 1) for i in range(1, 6)]
    expected = (disc[1] + disc[3]) / sum(disc[:3])
    assert weighted_context_precision(verdicts, k=5, ideal="attainable", n_relevant=3) == pytest.approx(expected)
    name = "wcp(ideal=attainable)@5"
    assert parse_measure(name).name == name
    assert evaluate_matrix(m, [name]).mean[name] == pytest.approx(expected)
    # ideal="k" divides by all 5 positions instead
    assert weighted_context_precision(verdicts, k=5) == pytest.approx((disc[1] + disc[3]) / sum(disc))


@pytest.mark.parametrize(("verdicts", "expected"), ACP_VECTORS)
def test_acp_vectors(verdicts, expected):
    assert round(average_context_precision(verdicts), 4) == round(expected, 4)
    assert average_context_precision(verdicts) == pytest.approx(expected, abs=5e-5)
    if verdicts:
        r = evaluate_matrix(RelevanceMatrix.from_verdicts([verdicts]), [f"acp@{len(verdicts)}"])
        assert r.mean[f"acp@{len(verdicts)}"] == pytest.approx(expected, abs=5e-5)


def test_acp_exact_fractions():
    assert average_context_precision([1, 0, 1]) == pytest.approx(5 / 6, abs=1e-15)
    assert average_context_precision([1, 1, 0, 1]) == pytest.approx(11 / 12, abs=1e-15)
    assert average_context_precision([0, 0, 1, 1, 1]) == pytest.approx((1 / 3 + 2 / 4 + 3 / 5) / 3, abs=1e-15)
    assert average_context_precision([1, 1, 1]) == 1.0  # exact: a perfect ranking is 1.0


def test_acp_ragas_compat():
    assert average_context_precision([1], ragas_compat=True) == 0.9999999999
    assert average_context_precision([1, 0, 1], ragas_compat=True) == (1 + 2 / 3) / (2 + 1e-10)
    assert average_context_precision([0, 0], ragas_compat=True) == 0.0
    r = evaluate_matrix(RelevanceMatrix.from_verdicts([[1]]), ["acp(ragas_compat=true)@5"])
    assert r.mean == {"acp(ragas_compat=true)@5": 0.9999999999}


def test_acp_rank_and_verdict_effects():
    base = average_context_precision([1, 0, 1])
    assert round(average_context_precision([0, 1, 1]) - base, 4) == -0.25  # rank effect
    assert round(average_context_precision([1, 1, 1]) - base, 4) == 0.1667  # verdict effect


def test_acp_cutoff_and_relevant_retrieved_denominator():
    assert average_context_precision([0, 1, 1], k=2) == 0.5
    # one relevant chunk at rank 1 scores 1.0 however much was missed
    assert average_context_precision([1, 0, 0, 0, 0]) == 1.0


def test_set_metrics_vectors():
    assert set_precision(["d1", "d2", "d3", "d4"], ["d1", "d4", "d5", "d6"]) == 0.5
    assert set_recall(["d1", "d2", "d3"], ["d1", "d4", "d5", "d6"]) == 0.25
    # order-blind, duplicates collapsed
    assert set_precision(["d4", "d1", "d1", "d2"], ["d1", "d4", "d5", "d6"]) == 2 / 3
    # empty denominator: undefined, never a number
    assert set_precision([], ["d1"]) is None
    assert set_recall(["d1"], []) is None


def test_set_metrics_undefined_left_out_of_the_mean():
    m = RelevanceMatrix.from_verdicts({"a": [1, 0, 0, 1], "b": []}, n_relevant=[4, 0])
    r = evaluate_matrix(m, ["id_precision", "id_recall"])
    assert r.per_query["a"] == {"id_precision": 0.5, "id_recall": 0.5}
    assert r.per_query["b"] == {"id_precision": None, "id_recall": None}
    assert r.mean == {"id_precision": 0.5, "id_recall": 0.5}
    assert r.summary["undefined"] == {"id_precision": 1, "id_recall": 1}


def test_context_recall_counts_passages_found_not_chunks():
    # 4 chunks; chunks 1 and 3 both match passage 0, chunk 4 matches passage 1; 3 passages
    m = RelevanceMatrix.from_verdicts([[1, 0, 1, 1]], n_relevant=[3], found=[[1, 0, 0, 1]])
    r = evaluate_matrix(m, ["context_recall@3", "context_recall@4", "precision@4", "recall@4"])
    assert r.mean["context_recall@3"] == pytest.approx(1 / 3)
    assert r.mean["context_recall@4"] == pytest.approx(2 / 3)
    assert r.mean["precision@4"] == 0.75
    assert r.mean["recall@4"] == pytest.approx(2 / 3)


def test_paired_f1():
    assert float(harmonic_mean(0.0, 0.0)) == 0.0
    m = RelevanceMatrix.from_verdicts([[1, 0, 1]], n_relevant=[4])
    r = evaluate_matrix(m, ["f1_wcp@3", "f1_acp@3", "wcp@3", "acp@3", "context_recall@3"])
    w, a, c = r.mean["wcp@3"], r.mean["acp@3"], r.mean["context_recall@3"]
    assert a == pytest.approx(5 / 6)
    assert c == 0.5
    assert r.mean["f1_wcp@3"] == pytest.approx(2 * w * c / (w + c))
    assert r.mean["f1_acp@3"] == pytest.approx(2 * (5 / 6) * 0.5 / (5 / 6 + 0.5))


def test_worked_example_through_the_engine():
    # 10 chunks, 2 match, 3 passages of which 2 found -> hit 1, P@10 0.20, R@10 0.67, F1@10 0.31
    v = [0, 1, 0, 0, 0, 1, 0, 0, 0, 0]
    m = RelevanceMatrix.from_verdicts([v], n_relevant=[3], found=[v])
    r = evaluate_matrix(m, ["hit_rate@10", "precision@10", "recall@10", "f1@10", "context_recall@10"])
    assert {k: round(x, 2) for k, x in r.mean.items()} == {
        "hit_rate@10": 1.0, "precision@10": 0.2, "recall@10": 0.67, "f1@10": 0.31, "context_recall@10": 0.67}


def test_canonical_names():
    assert parse_measure("wcp@5").name == "wcp@5"
    assert parse_measure("wcp(decay=log)@5").name == "wcp@5"
    assert parse_measure("acp(ragas_compat=true)@5").name == "acp(ragas_compat=true)@5"
    assert parse_measure("context_precision@5").name == "acp@5"


def test_wcp_attainable_never_exceeds_one_when_chunks_outnumber_passages():
    # text ground truth: 3 chunks match the single passage (R = 1)
    m = RelevanceMatrix.from_verdicts([[1, 1, 1]], n_relevant=[1], found=[[1, 0, 0]])
    r = evaluate_matrix(m, ["wcp(ideal=attainable)@3"])
    assert r.mean["wcp(ideal=attainable)@3"] == 1.0


def test_acp_ragas_compat_digit_for_digit_with_ragas_formula():
    # Ragas 0.4.3 _calculate_average_precision, transcribed: Python sums, left to right
    def ragas_ap(v):
        denominator = sum(v) + 1e-10
        numerator = sum([(sum(v[: i + 1]) / (i + 1)) * v[i] for i in range(len(v))])
        return numerator / denominator

    import random

    rng = random.Random(7)
    lists = [[int(rng.random() < 0.4) for _ in range(rng.randint(1, 40))] for _ in range(300)]
    for v in lists:
        assert average_context_precision(v, ragas_compat=True) == ragas_ap(v)
    m = RelevanceMatrix.from_verdicts(lists)
    values = evaluate_matrix(m, ["acp(ragas_compat=true)@40"]).per_query.column("acp(ragas_compat=true)@40")
    assert values.tolist() == [ragas_ap(v) for v in lists]
