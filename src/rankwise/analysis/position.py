"""How a generator uses position: answer accuracy with the supporting chunk planted at each rank,
and the rank discount that fits it best (docs/calibrate.md).

Every family is ``accuracy(i) = alpha + beta * w(i)`` with a shape ``w`` that is largest at some
position, a floor ``alpha >= 0`` and a drop ``beta >= 0`` with ``alpha + beta * max(w) <= 1``, so
every prediction lies in [0, 1] by construction. Shapes: ``flat`` (1; alpha only), ``log``
1/log2(i+1), ``linear`` 1/i, ``rbp`` p^(i-1), ``power`` i^-a, ``cliff`` 1 up to position n then 0
("flat to n, then drops") and a two-sided ``u_shape`` p^(i-1) + b * q^(K-i) ("lost in the middle").
Each family is fitted by maximum likelihood on the answers (k correct of n at each position; a
binomial likelihood, quasi-binomial for graded scores), the families are ranked by AIC at their
maximum (parameters: flat 1, log and linear 2, rbp, power and cliff 3, u_shape 5), and the best one
is tested against the per-position rates (deviance, chi-square, level 0.01): when it is rejected no
family fits and no curve is written. The fitted weights are saved for
``wcp(decay=curve,curve=FILE)``.

Example:
    >>> acc = [0.7 ** (i - 1) * 0.8 + 0.1 for i in range(1, 11)]
    >>> fit = fit_position_curve(acc, [50] * 10)
    >>> fit.best.name, round(fit.best.params["p"], 2), fit.fitted
    ('rbp', 0.7, True)
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from rankwise.data.finite import finite_json
from rankwise.errors import InputError

__all__ = ["fit_position_curve", "position_accuracy", "PositionFit", "DiscountFit", "discount_weights",
           "write_position_curve", "chi2_sf", "GOF_LEVEL", "GoodnessOfFit"]

GOF_LEVEL = 0.01  # the goodness-of-fit test's level: below it, no family fits
_FREE = {"flat": 1, "log": 2, "linear": 2, "rbp": 3, "power": 3, "cliff": 3, "u_shape": 5}
_EPS = 1e-12


def discount_weights(name: str, k: int, **params: float) -> np.ndarray:
    """w(1..k) of a candidate discount.

    Example:
        >>> discount_weights("u_shape", 3, p=0.5, q=0.5, b=1.0).tolist()
        [1.25, 1.0, 1.25]
        >>> discount_weights("cliff", 4, n=2).tolist()
        [1.0, 1.0, 0.0, 0.0]
    """
    i = np.arange(1, k + 1, dtype=np.float64)
    if name == "log":
        return 1.0 / np.log2(i + 1)
    if name == "linear":
        return 1.0 / i
    if name == "rbp":
        return np.power(params["p"], i - 1)
    if name == "power":
        return np.power(i, -params["a"])
    if name == "u_shape":
        return np.power(params["p"], i - 1) + params["b"] * np.power(params["q"], k - i)
    if name == "cliff":
        return (i <= params["n"]).astype(np.float64)
    if name == "flat":
        return np.ones(k)
    raise ValueError(f"unknown discount {name!r}")


@dataclass
class DiscountFit:
    """One family at its maximum likelihood: parameters, alpha + beta * w(i), log-likelihood and
    AIC."""

    name: str
    params: dict[str, float]
    alpha: float
    beta: float
    loglik: float
    aic: float
    n_params: int

    def predict(self, k: int) -> np.ndarray:
        """Predicted accuracy at positions 1..k, in [0, 1]."""
        return np.clip(self.alpha + self.beta * discount_weights(self.name, k, **self.params), 0.0, 1.0)

    def label(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}(" + ", ".join(f"{k}={v:.3g}" for k, v in self.params.items()) + ")"

    def to_dict(self) -> dict[str, Any]:
        return {"discount": self.name, "label": self.label(), "params": self.params, "alpha": self.alpha,
                "beta": self.beta, "loglik": self.loglik, "aic": self.aic, "n_params": self.n_params}


@dataclass
class GoodnessOfFit:
    """The best family against the per-position rates: deviance, degrees of freedom, p-value, level.
    """

    deviance: float
    df: int
    p_value: float | None  # None when df = 0 (as many parameters as positions: nothing to test)
    level: float = GOF_LEVEL

    @property
    def rejected(self) -> bool:
        return self.p_value is not None and self.p_value < self.level

    def sentence(self) -> str:
        """The test's result in words: deviance, df, p-value against the level."""
        if self.p_value is None:
            return "not tested: as many parameters as positions with answers"
        rel = "<" if self.rejected else ">="
        return (f"deviance {self.deviance:.2f} on {self.df} df against the per-position rates, "
                f"p = {self.p_value:.2g} {rel} {self.level:g}")

    def to_dict(self) -> dict[str, Any]:
        return {"test": "deviance (chi-square) of the best fit against the per-position rates",
                "deviance": self.deviance, "df": self.df, "p_value": self.p_value, "level": self.level,
                "rejected": self.rejected}


@dataclass
class PositionFit:
    """Accuracy by position (with intervals), every family's fit (lowest AIC first) and the best's
    test."""

    accuracy: list[float]
    counts: list[int]
    intervals: list[tuple[float, float]]
    fits: list[DiscountFit] = field(default_factory=list)
    gof: GoodnessOfFit | None = None

    @property
    def best(self) -> DiscountFit:
        return self.fits[0]

    @property
    def fitted(self) -> bool:
        """False when the goodness-of-fit test rejects the best family: no curve describes the
        answers."""
        return self.gof is None or not self.gof.rejected

    def sentence(self) -> str:
        """One sentence: the best fit and its test, or why no family fits (then no curve is
        written)."""
        head = f"{self.best.label()} (AIC {self.best.aic:.2f})"
        if self.gof is None:
            return f"best fit: {head}; goodness of fit not tested"
        if self.gof.rejected:
            return (f"no family fits the accuracy by position: even the best, {head}, leaves "
                    f"{self.gof.sentence()}; no curve written")
        return f"best fit: {head}; goodness of fit: {self.gof.sentence()}"

    def rivals(self, within: float = 2.0) -> list[DiscountFit]:
        """Other discounts whose AIC is within ``within`` of the best: the data do not tell them
        apart."""
        return [f for f in self.fits[1:] if f.aic - self.best.aic < within]

    def weights(self) -> list[float] | None:
        """The best fit's predicted accuracy per position, as ``wcp(decay=curve)`` weights; None
        when no family fits."""
        if not self.fitted:
            return None
        return [float(x) for x in self.best.predict(len(self.accuracy))]

    def to_json(self) -> dict[str, Any]:
        return {"accuracy": self.accuracy, "counts": self.counts, "intervals": [list(x) for x in self.intervals],
                "weights": self.weights(), "best": self.best.label() if self.fitted else None,
                "fitted": self.fitted, "verdict": self.sentence(),
                "criterion": "AIC = 2 x parameters - 2 x log-likelihood at the maximum (binomial)",
                "goodness_of_fit": self.gof.to_dict() if self.gof else None,
                "indistinguishable": [f.label() for f in self.rivals()], "fits": [f.to_dict() for f in self.fits]}


def _wilson(successes: float, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    if n == 0:
        return (float("nan"), float("nan"))
    p = successes / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, centre - half), min(1.0, centre + half))


def position_accuracy(outcomes: Sequence[tuple[int, float]], k: int) -> tuple[list[float], list[int],
                                                                              list[tuple[float, float]]]:
    """Mean answer score per planted position 1..k, the answers per position, and 95% Wilson
    intervals.

    Example:
        >>> acc, n, ci = position_accuracy([(1, 1.0), (1, 0.0), (2, 1.0)], 2)
        >>> acc, n
        ([0.5, 1.0], [2, 1])
    """
    sums, counts = np.zeros(k), np.zeros(k, dtype=np.int64)
    for pos, score in outcomes:
        if not 1 <= pos <= k:
            raise InputError(f"position {pos} outside 1..{k}", field="position")
        sums[pos - 1] += score
        counts[pos - 1] += 1
    acc = [float(s / c) if c else float("nan") for s, c in zip(sums, counts, strict=True)]
    return acc, counts.tolist(), [_wilson(s, int(c)) for s, c in zip(sums, counts, strict=True)]


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X ~ chi-square with integer ``df`` >= 1 (closed form, no scipy).

    Example:
        >>> round(chi2_sf(3.841458820694124, 1), 6), round(chi2_sf(9.21034037197618, 2), 6)
        (0.05, 0.01)
    """
    if x <= 0:
        return 1.0
    h = x / 2.0
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for j in range(1, df // 2):
            term *= h / j
            total += term
        return min(1.0, math.exp(-h) * total)
    total = math.erfc(math.sqrt(h))
    term = math.sqrt(h) / math.gamma(1.5)
    for j in range(df // 2):
        total += math.exp(-h) * term
        term *= h / (j + 1.5)
    return min(1.0, total)


def _loglik(p: np.ndarray, k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Binomial log-likelihood (without the constant) of k of n at rates p; p: (..., m)."""
    p = np.clip(p, _EPS, 1 - _EPS)
    with np.errstate(divide="ignore", invalid="ignore"):
        ll = np.where(k > 0, k * np.log(p), 0.0) + np.where(n - k > 0, (n - k) * np.log1p(-p), 0.0)
    return ll.sum(axis=-1)


def _argmax_affine(x: np.ndarray, c0: np.ndarray, c1: np.ndarray, k: np.ndarray, n: np.ndarray, lo: float,
                   hi: float, steps: int = 30) -> np.ndarray:
    """Per row, the x in [lo, hi] that maximises the binomial log-likelihood of p = c0 + x * c1
    (concave in x): Newton's method from ``x``, kept inside a bracket that bisection shrinks
    (safeguarded)."""
    def slope(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = np.clip(c0 + x[:, None] * c1, _EPS, 1 - _EPS)
        return (((k / p - (n - k) / (1 - p)) * c1).sum(axis=1),
                ((k / p ** 2 + (n - k) / (1 - p) ** 2) * c1 ** 2).sum(axis=1))

    at_hi, at_lo = slope(np.full(x.shape, hi))[0] >= 0, slope(np.full(x.shape, lo))[0] <= 0
    a, b = np.where(at_hi, hi, lo), np.where(at_lo, lo, hi)
    x = np.clip(x, a, b)
    for _ in range(steps):
        grad, curv = slope(x)
        a, b = np.where(grad > 0, x, a), np.where(grad > 0, b, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = x + grad / curv
        nxt = np.where(a == b, a, np.where((step > a) & (step < b), step, (a + b) / 2))
        if np.abs(nxt - x).max() < 1e-11:
            return nxt
        x = nxt
    return x


def _fit_levels(shapes: np.ndarray, k: np.ndarray, n: np.ndarray, rounds: int = 100) -> tuple[np.ndarray, ...]:
    """For each shape row w (max 1), the maximum-likelihood top ``t`` and floor share ``s`` of p = t
    * (s + (1 - s) * w) (so alpha = t*s, beta = t*(1-s), 0 <= alpha <= alpha + beta <= 1): rounds of
    coordinate ascent (each coordinate an exact 1-D concave maximisation, which reaches the bounds)
    and a joint Newton step in (alpha, beta), until no row gains 1e-9. Returns alpha, drop,
    log-likelihood."""
    g = shapes.shape[0]
    y = k.sum() / n.sum()
    t, s = np.full(g, min(max(2 * y, 0.05), 0.95)), np.full(g, 0.5)
    ll = np.full(g, -np.inf)
    for _ in range(rounds):
        t = _argmax_affine(t, 0.0, s[:, None] + (1 - s[:, None]) * shapes, k, n, _EPS, 1.0 - _EPS)
        s = _argmax_affine(s, t[:, None] * shapes, t[:, None] * (1 - shapes), k, n, 0.0, 1.0)
        t, s, now = _newton_levels(t * s, t * (1 - s), shapes, k, n)
        before, ll = ll, now
        if (ll - before).max() < 1e-9:
            break
    return t * s, t * (1 - s), ll


def _newton_levels(alpha: np.ndarray, drop: np.ndarray, shapes: np.ndarray, k: np.ndarray,
                   n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One joint Newton step in (alpha, drop), kept per row where it stays feasible and gains;
    returns top, floor share and log-likelihood."""
    p = np.clip(alpha[:, None] + drop[:, None] * shapes, _EPS, 1 - _EPS)
    r, q = k / p - (n - k) / (1 - p), k / p ** 2 + (n - k) / (1 - p) ** 2
    g1, g2 = r.sum(axis=1), (r * shapes).sum(axis=1)
    h11, h12, h22 = q.sum(axis=1), (q * shapes).sum(axis=1), (q * shapes ** 2).sum(axis=1)
    det = h11 * h22 - h12 ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        a2 = alpha + (h22 * g1 - h12 * g2) / det
        d2 = drop + (h11 * g2 - h12 * g1) / det
    ok = np.isfinite(a2) & np.isfinite(d2) & (a2 >= 0) & (d2 >= 0) & (a2 + d2 <= 1 - _EPS)
    old = _loglik(alpha[:, None] + drop[:, None] * shapes, k, n)
    new = np.where(ok, _loglik(np.where(ok, a2, alpha)[:, None] + np.where(ok, d2, drop)[:, None] * shapes, k, n),
                   -np.inf)
    take = new > old
    alpha, drop = np.where(take, a2, alpha), np.where(take, d2, drop)
    top = alpha + drop
    return top, np.where(top > 0, alpha / np.maximum(top, _EPS), 0.5), np.maximum(new, old)


_REFINE = {"rbp": (0.001, 0.0001), "power": (0.002, 0.0002), "u_shape": (0.02, 0.004)}  # finer grid steps


def _around(x: float, half: float, step: float, lo: float, hi: float) -> np.ndarray:
    return np.unique(np.clip(np.round(x + np.arange(-half, half + step / 2, step), 6), lo, hi))


def _grids(name: str, k: int, best: dict[str, float] | None = None, step: float = 0.0) -> list[dict[str, float]]:
    """The parameter grid of a family: coarse without ``best``, else one of spacing ``step`` around
    it."""
    if name in ("log", "linear"):
        return [{}]
    if name == "cliff":
        return [{"n": float(c)} for c in range(1, k)]
    if name == "rbp":
        ps = np.round(np.arange(0.01, 0.995, 0.01), 2) if best is None else _around(best["p"], 10 * step, step,
                                                                                       1e-4, 0.9999)
        return [{"p": float(p)} for p in ps]
    if name == "power":
        as_ = np.round(np.arange(0.02, 6.005, 0.02), 2) if best is None else _around(best["a"], 10 * step, step,
                                                                                        1e-4, 8.0)
        return [{"a": float(a)} for a in as_]
    if best is None:
        ps = qs = np.round(np.arange(0.1, 0.95, 0.1), 1)
        bs = np.array([0.1, 0.25, 0.5, 1.0, 2.0, 4.0])
    else:
        ps = _around(best["p"], 5 * step, step, 1e-4, 0.9999)
        qs = _around(best["q"], 5 * step, step, 1e-4, 0.9999)
        bs = best["b"] * np.exp(np.linspace(-2, 2, 9) * step * 5)
    return [{"p": float(p), "q": float(q), "b": float(round(b, 6))} for p in ps for q in qs for b in bs]


def _fit_family(name: str, k: int, keep: np.ndarray, succ: np.ndarray, n: np.ndarray) -> DiscountFit:
    """One family at its maximum likelihood: a coarse grid of its shape parameters, then finer grids
    around the best, the levels (alpha, beta) maximised exactly at each."""
    free = _FREE[name]
    if name == "flat":
        rate = float(succ.sum() / n.sum())
        ll = float(_loglik(np.full(len(n), rate), succ, n))
        return DiscountFit(name, {}, rate, 0.0, ll, 2 * free - 2 * ll, free)
    best: tuple[float, dict[str, float], float, float] | None = None
    for step in (0.0, *_REFINE.get(name, ())):
        grid = _grids(name, k, best[1] if best else None, step)
        raw = np.array([discount_weights(name, k, **g) for g in grid])
        top = raw.max(axis=1, keepdims=True)
        alpha, drop, ll = _fit_levels(raw[:, keep] / top, succ, n)
        i = int(np.argmax(ll))
        if best is None or ll[i] > best[0]:
            best = (float(ll[i]), grid[i], float(alpha[i]), float(drop[i] / top[i, 0]))
    assert best is not None
    ll, params, alpha, beta = best
    params = {key: (int(v) if name == "cliff" else round(v, 4)) for key, v in params.items()}
    return DiscountFit(name, params, alpha, beta, ll, 2 * free - 2 * ll, free)


def fit_position_curve(accuracy: Sequence[float], counts: Sequence[int], *,
                       level: float = GOF_LEVEL) -> PositionFit:
    """Fit every family by maximum likelihood to accuracy-by-position (``accuracy`` x ``counts``
    correct of ``counts`` at each position), rank by AIC (lowest first) and test the best against
    the per-position rates at ``level`` (0 turns the test off)."""
    y = np.asarray(accuracy, dtype=np.float64)
    n_all = np.asarray(counts, dtype=np.float64)
    keep = (n_all > 0) & ~np.isnan(y)
    k = len(y)
    if keep.sum() < 3:
        raise InputError("a position curve needs answers at three positions or more", field="positions")
    n = n_all[keep]
    succ = np.clip(y[keep], 0.0, 1.0) * n
    fits = [_fit_family(name, k, keep, succ, n) for name in _FREE]
    fits.sort(key=lambda f: (round(f.aic, 9), f.n_params, f.name))
    saturated = float(_loglik(succ / n, succ, n))
    df = int(keep.sum()) - fits[0].n_params
    deviance = max(0.0, 2 * (saturated - fits[0].loglik))
    gof = None if level <= 0 else GoodnessOfFit(deviance, max(df, 0), chi2_sf(deviance, df) if df > 0 else None,
                                                  level)
    acc_list = [float(x) for x in y]
    intervals = [_wilson(float(a) * c, int(c)) if c else (float("nan"), float("nan"))
                 for a, c in zip(np.nan_to_num(y), n_all, strict=True)]
    return PositionFit(acc_list, [int(c) for c in n_all], intervals, fits, gof)


def write_position_curve(fit: PositionFit, path: str | PathLike) -> Path:
    """Save a fit as JSON for ``wcp(decay=curve,curve=PATH)``; refuses a fit no family passes."""
    if not fit.fitted:
        raise ValueError(fit.sentence())
    out = Path(path)
    from rankwise._atomic import atomic_write_text

    atomic_write_text(out, json.dumps(finite_json(fit.to_json()), indent=2, allow_nan=False) + "\n")
    return out
