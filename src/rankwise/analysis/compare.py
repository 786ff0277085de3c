"""Compare systems query by query: means, deltas, paired tests, intervals, corrections, effect
sizes.

``compare`` evaluates every run on the same qrels and compares each system with a baseline, metric
by metric, on the paired per-query values. ``compare_records`` does the same over per-case RAG
records (scores under one verdict source), cases matched by id. Both end in
:func:`compare_per_query`, which takes per-query value arrays from anywhere.

Example:
    >>> qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    >>> base = {"q1": ["x", "a"], "q2": ["x", "b"], "q3": ["x", "c"]}
    >>> cand = {"q1": ["a", "x"], "q2": ["b", "x"], "q3": ["c", "x"]}
    >>> r = compare(qrels, [base, cand], ["mrr"], names=["base", "cand"])
    >>> c = r.comparison("cand", "mrr")
    >>> (c.baseline_mean, c.mean, c.delta, c.wins, c.p_value)
    (0.5, 1.0, 0.5, 3, 0.25)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

import numpy as np

from rankwise._words import count, system_stem
from rankwise.analysis.significance import (
    CORRECTIONS,
    TESTS,
    bootstrap_ci,
    ci_disagreement,
    cohens_d,
    correct_pvalues,
    paired_test,
    win_tie_loss,
)
from rankwise.analysis.system_warnings import case_notes, collect_warnings, name_warnings
from rankwise.errors import InputError, warn

__all__ = ["compare", "compare_per_query", "compare_records", "ComparisonResult", "PairedComparison",
           "DEFAULT_COMPARE_METRICS", "system_names", "record_scores", "load_record_sets", "compare_results"]

DEFAULT_COMPARE_METRICS = ("ndcg@10", "map", "mrr", "precision@10", "recall@100")


@dataclass(frozen=True)
class PairedComparison:
    """One system against the baseline on one metric.

    Attributes:
        metric, system, baseline: what is compared.
        mean, baseline_mean: means over the paired queries.
        delta: ``mean - baseline_mean``.
        ci_low, ci_high: bootstrap interval of the mean paired difference.
        p_values: raw p-value of every test run (test name -> p).
        p_value: raw p-value of the primary test; ``p_adjusted`` after the correction.
        significant: ``p_adjusted < alpha``.
        effect_size: Cohen's d of the paired differences (None when undefined).
        wins, ties, losses: queries where the system beats, equals, trails the baseline.
        n: paired queries used (queries where a metric is undefined for either system are left out).
        note: set when the bootstrap interval disagrees with the test's verdict (the test decides).
    """

    metric: str
    system: str
    baseline: str
    mean: float
    baseline_mean: float
    delta: float
    ci_low: float
    ci_high: float
    p_values: dict[str, float]
    p_value: float
    p_adjusted: float
    significant: bool
    effect_size: float | None
    wins: int
    ties: int
    losses: int
    n: int
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "note": self.note,
            "metric": self.metric, "system": self.system, "baseline": self.baseline,
            "mean": self.mean, "baseline_mean": self.baseline_mean, "delta": self.delta,
            "ci_low": _num(self.ci_low), "ci_high": _num(self.ci_high),
            "p_value": _num(self.p_value), "p_adjusted": _num(self.p_adjusted),
            "p_values": {k: _num(v) for k, v in self.p_values.items()},
            "significant": self.significant, "effect_size": _num(self.effect_size),
            "wins": self.wins, "ties": self.ties, "losses": self.losses, "n": self.n,
        }


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


@dataclass
class ComparisonResult:
    """What :func:`compare` returns.

    Attributes:
        systems: system names, in input order; ``baseline`` is one of them.
        metrics: canonical metric names.
        query_ids: the paired queries (or case ids), in order.
        values: system -> array (queries x metrics) of per-query values (NaN = undefined).
        means: system -> metric -> mean over the queries where the metric is defined.
        comparisons: one :class:`PairedComparison` per non-baseline system and metric.
        settings: test(s), permutations, seed, correction, alpha, resamples, confidence.
        summary: how many queries were compared and why any were left out, per system.
    """

    systems: list[str]
    baseline: str
    metrics: list[str]
    query_ids: list[str]
    values: dict[str, np.ndarray]
    means: dict[str, dict[str, float]]
    comparisons: list[PairedComparison]
    settings: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def test(self) -> str:
        """The primary test (its p-values are corrected and decide significance)."""
        return self.settings["tests"][0]

    @property
    def candidates(self) -> list[str]:
        return [s for s in self.systems if s != self.baseline]

    def comparison(self, system: str, metric: str) -> PairedComparison:
        """The comparison of ``system`` with the baseline on ``metric`` (canonical or alias name).
        """
        metric = _metric_key(metric, self.metrics)
        for c in self.comparisons:
            if c.system == system and c.metric == metric:
                return c
        raise KeyError(f"no comparison for system {system!r} and metric {metric!r}")

    def per_query(self, system: str, metric: str) -> np.ndarray:
        """``system``'s per-query values of ``metric``, in :attr:`query_ids` order."""
        return self.values[system][:, self.metrics.index(_metric_key(metric, self.metrics))]

    def deltas(self, system: str, metric: str) -> np.ndarray:
        """Per-query ``system - baseline`` (NaN where either is undefined)."""
        return self.per_query(system, metric) - self.per_query(self.baseline, metric)

    def to_json(self, *, per_query: bool = False) -> dict[str, Any]:
        """A JSON-ready dict (NaN written as null); ``per_query`` adds every system's values."""
        out: dict[str, Any] = {
            "systems": self.systems, "baseline": self.baseline, "metrics": self.metrics,
            "queries": len(self.query_ids), "settings": self.settings, "summary": self.summary,
            "means": self.means, "comparisons": [c.to_dict() for c in self.comparisons],
        }
        if per_query:
            out["per_query"] = {
                s: {q: {m: _num(float(v)) for m, v in zip(self.metrics, row, strict=True)}
                    for q, row in zip(self.query_ids, self.values[s].tolist(), strict=True)}
                for s in self.systems
            }
        return out

    def rows(self) -> list[dict[str, Any]]:
        """Flat rows, one per (metric, system), baseline first: for CSV and tables."""
        out = []
        for metric in self.metrics:
            for system in self.systems:
                row: dict[str, Any] = {"metric": metric, "system": system,
                                       "mean": self.means[system][metric], "baseline": system == self.baseline}
                if system != self.baseline:
                    c = self.comparison(system, metric).to_dict()
                    for key in ("delta", "ci_low", "ci_high", "p_value", "p_adjusted", "significant",
                                "effect_size", "wins", "ties", "losses", "n"):
                        row[key] = c[key]
                    for test, p in c["p_values"].items():
                        row[f"p_{test}"] = p
                out.append(row)
        return out


def _metric_key(metric: str, known: list[str]) -> str:
    if metric in known:
        return metric
    from rankwise.metrics.registry import parse_measure

    try:
        name = parse_measure(metric).name
    except InputError:
        raise KeyError(f"unknown metric {metric!r}") from None
    if name not in known:
        raise KeyError(f"metric {metric!r} was not compared (compared: {', '.join(known)})")
    return name


def _check_settings(tests: Sequence[str], correction: str, alpha: float, permutations: int,
                    resamples: int, confidence: float) -> None:
    for t in tests:
        if t not in TESTS:
            raise InputError(f"unknown test {t!r}; choose from {', '.join(TESTS)}", field="test")
    if correction not in CORRECTIONS:
        raise InputError(f"unknown correction {correction!r}; choose from {', '.join(CORRECTIONS)}",
                         field="correction")
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must be between 0 and 1, not {alpha}", field="alpha")
    if permutations < 1:
        raise InputError("permutations must be at least 1", field="permutations")
    if resamples < 1:
        raise InputError("resamples must be at least 1", field="resamples")
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be between 0 and 1, not {confidence}", field="confidence")


def _as_tests(test: str | Sequence[str]) -> list[str]:
    tests = [test] if isinstance(test, str) else list(test)
    if not tests:
        raise InputError("at least one test is needed", field="test")
    out: list[str] = []
    for t in tests:
        t = {"student": "t", "ttest": "t", "t-test": "t", "fisher": "randomization",
             "permutation": "randomization"}.get(t, t)
        if t not in out:
            out.append(t)
    return out


def _mean(col: np.ndarray, metric: str) -> float:
    from rankwise.metrics.engine import aggregate, sequential_mean

    try:
        return aggregate(col, metric)
    except InputError:  # a column that is not a registered metric (per-query values from elsewhere)
        return sequential_mean(col[~np.isnan(col)])


def compare_per_query(
    values: Mapping[str, np.ndarray],
    query_ids: Sequence[str],
    metrics: Sequence[str],
    *,
    baseline: int | str = 0,
    test: str | Sequence[str] = "randomization",
    permutations: int = 10_000,
    seed: int | None = 42,
    correction: str = "holm",
    alpha: float = 0.05,
    resamples: int = 10_000,
    confidence: float = 0.95,
    summary: dict | None = None,
) -> ComparisonResult:
    """Compare systems given their per-query values (system -> array queries x metrics, same rows).

    Every non-baseline system is compared with the baseline on every metric; the primary test's
    p-values (the first of ``test``) are corrected together across systems x metrics.

    Example:
        >>> import numpy as np
        >>> r = compare_per_query({"a": np.array([[0.1], [0.2]]), "b": np.array([[0.3], [0.2]])},
        ...                       ["q1", "q2"], ["score"], test="t", correction="none")
        >>> round(r.comparison("b", "score").delta, 4)
        0.1
    """
    tests = _as_tests(test)
    _check_settings(tests, correction, alpha, permutations, resamples, confidence)
    systems = list(values)
    if len(systems) < 2:
        raise InputError("a comparison needs at least two systems", field="runs")
    query_ids = list(query_ids)
    metrics = list(metrics)
    arrays: dict[str, np.ndarray] = {}
    for s in systems:
        a = np.asarray(values[s], dtype=np.float64)
        if a.shape != (len(query_ids), len(metrics)):
            raise InputError(f"system {s!r}: values have shape {a.shape}, expected "
                             f"({len(query_ids)}, {len(metrics)})", field="values")
        arrays[s] = a
    base = _baseline_name(baseline, systems)
    means = {s: {m: _mean(arrays[s][:, j], m) for j, m in enumerate(metrics)} for s in systems}

    raw: list[dict[str, Any]] = []
    for s in systems:
        if s == base:
            continue
        for j, m in enumerate(metrics):
            a, b = arrays[s][:, j], arrays[base][:, j]
            ok = ~(np.isnan(a) | np.isnan(b))
            d = a[ok] - b[ok]
            p_values = {t: paired_test(d, t, permutations=permutations, seed=seed) for t in tests}
            lo, hi = bootstrap_ci(d, resamples=resamples, confidence=confidence, seed=seed)
            w, t_, lss = win_tie_loss(d)
            mean_s, mean_b = _mean(a[ok], m), _mean(b[ok], m)
            raw.append(dict(metric=m, system=s, baseline=base, mean=mean_s, baseline_mean=mean_b,
                            delta=mean_s - mean_b, ci_low=lo, ci_high=hi, p_values=p_values,
                            p_value=p_values[tests[0]], effect_size=cohens_d(d), wins=w, ties=t_,
                            losses=lss, n=int(ok.sum())))
    adjusted = correct_pvalues([r["p_value"] for r in raw], correction)
    comparisons = [
        PairedComparison(**r, p_adjusted=p, significant=bool(not math.isnan(p) and p < alpha),
                         note=ci_disagreement(p, r["ci_low"], r["ci_high"], alpha, correction=correction))
        for r, p in zip(raw, adjusted, strict=True)
    ]
    settings = {"tests": tests, "permutations": permutations, "seed": seed, "correction": correction,
                "alpha": alpha, "resamples": resamples, "confidence": confidence,
                "comparisons": sum(1 for r in raw if not math.isnan(r["p_value"]))}
    return ComparisonResult(systems, base, metrics, query_ids, arrays, means, comparisons, settings,
                            dict(summary or {"queries": len(query_ids)}))


def _baseline_name(baseline: int | str, systems: list[str]) -> str:
    if isinstance(baseline, str) and baseline in systems:
        return baseline
    try:
        i = int(baseline)
    except (TypeError, ValueError):
        raise InputError(f"baseline {baseline!r} is neither a system name nor an index "
                         f"(systems: {', '.join(systems)})", field="baseline") from None
    if not -len(systems) <= i < len(systems):
        raise InputError(f"baseline index {i} out of range for {len(systems)} systems", field="baseline")
    return systems[i]


def system_names(inputs: Sequence[Any], names: Sequence[str] | None = None) -> list[str]:
    """Names for systems: ``names`` if given, else file stems / Run names / ``run1``..., made
    unique.

    Example:
        >>> system_names(["runs/bm25.trec", "other/bm25.trec", {"q": ["d"]}, "dense.rec.jsonl"])
        ['bm25', 'bm25#2', 'run3', 'dense']
    """
    if names:
        names = [str(n) for n in names]
        if len(names) != len(inputs):
            raise InputError(f"{len(names)} names for {len(inputs)} systems", field="name")
        if len(set(names)) != len(names):
            raise InputError(f"system names must be unique: {', '.join(names)}", field="name")
        return names
    out: list[str] = []
    for i, obj in enumerate(inputs):
        if isinstance(obj, (str, PathLike)):
            name = system_stem(obj)
        else:
            name = getattr(obj, "name", None) or ""
            if name == "run":
                name = ""
        name = name or f"run{i + 1}"
        unique, k = name, 2
        while unique in out:
            unique, k = f"{name}#{k}", k + 1
        out.append(unique)
    return out


def compare(
    qrels: Any,
    runs: Sequence[Any],
    metrics: Iterable[str] | str | None = None,
    *,
    baseline: int | str = 0,
    names: Sequence[str] | None = None,
    test: str | Sequence[str] = "randomization",
    permutations: int = 10_000,
    seed: int | None = 42,
    correction: str = "holm",
    alpha: float = 0.05,
    resamples: int = 10_000,
    confidence: float = 0.95,
    relevance_level: int = 1,
    missing: str = "zero",
    allow_mismatch: bool = False,
) -> ComparisonResult:
    """Evaluate runs on the same qrels and compare each with the baseline, query by query.

    Args:
        qrels: qrels (object, dict, DataFrame or path).
        runs: two or more runs (objects, dicts, DataFrames or paths).
        metrics: metric names; default :data:`DEFAULT_COMPARE_METRICS`.
        baseline: index or name of the baseline system (default the first).
        names: system names (default: file stems).
        test: ``"randomization"`` (sign-flip permutation test), ``"t"`` (paired t-test) or
            ``"wilcoxon"``, or several: the first decides significance, all are reported.
        permutations, seed: randomization test draws and seed (also seeds the bootstrap).
        correction: ``"holm"``, ``"bonferroni"`` or ``"none"``, across systems x metrics.
        alpha: significance level applied to corrected p-values.
        resamples, confidence: bootstrap interval of the mean difference.
        relevance_level, missing: as in :func:`rankwise.evaluate`.
        allow_mismatch: runs that cover different judged queries are an error (under
            ``missing="zero"`` a query one run lacks would score 0 for that run alone); with this,
            only the queries every run covers are compared, and the summary says how many each run
            lost.

    Example:
        >>> qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
        >>> r = compare(qrels, [{"q1": ["a"], "q2": ["x"]}, {"q1": ["a"], "q2": ["b"]}], "P@1")
        >>> r.means
        {'run1': {'precision@1': 0.5}, 'run2': {'precision@1': 1.0}}
    """
    from rankwise.data.load import load_qrels, load_run
    from rankwise.metrics.engine import evaluate
    from rankwise.metrics.registry import parse_measures

    if isinstance(metrics, str):
        metrics = [metrics]
    measures = parse_measures(metrics or DEFAULT_COMPARE_METRICS)
    runs = list(runs)
    if len(runs) < 2:
        raise InputError("compare needs at least two runs", field="runs")
    labels = system_names(runs, names)
    q = load_qrels(qrels)
    results = {}
    for label, run in zip(labels, runs, strict=True):
        results[label] = evaluate(q, load_run(run, name=label), measures, relevance_level=relevance_level,
                                  missing=missing)
    metric_names = [m.name for m in measures]
    first = results[labels[0]].per_query.query_ids
    common = set(first)
    for r in results.values():
        common &= set(r.per_query.query_ids)
    if missing == "zero":  # under skip, each run's missing queries are left out already (and said)
        common -= _lacked_by_some(results, labels, runs, allow_mismatch)
    query_ids = [qid for qid in first if qid in common]
    if not query_ids:
        raise InputError("the runs share no evaluated query", field="query_id")
    values = {}
    for label, r in results.items():
        index = {qid: i for i, qid in enumerate(r.per_query.query_ids)}
        rows = np.fromiter((index[qid] for qid in query_ids), dtype=np.int64, count=len(query_ids))
        values[label] = r.per_query.values[rows]
    summary: dict[str, Any] = {"queries": len(query_ids), "missing": missing,
                               "systems": {label: r.summary for label, r in results.items()}}
    left_out = {label: len(r.per_query.query_ids) - len(query_ids) for label, r in results.items()}
    if any(left_out.values()):
        summary["left_out_not_in_every_run"] = left_out
    return compare_per_query(values, query_ids, metric_names, baseline=baseline, test=test,
                             permutations=permutations, seed=seed, correction=correction, alpha=alpha,
                             resamples=resamples, confidence=confidence, summary=summary)


def _lacked_by_some(results: Mapping[str, Any], labels: Sequence[str], runs: Sequence[Any],
                    allow_mismatch: bool) -> set[str]:
    """The judged queries some run lacks and another covers: an error naming the run unless
    ``allow_mismatch`` (then the set to leave out)."""
    lacking = {label: set(results[label].summary.get("missing_queries") or []) for label in labels}
    everyone = set.intersection(*lacking.values()) if lacking else set()
    some = set().union(*lacking.values()) - everyone
    if some and not allow_mismatch:
        label = next(lab for lab in labels if lacking[lab] - everyone)
        lacked = sorted(lacking[label] - everyone)
        where = runs[labels.index(label)]
        raise InputError(f"runs cover different queries: {label} lacks {count(len(lacked), 'judged query', 'judged queries')} "
                         f"another run covers (e.g. {', '.join(repr(q) for q in lacked[:3])}), which would score 0 "
                         "for it alone; --allow-query-mismatch compares the queries every run covers",
                         source=where if isinstance(where, (str, PathLike)) else None, field="query_id")
    return some


# ------------------------------------------------------------------------------------ RAG records
def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def record_scores(records: Sequence[Any], source: str, *, origin: str = "<records>"
                  ) -> tuple[list[str], dict[str, dict[str, float | None]]]:
    """Case ids (in file order) and per-case scores ``{case_id: {metric: value}}`` under ``source``.

    Records are :class:`rankwise.data.records.CaseRecord` objects or dicts of the same shape.

    Example:
        >>> ids, scores = record_scores([{"id": "c1", "scores": {"ids": {"wcp@3": 0.7}}}], "ids")
        >>> ids, scores["c1"]
        (['c1'], {'wcp@3': 0.7})
    """
    ids: list[str] = []
    scores: dict[str, dict[str, float | None]] = {}
    for line, rec in enumerate(records, start=1):
        cid = _field(rec, "id")
        if cid is None:
            raise InputError("record has no id", source=origin, line=line, field="id")
        cid = str(cid)
        if cid in scores:
            raise InputError(f"case id {cid!r} appears twice", source=origin, line=line, field="id")
        by_source = _field(rec, "scores") or {}
        ids.append(cid)
        scores[cid] = dict(by_source.get(source) or {})
    return ids, scores


def compare_records(
    records: Mapping[str, Any],
    source: str,
    metrics: Iterable[str] | str | None = None,
    *,
    baseline: int | str = 0,
    allow_mismatch: bool = False,
    test: str | Sequence[str] = "randomization",
    permutations: int = 10_000,
    seed: int | None = 42,
    correction: str = "holm",
    alpha: float = 0.05,
    resamples: int = 10_000,
    confidence: float = 0.95,
    labels: Any = None,
    relevance_level: int = 1,
) -> ComparisonResult:
    """Compare RAG systems case by case under verdict ``source``, cases matched by id.

    ``records`` maps a system name to its records (objects, dicts, a records file) or its test set.
    Every metric is computed from the stored verdicts by :func:`rankwise.evaluate_rag` (the numbers
    ``eval-rag`` prints), so any registered metric can be compared, whatever scores the records
    hold. Different case sets are an error unless ``allow_mismatch`` (then only shared cases are
    compared, and the summary says how many each system lost). An undefined value leaves that case
    out of the comparisons of that metric only; the counts are in the summary. What ``evaluate_rag``
    warns about a system's cases (duplicate chunk ids, a cutoff past every list) and its unscorable
    / incomplete cases are warned once, naming the system (``system 'bm25': ...``; identical ones
    merged: ``systems 'a' and 'b': ...``), and kept in ``summary["warnings"]``.

    Example:
        >>> recs = {
        ...     "a": [
        ...         {
        ...             "id": "c1",
        ...             "retrieved_context_ids": ["x", "d1"],
        ...             "reference_context_ids": ["d1"],
        ...         },
        ...         {
        ...             "id": "c2",
        ...             "retrieved_context_ids": ["x", "d2"],
        ...             "reference_context_ids": ["d2"],
        ...         },
        ...     ],
        ...     "b": [
        ...         {
        ...             "id": "c2",
        ...             "retrieved_context_ids": ["d2", "x"],
        ...             "reference_context_ids": ["d2"],
        ...         },
        ...         {
        ...             "id": "c1",
        ...             "retrieved_context_ids": ["d1", "x"],
        ...             "reference_context_ids": ["d1"],
        ...         },
        ...     ],
        ... }
        >>> compare_records(recs, "ids", "mrr").comparison("b", "mrr").delta
        0.5
    """
    from rankwise.metrics.rag import default_rag_metrics

    systems = list(records)
    if len(systems) < 2:
        raise InputError("compare-rag needs at least two record sets", field="records")
    if isinstance(metrics, str):
        metrics = [metrics]
    names = list(metrics) if metrics else None
    if names is None:
        stored = _stored_metric_names(records, source)
        names = stored or default_rag_metrics([1, 3, 5, 10], source)
    results, warned = _evaluate_systems(records, source, names, labels, relevance_level)
    return compare_results(results, source, warned, baseline=baseline, allow_mismatch=allow_mismatch, test=test,
                           permutations=permutations, seed=seed, correction=correction, alpha=alpha,
                           resamples=resamples, confidence=confidence)


def compare_results(results: Mapping[str, Any], source: str, warned: Mapping[str, list[str]] | None = None, *,
                    baseline: int | str = 0, allow_mismatch: bool = False, test: str | Sequence[str] = "randomization",
                    permutations: int = 10_000, seed: int | None = 42, correction: str = "holm", alpha: float = 0.05,
                    resamples: int = 10_000, confidence: float = 0.95) -> ComparisonResult:
    """:func:`compare_records` from results :func:`rankwise.evaluate_rag` already gave (one per
    system, same metrics), and what it warned for each system (``warned``; its case notes are added
    here), so that a caller that scored the systems itself (a sweep) does not score them again.

    Example:
        >>> from rankwise.metrics.rag import evaluate_rag
        >>> a = evaluate_rag(
        ...     [
        ...         {
        ...             "id": "c1",
        ...             "retrieved_context_ids": ["x", "d1"],
        ...             "reference_context_ids": ["d1"],
        ...         }
        ...     ],
        ...     "ids",
        ...     metrics=["mrr"],
        ... )
        >>> b = evaluate_rag(
        ...     [
        ...         {
        ...             "id": "c1",
        ...             "retrieved_context_ids": ["d1", "x"],
        ...             "reference_context_ids": ["d1"],
        ...         }
        ...     ],
        ...     "ids",
        ...     metrics=["mrr"],
        ... )
        >>> compare_results({"a": a, "b": b}, "ids").comparison("b", "mrr").delta
        0.5
    """
    systems = list(results)
    if len(systems) < 2:
        raise InputError("compare-rag needs at least two record sets", field="records")
    metric_names = list(results[systems[0]].names)
    for s in systems[1:]:  # the values are compared column by column: the same metrics in the same order
        if list(results[s].names) != metric_names:
            raise InputError(f"system {s!r} was scored with metrics {list(results[s].names)}, system "
                             f"{systems[0]!r} with {metric_names}: score every system with the same metrics",
                             field="results")
    warned = {s: [*(warned or {}).get(s, []), *case_notes(results[s].summary)] for s in systems}
    case_ids, left_out = _shared_cases(results, allow_mismatch)
    values, undefined = _aligned_values(results, case_ids, metric_names)
    summary: dict[str, Any] = {"queries": len(case_ids), "source": source,
                               "r_basis": results[systems[0]].summary.get("r_basis")}
    if any(left_out.values()):
        summary["left_out_not_in_every_set"] = left_out
    if undefined:
        summary["undefined"] = undefined
        why = {m: w for r in results.values() for m, w in (r.summary.get("undefined_why") or {}).items()
               if any(m in per for per in undefined.values())}
        if why:  # when each metric is undefined, as eval-rag says it (calls_to_evidence: evidence never complete)
            summary["undefined_why"] = why
    summary.update(_diagnoses(results))
    named = name_warnings(warned)
    if named:
        summary["warnings"] = named
        for line in named:
            warn(line)
    return compare_per_query(values, case_ids, metric_names, baseline=baseline, test=test,
                             permutations=permutations, seed=seed, correction=correction, alpha=alpha,
                             resamples=resamples, confidence=confidence, summary=summary)


def _diagnoses(results: Mapping[str, Any]) -> dict[str, dict]:
    """Per system, the failure-class counts and the headroom (docs/failures.md) of an
    ``evaluate_rag`` result; nothing for results without records (runs scored against qrels)."""
    from rankwise.analysis.diagnosis import diagnose

    out: dict[str, dict] = {"failure_classes": {}, "headroom": {}}
    for s, r in results.items():
        if getattr(r, "records", None) is None or not hasattr(r, "relevance"):
            return {}
        if "failure_classes" not in r.summary:
            diagnose(r)
        out["failure_classes"][s] = r.summary["failure_classes"]
        out["headroom"][s] = r.summary["headroom"]
    return out


def _evaluate_systems(records: Mapping[str, Any], source: str, names: list[str], labels: Any,
                      relevance_level: int) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Each system's :func:`~rankwise.metrics.rag.evaluate_rag` result and the warnings it gave; an
    input error in records given as objects names the system."""
    from rankwise.metrics.rag import evaluate_rag

    results = {}
    warned: dict[str, list[str]] = {}
    for s in records:  # each system's warnings, named by the caller
        with collect_warnings() as warned[s]:
            try:
                results[s] = evaluate_rag(records[s], source, metrics=names, labels=labels,
                                          relevance_level=relevance_level, system=s)
            except InputError as exc:  # records given as objects: name the system the problem is in
                if exc.source is not None:
                    raise
                raise InputError(exc.problem, source=f"system {s!r}", line=exc.line, field=exc.field) from None
    return results, warned


def _shared_cases(results: Mapping[str, Any], allow_mismatch: bool) -> tuple[list[str], dict[str, int]]:
    """The case ids every system holds (the first system's order) and how many each system has
    beyond them; different case sets raise unless ``allow_mismatch``."""
    first_ids = list(next(iter(results.values())).per_query.query_ids)
    common = set(first_ids)
    for r in results.values():
        common &= set(r.per_query.query_ids)
    left_out = {s: len(r.per_query.query_ids) - len(common) for s, r in results.items()}
    if any(left_out.values()) and not allow_mismatch:
        detail = []
        for s, r in results.items():
            extra = [i for i in r.per_query.query_ids if i not in common]
            if extra:
                detail.append(f"{s} has {count(len(extra), 'case')} not in every set (e.g. {extra[0]!r})")
        raise InputError("record sets hold different cases: " + "; ".join(detail)
                         + " (allow_mismatch compares the shared ones)", field="id")
    case_ids = [c for c in first_ids if c in common]
    if not case_ids:
        raise InputError("the record sets share no case id", field="id")
    return case_ids, left_out


def _aligned_values(results: Mapping[str, Any], case_ids: list[str], metric_names: list[str]
                    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, int]]]:
    """Each system's per-case values in ``case_ids`` order, and its undefined values counted per
    metric."""
    values: dict[str, np.ndarray] = {}
    undefined: dict[str, dict[str, int]] = {}
    for s, r in results.items():
        index = {q: i for i, q in enumerate(r.per_query.query_ids)}
        arr = r.per_query.values[[index[c] for c in case_ids]]
        values[s] = arr
        nan = np.isnan(arr).sum(axis=0)
        if nan.any():
            undefined[s] = {m: int(n) for m, n in zip(metric_names, nan.tolist(), strict=True) if n}
    return values, undefined


def _stored_metric_names(records: Mapping[str, Any], source: str) -> list[str]:
    """Metric names scored under ``source`` in every case of every in-memory record set (file
    order)."""
    shared: list[str] | None = None
    for recs in records.values():
        if not isinstance(recs, (list, tuple)):
            return []
        names: list[str] = []
        for rec in recs:
            for m in (_field(rec, "scores") or {}).get(source) or {}:
                if m not in names:
                    names.append(m)
        shared = names if shared is None else [m for m in shared if m in names]
    return shared or []


def load_record_sets(paths: Sequence[Any], names: Sequence[str] | None = None, *, source: str = "containment",
                     labels: Any = None, relevance_level: int = 1,
                     min_evidence_chars: int | None = None) -> dict[str, list[Any]]:
    """Records with ``source`` verdicts, by system name, from records files or test sets (judged now
    when they hold no such verdicts: :func:`rankwise.metrics.rag.judged_records`;
    ``min_evidence_chars`` as there: given, it re-judges stored containment/fuzzy verdicts; a
    labelling sheet's rows by system name)."""
    from rankwise.metrics.rag import judged_records

    items = list(paths)
    system_labels = system_names(items, names)
    sets: dict[str, list[Any]] = {}
    warned: dict[str, list[str]] = {}
    for label, p in zip(system_labels, items, strict=True):
        with collect_warnings() as warned[label]:
            extra = {} if min_evidence_chars is None else {"min_evidence_chars": min_evidence_chars}
            sets[label] = judged_records(p, source, labels=labels, relevance_level=relevance_level, system=label,
                                         **extra)[0]
    for line in name_warnings(warned):
        warn(line)
    return sets
