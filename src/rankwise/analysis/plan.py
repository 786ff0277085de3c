"""Plan a test set before running it: the questions needed to detect a difference, and the smallest
difference a set of a given size can detect, by simulating rankwise's own paired test.

The pilot is any pair of systems' per-question values (two runs with qrels, two records files, saved
results) — their paired differences — or a guess of the differences' standard deviation. Power at n
questions is the share of simulated sets that the paired test rankwise uses (``randomization``, the
sign-flip test of ``compare``/``gate``; or ``t``) finds significant at ``alpha``: each set draws n
differences from the pilot's, centred and shifted so their mean is the effect (with ``sd``: normal
differences). Every n is simulated with the same seed (common random numbers), so power grows
smoothly with n and with the effect. The normal-approximation formula n = ((z[1-α/2] + z[1-β]) σ /
d)² is given beside the simulated number; they agree for normal differences and a t-test, and part
where the pilot's differences are skewed or lumpy (many ties at 0, as with binary metrics).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankwise.errors import InputError, warn

__all__ = ["SamplePlan", "simulated_power", "plan_sample_size", "minimum_detectable_effect", "formula_n",
           "PLAN_TESTS", "paired_pilot", "detectable_effect", "MDE_POWER"]

#: the power at which the gate reports each metric's minimum detectable effect
MDE_POWER = 0.8

#: the paired tests the simulation runs (as analysis/significance.py computes them)
PLAN_TESTS = ("randomization", "t")


@dataclass
class SamplePlan:
    """What :func:`plan_sample_size` found.

    Attributes:
        n: questions needed (None: not reachable within ``max_n``, or undefined — ``note`` says
            why).
        power_at_n: the simulated power at ``n``.
        formula: the normal-approximation n, for comparison.
        mde: the smallest effect the pilot's own size (or ``n_for_mde``) detects with the target
            power.
    """

    effect: float
    alpha: float
    power: float
    test: str
    sd: float | None
    pilot: int | None
    sims: int
    permutations: int
    seed: int
    n: int | None = None
    power_at_n: float | None = None
    formula: int | None = None
    n_for_mde: int | None = None
    mde: float | None = None
    note: str | None = None
    curve: dict[int, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values."""
        out = dict(self.__dict__)
        out["curve"] = {str(k): v for k, v in sorted(self.curve.items())}
        return out


def formula_n(sd: float, effect: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """The normal-approximation sample size of a two-sided paired test.

    Example:
        >>> formula_n(0.2, 0.05)
        126
    """
    from statistics import NormalDist

    z = NormalDist().inv_cdf
    return math.ceil(((z(1 - alpha / 2) + z(power)) * sd / effect) ** 2)


def _draws(diffs: np.ndarray | None, sd: float | None, n: int, sims: int, seed: int) -> np.ndarray:
    """``sims`` x ``n`` centred differences: resampled from the pilot, or normal with ``sd``."""
    rng = np.random.default_rng([seed, n])
    if diffs is not None:
        centred = diffs - diffs.mean()
        return centred[rng.integers(0, len(centred), size=(sims, n))]
    return rng.normal(0.0, sd, size=(sims, n))


def _p_values(x: np.ndarray, test: str, permutations: int, seed: int) -> np.ndarray:
    """Each row's two-sided p-value under ``test`` (vectorised over rows)."""
    n = x.shape[1]
    if test == "t":
        from scipy.special import stdtr

        mean, sd = x.mean(axis=1), x.std(axis=1, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(sd > 0, mean / (sd / math.sqrt(n)), np.where(mean == 0, 0.0, np.inf))
        return np.minimum(1.0, 2.0 * stdtr(n - 1, -np.abs(t)))
    signs = 1.0 - 2.0 * np.random.default_rng([seed, n, 1]).integers(0, 2, size=(n, permutations))
    observed = np.abs(x.sum(axis=1))
    tolerance = 1e-9 * np.maximum(np.abs(x).sum(axis=1), 1e-300)
    hits = np.zeros(len(x))
    for start in range(0, permutations, 256):  # blocks: sims x 256 sums at a time
        hits += (np.abs(x @ signs[:, start:start + 256]) >= (observed - tolerance)[:, None]).sum(axis=1)
    return (hits + 1) / (permutations + 1)


def simulated_power(n: int, effect: float, *, diffs: Any = None, sd: float | None = None, alpha: float = 0.05,
                    test: str = "randomization", sims: int = 1000, permutations: int = 1000, seed: int = 0) -> float:
    """The share of ``sims`` simulated sets of ``n`` questions whose paired test rejects at
    ``alpha``.

    Example:
        >>> simulated_power(126, 0.05, sd=0.2, test="t", sims=2000) > 0.75
        True
    """
    pilot = None if diffs is None else np.asarray(diffs, dtype=float)
    x = _draws(pilot, sd, n, sims, seed) + effect
    return float((_p_values(x, test, permutations, seed) < alpha).mean())


def _pilot(diffs: Any, sd: float | None) -> tuple[np.ndarray | None, float | None, str | None]:
    """The pilot's differences and their sd, or why no plan can be made."""
    if diffs is None and sd is None:
        raise InputError("give a pilot (two systems' per-question values) or a guess of the sd", field="sd")
    if diffs is not None:
        d = np.asarray(diffs, dtype=float)
        if len(d) < 2 or not np.isfinite(d).all():
            return d, None, "the pilot needs at least 2 questions with finite values on both systems"
        s = float(d.std(ddof=1))
        if s == 0 or float(np.ptp(d)) == 0:
            return d, None, ("every pilot question has the same difference: no variance to simulate from, so no "
                             "sample size can be planned (any real difference shows at once, or none can)")
        return d, s, None
    if not sd > 0:
        raise InputError(f"the sd must be > 0, got {sd}", field="sd")
    return None, float(sd), None


def plan_sample_size(effect: float, *, diffs: Any = None, sd: float | None = None, alpha: float = 0.05,
                     power: float = 0.8, test: str = "randomization", sims: int = 1000, permutations: int = 1000,
                     seed: int = 0, max_n: int = 20_000, n_for_mde: int | None = None,
                     progress: Any = None) -> SamplePlan:
    """The fewest questions with which ``test`` detects ``effect`` with probability ``power`` at
    ``alpha``, and the minimum detectable effect of ``n_for_mde`` questions (default the pilot's
    size).

    Example:
        >>> p = plan_sample_size(0.05, sd=0.2, test="t", sims=1000)
        >>> p.formula, abs(p.n - p.formula) <= 6, p.power_at_n >= 0.8
        (126, True, True)
    """
    _check(effect, alpha, power, test, sims, permutations)
    pilot, s, why = _pilot(diffs, sd)
    plan = SamplePlan(effect, alpha, power, test, s, None if pilot is None else len(pilot), sims, permutations, seed)
    if why:
        plan.note = why
        return plan
    plan.formula = formula_n(s, effect, alpha, power)

    def at(n: int) -> float:
        if n not in plan.curve:
            plan.curve[n] = simulated_power(n, effect, diffs=pilot, sd=s, alpha=alpha, test=test, sims=sims,
                                            permutations=permutations, seed=seed)
            if progress is not None:
                progress(1)
        return plan.curve[n]

    lo, hi = 2, max(4, min(plan.formula, max_n))
    while at(hi) < power:
        if hi >= max_n:
            plan.note = (f"even {max_n:,} questions reach power {at(hi):.3f} < {power:g} for an effect of "
                         f"{effect:g}: not reachable; plan for a larger effect or lower the variance")
            break
        lo, hi = hi, min(hi * 2, max_n)
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if at(mid) >= power else (mid, hi)
        plan.n, plan.power_at_n = hi, at(hi)
    plan.n_for_mde = n_for_mde or plan.pilot
    if plan.n_for_mde:
        plan.mde = minimum_detectable_effect(plan.n_for_mde, diffs=pilot, sd=s, alpha=alpha, power=power,
                                             test=test, sims=sims, permutations=permutations, seed=seed)
    return plan


def minimum_detectable_effect(n: int, *, diffs: Any = None, sd: float | None = None, alpha: float = 0.05,
                              power: float = 0.8, test: str = "randomization", sims: int = 1000,
                              permutations: int = 1000, seed: int = 0) -> float | None:
    """The smallest mean difference ``n`` questions detect with probability ``power`` (None:
    undefined).

    Example:
        >>> round(minimum_detectable_effect(126, sd=0.2, test="t", sims=1000), 2)
        0.05
    """
    _check(1.0, alpha, power, test, sims, permutations)
    pilot, s, why = _pilot(diffs, sd)
    if why or n < 2:
        return None
    lo, hi = 0.0, 4.0 * s
    while simulated_power(n, hi, diffs=pilot, sd=s, alpha=alpha, test=test, sims=sims, permutations=permutations,
                          seed=seed) < power:
        hi *= 2
        if hi > 1e6 * s:
            return None
    for _ in range(30):
        mid = (lo + hi) / 2
        ok = simulated_power(n, mid, diffs=pilot, sd=s, alpha=alpha, test=test, sims=sims,
                             permutations=permutations, seed=seed) >= power
        lo, hi = (lo, mid) if ok else (mid, hi)
        if hi - lo <= 1e-4 * s:
            break
    return hi


def detectable_effect(diffs: Any, *, alpha: float = 0.05, power: float = MDE_POWER, test: str = "randomization",
                      seed: int = 0) -> tuple[float | None, str]:
    """The minimum detectable effect of the questions behind ``diffs`` (their paired differences are
    the pilot), and a sentence saying how it was found or why there is none: what the gate prints
    beside a verdict, the same number ``rankwise plan-testset`` gives the same pilot as the MDE of
    the set you have.

    ``test`` is simulated when it is one of :data:`PLAN_TESTS`; a Wilcoxon gate's MDE is the
    t-test's, said so.

    Example:
        >>> mde, how = detectable_effect([0.1, -0.2, 0.3, 0.0, 0.2, -0.1, 0.25, 0.05] * 4, test="t")
        >>> round(mde, 3), how.split(",")[0]
        (0.084, 'the smallest mean difference 32 questions detect with 80% power at alpha 0.05')
        >>> detectable_effect([0.2, 0.2, 0.2])
        (None, 'every question has the same difference: no variance to simulate from')
    """
    pilot = np.asarray(diffs, dtype=float)
    if len(pilot) < 2 or not np.isfinite(pilot).all():
        return None, "fewer than 2 paired questions with finite values"
    if float(np.ptp(pilot)) == 0:
        return None, "every question has the same difference: no variance to simulate from"
    used = test if test in PLAN_TESTS else "t"
    mde = minimum_detectable_effect(len(pilot), diffs=pilot, alpha=alpha, power=power, test=used, seed=seed)
    if mde is None:
        return None, f"no difference reaches {power:.0%} power with {len(pilot)} questions under the {used} test"
    how = (f"the smallest mean difference {len(pilot)} questions detect with {power:.0%} power at alpha {alpha:g}, "
           f"by simulating the {used} test from the observed per-question differences"
           + ("" if used == test else f" (the {test} test is not simulated: the t test's MDE)"))
    return mde, how


def paired_pilot(baseline: Any, candidate: Any, metric: str, *, qrels: Any = None,
                 relevance: str | None = None) -> np.ndarray | None:
    """The pilot's paired per-question differences (candidate − baseline) in ``metric``, read as
    ``gate`` reads its inputs (runs with qrels, RAG records or test sets, saved results); None when
    no pilot is given.

    Example:
        >>> a = {"per_query": {"q1": {"ndcg@10": 0.5}, "q2": {"ndcg@10": 1.0}}}
        >>> b = {"per_query": {"q1": {"ndcg@10": 0.75}, "q2": {"ndcg@10": 1.0}}}
        >>> paired_pilot(a, b, "ndcg@10").tolist()
        [0.25, 0.0]
    """
    from rankwise.analysis.sides import per_query_values

    if baseline is None and candidate is None:
        return None
    if baseline is None or candidate is None:
        raise InputError("a pilot needs both --baseline and --candidate", field="baseline" if baseline is None
                         else "candidate")
    ids_a, va = per_query_values(baseline, [metric], qrels=qrels, relevance=relevance)
    ids_b, vb = per_query_values(candidate, [metric], qrels=qrels, relevance=relevance)
    b_of = dict(zip(ids_b, vb[:, 0].tolist(), strict=True))
    shared = [i for i in ids_a if i in b_of]
    if not shared:
        raise InputError("the pilot's two systems share no question id", field="candidate")
    if len(shared) < max(len(ids_a), len(ids_b)):  # as the gate: a question one system lacks is no pair
        warn(f"the pilot's systems share {len(shared)} question ids ({len(ids_a)} in the baseline, {len(ids_b)} in "
             f"the candidate): the differences are those {len(shared)}")
    a_of = dict(zip(ids_a, va[:, 0].tolist(), strict=True))
    return np.asarray([b_of[q] - a_of[q] for q in shared], dtype=float)


def _check(effect: float, alpha: float, power: float, test: str, sims: int, permutations: int) -> None:
    if not effect > 0:
        raise InputError(f"the effect must be > 0, got {effect}", field="effect")
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be in (0, 1), got {alpha}", field="alpha")
    if not 0 < power < 1:
        raise InputError(f"power must be in (0, 1), got {power}", field="power")
    if test not in PLAN_TESTS:
        raise InputError(f"the simulation runs the {' or '.join(PLAN_TESTS)} test, not {test!r}", field="test")
    if sims < 100 or permutations < 100:
        raise InputError("give at least 100 simulations and 100 permutations", field="sims")
