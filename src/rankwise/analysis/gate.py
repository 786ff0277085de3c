"""A regression gate for CI: fail only when a metric drops by more than a budget *and* the drop is
real.

The baseline and the candidate are runs (scored against qrels), saved results holding per-query
values (``rankwise eval --format json --per-query``), or RAG records / test sets (scored by
``evaluate_rag`` under one verdict source). Whatever the pairing, both must cover the same queries
(a run lacking a query is refused, not scored 0) unless ``allow_query_mismatch``. A saved result of
means only is compared on its means, with no paired test, and the result says so. A floor per metric
(``floors={"ndcg@10": 0.4}``) fails the gate whenever the candidate's mean is below it, significant
or not. The p-value comes from the same routine as ``compare``'s, so the two print the same p for
the same data and seed.

Example:
    >>> qrels = {f"q{i}": {"a": 1} for i in range(20)}
    >>> good = {f"q{i}": ["a", "x"] for i in range(20)}
    >>> bad = {f"q{i}": ["x", "a"] for i in range(20)}
    >>> gate(good, bad, ["mrr"], qrels=qrels, max_drop=0.01).exit_code
    1
    >>> gate(good, good, ["mrr"], qrels=qrels, max_drop=0.01).exit_code
    0
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

import numpy as np

from rankwise.analysis.sides import Side, read_side
from rankwise.analysis.significance import CORRECTIONS, correct_pvalues, paired_test
from rankwise.analysis.system_warnings import collect_warnings, name_warnings
from rankwise.errors import InputError, warn

__all__ = ["gate", "GateResult", "MetricCheck", "parse_floors"]


@dataclass(frozen=True)
class MetricCheck:
    """The gate's verdict on one metric.

    Attributes:
        metric: canonical metric name.
        baseline_mean, candidate_mean, delta: means over the shared queries; ``delta = cand -
            base``.
        p_value: the paired test's p-value (after correction across metrics, if asked).
        over_budget: the drop ``-delta`` exceeds ``max_drop``.
        significant: ``p_value < alpha``.
        failed: over budget and significant (a drop, not a gain), or below the floor.
        floor: the absolute minimum asked for the candidate's mean, if any.
        below_floor: the candidate's mean is below ``floor``.
        worst: the queries that dropped most: ``(query_id, baseline, candidate, delta)``.
        n: paired queries.
        untested: why no paired test ran (a side holds only means), else None; then ``p_value`` is
            NaN and a drop over budget fails on its own.
        ci_low, ci_high: 95% percentile bootstrap interval of the mean paired difference (queries
            resampled, the same routine and seed as ``compare``'s); None when untested.
        mde: the minimum detectable effect of these ``n`` queries: the smallest mean difference the
            gate's test finds at ``alpha`` with 80% power, simulated from the observed per-query
            differences (:func:`rankwise.analysis.plan.detectable_effect`, as ``rankwise
            plan-testset``); None when undefined, and ``mde_note`` says why (else how it was found).
    """

    metric: str
    baseline_mean: float
    candidate_mean: float
    delta: float
    p_value: float
    over_budget: bool
    significant: bool
    failed: bool
    worst: list[tuple[str, float, float, float]]
    n: int
    floor: float | None = None
    below_floor: bool = False
    untested: str | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    mde: float | None = None
    mde_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"floor": self.floor, "below_floor": self.below_floor, "metric": self.metric, "baseline_mean": self.baseline_mean, "candidate_mean": self.candidate_mean,
                "delta": self.delta, "p_value": None if math.isnan(self.p_value) else self.p_value,
                "over_budget": self.over_budget, "significant": self.significant, "failed": self.failed,
                "n": self.n, "untested": self.untested, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "mde": self.mde, "mde_note": self.mde_note,
                "worst": [{"query_id": q, "baseline": b, "candidate": c, "delta": d} for q, b, c, d in self.worst]}


@dataclass
class GateResult:
    """What :func:`gate` returns; ``exit_code`` is 1 when any metric failed, else 0."""

    checks: list[MetricCheck]
    max_drop: float
    alpha: float
    settings: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> list[MetricCheck]:
        return [c for c in self.checks if c.failed]

    @property
    def passed(self) -> bool:
        return not self.failed

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "max_drop": self.max_drop, "alpha": self.alpha,
                "settings": self.settings, "summary": self.summary,
                "checks": [c.to_dict() for c in self.checks]}


def _canonical(metric: str) -> str:
    from rankwise.metrics.registry import parse_measure

    return parse_measure(metric).name


def gate(
    baseline: Any,
    candidate: Any,
    metrics: Iterable[str] | str,
    *,
    max_drop: float = 0.01,
    alpha: float = 0.05,
    qrels: Any = None,
    allow_query_mismatch: bool = False,
    test: str = "randomization",
    permutations: int = 10_000,
    seed: int | None = 42,
    correction: str = "none",
    relevance_level: int = 1,
    missing: str = "zero",
    worst: int = 5,
    floors: Mapping[str, float] | None = None,
    relevance: str | None = None,
    labels: Any = None,
    min_evidence_chars: int | None = None,
) -> GateResult:
    """Check a candidate against a baseline: a metric fails when it drops by more than ``max_drop``
    (absolute, in metric units) *and* a paired test finds the drop significant at ``alpha``.

    Args:
        baseline, candidate: runs (scored against ``qrels``), saved results (``.json`` from
            ``rankwise eval --format json --per-query`` or the parsed dict), EvalResults, or RAG
            records / test sets. A saved result without per-query values is compared on its means:
            no paired test can run, so a drop over ``max_drop`` fails on its own
            (``MetricCheck.untested`` says why).
        metrics: metrics to check.
        max_drop: the largest tolerated drop of a mean.
        alpha: significance level.
        qrels: needed when an input is a run.
        allow_query_mismatch: when the two cover different queries (a run lacking a query, a saved
            result holding one more), compare only the queries both cover instead of refusing.
        test: ``"randomization"``, ``"t"`` or ``"wilcoxon"`` (two-sided).
        correction: ``"none"`` (default), ``"holm"`` or ``"bonferroni"`` across the checked metrics.
        worst: how many of the most-dropped queries to report per metric.
        floors: metric -> absolute minimum of the candidate's mean; below it the gate fails whatever
            the test says (a floor on a metric not in ``metrics`` adds that metric).
        relevance: verdict source for RAG records / test sets (default containment).
        labels: human labels or graded qrels for ``relevance`` human / ids.
        min_evidence_chars: containment/fuzzy test sets judged now: letters/digits a chunk lying
            inside a reference passage must hold to count (default 20, as ``evaluate_rag``).

    Every pairing is checked for the queries each side covers (a run: the judged queries it
        retrieves for;
    a saved result: its per-query ids less the ``missing_queries`` its summary lists; records: their
        case
    ids): different sets are an :class:`InputError` naming the queries and the side, unless
    ``allow_query_mismatch``. Warnings about either input (e.g. duplicate chunk ids, unscorable
    cases) are given once, naming the system (its file stem, else ``baseline`` / ``candidate``), and
    kept in ``summary["warnings"]``.

    Example (the candidate ranks every relevant document second instead of first):
        >>> qrels = {f"q{i}": {f"d{i}": 1} for i in range(8)}
        >>> baseline = {f"q{i}": {f"d{i}": 2.0, "x": 1.0} for i in range(8)}
        >>> candidate = {f"q{i}": {"x": 2.0, f"d{i}": 1.0} for i in range(8)}
        >>> result = gate(baseline, candidate, "mrr", qrels=qrels, max_drop=0.05)
        >>> check = result.checks[0]
        >>> result.passed, check.delta, check.p_value, result.exit_code
        (False, -0.5, 0.0078125, 1)
    """
    names, floor_of = _check_gate_settings(metrics, floors, max_drop, alpha, correction)
    common = {"qrels": qrels, "relevance_level": relevance_level, "missing": missing, "relevance": relevance,
              "labels": labels, "min_evidence_chars": min_evidence_chars}
    base, cand, warned = _load_sides(baseline, candidate, names, common)
    summary: dict[str, Any] = {"baseline_queries": base.count, "candidate_queries": cand.count}
    if base.kind == "rag" or cand.kind == "rag":  # which verdicts decided: named, the default said as such
        summary["verdict_source"] = relevance or "containment"
        summary["verdict_source_from"] = "--relevance" if relevance else "default"
    excluded = _check_query_sets(base, cand, allow_query_mismatch, summary)
    named = name_warnings(warned)
    if named:
        summary["warnings"] = named
        for line in named:
            warn(line)
    if base.values is None or cand.values is None:
        measured = _mean_checks(base, cand, names, excluded, summary)
    else:
        measured = _paired_checks(base, cand, names, excluded, summary, test=test, permutations=permutations,
                                  seed=seed, worst=worst, alpha=alpha)
    checks = _verdicts(measured, correct_pvalues([m.p_value for m in measured], correction), max_drop, alpha,
                       floor_of, summary.get("untested"))
    settings = {"test": test, "permutations": permutations, "seed": seed, "correction": correction,
                "floors": floor_of, "relevance": relevance}
    return GateResult(checks, max_drop, alpha, settings, summary)


def _load_sides(baseline: Any, candidate: Any, names: list[str], common: dict[str, Any]
                ) -> tuple[Side, Side, dict[str, list[str]]]:
    """Both sides converted once (the qrels loaded once for both), of the same kind, and the
    warnings each gave, by its label."""
    from functools import cache

    from rankwise.data.load import load_qrels

    warned: dict[str, list[str]] = {}
    base_label, cand_label = _labels(baseline, candidate)
    qrels_once = None if common["qrels"] is None else cache(lambda: load_qrels(common["qrels"]))
    with collect_warnings() as warned[base_label]:
        base = read_side(baseline, "baseline", names, **common, load_qrels=qrels_once)
    with collect_warnings() as warned[cand_label]:
        cand = read_side(candidate, "candidate", names, **common, load_qrels=qrels_once)
    _check_kinds(base, cand)
    return base, cand, warned


@dataclass(frozen=True)
class _Measured:
    """One metric measured on both sides, before the verdict: means, raw p-value (NaN: untested),
    the queries that dropped most, paired queries, bootstrap interval and MDE (with how it was
    found, or why none)."""

    metric: str
    baseline_mean: float
    candidate_mean: float
    p_value: float = float("nan")
    worst: list[tuple[str, float, float, float]] = field(default_factory=list)
    n: int = 0
    ci_low: float | None = None
    ci_high: float | None = None
    mde: float | None = None
    mde_note: str | None = None


def _verdicts(measured: list[_Measured], adjusted: list[float], max_drop: float, alpha: float,
              floor_of: Mapping[str, float], untested: str | None) -> list[MetricCheck]:
    """One :class:`MetricCheck` per metric: over ``max_drop`` and significant (or untested), or
    below its floor, fails."""
    checks = []
    for m, p in zip(measured, adjusted, strict=True):
        delta = m.candidate_mean - m.baseline_mean
        over = -delta > max_drop + 1e-12
        significant = not math.isnan(p) and p < alpha
        floor = floor_of.get(m.metric)
        below = floor is not None and m.candidate_mean < floor
        checks.append(MetricCheck(
            metric=m.metric, baseline_mean=m.baseline_mean, candidate_mean=m.candidate_mean, delta=delta,
            p_value=p, over_budget=over, significant=significant,
            failed=(over and (significant or untested is not None)) or below, worst=m.worst, n=m.n, floor=floor,
            below_floor=below, untested=untested, ci_low=m.ci_low, ci_high=m.ci_high, mde=m.mde,
            mde_note=m.mde_note))
    return checks


def _check_gate_settings(metrics: Iterable[str] | str, floors: Mapping[str, float] | None, max_drop: float,
                         alpha: float, correction: str) -> tuple[list[str], dict[str, float]]:
    """The canonical metric names to check (floors' metrics added) and the floors; bad settings
    raise."""
    if isinstance(metrics, str):
        metrics = [metrics]
    metrics = list(metrics)
    if not metrics and not floors:
        raise InputError("the gate needs at least one metric or floor", field="metric")
    if max_drop < 0:
        raise InputError(f"max drop must be >= 0, not {max_drop}", field="max_drop")
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must be between 0 and 1, not {alpha}", field="alpha")
    if correction not in CORRECTIONS:
        raise InputError(f"unknown correction {correction!r}", field="correction")
    floor_of: dict[str, float] = {}
    for metric, value in (floors or {}).items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise InputError(f"the floor of {metric!r} must be a number, not {value!r}", field="floors")
        floor_of[_canonical(metric)] = float(value)
    names = [_canonical(m) for m in metrics]
    return list(dict.fromkeys([*names, *floor_of])), floor_of


def _check_kinds(base: Side, cand: Side) -> None:
    """A run's metrics (scored against qrels) and RAG records' (scored from verdicts) are not
    comparable."""
    if {base.kind, cand.kind} == {"ir", "rag"}:
        what = {"ir": "a run (or a saved `rankwise eval` result) scored against qrels",
                "rag": "RAG records (or a saved `rankwise eval-rag` result) scored from verdicts"}
        raise InputError(f"the baseline is {what[base.kind]} and the candidate {what[cand.kind]}: gate two "
                         "inputs of the same kind", source=cand.where, field="candidate")


def _check_query_sets(base: Side, cand: Side, allow: bool, summary: dict[str, Any]) -> set[str]:
    """Refuse different query sets (unless ``allow``); the queries to leave out of the comparison.
    """
    if base.covered is not None and cand.covered is not None:
        only_base = [q for q in base.ids if q in base.covered and q not in cand.covered]
        only_cand = [q for q in cand.ids if q in cand.covered and q not in base.covered]
    else:
        only_base = sorted(base.covered & cand.absent if base.covered is not None else cand.absent - base.absent)
        only_cand = sorted(cand.covered & base.absent if cand.covered is not None else base.absent - cand.absent)
    unnamed = None
    if (base.count is not None and cand.count is not None
            and base.count - len(only_base) != cand.count - len(only_cand)):
        unnamed = (f"{base.named} covers {base.count} queries and {cand.named} {cand.count} (a saved result "
                   "of means only names no query)")
    if (only_base or only_cand or unnamed) and not allow:
        parts = []
        if only_base:
            parts.append(f"the candidate lacks {_queries(only_base)} that {base.named} covers: "
                         f"{_examples(only_base)}")
        if only_cand:
            parts.append(f"the candidate covers {_queries(only_cand)} that {base.named} lacks: "
                         f"{_examples(only_cand)}")
        if unnamed:
            parts.append(unnamed)
        raise InputError("baseline and candidate cover different queries: " + "; ".join(parts)
                         + " (allow_query_mismatch compares only the queries both cover)",
                         source=cand.where, field="query_id")
    if only_base or only_cand:
        summary["only_in_baseline"] = len(only_base)
        summary["only_in_candidate"] = len(only_cand)
    if unnamed:
        summary.setdefault("notes", []).append(f"query sets differ: {unnamed}")
    if base.count is None or cand.count is None:
        side = base if base.count is None else cand
        summary.setdefault("notes", []).append(f"{side.named} gives no query count: its query set was not "
                                               "checked")
    return {*only_base, *only_cand}


def _queries(ids: Sequence[str]) -> str:
    return f"{len(ids)} quer{'y' if len(ids) == 1 else 'ies'}"


def _examples(ids: Sequence[str], most: int = 5) -> str:
    shown = ", ".join(repr(q) for q in ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _paired_checks(base: Side, cand: Side, names: list[str], excluded: set[str], summary: dict[str, Any], *,
                   test: str, permutations: int, seed: int | None, worst: int, alpha: float) -> list[_Measured]:
    """Each metric measured over the paired queries: means, p, worst queries, interval, MDE."""
    from rankwise.analysis.plan import detectable_effect
    from rankwise.analysis.significance import bootstrap_ci
    from rankwise.metrics.engine import aggregate

    assert base.values is not None and cand.values is not None
    c_index = {q: i for i, q in enumerate(cand.ids)}
    shared = [q for q in base.ids if q in c_index and q not in excluded]
    if not shared:
        raise InputError("baseline and candidate share no query", source=cand.where, field="query_id")
    summary["queries"] = len(shared)
    b_index = {q: i for i, q in enumerate(base.ids)}
    b = base.values[[b_index[q] for q in shared]]
    c = cand.values[[c_index[q] for q in shared]]
    measured = []
    for j, name in enumerate(names):
        ok = ~(np.isnan(b[:, j]) | np.isnan(c[:, j]))
        bj, cj = b[ok, j], c[ok, j]
        d = cj - bj
        p = paired_test(d, test, permutations=permutations, seed=seed) if len(d) else float("nan")
        order = np.argsort(d, kind="stable")[:worst]
        ids = [q for q, keep in zip(shared, ok.tolist(), strict=True) if keep]
        worst_rows = [(ids[i], float(bj[i]), float(cj[i]), float(d[i])) for i in order.tolist() if d[i] < 0]
        ci_low, ci_high = bootstrap_ci(d, seed=seed) if len(d) else (None, None)
        mde, mde_note = detectable_effect(d, alpha=alpha, test=test)
        measured.append(_Measured(name, aggregate(bj, name), aggregate(cj, name), p, worst_rows, int(ok.sum()),
                                  ci_low, ci_high, mde, mde_note))
    return measured


def _mean_checks(base: Side, cand: Side, names: list[str], excluded: set[str],
                 summary: dict[str, Any]) -> list[_Measured]:
    """Each metric's two means, when a side holds only means: no test, no interval, no MDE."""
    from rankwise.metrics.engine import aggregate

    held = base if base.values is None else cand
    summary["untested"] = (f"{held.named} holds no per-query values (save it with `--format json --per-query` "
                           "from `rankwise eval` or `eval-rag`), so no paired significance test can run: a drop over the budget fails "
                           "on its own")
    summary["queries"] = None
    if excluded:
        summary.setdefault("notes", []).append(
            f"the saved means of {held.named} still count the {_queries(sorted(excluded))} the other side "
            "lacks (a saved mean cannot be split)")
    means: dict[str, dict[str, float]] = {}
    for side in (base, cand):
        if side.means is not None:
            means[side.role] = side.means
            continue
        assert side.values is not None
        rows = [i for i, q in enumerate(side.ids) if q not in excluded]
        cols = side.values[rows]
        means[side.role] = {n: aggregate(cols[~np.isnan(cols[:, j]), j], n) for j, n in enumerate(names)}
        summary[f"{side.role}_queries_compared"] = len(rows)
    return [_Measured(n, means["baseline"][n], means["candidate"][n], mde_note="no per-query values to simulate from")
            for n in names]


def parse_floors(items: Iterable[str]) -> dict[str, float]:
    """``["ndcg@10=0.40", "recall@5=0.6"]`` -> ``{"ndcg@10": 0.4, "recall@5": 0.6}`` (names
    canonical).

    Example:
        >>> parse_floors(["ndcg_cut_10=0.4"])
        {'ndcg@10': 0.4}
    """
    out: dict[str, float] = {}
    for item in items:
        metric, sep, raw = str(item).rpartition("=")
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not sep or not metric.strip() or not math.isfinite(value):
            raise InputError(f"a floor is METRIC=VALUE, e.g. ndcg@10=0.40; got {item!r}", field="floors")
        out[_canonical(metric.strip())] = value
    return out


def _labels(baseline: Any, candidate: Any) -> tuple[str, str]:
    """The names warnings give the two systems: file stems (as ``compare``), else ``baseline`` /
    ``candidate``; the role is added when both stems are the same."""
    from rankwise.analysis.compare import system_names

    stems = system_names([baseline, candidate])
    labels = [stem if isinstance(obj, (str, PathLike)) else role
              for stem, obj, role in zip(stems, (baseline, candidate), ("baseline", "candidate"), strict=True)]
    if labels[1] == f"{labels[0]}#2" or labels[0] == labels[1]:
        base = labels[0]
        labels = [f"{base} (baseline)", f"{base} (candidate)"]
    return labels[0], labels[1]
