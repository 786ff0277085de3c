"""Paired tests, bootstrap, effect size and corrections, checked against scipy and exact references.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rankwise.analysis.significance import (
    bootstrap_ci,
    cohens_d,
    correct_pvalues,
    paired_t_test,
    paired_test,
    randomization_test,
    wilcoxon_test,
    win_tie_loss,
)


def exact_signflip_p(int_diffs: np.ndarray) -> float:
    """Exact two-sided sign-flip p-value for integer differences, by counting sums with a DP (no
    sampling, no floats): an independent reference for the randomization test."""
    counts = {0: 1}
    for x in int_diffs.tolist():
        nxt: dict[int, int] = {}
        for s, c in counts.items():
            nxt[s + x] = nxt.get(s + x, 0) + c
            nxt[s - x] = nxt.get(s - x, 0) + c
        counts = nxt
    observed = abs(int(int_diffs.sum()))
    extreme = sum(c for s, c in counts.items() if abs(s) >= observed)
    return extreme / 2 ** len(int_diffs)


def mc_tolerance(p: float, draws: int) -> float:
    return 4 * math.sqrt(max(p * (1 - p), 1e-4) / draws) + 1 / draws


# ---------------------------------------------------------------------------------- randomization
# test
def test_randomization_enumerates_small_samples_exactly():
    # 3 equal positive differences: of 8 sign assignments only +++ and --- are as extreme
    assert randomization_test([0.5, 0.5, 0.5]) == 0.25
    # brute force over every assignment for a mixed sample
    d = np.array([0.3, -0.1, 0.2, 0.05, 0.4, -0.2, 0.1])
    hits = sum(abs(np.dot(s, d)) >= abs(d.sum()) - 1e-12 for s in itertools.product([1, -1], repeat=len(d)))
    assert randomization_test(d) == hits / 2 ** len(d)


def test_randomization_is_seeded_and_matches_exact_reference():
    rng = np.random.default_rng(3)
    ints = rng.integers(-3, 5, size=60)  # like precision@10 differences x 10: many exact ties
    d = ints / 10.0
    exact = exact_signflip_p(ints)
    p = randomization_test(d, permutations=20_000, seed=11)
    assert p == randomization_test(d, permutations=20_000, seed=11)
    assert abs(p - exact) <= mc_tolerance(exact, 20_000), (p, exact)
    assert 0.001 < exact < 0.5  # a case where the test is informative


def test_randomization_counts_float_ties():
    # 40 differences of +-0.1: every assignment's sum is a multiple of 0.1 computed in floats;
    # dropping rounding ties would bias p downwards. Exact: P(|sum| >= observed).
    ints = np.array([1] * 24 + [-1] * 16)
    exact = exact_signflip_p(ints)
    p = randomization_test(ints * 0.1, permutations=50_000, seed=5)
    assert abs(p - exact) <= mc_tolerance(exact, 50_000), (p, exact)


def test_randomization_edge_cases():
    assert randomization_test([0.0, 0.0, 0.0, 0.0]) == 1.0
    assert math.isnan(randomization_test([]))
    # p is never 0: the observed assignment counts
    d = np.full(200, 0.3)
    assert randomization_test(d, permutations=1000, seed=1) == pytest.approx(1 / 1001)
    with pytest.raises(ValueError):
        randomization_test([0.1, float("nan")])


def test_randomization_memory_blocks_give_same_answer_as_one_block(monkeypatch):
    import rankwise.analysis.significance as sig

    d = np.random.default_rng(0).normal(0.02, 0.1, size=300)
    whole = randomization_test(d, permutations=5000, seed=9)
    monkeypatch.setattr(sig, "_BLOCK_ELEMENTS", 300 * 7)  # 7 rows per block
    assert randomization_test(d, permutations=5000, seed=9) == whole


# ------------------------------------------------------------------------------------ t and
# Wilcoxon
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_t_test_equals_scipy(seed):
    from scipy import stats  # here, not at module level: collection would pay its import
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 1, size=80)
    b = np.clip(a + rng.normal(0.03, 0.15, size=80), 0, 1)
    assert paired_t_test(b - a) == pytest.approx(stats.ttest_rel(b, a).pvalue, abs=1e-12)


def test_t_test_edge_cases():
    assert paired_t_test([0.0, 0.0, 0.0]) == 1.0
    assert paired_t_test([0.2, 0.2, 0.2]) == 0.0  # no variance, non-zero mean
    assert math.isnan(paired_t_test([0.3]))


def test_wilcoxon_equals_scipy():
    from scipy import stats  # here, not at module level: collection would pay its import
    rng = np.random.default_rng(4)
    a = rng.uniform(0, 1, size=50)
    b = a + rng.normal(0.05, 0.2, size=50)
    b[:5] = a[:5]  # zero differences are dropped, as scipy's default
    assert wilcoxon_test(b - a) == pytest.approx(stats.wilcoxon(b, a).pvalue, abs=1e-12)
    assert wilcoxon_test([0.0, 0.0]) == 1.0


def test_paired_test_dispatch_and_unknown():
    d = [0.1, -0.05, 0.2, 0.15, 0.0, 0.3]
    assert paired_test(d, "t") == paired_t_test(d)
    assert paired_test(d, "wilcoxon") == wilcoxon_test(d)
    with pytest.raises(ValueError, match="unknown test"):
        paired_test(d, "sign")


# ------------------------------------------------------------------------------------ bootstrap
# etc.
def test_bootstrap_interval_matches_normal_theory_and_is_seeded():
    rng = np.random.default_rng(8)
    d = rng.normal(0.05, 0.2, size=400)
    lo, hi = bootstrap_ci(d, resamples=20_000, seed=3)
    se = d.std(ddof=1) / math.sqrt(len(d))
    assert lo == pytest.approx(d.mean() - 1.96 * se, abs=0.15 * se)
    assert hi == pytest.approx(d.mean() + 1.96 * se, abs=0.15 * se)
    assert (lo, hi) == bootstrap_ci(d, resamples=20_000, seed=3)
    lo90, hi90 = bootstrap_ci(d, resamples=20_000, seed=3, confidence=0.9)
    assert lo < lo90 < hi90 < hi


def test_bootstrap_degenerate():
    assert bootstrap_ci([0.2, 0.2, 0.2]) == (pytest.approx(0.2), pytest.approx(0.2))
    lo, hi = bootstrap_ci([])
    assert math.isnan(lo) and math.isnan(hi)


def test_cohens_d_and_win_tie_loss():
    d = np.array([0.1, 0.3, -0.1, 0.0, 0.2])
    assert cohens_d(d) == pytest.approx(d.mean() / d.std(ddof=1))
    assert cohens_d([0.0, 0.0]) == 0.0
    assert cohens_d([0.1, 0.1]) is None
    assert cohens_d([0.1]) is None
    assert win_tie_loss(d) == (3, 1, 1)
    assert win_tie_loss([1e-15, -1e-15]) == (0, 2, 0)  # float dust is a tie


def test_holm_and_bonferroni():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005*4, 0.01*3, 0.03*2, 0.04*1 -> 0.02, 0.03, 0.06, 0.06 (monotone)
    assert correct_pvalues(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert correct_pvalues(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02])
    assert correct_pvalues(p, "none") == p
    # NaN (undefined test) stays NaN and is not counted
    out = correct_pvalues([0.01, float("nan"), 0.02], "bonferroni")
    assert out[0] == pytest.approx(0.02) and math.isnan(out[1]) and out[2] == pytest.approx(0.04)
    assert correct_pvalues([0.5, 0.9], "holm") == [1.0, 1.0]
    with pytest.raises(ValueError):
        correct_pvalues(p, "fdr")
