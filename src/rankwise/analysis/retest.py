"""Test-retest statistics of an LLM judge: how far its verdicts on the same chunks move when it
judges them again, unchanged or under one controlled change, and how far the metric means move with
them.

A *verdict table* is ``{case id: [verdict of each chunk, by rank: 1, 0, or None when none was
had]}``. One condition's tables (one per repetition) are compared with the baseline's chunk by
chunk, over the chunks both have a verdict for: the flips (0 -> 1 and 1 -> 0), the flip rate with a
percentile bootstrap interval over cases (a case's chunks are judged together, so cases, not chunks,
are the independent draws) and Cohen's kappa of the pairs, the judge's agreement with itself
(:func:`~rankwise.relevance.agreement.cohen_kappa`). A gullibility probe is the same comparison on
the chunks the baseline calls irrelevant, rewritten to tempt the judge: its flip rate is the share
it now calls relevant.

An estimate that cannot be had is None with a sentence why (no chunk compared; one class on both
sides, where kappa is undefined; one case, where an interval over cases is not) -- never a NaN.

Example (a judge that flips one chunk of four on its second look):
    >>> base = {"q1": [1, 0], "q2": [1, 0]}
    >>> f = compare_verdicts(base, [{"q1": [1, 0], "q2": [0, 0]}], name="repeat", resamples=200)
    >>> f.pairs, f.flips, f.down, f.rate, round(f.kappa, 4)
    (4, 1, 1, 0.25, 0.5)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rankwise.errors import InputError
from rankwise.relevance.agreement import cohen_kappa

__all__ = ["Flips", "MetricMove", "Retest", "compare_verdicts", "metric_moves", "only_verdict"]

Table = Mapping[str, Sequence["int | None"]]


@dataclass
class Flips:
    """One condition's verdicts against the baseline's, over its repetitions (``rate``, ``kappa``
    and their intervals None when undefined: ``why`` says why)."""

    name: str
    repeats: int
    cases: int  # cases with at least one chunk compared
    pairs: int  # chunk verdicts compared (both sides had one), over all repetitions
    flips: int
    up: int  # baseline 0, now 1
    down: int  # baseline 1, now 0
    rate: float | None
    ci: tuple[float, float] | None
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    per_repeat: list[float | None] = field(default_factory=list)  # the flip rate of each repetition
    not_compared: int = 0  # chunks of the baseline's cases that one side has no verdict for, over repetitions
    why: list[str] = field(default_factory=list)


@dataclass
class MetricMove:
    """How far one metric's mean moves under one condition: the baseline's mean, each repetition's,
    their mean's shift from the baseline, their standard deviation and range (None, with ``why``,
    when undefined)."""

    metric: str
    condition: str
    baseline: float | None
    means: list[float | None]
    shift: float | None
    sd: float | None
    low: float | None
    high: float | None
    why: str | None = None


@dataclass
class Retest:
    """What ``rankwise judge-retest`` found: the sample, the conditions' flips, the probes' flips,
    the metric moves, and notes (conditions not run and why, verdicts not had)."""

    judge: dict[str, Any]
    cases: int
    chunks: int
    strata: dict[str, int]
    repeats: int
    seed: int
    confidence: float
    resamples: int
    conditions: list[Flips]
    probes: list[Flips]
    probe_noise: Flips | None  # plain repetition's 0 -> 1 flips on the chunks the probes rewrite: the noise floor
    metrics: list[MetricMove]
    baseline_means: dict[str, float | None]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Everything, as JSON-ready values."""
        return asdict(self)


def only_verdict(table: Table, value: int) -> dict[str, list[int | None]]:
    """The table with every verdict other than ``value`` blanked (None): the chunks a probe
    rewrites.

    Example:
        >>> only_verdict({"q1": [1, 0, None]}, 0)
        {'q1': [None, 0, None]}
    """
    return {q: [v if v == value else None for v in vs] for q, vs in table.items()}


def _counts(base: Table, table: Table, cases: list[str]) -> tuple[np.ndarray, int]:
    """Per case: [n00, n01, n10, n11] (baseline, other); and the chunks not compared."""
    out = np.zeros((len(cases), 4), dtype=np.int64)
    missing = 0
    for row, q in enumerate(cases):
        got = table.get(q)
        for i, b in enumerate(base[q]):
            if b is None:
                continue
            o = got[i] if got is not None and i < len(got) else None
            if o is None:
                missing += 1
                continue
            out[row, 2 * int(b) + int(o)] += 1
    return out, missing


def _kappa(c: np.ndarray) -> float | None:
    """Cohen's kappa of a 2x2 confusion [n00, n01, n10, n11] (the routine of ``rankwise agree``)."""
    pairs = [(0, 0)] * int(c[0]) + [(0, 1)] * int(c[1]) + [(1, 0)] * int(c[2]) + [(1, 1)] * int(c[3])
    return cohen_kappa(pairs)


def _interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(draws, [tail, 1 - tail])
    return float(lo), float(hi)


def _kappa_draws(conf: np.ndarray) -> np.ndarray:
    """Kappa of each resampled confusion (rows: resamples; columns n00, n01, n10, n11); NaN where
    undefined."""
    n = conf.sum(axis=1).astype(float)
    po = (conf[:, 0] + conf[:, 3]) / n
    b1, o1 = (conf[:, 2] + conf[:, 3]) / n, (conf[:, 1] + conf[:, 3]) / n
    pe = b1 * o1 + (1 - b1) * (1 - o1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(pe < 1, (po - pe) / (1 - pe), np.nan)


def compare_verdicts(baseline: Table, tables: Sequence[Table], *, name: str, resamples: int = 1000,
                     confidence: float = 0.95, seed: int = 42, kappa: bool = True) -> Flips:
    """The flips of ``tables`` (one per repetition) against ``baseline``, chunk by chunk (see the
    module doc); ``kappa=False`` for a probe, whose baseline is one class by construction (no kappa
    is computed).

    Example:
        >>> f = compare_verdicts({"q1": [1, 1]}, [{"q1": [1, 1]}], name="repeat")
        >>> f.rate, f.kappa, f.ci, f.why[0]
        (0.0, None, None, 'kappa undefined: every compared verdict is 1 on both sides (one class)')
    """
    if resamples < 1 or not 0 < confidence < 1:
        raise InputError("resamples must be >= 1 and confidence between 0 and 1", field="confidence")
    cases = sorted(baseline)
    per_case = np.zeros((len(cases), 4), dtype=np.int64)
    per_repeat: list[float | None] = []
    missing = 0
    for table in tables:
        counts, lost = _counts(baseline, table, cases)
        per_case += counts
        missing += lost
        n = int(counts.sum())
        per_repeat.append(float(counts[:, 1].sum() + counts[:, 2].sum()) / n if n else None)
    total = per_case.sum(axis=0)
    pairs, up, down = int(total.sum()), int(total[1]), int(total[2])
    used = per_case[per_case.sum(axis=1) > 0]
    flips = Flips(name, len(tables), len(used), pairs, up + down, up, down, None, None, None, None, per_repeat,
                  missing)
    if pairs == 0:
        flips.why.append("no chunk has a verdict on both sides: nothing to compare")
        return flips
    flips.rate = (up + down) / pairs
    flips.kappa = _kappa(total) if kappa else None
    if kappa and flips.kappa is None:
        one = "1" if total[3] else "0"
        flips.why.append(f"kappa undefined: every compared verdict is {one} on both sides (one class)")
    if len(used) < 2:
        flips.why.append("one case compared: no interval over cases")
        return flips
    rng = np.random.default_rng(seed)
    conf = used[rng.integers(0, len(used), size=(resamples, len(used)))].sum(axis=1)
    flips.ci = _interval((conf[:, 1] + conf[:, 2]) / conf.sum(axis=1), confidence)
    if flips.kappa is not None:
        kappas = _kappa_draws(conf)
        defined = kappas[~np.isnan(kappas)]
        if len(defined) >= 0.9 * resamples:
            flips.kappa_ci = _interval(defined, confidence)
        else:
            flips.why.append(f"no kappa interval: {resamples - len(defined)} of {resamples} resamples hold one "
                             "class only")
    return flips


def metric_moves(baseline: Mapping[str, float | None],
                 conditions: Mapping[str, Sequence[Mapping[str, float | None]]]) -> list[MetricMove]:
    """Per metric and condition: how far the mean moves from the baseline's over the repetitions.

    Example:
        >>> m = metric_moves(
        ...     {"precision": 0.5}, {"repeat": [{"precision": 0.4}, {"precision": 0.6}]}
        ... )[0]
        >>> m.shift, round(m.sd, 4), m.low, m.high
        (0.0, 0.1414, 0.4, 0.6)
    """
    out = []
    for metric in baseline:
        for cond, reps in conditions.items():
            means = [r.get(metric) for r in reps]
            had = [m for m in means if m is not None]
            base = baseline[metric]
            move = MetricMove(metric, cond, base, means, None, None, None, None)
            if not had:
                move.why = "no repetition could be scored"
            else:
                move.low, move.high = min(had), max(had)
                if base is not None:
                    shift = float(np.mean(had)) - base
                    move.shift = 0.0 if abs(shift) < 1e-12 else shift  # no "-0.0000" from rounding noise
                if len(had) >= 2:
                    move.sd = float(np.std(had, ddof=1))
                else:
                    move.why = "one repetition: no standard deviation"
            out.append(move)
    return out
