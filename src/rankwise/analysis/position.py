"""How a generator uses position: answer accuracy with the supporting chunk planted at each rank, and the
rank discount that fits it best (docs/calibrate.md).

Candidates, each fitted as ``accuracy(i) = alpha + beta * w(i)`` by weighted least squares (weights =
answers per position): ``log`` 1/log2(i+1), ``linear`` 1/i, ``rbp`` p^(i-1), ``power`` i^-a and a two-sided
``u_shape`` p^(i-1) + b * q^(K-i) ("lost in the middle"). Parameters are searched on a grid; the fit with
the lowest AIC (binomial likelihood of the answers) wins. The fitted weights are saved for ``wcp(decay=curve,curve=FILE)``.

Example:
    >>> acc = [0.7 ** (i - 1) * 0.8 + 0.1 for i in range(1, 11)]
    >>> fit = fit_position_curve(acc, [50] * 10)
    >>> fit.best.name, round(fit.best.params["p"], 2)
    ('rbp', 0.7)
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

from rankwise.errors import InputError

__all__ = ["fit_position_curve", "position_accuracy", "PositionFit", "DiscountFit", "discount_weights",
           "write_position_curve"]

_P_GRID = np.round(np.arange(0.05, 1.0, 0.01), 2)
_A_GRID = np.round(np.arange(0.1, 3.01, 0.05), 2)
_U_GRID = np.round(np.arange(0.1, 1.0, 0.1), 1)
_B_GRID = (0.25, 0.5, 0.75, 1.0, 1.5)


def discount_weights(name: str, k: int, **params: float) -> np.ndarray:
    """w(1..k) of a candidate discount.

    Example:
        >>> discount_weights("u_shape", 3, p=0.5, q=0.5, b=1.0).tolist()
        [1.25, 1.0, 1.25]
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
    if name == "flat":
        return np.ones(k)
    raise ValueError(f"unknown discount {name!r}")


@dataclass
class DiscountFit:
    """One discount's best fit: parameters, alpha + beta * w(i), weighted squared error and AIC."""

    name: str
    params: dict[str, float]
    alpha: float
    beta: float
    sse: float
    aic: float

    def predict(self, k: int) -> np.ndarray:
        return self.alpha + self.beta * discount_weights(self.name, k, **self.params)

    def label(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}(" + ", ".join(f"{k}={v:g}" for k, v in self.params.items()) + ")"

    def to_dict(self) -> dict[str, Any]:
        return {"discount": self.name, "label": self.label(), "params": self.params, "alpha": self.alpha,
                "beta": self.beta, "sse": self.sse, "aic": self.aic}


@dataclass
class PositionFit:
    """Accuracy by position (with intervals) and every discount's fit, best (lowest AIC) first."""

    accuracy: list[float]
    counts: list[int]
    intervals: list[tuple[float, float]]
    fits: list[DiscountFit] = field(default_factory=list)

    @property
    def best(self) -> DiscountFit:
        return self.fits[0]

    def rivals(self, within: float = 2.0) -> list[DiscountFit]:
        """Other discounts whose AIC is within ``within`` of the best: the data do not tell them apart."""
        return [f for f in self.fits[1:] if f.aic - self.best.aic < within]

    def weights(self) -> list[float]:
        """The best fit's predicted accuracy per position, as ``wcp(decay=curve)`` weights (>= 0)."""
        return [max(0.0, float(x)) for x in self.best.predict(len(self.accuracy))]

    def to_json(self) -> dict[str, Any]:
        return {"accuracy": self.accuracy, "counts": self.counts, "intervals": [list(x) for x in self.intervals],
                "weights": self.weights(), "best": self.best.label(),
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
    """Mean answer score per planted position 1..k, the answers per position, and 95% Wilson intervals.

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


def _fit_linear(w: np.ndarray, y: np.ndarray, n: np.ndarray) -> tuple[float, float, float]:
    """Weighted least squares of y = alpha + beta * w; returns alpha, beta, weighted SSE."""
    sw = n.sum()
    mw, my = (n * w).sum() / sw, (n * y).sum() / sw
    var = (n * (w - mw) ** 2).sum()
    beta = 0.0 if var <= 1e-15 else float((n * (w - mw) * (y - my)).sum() / var)
    alpha = float(my - beta * mw)
    sse = float((n * (y - alpha - beta * w) ** 2).sum())
    return alpha, beta, sse


def fit_position_curve(accuracy: Sequence[float], counts: Sequence[int]) -> PositionFit:
    """Fit every candidate discount to accuracy-by-position; the lowest AIC first."""
    y = np.asarray(accuracy, dtype=np.float64)
    n = np.asarray(counts, dtype=np.float64)
    keep = (n > 0) & ~np.isnan(y)
    k = len(y)
    if keep.sum() < 3:
        raise InputError("a position curve needs answers at three positions or more", field="positions")
    grids: dict[str, list[dict[str, float]]] = {
        "log": [{}], "linear": [{}], "flat": [{}],
        "rbp": [{"p": float(p)} for p in _P_GRID],
        "power": [{"a": float(a)} for a in _A_GRID],
        "u_shape": [{"p": float(p), "q": float(q), "b": float(b)} for p in _U_GRID for q in _U_GRID
                    for b in _B_GRID],
    }
    fits = []
    for name, grid in grids.items():
        best = None
        for params in grid:
            w = discount_weights(name, k, **params)
            alpha, beta, sse = _fit_linear(w[keep], y[keep], n[keep])
            if best is None or sse < best[3] - 1e-15:
                best = (params, alpha, beta, sse)
        params, alpha, beta, sse = best
        free = 2 + len(params) if name != "flat" else 1
        pred = np.clip(alpha + beta * discount_weights(name, k, **params)[keep], 1e-6, 1 - 1e-6)
        a = np.clip(y[keep], 0.0, 1.0)
        loglik = float((n[keep] * (a * np.log(pred) + (1 - a) * np.log(1 - pred))).sum())
        aic = -2.0 * loglik + 2 * free
        fits.append(DiscountFit(name, params, alpha, beta, sse, aic))
    fits.sort(key=lambda f: (f.aic, f.name))
    acc_list = [float(x) for x in y]
    intervals = [_wilson(float(a) * c, int(c)) if c else (float("nan"), float("nan"))
                 for a, c in zip(np.nan_to_num(y), n, strict=True)]
    return PositionFit(acc_list, [int(c) for c in n], intervals, fits)


def write_position_curve(fit: PositionFit, path: str | PathLike) -> Path:
    """Save a fit as JSON for ``wcp(decay=curve,curve=PATH)``."""
    out = Path(path)
    out.write_text(json.dumps(_finite(fit.to_json()), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return out


def _finite(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x
