"""A regression gate for CI: fail only when a metric drops by more than a budget *and* the drop is real.

The baseline and the candidate are runs (scored against qrels), saved results holding per-query values
(``rankwise eval --format json --per-query``), or RAG records / test sets (scored by ``evaluate_rag`` under
one verdict source). Both must cover the same queries. A floor per metric (``floors={"ndcg@10": 0.4}``)
fails the gate whenever the candidate's mean is below it, significant or not. The p-value comes from the
same routine as ``compare``'s, so the two print the same p for the same data and seed.

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

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from rankwise.analysis.significance import CORRECTIONS, correct_pvalues, paired_test
from rankwise.analysis.system_warnings import case_notes, collect_warnings, name_warnings
from rankwise.errors import InputError, warn

__all__ = ["gate", "GateResult", "MetricCheck", "per_query_values", "parse_floors"]


@dataclass(frozen=True)
class MetricCheck:
    """The gate's verdict on one metric.

    Attributes:
        metric: canonical metric name.
        baseline_mean, candidate_mean, delta: means over the shared queries; ``delta = cand - base``.
        p_value: the paired test's p-value (after correction across metrics, if asked).
        over_budget: the drop ``-delta`` exceeds ``max_drop``.
        significant: ``p_value < alpha``.
        failed: over budget and significant (a drop, not a gain), or below the floor.
        floor: the absolute minimum asked for the candidate's mean, if any.
        below_floor: the candidate's mean is below ``floor``.
        worst: the queries that dropped most: ``(query_id, baseline, candidate, delta)``.
        n: paired queries.
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

    def to_dict(self) -> dict[str, Any]:
        return {"floor": self.floor, "below_floor": self.below_floor, "metric": self.metric, "baseline_mean": self.baseline_mean, "candidate_mean": self.candidate_mean,
                "delta": self.delta, "p_value": None if math.isnan(self.p_value) else self.p_value,
                "over_budget": self.over_budget, "significant": self.significant, "failed": self.failed,
                "n": self.n,
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


def _saved_result(obj: Any) -> Mapping | None:
    """The parsed saved result if ``obj`` is one (dict or .json file with ``per_query``), else None."""
    if isinstance(obj, Mapping) and "per_query" in obj:
        return obj
    if isinstance(obj, Mapping) and "mean" in obj and "summary" in obj:
        raise InputError("the saved result has no per-query values; save it with "
                         "`rankwise eval --format json --per-query`", field="per_query")
    if isinstance(obj, (str, PathLike)) and Path(obj).suffix.lower() == ".json":
        path = Path(obj)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", source=path) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return None  # not one JSON document: a run in JSON Lines, read as a run
        if isinstance(data, Mapping) and "per_query" in data:
            return data
        if isinstance(data, Mapping) and "mean" in data:
            raise InputError("the saved result has no per-query values; save it with "
                             "`rankwise eval --format json --per-query`", source=path, field="per_query")
    return None


def _is_rag(obj: Any) -> bool:
    from rankwise.data.records import CaseRecord, is_rag_file

    if isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], (CaseRecord, Mapping)):
        return True
    return isinstance(obj, (str, PathLike)) and is_rag_file(obj)


def per_query_values(obj: Any, metrics: Sequence[str], *, qrels: Any = None, relevance_level: int = 1,
                     missing: str = "zero", origin: str | None = None, relevance: str | None = None,
                     labels: Any = None, min_evidence_chars: int | None = None) -> tuple[list[str], np.ndarray]:
    """Query ids and a (queries x metrics) array from a run (with ``qrels``), a saved result, an EvalResult,
    or RAG records / a test set (scored under verdict source ``relevance``, default containment).

    Example:
        >>> saved = {"per_query": {"q1": {"ndcg@10": 0.5}, "q2": {"ndcg@10": 1.0}}}
        >>> ids, values = per_query_values(saved, ["ndcg_cut_10"])
        >>> ids, values.tolist()
        (['q1', 'q2'], [[0.5], [1.0]])
    """
    from rankwise.metrics.evaluate import EvalResult, evaluate

    names = [_canonical(m) for m in metrics]
    where = origin or (str(obj) if isinstance(obj, (str, PathLike)) else None)
    if isinstance(obj, EvalResult):
        missing_names = [n for n in names if n not in obj.names]
        if missing_names:
            raise InputError(f"result has no metric {missing_names[0]!r}", source=where, field="metric")
        return list(obj.per_query.query_ids), np.column_stack([obj.per_query.column(n) for n in names])
    if relevance is not None or _is_rag(obj):
        from rankwise.metrics.rag import evaluate_rag

        extra = {} if min_evidence_chars is None else {"min_evidence_chars": min_evidence_chars}
        rag = evaluate_rag(obj, relevance or "containment", metrics=names, labels=labels,
                           relevance_level=relevance_level, **extra)
        for note in case_notes(rag.summary):  # unscorable / incomplete cases: counted, not silent
            warn(note)
        return list(rag.per_query.query_ids), np.column_stack([rag.per_query.column(n) for n in names])
    saved = _saved_result(obj)
    if saved is not None:
        per_query = saved["per_query"]
        if not isinstance(per_query, Mapping) or not per_query:
            raise InputError("per_query must be a non-empty object {query_id: {metric: value}}", source=where,
                             field="per_query")
        ids = [str(q) for q in per_query]
        values = np.empty((len(ids), len(names)))
        for i, (qid, row) in enumerate(per_query.items()):
            if not isinstance(row, Mapping):
                raise InputError(f"query {qid!r}: expected an object of metric values", source=where,
                                 field="per_query")
            for j, name in enumerate(names):
                if name not in row:
                    known = ", ".join(sorted(row)) or "none"
                    raise InputError(f"query {qid!r} has no value for metric {name!r} (has: {known})",
                                     source=where, field=name)
                v = row[name]
                if v is None:
                    values[i, j] = np.nan
                elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    values[i, j] = float(v)
                else:
                    raise InputError(f"query {qid!r}: value {v!r} is not a number", source=where, field=name)
        return ids, values
    if qrels is None:
        raise InputError("a run needs qrels to be scored, or pass a saved result with per-query "
                         "values (`rankwise eval --format json --per-query`)", source=where, field="qrels")
    result = evaluate(qrels, obj, names, relevance_level=relevance_level, missing=missing)
    return list(result.per_query.query_ids), np.column_stack([result.per_query.column(n) for n in names])


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
        baseline, candidate: runs (scored against ``qrels``), saved results with per-query values
            (``.json`` from ``rankwise eval --format json --per-query`` or the parsed dict), or EvalResults.
        metrics: metrics to check.
        max_drop: the largest tolerated drop of a mean.
        alpha: significance level.
        qrels: needed when an input is a run.
        allow_query_mismatch: compare only shared queries instead of refusing different query sets.
        test: ``"randomization"``, ``"t"`` or ``"wilcoxon"`` (two-sided).
        correction: ``"none"`` (default), ``"holm"`` or ``"bonferroni"`` across the checked metrics.
        worst: how many of the most-dropped queries to report per metric.
        floors: metric -> absolute minimum of the candidate's mean; below it the gate fails whatever
            the test says (a floor on a metric not in ``metrics`` adds that metric).
        relevance: verdict source for RAG records / test sets (default containment).
        labels: human labels or graded qrels for ``relevance`` human / ids.
        min_evidence_chars: containment/fuzzy test sets judged now: letters/digits a chunk lying inside a
            reference passage must hold to count (default 20, as ``evaluate_rag``).

    Warnings about either input (e.g. duplicate chunk ids, unscorable cases) are given once, naming the
    system (its file stem, else ``baseline`` / ``candidate``), and kept in ``summary["warnings"]``.
    """
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
    names = list(dict.fromkeys([*names, *floor_of]))
    baseline, candidate = _check_run_queries(baseline, candidate, qrels, allow_query_mismatch)
    common = {"qrels": qrels, "relevance_level": relevance_level, "missing": missing, "relevance": relevance,
              "labels": labels, "min_evidence_chars": min_evidence_chars}
    warned: dict[str, list[str]] = {}
    base_label, cand_label = _labels(baseline, candidate)
    with collect_warnings() as warned[base_label]:
        base_ids, base_vals = per_query_values(baseline, names, origin=_origin(baseline, "baseline"), **common)
    with collect_warnings() as warned[cand_label]:
        cand_ids, cand_vals = per_query_values(candidate, names, origin=_origin(candidate, "candidate"), **common)
    base_set, cand_set = set(base_ids), set(cand_ids)
    summary: dict[str, Any] = {"baseline_queries": len(base_ids), "candidate_queries": len(cand_ids)}
    if base_set != cand_set:
        only_base = [q for q in base_ids if q not in cand_set]
        only_cand = [q for q in cand_ids if q not in base_set]
        if not allow_query_mismatch:
            parts = []
            if only_base:
                parts.append(f"{len(only_base)} only in the baseline (e.g. {only_base[0]!r})")
            if only_cand:
                parts.append(f"{len(only_cand)} only in the candidate (e.g. {only_cand[0]!r})")
            raise InputError("baseline and candidate cover different queries: " + ", ".join(parts)
                             + " (allow_query_mismatch compares the shared ones)", field="query_id")
        summary["only_in_baseline"] = len(only_base)
        summary["only_in_candidate"] = len(only_cand)
    shared = [q for q in base_ids if q in cand_set]
    if not shared:
        raise InputError("baseline and candidate share no query", field="query_id")
    summary["queries"] = len(shared)
    named = name_warnings(warned)
    if named:
        summary["warnings"] = named
        for line in named:
            warn(line)
    b_index = {q: i for i, q in enumerate(base_ids)}
    c_index = {q: i for i, q in enumerate(cand_ids)}
    b = base_vals[[b_index[q] for q in shared]]
    c = cand_vals[[c_index[q] for q in shared]]

    from rankwise.metrics.evaluate import aggregate

    raw = []
    for j, name in enumerate(names):
        ok = ~(np.isnan(b[:, j]) | np.isnan(c[:, j]))
        bj, cj = b[ok, j], c[ok, j]
        d = cj - bj
        p = paired_test(d, test, permutations=permutations, seed=seed) if len(d) else float("nan")
        order = np.argsort(d, kind="stable")[:worst]
        ids = [q for q, keep in zip(shared, ok.tolist(), strict=True) if keep]
        worst_rows = [(ids[i], float(bj[i]), float(cj[i]), float(d[i])) for i in order.tolist() if d[i] < 0]
        base_mean, cand_mean = aggregate(bj, name), aggregate(cj, name)
        raw.append((name, base_mean, cand_mean, p, worst_rows, int(ok.sum())))
    adjusted = correct_pvalues([r[3] for r in raw], correction)
    checks = []
    for (name, base_mean, cand_mean, _, worst_rows, n), p in zip(raw, adjusted, strict=True):
        delta = cand_mean - base_mean
        over = -delta > max_drop + 1e-12
        significant = not math.isnan(p) and p < alpha
        floor = floor_of.get(name)
        below = floor is not None and cand_mean < floor
        checks.append(MetricCheck(name, base_mean, cand_mean, delta, p, over, significant,
                                  (over and significant) or below, worst_rows, n, floor, below))
    settings = {"test": test, "permutations": permutations, "seed": seed, "correction": correction,
                "floors": floor_of, "relevance": relevance}
    return GateResult(checks, max_drop, alpha, settings, summary)


def _check_run_queries(baseline: Any, candidate: Any, qrels: Any, allow: bool) -> tuple[Any, Any]:
    """Two runs scored against qrels must retrieve for the same queries: scoring a missing query as 0
    would hide it. Saved results and RAG inputs are checked on their evaluated ids instead. Returns the
    inputs, runs loaded (once)."""
    from rankwise.metrics.evaluate import EvalResult

    if qrels is None or _is_rag(baseline) or _is_rag(candidate):
        return baseline, candidate
    if any(isinstance(x, EvalResult) or _saved_result(x) is not None for x in (baseline, candidate)):
        return baseline, candidate
    from rankwise.data.load import load_qrels, load_run

    baseline, candidate = load_run(baseline), load_run(candidate)
    judged = set(load_qrels(qrels).queries)
    base = set(baseline.queries) & judged
    cand = set(candidate.queries) & judged
    if base != cand and not allow:
        only_base, only_cand = sorted(base - cand), sorted(cand - base)
        parts = []
        if only_base:
            parts.append(f"{len(only_base)} only in the baseline (e.g. {only_base[0]!r})")
        if only_cand:
            parts.append(f"{len(only_cand)} only in the candidate (e.g. {only_cand[0]!r})")
        raise InputError("baseline and candidate runs retrieve for different queries: " + ", ".join(parts)
                         + " (allow_query_mismatch compares them anyway, a missing query scoring 0)",
                         field="query_id")
    return baseline, candidate


def parse_floors(items: Iterable[str]) -> dict[str, float]:
    """``["ndcg@10=0.40", "recall@5=0.6"]`` -> ``{"ndcg@10": 0.4, "recall@5": 0.6}`` (names canonical).

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


def _origin(obj: Any, role: str) -> str:
    return str(obj) if isinstance(obj, (str, PathLike)) else f"<{role}>"
