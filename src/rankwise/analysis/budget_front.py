"""Quality against context budget: each configuration's curve and the Pareto front of (budget,
quality) points.

A point (configuration, budget B, mean quality q) is dominated when another point reaches at least q
with at most B, better in one of the two; the front is what is left: the cheapest prompt that
reaches each quality.

Example:
    >>> curves = {"small": {500: 0.4, 1000: 0.7}, "large": {500: 0.3, 1000: 0.7, 2000: 0.8}}
    >>> [(p.config, p.budget, p.value) for p in pareto_front(curves)]
    [('small', 500, 0.4), ('small', 1000, 0.7), ('large', 2000, 0.8)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FrontPoint", "pareto_front", "best_at_each_budget"]


@dataclass(frozen=True)
class FrontPoint:
    """One configuration at one budget on the front."""

    config: str
    budget: int
    value: float


def pareto_front(curves: Mapping[str, Mapping[int, float]]) -> list[FrontPoint]:
    """The points no other point dominates, by budget then quality; on an exact tie (same budget and
    value) the configuration listed first stays."""
    points = [(b, -v, i, lab) for i, (lab, curve) in enumerate(curves.items()) for b, v in curve.items()]
    front: list[FrontPoint] = []
    best = float("-inf")
    for b, neg, _, lab in sorted(points):
        v = -neg
        if v > best:
            front.append(FrontPoint(lab, b, v))
            best = v
    return front


def best_at_each_budget(curves: Mapping[str, Mapping[int, float]]) -> dict[int, tuple[str, float]]:
    """Budget -> (configuration, value) of the best configuration there (the first listed on a tie).

    Example:
        >>> best_at_each_budget({"a": {100: 0.5}, "b": {100: 0.6}})
        {100: ('b', 0.6)}
    """
    out: dict[int, tuple[str, float]] = {}
    for lab, curve in curves.items():
        for b, v in curve.items():
            if b not in out or v > out[b][1]:
                out[b] = (lab, v)
    return dict(sorted(out.items()))
