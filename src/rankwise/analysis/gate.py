"""A regression gate for CI: fail only when a metric drops by more than a budget *and* the drop is real.

The baseline and the candidate are runs (scored against qrels), saved results holding per-query values
(``rankwise eval --format json --per-query``), or RAG records / test sets (scored by ``evaluate_rag`` under
one verdict source). Whatever the pairing, both must cover the same queries (a run lacking a query is
refused, not scored 0) unless ``allow_query_mismatch``. A saved result of means only is compared on its
means, with no paired test, and the result says so. A floor per metric (``floors={"ndcg@10": 0.4}``)
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

__all__ = ["gate", "GateResult", "MetricCheck", "per_query_values", "parse_floors", "read_saved_result", "is_rag_input"]


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
        untested: why no paired test ran (a side holds only means), else None; then ``p_value`` is NaN
            and a drop over budget fails on its own.
        ci_low, ci_high: 95% percentile bootstrap interval of the mean paired difference (queries resampled,
            the same routine and seed as ``compare``'s); None when untested.
        mde: the minimum detectable effect of these ``n`` queries: the smallest mean difference the gate's
            test finds at ``alpha`` with 80% power, simulated from the observed per-query differences
            (:func:`rankwise.analysis.plan.detectable_effect`, as ``rankwise plan-testset``); None when
            undefined, and ``mde_note`` says why (else how it was found).
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


def read_saved_result(obj: Any) -> Mapping | None:
    """The parsed saved result if ``obj`` is one (dict or .json file with ``per_query`` or ``mean`` and
    ``summary``), else None.

    Example:
        >>> read_saved_result({"mean": {"map": 0.5}, "summary": {}})["mean"]
        {'map': 0.5}
        >>> read_saved_result("run.trec") is None
        True
    """
    if isinstance(obj, Mapping) and ("per_query" in obj or ("mean" in obj and "summary" in obj)):
        return obj
    if isinstance(obj, (str, PathLike)) and Path(obj).suffix.lower() == ".json":
        from rankwise.data._text import decode_text, json_loads, open_error

        path = Path(obj)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise open_error(exc, path) from None
        text = decode_text(data, path)  # bytes that are not UTF-8: an error naming the line
        try:
            parsed = json_loads(text, source=path, line=None)  # nesting too deep: an error naming the file
        except InputError as exc:
            if exc.problem.startswith("not valid JSON"):
                return None  # several JSON documents: a run in JSON Lines, read as a run
            raise
        if isinstance(parsed, Mapping) and ("per_query" in parsed or "mean" in parsed):
            return parsed
    return None


def _saved_result(obj: Any) -> Mapping | None:
    """The parsed saved result with per-query values if ``obj`` is one, else None (means only: raises)."""
    saved = read_saved_result(obj)
    if saved is not None and "per_query" not in saved:
        where = str(obj) if isinstance(obj, (str, PathLike)) else None
        raise InputError("the saved result has no per-query values; save it with "
                         "`rankwise eval --format json --per-query`", source=where, field="per_query")
    return saved


def is_rag_input(obj: Any) -> bool:
    """Is ``obj`` RAG records or a test set (a list of records / dicts, or a RAG JSONL file) rather than a run?

    Example:
        >>> is_rag_input([{"id": "q1", "retrieved_contexts": ["a chunk"]}]), is_rag_input({"q1": {"d1": 1.0}})
        (True, False)
    """
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
    if relevance is not None or is_rag_input(obj):
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
        baseline, candidate: runs (scored against ``qrels``), saved results (``.json`` from
            ``rankwise eval --format json --per-query`` or the parsed dict), EvalResults, or RAG records /
            test sets. A saved result without per-query values is compared on its means: no paired test
            can run, so a drop over ``max_drop`` fails on its own (``MetricCheck.untested`` says why).
        metrics: metrics to check.
        max_drop: the largest tolerated drop of a mean.
        alpha: significance level.
        qrels: needed when an input is a run.
        allow_query_mismatch: when the two cover different queries (a run lacking a query, a saved result
            holding one more), compare only the queries both cover instead of refusing.
        test: ``"randomization"``, ``"t"`` or ``"wilcoxon"`` (two-sided).
        correction: ``"none"`` (default), ``"holm"`` or ``"bonferroni"`` across the checked metrics.
        worst: how many of the most-dropped queries to report per metric.
        floors: metric -> absolute minimum of the candidate's mean; below it the gate fails whatever
            the test says (a floor on a metric not in ``metrics`` adds that metric).
        relevance: verdict source for RAG records / test sets (default containment).
        labels: human labels or graded qrels for ``relevance`` human / ids.
        min_evidence_chars: containment/fuzzy test sets judged now: letters/digits a chunk lying inside a
            reference passage must hold to count (default 20, as ``evaluate_rag``).

    Every pairing is checked for the queries each side covers (a run: the judged queries it retrieves for;
    a saved result: its per-query ids less the ``missing_queries`` its summary lists; records: their case
    ids): different sets are an :class:`InputError` naming the queries and the side, unless
    ``allow_query_mismatch``. Warnings about either input (e.g. duplicate chunk ids, unscorable cases)
    are given once, naming the system (its file stem, else ``baseline`` / ``candidate``), and kept in
    ``summary["warnings"]``.

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
        raw = _mean_checks(base, cand, names, excluded, summary)
    else:
        raw = _paired_checks(base, cand, names, excluded, summary, test=test, permutations=permutations,
                             seed=seed, worst=worst, alpha=alpha)
    checks = _verdicts(raw, correct_pvalues([r[3] for r in raw], correction), max_drop, alpha, floor_of,
                       summary.get("untested"))
    settings = {"test": test, "permutations": permutations, "seed": seed, "correction": correction,
                "floors": floor_of, "relevance": relevance}
    return GateResult(checks, max_drop, alpha, settings, summary)


def _load_sides(baseline: Any, candidate: Any, names: list[str], common: dict[str, Any]
                ) -> tuple[Any, Any, dict[str, list[str]]]:
    """Both sides loaded and scored (an input read once when both name it), of the same kind, and the
    warnings each gave, by its label."""
    warned: dict[str, list[str]] = {}
    base_label, cand_label = _labels(baseline, candidate)
    loaded: dict[str, Any] = {}
    with collect_warnings() as warned[base_label]:
        base = _side(baseline, "baseline", names, common, loaded)
    with collect_warnings() as warned[cand_label]:
        cand = _side(candidate, "candidate", names, common, loaded)
    _check_kinds(base, cand)
    return base, cand, warned


def _verdicts(raw: list[tuple], adjusted: list[float], max_drop: float, alpha: float,
              floor_of: Mapping[str, float], untested: str | None) -> list[MetricCheck]:
    """One :class:`MetricCheck` per metric: over ``max_drop`` and significant (or untested), or below its
    floor, fails."""
    checks = []
    for (name, base_mean, cand_mean, _, worst_rows, n, ci, mde), p in zip(raw, adjusted, strict=True):
        delta = cand_mean - base_mean
        over = -delta > max_drop + 1e-12
        significant = not math.isnan(p) and p < alpha
        floor = floor_of.get(name)
        below = floor is not None and cand_mean < floor
        failed = (over and (significant or untested is not None)) or below
        checks.append(MetricCheck(name, base_mean, cand_mean, delta, p, over, significant, failed, worst_rows, n,
                                  floor, below, untested, *ci, *mde))
    return checks


def _check_gate_settings(metrics: Iterable[str] | str, floors: Mapping[str, float] | None, max_drop: float,
                         alpha: float, correction: str) -> tuple[list[str], dict[str, float]]:
    """The canonical metric names to check (floors' metrics added) and the floors; bad settings raise."""
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


@dataclass
class _Side:
    """One input of the gate: its per-query values (or saved means) and the queries it covers.

    ``covered`` is None when the input names no query (a saved result of means only); ``absent`` holds the
    judged queries it is known to lack (a run's, or those a saved summary lists as missing)."""

    role: str
    where: str
    kind: str  # "ir" (runs, saved eval results) or "rag" (records, test sets, saved eval-rag results)
    ids: list[str]
    values: np.ndarray | None
    means: dict[str, float] | None
    covered: set[str] | None
    count: int | None
    absent: set[str]

    @property
    def named(self) -> str:
        return f"the {self.role}" + ("" if self.where == f"<{self.role}>" else f" ({self.where})")


def _side(obj: Any, role: str, names: list[str], common: dict[str, Any], loaded: dict[str, Any]) -> _Side:
    """Read and score one input of the gate (``loaded`` keeps the qrels, loaded once for both)."""
    from rankwise.metrics.evaluate import EvalResult

    where = _origin(obj, role)
    if isinstance(obj, EvalResult):
        ids, values = per_query_values(obj, names, origin=where)
        absent = {str(q) for q in obj.summary.get("missing_queries") or []}
        return _Side(role, where, "ir", ids, values, None, set(ids) - absent, len(set(ids) - absent), absent)
    saved = read_saved_result(obj)
    if saved is not None:
        return _saved_side(saved, role, where, names)
    if common["relevance"] is not None or is_rag_input(obj):
        ids, values = per_query_values(obj, names, origin=where, **common)
        return _Side(role, where, "rag", ids, values, None, set(ids), len(ids), set())
    from rankwise.data.load import load_qrels, load_run

    if common["qrels"] is None:
        per_query_values(obj, names, origin=where, **common)  # raises: a run needs qrels
    if "qrels" not in loaded:
        loaded["qrels"] = load_qrels(common["qrels"])
    run = load_run(obj)
    ids, values = per_query_values(run, names, origin=where, **{**common, "qrels": loaded["qrels"]})
    judged = set(loaded["qrels"].queries)
    covered = set(run.queries) & judged
    return _Side(role, where, "ir", ids, values, None, covered, len(covered), judged - covered)


def _saved_side(saved: Mapping, role: str, where: str, names: list[str]) -> _Side:
    """A saved result: per-query values when it has them, else its means (and its summary's counts)."""
    summary = saved.get("summary") if isinstance(saved.get("summary"), Mapping) else {}
    kind = "rag" if "relevance" in summary else "ir" if "queries_in_qrels" in summary else "any"
    absent = {str(q) for q in summary.get("missing_queries") or []}
    if "per_query" in saved:
        ids, values = per_query_values(saved, names, origin=where)
        covered = set(ids) - absent
        return _Side(role, where, kind, ids, values, None, covered, len(covered), absent)
    mean = saved.get("mean")
    if not isinstance(mean, Mapping):
        raise InputError("mean must be an object {metric: value}", source=where, field="mean")
    means: dict[str, float] = {}
    for name in names:
        v = mean.get(name)
        if name not in mean:
            known = ", ".join(sorted(mean)) or "none"
            raise InputError(f"no mean for metric {name!r} (has: {known})", source=where, field=name)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            raise InputError(f"the mean {v!r} is not a number", source=where, field=name)
        means[name] = float(v)
    count = summary.get("evaluated")
    if isinstance(count, int) and summary.get("missing") == "zero":
        count -= int(summary.get("missing_from_run") or 0)
    return _Side(role, where, kind, [], None, means, None, count if isinstance(count, int) else None, absent)


def _check_kinds(base: _Side, cand: _Side) -> None:
    """A run's metrics (scored against qrels) and RAG records' (scored from verdicts) are not comparable."""
    if {base.kind, cand.kind} == {"ir", "rag"}:
        what = {"ir": "a run (or a saved `rankwise eval` result) scored against qrels",
                "rag": "RAG records (or a saved `rankwise eval-rag` result) scored from verdicts"}
        raise InputError(f"the baseline is {what[base.kind]} and the candidate {what[cand.kind]}: gate two "
                         "inputs of the same kind", source=cand.where, field="candidate")


def _check_query_sets(base: _Side, cand: _Side, allow: bool, summary: dict[str, Any]) -> set[str]:
    """Refuse different query sets (unless ``allow``); the queries to leave out of the comparison."""
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


def _paired_checks(base: _Side, cand: _Side, names: list[str], excluded: set[str], summary: dict[str, Any], *,
                   test: str, permutations: int, seed: int | None, worst: int, alpha: float) -> list[tuple]:
    """Per metric: (name, baseline mean, candidate mean, p, worst queries, n, (CI low, CI high), (MDE, how))
    over the paired queries."""
    from rankwise.analysis.plan import detectable_effect
    from rankwise.analysis.significance import bootstrap_ci
    from rankwise.metrics.evaluate import aggregate

    assert base.values is not None and cand.values is not None
    c_index = {q: i for i, q in enumerate(cand.ids)}
    shared = [q for q in base.ids if q in c_index and q not in excluded]
    if not shared:
        raise InputError("baseline and candidate share no query", source=cand.where, field="query_id")
    summary["queries"] = len(shared)
    b_index = {q: i for i, q in enumerate(base.ids)}
    b = base.values[[b_index[q] for q in shared]]
    c = cand.values[[c_index[q] for q in shared]]
    raw = []
    for j, name in enumerate(names):
        ok = ~(np.isnan(b[:, j]) | np.isnan(c[:, j]))
        bj, cj = b[ok, j], c[ok, j]
        d = cj - bj
        p = paired_test(d, test, permutations=permutations, seed=seed) if len(d) else float("nan")
        order = np.argsort(d, kind="stable")[:worst]
        ids = [q for q, keep in zip(shared, ok.tolist(), strict=True) if keep]
        worst_rows = [(ids[i], float(bj[i]), float(cj[i]), float(d[i])) for i in order.tolist() if d[i] < 0]
        ci = bootstrap_ci(d, seed=seed) if len(d) else (None, None)
        mde = detectable_effect(d, alpha=alpha, test=test)
        raw.append((name, aggregate(bj, name), aggregate(cj, name), p, worst_rows, int(ok.sum()), ci, mde))
    return raw


def _mean_checks(base: _Side, cand: _Side, names: list[str], excluded: set[str],
                 summary: dict[str, Any]) -> list[tuple]:
    """Per metric, when a side holds only means: (name, baseline mean, candidate mean, NaN, [], 0, no CI)."""
    from rankwise.metrics.evaluate import aggregate

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
    no_mde = (None, "no per-query values to simulate from")
    return [(n, means["baseline"][n], means["candidate"][n], float("nan"), [], 0, (None, None), no_mde)
            for n in names]


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
