"""Paired significance tests, bootstrap intervals, effect sizes and multiple-comparison corrections.

Everything works on the paired differences ``d = candidate - baseline`` of one metric over the same
queries. The randomization test and the bootstrap are vectorised numpy and seeded, so the same
inputs always give the same digits; scipy (t and Wilcoxon distributions) is imported only when those
tests run.

Example:
    >>> import numpy as np
    >>> d = np.array([0.1, 0.2, 0.15, 0.05, 0.3, 0.1, 0.2, 0.25])
    >>> randomization_test(d, permutations=10_000, seed=0) < 0.01
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["TESTS", "CORRECTIONS", "EXACT_LIMIT", "ci_disagreement", "randomization_test", "paired_t_test", "wilcoxon_test", "paired_test",
           "bootstrap_ci", "cohens_d", "win_tie_loss", "correct_pvalues"]

TESTS = ("randomization", "t", "wilcoxon")
CORRECTIONS = ("holm", "bonferroni", "none")

# Two per-query values closer than this are a tie (metric values are sums of a few floats).
TIE_TOLERANCE = 1e-12
# Elements per block of sign flips / resamples: bounds memory whatever the number of queries.
_BLOCK_ELEMENTS = 2_000_000
# Up to this many non-zero paired differences, the randomization test enumerates every sign pattern.
EXACT_LIMIT = 20


def _as_diffs(diffs) -> np.ndarray:
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim != 1:
        raise ValueError("paired differences must be a 1-d array")
    if np.isnan(d).any():
        raise ValueError("paired differences contain NaN; drop undefined pairs first")
    return d


def randomization_test(diffs, *, permutations: int = 10_000, seed: int | None = 42) -> float:
    """Two-sided paired randomization (sign-flip, Fisher) test of mean difference zero.

    Under the null hypothesis the two systems are exchangeable on every query, so each paired
    difference keeps or flips its sign with probability 1/2. The p-value is the share of sign
    assignments whose mean difference is at least as far from zero as the observed one. Zero
    differences cannot change a sum under sign flips, so they are set aside. With at most
    :data:`EXACT_LIMIT` non-zero differences (or ``2**n <= permutations``) every assignment is
    enumerated and p is exact; otherwise ``permutations`` random assignments are drawn with
    ``numpy.random.default_rng(seed)`` and ``p = (hits + 1) / (permutations + 1)``, which counts the
    observed assignment and is never 0. The differences are sorted first, so the same values give
    the same p in whatever order the queries come (``compare``, ``compare-rag`` and ``gate`` agree).

    Example:
        >>> randomization_test([0.5, 0.5, 0.5])  # 8 assignments, 2 as extreme (+++ and ---)
        0.25
        >>> randomization_test([0.0, 0.0])
        1.0
        >>> randomization_test([0.3, 0.0, -0.1, 0.2]) == randomization_test([0.2, -0.1, 0.3])
        True
    """
    d = _as_diffs(diffs)
    if len(d) == 0:
        return float("nan")
    d = np.sort(d[np.abs(d) > TIE_TOLERANCE])
    n = len(d)
    if n == 0:
        return 1.0
    observed = abs(d.sum())
    # Sums of sign-flipped copies can differ from the observed sum in the last bits: allow for it.
    threshold = observed - 1e-9 * max(float(np.abs(d).sum()), 1e-300)
    if n <= EXACT_LIMIT or (n <= 62 and 2**n <= permutations):
        total = 2**n
        hits = 0
        bits = np.arange(n, dtype=np.int64)
        block = max(1, _BLOCK_ELEMENTS // n)
        for start in range(0, total, block):
            codes = np.arange(start, min(total, start + block), dtype=np.int64)
            signs = 1.0 - 2.0 * ((codes[:, None] >> bits) & 1)
            hits += int((np.abs(signs @ d) >= threshold).sum())
        return hits / total
    rng = np.random.default_rng(seed)
    hits = 0
    block = max(1, _BLOCK_ELEMENTS // n)
    done = 0
    while done < permutations:
        size = min(block, permutations - done)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(size, n), dtype=np.int8)
        hits += int((np.abs(signs @ d) >= threshold).sum())
        done += size
    return (hits + 1) / (permutations + 1)


def paired_t_test(diffs) -> float:
    """Two-sided paired Student's t-test p-value (same as ``scipy.stats.ttest_rel``).

    All differences equal: p = 1 when they are zero, 0 otherwise (no variance to test against).
    Fewer than two pairs: NaN (undefined).

    Example:
        >>> round(paired_t_test([0.1, 0.2, 0.3, -0.05]), 4)
        0.1627
    """
    d = _as_diffs(diffs)
    n = len(d)
    if n < 2:
        return float("nan")
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    if sd == 0.0 or sd <= 1e-14 * max(abs(mean), 1e-300):
        return 1.0 if mean == 0.0 else 0.0
    from scipy.special import stdtr

    t = mean / (sd / np.sqrt(n))
    return float(min(1.0, 2.0 * stdtr(n - 1, -abs(t))))


def wilcoxon_test(diffs) -> float:
    """Two-sided Wilcoxon signed-rank test p-value (``scipy.stats.wilcoxon``, zero differences
    dropped).

    All differences zero: p = 1. No pair: NaN.

    Example:
        >>> round(wilcoxon_test([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]), 4)
        0.0312
    """
    d = _as_diffs(diffs)
    if len(d) == 0:
        return float("nan")
    if not np.any(np.abs(d) > TIE_TOLERANCE):
        return 1.0
    from scipy.stats import wilcoxon

    d = np.where(np.abs(d) > TIE_TOLERANCE, d, 0.0)
    return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def paired_test(diffs, test: str = "randomization", *, permutations: int = 10_000,
                seed: int | None = 42) -> float:
    """Dispatch to one of :data:`TESTS` by name.

    Example:
        >>> paired_test([0.0, 0.0, 0.0], "t")
        1.0
    """
    if test == "randomization":
        return randomization_test(diffs, permutations=permutations, seed=seed)
    if test == "t":
        return paired_t_test(diffs)
    if test == "wilcoxon":
        return wilcoxon_test(diffs)
    raise ValueError(f"unknown test {test!r}; choose from {', '.join(TESTS)}")


def bootstrap_ci(diffs, *, resamples: int = 10_000, confidence: float = 0.95,
                 seed: int | None = 42) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean paired difference (queries resampled with
    replacement).

    The differences are sorted first, so the interval does not depend on the order of the queries.

    Example:
        >>> lo, hi = bootstrap_ci([0.1, 0.2, 0.3, 0.2, 0.1, 0.25], seed=1)
        >>> 0.1 <= lo < hi <= 0.3
        True
    """
    d = _as_diffs(diffs)
    n = len(d)
    if n == 0:
        return float("nan"), float("nan")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be between 0 and 1")
    d = np.sort(d)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    block = max(1, _BLOCK_ELEMENTS // n)
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        idx = rng.integers(0, n, size=(size, n))
        means[start:start + size] = d[idx].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


def cohens_d(diffs) -> float | None:
    """Effect size of paired differences (Cohen's d_z): mean / standard deviation (ddof=1).

    None when undefined: fewer than two pairs, or all differences equal and non-zero. 0 when all are
        0.

    Example:
        >>> round(cohens_d([0.1, 0.3]), 4)
        1.4142
    """
    d = _as_diffs(diffs)
    if len(d) < 2:
        return None
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    if sd <= 1e-14 * max(abs(mean), 1e-300):
        return 0.0 if mean == 0.0 else None
    return mean / sd


def win_tie_loss(diffs) -> tuple[int, int, int]:
    """Queries where the candidate is better, equal (within 1e-12), worse.

    Example:
        >>> win_tie_loss([0.1, 0.0, -0.2, 0.3])
        (2, 1, 1)
    """
    d = _as_diffs(diffs)
    wins = int((d > TIE_TOLERANCE).sum())
    losses = int((d < -TIE_TOLERANCE).sum())
    return wins, len(d) - wins - losses, losses


def correct_pvalues(pvalues: Sequence[float], method: str = "holm") -> list[float]:
    """Adjust p-values for multiple comparisons: ``holm`` (Holm–Bonferroni step-down),
    ``bonferroni`` or ``none``. NaN entries (undefined tests) stay NaN and do not count as
    comparisons.

    Example:
        >>> [round(p, 4) for p in correct_pvalues([0.01, 0.04, 0.03], "holm")]
        [0.03, 0.06, 0.06]
        >>> [round(p, 4) for p in correct_pvalues([0.01, 0.04, 0.03], "bonferroni")]
        [0.03, 0.12, 0.09]
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if method not in CORRECTIONS:
        raise ValueError(f"unknown correction {method!r}; choose from {', '.join(CORRECTIONS)}")
    out = p.copy()
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if method == "none" or m == 0:
        return [float(x) for x in out]
    if method == "bonferroni":
        out[ok] = np.minimum(1.0, p[ok] * m)
    else:
        order = ok[np.argsort(p[ok], kind="stable")]
        scaled = p[order] * (m - np.arange(m))
        out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return [float(x) for x in out]


def ci_disagreement(p_value: float, ci_low: float, ci_high: float, alpha: float, *,
                    correction: str = "none") -> str | None:
    """A note when the bootstrap interval and the test disagree about "no difference", else None.

    The percentile bootstrap interval and the randomization test ask different questions (how
    precise the mean difference is; whether the systems are exchangeable), so near alpha they can
    disagree. We keep both, report the test's verdict as the decision and say so when the interval
    disagrees. ``p_value`` is the p that decides: after ``correction`` (the note then says "adjusted
    p", with its value, since the raw p printed beside it may be below alpha).

    Example:
        >>> ci_disagreement(0.08, 0.01, 0.2, 0.05)
        'the interval excludes 0 but p = 0.08 >= alpha 0.05: the test decides (not significant)'
        >>> ci_disagreement(0.0615, 0.01, 0.2, 0.05, correction="holm")
        'the interval excludes 0 but the holm-adjusted p = 0.0615 >= alpha 0.05: the test decides (not significant)'
        >>> ci_disagreement(0.01, 0.01, 0.2, 0.05) is None
        True
    """
    if any(np.isnan(x) for x in (p_value, ci_low, ci_high)):
        return None
    excludes_zero = ci_low > 0 or ci_high < 0
    significant = p_value < alpha
    which = "p" if correction == "none" else f"the {correction}-adjusted p"
    if excludes_zero and not significant:
        return f"the interval excludes 0 but {which} = {p_value:.4g} >= alpha {alpha:g}: the test decides (not significant)"
    if significant and not excludes_zero:
        return f"the interval includes 0 but {which} = {p_value:.4g} < alpha {alpha:g}: the test decides (significant)"
    return None
