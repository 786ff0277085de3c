"""Prediction-powered inference (PPI++): a judge's numbers corrected by a few human labels
(docs/ppi.md).

n cases carry both a human and a judge value of a metric (the labelled set), N more carry only the
judge's (the unlabelled set: the judged cases *without* human labels, as in Angelopoulos et al.
2023, whose variance formula assumes the two sets independent; counting the labelled cases in both
would correlate the terms). With the power-tuning weight λ (Angelopoulos, Duchi, Zrnic 2023,
"PPI++"):

    θ̂ = λ·mean(f̃) + mean(Y − λ·f)                       (f̃: judge on unlabelled, f, Y: judge,
    human on labelled) Var(θ̂) = λ²·Var(f̃)/N + Var(Y − λ·f)/n              (sample variances, ddof
    = 1) λ̂ = Cov(Y, f) / ((1 + n/N)·Var(f ∪ f̃))  clipped to [0, 1]

λ = 0 is the human-only mean; λ = 1 is classic PPI. The interval is the normal one, θ̂ ± z·√Var. The
estimate is unbiased whatever the judge's bias; the interval is never wider than the human-only one
up to the noise of estimating λ. A paired comparison of two systems is the same estimate on per-case
differences.

Example:
    >>> est = ppi_mean([1, 0, 1, 1], [1, 0, 1, 0], [1, 1, 0, 1, 0, 1, 1, 0])
    >>> round(est.estimate, 4), round(est.lam, 4), est.n, est.N
    (0.8024, 0.419, 4, 8)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from rankwise.errors import InputError, warn

__all__ = ["PPIEstimate", "PPIResult", "ppi_mean", "ppi_batch", "ppi_records", "ppi_compare", "plan_labels",
           "LabelPlan", "paired_values", "labels_for_system", "UNLABELLED_SET", "plan_from_records", "ppi_gate",
           "PPIGate", "metric_range", "dataclass_copy"]

UNLABELLED_SET = ("the judged cases without human labels (the paper's independent unlabelled set; the labelled "
                  "cases enter through the rectifier only)")


@dataclass
class PPIEstimate:
    """One metric's PPI++ estimate beside the judge-only and human-only means.

    Attributes:
        metric: the metric (or ``A − B`` difference) estimated.
        n, N: labelled cases (human and judge) and unlabelled cases (judge only).
        judge_mean: the judge's mean over all n + N cases (what the judge alone reports).
        human_mean, human_ci: the human mean over the n labelled cases and its normal interval.
        estimate, ci, se: the PPI++ estimate, its interval and standard error.
        lam: the power-tuning weight λ (0: human only; 1: classic PPI).
        effective_n: human labels that alone would give an interval this narrow.
        note: why an estimate or interval is missing (None when all are given).
    """

    metric: str
    n: int
    N: int
    alpha: float
    judge_mean: float | None = None
    human_mean: float | None = None
    human_ci: tuple[float, float] | None = None
    human_se: float | None = None
    estimate: float | None = None
    ci: tuple[float, float] | None = None
    se: float | None = None
    lam: float | None = None
    effective_n: float | None = None
    note: str | None = None
    #: the range the intervals were clipped to (the metric's, or a difference's), when a normal
    #: interval passed it
    clipped_to: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (intervals as two-element lists, None where undefined)."""
        out = dict(self.__dict__)
        for key in ("ci", "human_ci", "clipped_to"):
            out[key] = list(out[key]) if out[key] is not None else None
        return out


def _z(alpha: float) -> float:
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be between 0 and 1, got {alpha}", field="alpha")
    return NormalDist().inv_cdf(1 - alpha / 2)


def ppi_batch(y: Any, f: Any, f_unl: Any, lam: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PPI++ estimate, standard error and λ for many data sets at once (rows of 2-D arrays).

    ``y``, ``f``: (..., n) human and judge values on the labelled cases; ``f_unl``: (..., N) judge
    values on the unlabelled ones (N ≥ 2, n ≥ 2). ``lam`` fixes λ (1: classic PPI); None tunes it.
    Used by simulations.

    Example:
        >>> est, se, lam = ppi_batch([[1, 0, 1]], [[1, 0, 0]], [[1, 0, 1, 1]], lam=1.0)
        >>> float(est[0]), float(lam[0])
        (1.0833333333333333, 1.0)
    """
    y, f, fu = (np.asarray(a, dtype=float) for a in (y, f, f_unl))
    n, big_n = y.shape[-1], fu.shape[-1]
    if lam is None:
        both = np.concatenate([f, fu], axis=-1)
        var_f = both.var(axis=-1, ddof=1)
        cov = ((y - y.mean(axis=-1, keepdims=True)) * (f - f.mean(axis=-1, keepdims=True))).sum(axis=-1) / (n - 1)
        denom = (1 + n / big_n) * var_f
        with np.errstate(divide="ignore", invalid="ignore"):
            lam_arr = np.where(denom > 0, cov / np.where(denom > 0, denom, 1.0), 0.0)
        lam_arr = np.clip(lam_arr, 0.0, 1.0)
    else:
        lam_arr = np.full(y.shape[:-1], float(lam))
    lk = lam_arr[..., None]
    rect = y - lk * f
    est = lam_arr * fu.mean(axis=-1) + rect.mean(axis=-1)
    var = lam_arr ** 2 * fu.var(axis=-1, ddof=1) / big_n + rect.var(axis=-1, ddof=1) / n
    return est, np.sqrt(var), lam_arr


def ppi_mean(y: Sequence[float], f: Sequence[float], f_unl: Sequence[float], *, alpha: float = 0.05,
             metric: str = "metric", lam: float | None = None,
             value_range: tuple[float, float] | None = None) -> PPIEstimate:
    """The PPI++ estimate of a mean with its (1 − alpha) interval, beside the human-only and
    judge-only means.

    ``y`` and ``f`` are the human and judge values of the n labelled cases (same order); ``f_unl``
    the judge values of the N unlabelled cases. An undefined estimate (n < 2, zero variance) gives
    no interval and a sentence why in ``note``, never NaN. With ``value_range`` (the values'
    possible range, e.g. (0, 1)), an interval the normal approximation stretches past it is clipped
    to it, and ``note`` and ``clipped_to`` say so.

    Example:
        >>> e = ppi_mean([1, 0, 1, 1], [1, 0, 1, 1], [1, 0] * 10)
        >>> round(e.estimate, 4), e.ci is not None, e.effective_n > e.n
        (0.549, True, True)
    """
    z = _z(alpha)
    y_a, f_a, fu_a = (np.asarray(a, dtype=float).ravel() for a in (y, f, f_unl))
    if len(y_a) != len(f_a):
        raise InputError(f"{len(y_a)} human values but {len(f_a)} judge values on the labelled cases")
    for name, arr in (("human", y_a), ("judge", f_a), ("judge (unlabelled)", fu_a)):
        if not np.all(np.isfinite(arr)):
            raise InputError(f"the {name} values hold a missing or non-finite number")
    n, big_n = len(y_a), len(fu_a)
    every = np.concatenate([f_a, fu_a])
    out = PPIEstimate(metric, n, big_n, alpha, judge_mean=float(every.mean()) if len(every) else None)
    if n == 0:
        out.note = "no case has human labels: only the judge's mean is known, with no correction and no interval"
        return out
    out.human_mean = float(y_a.mean())
    if n < 2:
        out.note = "one labelled case: a variance (and so any interval) needs at least 2 labelled cases"
        return out
    sd_y = float(y_a.std(ddof=1))
    out.human_se = sd_y / math.sqrt(n)
    if sd_y > 0:
        out.human_ci = (out.human_mean - z * out.human_se, out.human_mean + z * out.human_se)
    if big_n < 2:
        out.lam, out.estimate, out.se = 0.0, out.human_mean, out.human_se
        why = "every case is labelled" if big_n == 0 else "one case is unlabelled"
        out.note = f"{why}: the judge adds nothing, the PPI estimate is the human mean"
    else:
        est, se, lam_a = ppi_batch(y_a, f_a, fu_a, lam)
        out.estimate, out.se, out.lam = float(est), float(se), float(lam_a)
    if out.se > 0:
        out.ci = (out.estimate - z * out.se, out.estimate + z * out.se)
        if sd_y > 0:
            out.effective_n = sd_y ** 2 / out.se ** 2
    else:
        out.note = ("zero variance: every labelled case has the same human value and the judge does not vary; "
                    "an interval of width 0 would claim certainty, so none is given")
    if sd_y == 0 and out.note is None:
        out.note = "every labelled case has the same human value: the human-only interval is undefined"
    if value_range is not None:
        _clip(out, value_range)
    return out


def _clip(out: PPIEstimate, value_range: tuple[float, float]) -> None:
    """Clip the intervals to the values' possible range, saying so in the note."""
    lo, hi = value_range
    clipped = False
    for key in ("ci", "human_ci"):
        ci = getattr(out, key)
        if ci is not None and (ci[0] < lo or ci[1] > hi):
            setattr(out, key, (max(ci[0], lo), min(ci[1], hi)))
            clipped = True
    if clipped:
        out.clipped_to = (lo, hi)
        said = f"interval clipped to [{lo:g}, {hi:g}], the values' possible range (the normal interval passed it)"
        out.note = f"{out.note}; {said}" if out.note else said


def metric_range(name: str, *, difference: bool = False) -> tuple[float, float] | None:
    """The possible range of a metric's per-case values (of a difference of two, with
    ``difference``), or None.

    Example:
        >>> (
        ...     metric_range("ndcg@10"),
        ...     metric_range("ndcg@10", difference=True),
        ...     metric_range("no_such_metric"),
        ... )
        ((0.0, 1.0), (-1.0, 1.0), None)
    """
    from rankwise.metrics.registry import parse_measure

    try:
        found = parse_measure(name).metric.value_range
    except InputError:  # a name the registry does not parse: no range, no clipping
        return None
    if found is None or not all(math.isfinite(v) for v in found):
        return None
    lo, hi = float(found[0]), float(found[1])
    return (lo - hi, hi - lo) if difference else (lo, hi)


@dataclass
class PPIResult:
    """What :func:`ppi_records` and :func:`ppi_compare` return: one :class:`PPIEstimate` per metric.

    Attributes:
        estimates: metric (or ``system − baseline: metric``) -> estimate.
        judge, human: the verdict sources of f and Y.
        summary: cases labelled, unlabelled, left out (and why), the unlabelled set's definition,
            alpha.
    """

    estimates: dict[str, PPIEstimate]
    judge: str
    human: str
    summary: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready result."""
        return {"judge": self.judge, "human": self.human, "summary": self.summary,
                "estimates": {k: v.to_dict() for k, v in self.estimates.items()}}


def labels_for_system(labels: Any, system: str, records: Sequence[Any], systems: Sequence[str]) -> list[Any]:
    """The labels of one system: rows whose ``system`` column names it, and rows without a system
    whose chunk id was retrieved for that question (a chunk's relevance does not depend on who
    retrieved it).

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord
        >>> recs = [CaseRecord("q1", chunks=[ChunkRecord(rank=1, id="c1")])]
        >>> rows = [{"query_id": "q1", "chunk_id": "c1", "verdict": 1},
        ...         {"query_id": "q1", "chunk_id": "c9", "verdict": 0}]
        >>> [lab.chunk_id for lab in labels_for_system(rows, "a", recs, ["a", "b"])]
        ['c1']
    """
    from rankwise.relevance.human import read_labels

    rows = read_labels(labels)
    if len(systems) == 1:
        return [lab for lab in rows if lab.system in (None, system)]
    ids = {r.id: {c.id for c in r.chunks} for r in records}
    out = []
    for lab in rows:
        if lab.system is not None and lab.system not in systems:
            raise InputError(f"system {lab.system!r} is not one of the compared systems {list(systems)}",
                             source=lab.source, line=lab.line, field="system")
        if lab.system == system:
            out.append(lab)
        elif lab.system is None:
            if lab.chunk_id is None:
                raise InputError("a label without chunk_id needs a system column when several systems are "
                                 "compared (ranks differ between systems)", source=lab.source, line=lab.line,
                                 field="system")
            if lab.chunk_id in ids.get(lab.case_id, ()):
                out.append(dataclass_copy(lab))
    return out


def dataclass_copy(obj: Any) -> Any:
    """A shallow copy of a dataclass instance (a label placed in several systems)."""
    from dataclasses import replace

    return replace(obj)


def _case_values(records: list[Any], judge: str, human: str, labels: Any, *, k: Any, metrics: Any,
                 unscorable: str, incomplete: str, relevance_level: int, judging: Mapping[str, Any],
                 system: str | None = None) -> tuple[list[str], dict, dict, dict[str, Any]]:
    """Per-case metric values under the judge (every scored case) and under humans (fully labelled
    cases); partially labelled cases (counted as unlabelled) are warned about here, once for every
    PPI command."""
    from rankwise.metrics.rag import DEFAULT_KS, default_rag_metrics, evaluate_rag, judged_records

    if judge == human:
        raise InputError(f"the judge source and the human source are both {judge!r}; PPI needs two sources "
                         "(e.g. --relevance llm with --labels human.csv)", field="relevance")
    if labels is None:
        from rankwise.data.records import as_records

        records = as_records(records)
        if not any(human in r.sources() for r in records):
            raise InputError(f"PPI needs human labels: pass --labels (a CSV/JSONL of query_id, chunk_id or rank, "
                             f"verdict; `rankwise sample-labels` writes one) or records holding {human!r} verdicts",
                             field="labels")
    records, _ = judged_records(records, human, labels=labels, relevance_level=relevance_level)
    if metrics is None:
        ks = DEFAULT_KS if k is None else ([k] if isinstance(k, int) else list(k))
        metrics = default_rag_metrics(ks, human)
    judged = evaluate_rag(records, judge, metrics=metrics, k=k, unscorable=unscorable, incomplete=incomplete,
                          relevance_level=relevance_level, **judging)
    names = [m.name for m in judged.measures]
    labelled, partial = [], []
    for r in records:
        status = r.status.get(human) or "missing"
        have = sum(1 for c in r.chunks if (v := c.verdicts.get(human)) is not None and v.status == "ok")
        if status == "ok" and r.chunks and r.id in judged.per_query:
            labelled.append(r.id)
        elif have:
            partial.append(r.id)
    if not labelled:
        raise InputError(f"no case has a {human!r} verdict on every retrieved chunk; label whole cases "
                         "(`rankwise sample-labels` writes a sheet)", field="labels")
    keep = set(labelled)
    human_res = evaluate_rag([r for r in records if r.id in keep], human, metrics=names, k=k,
                             unscorable=unscorable, incomplete="skip", relevance_level=relevance_level)
    left_out = sorted(set(r.id for r in records) - set(judged.per_query))
    info = {"cases": len(records), "labelled": len(labelled), "unlabelled": len(judged.per_query) - len(labelled),
            "partially_labelled": len(partial), "partially_labelled_cases": partial[:20],
            "left_out": len(left_out), "left_out_cases": left_out[:20]}
    _warn_partial(info, system)
    return names, judged.per_query, human_res.per_query, info


def ppi_records(testset: Any, judge: str = "llm", *, labels: Any = None, human: str = "human",
                metrics: Iterable[str] | str | None = None, k: int | Iterable[int] | None = None,
                alpha: float = 0.05, unscorable: str = "skip", incomplete: str = "zero",
                relevance_level: int = 1, system: str | None = None, **judging: Any) -> PPIResult:
    """PPI++ means of RAG metrics: judge verdicts on every case, human verdicts on a labelled
    subset.

    Per-case values come from :func:`rankwise.metrics.rag.evaluate_rag` (the same numbers as
    ``eval-rag``), under ``judge`` for every case and under ``human`` for the cases whose every
    chunk has a human verdict. ``labels`` are human labels (CSV/JSONL or rows); without them the
    records' stored ``human`` verdicts are used. Partially labelled cases count as unlabelled
    (reported). A labelling sheet of several systems (``system`` column) is narrowed to ``system``.

    Example:
        >>> rows = [{"id": f"q{i}", "retrieved_contexts": ["alpha beta", "gamma"],
        ...          "reference_contexts": ["alpha beta" if i % 3 else "delta"]} for i in range(6)]
        >>> labs = [{"query_id": f"q{i}", "rank": r, "verdict": int(r == 1 and i % 3 > 0)}
        ...         for i in range(4) for r in (1, 2)]
        >>> res = ppi_records(rows, "containment", labels=labs, metrics=["hit_rate@1"])
        >>> e = res.estimates["hit_rate@1"]
        >>> (e.n, e.N, round(e.judge_mean, 4), e.human_mean)
        (4, 2, 0.6667, 0.5)
    """
    labels = _one_system(labels, system)
    names, judged, humans, info = _case_values(testset, judge, human, labels, k=k, metrics=metrics,
                                               unscorable=unscorable, incomplete=incomplete,
                                               relevance_level=relevance_level, judging=judging)
    lab = [q for q in judged if q in humans]
    unl = [q for q in judged if q not in humans]
    estimates = {}
    for m in names:
        estimates[m] = ppi_mean([humans[q][m] for q in lab], [judged[q][m] for q in lab],
                                [judged[q][m] for q in unl], alpha=alpha, metric=m, value_range=metric_range(m))
    summary = {**info, "alpha": alpha, "unlabelled_set": UNLABELLED_SET}
    return PPIResult(estimates, judge, human, summary)


def _one_system(labels: Any, system: str | None) -> Any:
    """The labels of ``system`` when the labels name several systems (a multi-system labelling
    sheet)."""
    if labels is None:
        return None
    from rankwise.relevance.human import labels_of_system

    return labels_of_system(labels, system)


def _warn_partial(summary: dict[str, Any], system: str | None = None) -> None:
    """The one warning of partially labelled cases (kept in ``summary["warnings"]``), naming the
    system when several are compared."""
    n = summary.get("partially_labelled")
    if n:
        whose = f"{system}: " if system else ""
        warn(f"{whose}{n} case{'s have' if n != 1 else ' has'} human labels on some chunks only; "
             f"{'they count' if n != 1 else 'it counts'} as unlabelled (label every chunk of a case), "
             f"e.g. {summary['partially_labelled_cases'][:3]}", summary=summary)


def paired_values(a: Mapping[str, Mapping[str, float]], b: Mapping[str, Mapping[str, float]],
                  metric: str) -> dict[str, float]:
    """Per-case differences ``a − b`` of one metric over the cases both hold.

    Example:
        >>> paired_values({"q1": {"m": 1.0}, "q2": {"m": 0.5}}, {"q1": {"m": 0.25}}, "m")
        {'q1': 0.75}
    """
    return {q: a[q][metric] - b[q][metric] for q in a if q in b}


def ppi_compare(sets: Mapping[str, Any], judge: str = "llm", *, labels: Any = None, human: str = "human",
                baseline: str | int = 0, metrics: Iterable[str] | str | None = None,
                k: int | Iterable[int] | None = None, alpha: float = 0.05, unscorable: str = "skip",
                incomplete: str = "zero", relevance_level: int = 1, allow_mismatch: bool = False) -> PPIResult:
    """Paired PPI++ of each system's mean minus the baseline's, per metric.

    A case is labelled for a pair when both systems' lists of it are fully human-labelled; the
    estimate is :func:`ppi_mean` on the per-case differences (human on labelled, judge on every
    case). Keys of the result are ``"system − baseline: metric"``.
    """
    names_sys = list(sets)
    if len(names_sys) < 2:
        raise InputError("a comparison needs at least two systems (records files)")
    base = names_sys[int(baseline)] if str(baseline).isdigit() else str(baseline)
    if base not in sets:
        raise InputError(f"baseline {baseline!r} is none of the systems {names_sys}", field="baseline")
    per: dict[str, tuple] = {}
    metric_names: list[str] | None = None
    summaries = {}
    for name, recs in sets.items():
        own = labels_for_system(labels, name, recs, names_sys) if labels is not None else None
        mnames, judged, humans, info = _case_values(recs, judge, human, own, k=k, metrics=metrics,
                                                    unscorable=unscorable, incomplete=incomplete,
                                                    relevance_level=relevance_level, judging={}, system=name)
        metric_names = metric_names or mnames
        per[name] = (judged, humans)
        summaries[name] = info
    ids = {name: set(v[0]) for name, v in per.items()}
    if not allow_mismatch and len({frozenset(s) for s in ids.values()}) > 1:
        diff = sorted(set.union(*ids.values()) - set.intersection(*ids.values()))
        raise InputError(f"the systems hold different cases ({len(diff)} not in every file, e.g. {diff[:3]}); "
                         "pass --allow-mismatch to compare the shared cases", field="records")
    estimates = {}
    bj, bh = per[base]
    for name in names_sys:
        if name == base:
            continue
        sj, sh = per[name]
        for m in metric_names or []:
            dj = paired_values(sj, bj, m)
            dh = paired_values(sh, bh, m)
            lab = [q for q in dj if q in dh]
            unl = [q for q in dj if q not in dh]
            key = f"{name} − {base}: {m}"
            estimates[key] = ppi_mean([dh[q] for q in lab], [dj[q] for q in lab], [dj[q] for q in unl],
                                      alpha=alpha, metric=key, value_range=metric_range(m, difference=True))
    summary = {"baseline": base, "systems": summaries, "alpha": alpha, "unlabelled_set": UNLABELLED_SET,
               "labelled_pairs": "cases whose lists are fully human-labelled in both systems"}
    return PPIResult(estimates, judge, human, summary)


MIN_LABELS = 30


@dataclass
class LabelPlan:
    """How many human labels reach a half-width, from a pilot (see :func:`plan_labels`)."""

    metric: str
    half_width: float
    total: int
    pilot: int
    ppi_labels: int | None
    human_labels: int | None
    lam: float | None
    price_per_label: float | None = None
    note: str | None = None
    #: what humans alone would need when that is more than the cases there are (``human_labels`` is
    #: then None)
    human_labels_needed: int | None = None

    def cost(self, labels: int | None) -> float | None:
        """Price of ``labels`` labels (None without a price or a count)."""
        return None if labels is None or self.price_per_label is None else labels * self.price_per_label

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready plan, with the costs."""
        out = dict(self.__dict__)
        out.update(ppi_cost=self.cost(self.ppi_labels), human_cost=self.cost(self.human_labels),
                   all_cost=self.cost(self.total))
        return out


def plan_labels(y: Sequence[float], f: Sequence[float], f_all: Sequence[float], half_width: float, *,
                alpha: float = 0.05, metric: str = "metric", price_per_label: float | None = None,
                min_labels: int = MIN_LABELS) -> LabelPlan:
    """Human labels needed for a PPI++ interval of half-width ``half_width`` (and for human labels
    alone).

    ``y``, ``f``: the pilot's human and judge values (cases with both sources); ``f_all``: the judge
    values of every judged case (pilot included), whose count is the most one can label. Variances
    and the covariance are the pilot's; λ is re-tuned for every n (labelled n, unlabelled total −
    n). Never fewer than ``min_labels`` (the interval is a normal approximation, and λ is estimated
    from the labels).

    Example:
        >>> p = plan_labels([1, 0, 1, 0, 1, 1], [1, 0, 1, 0, 1, 0], [1, 0] * 500, 0.05)
        >>> p.ppi_labels < p.human_labels, p.human_labels
        (True, 410)
    """
    if not half_width > 0:
        raise InputError(f"the half-width must be > 0, got {half_width}", field="half-width")
    z = _z(alpha)
    y_a, f_a, fa = (np.asarray(a, dtype=float).ravel() for a in (y, f, f_all))
    total = len(fa)
    plan = LabelPlan(metric, half_width, total, len(y_a), None, None, None, price_per_label)
    if len(y_a) < 2:
        plan.note = "the pilot needs at least 2 cases with both human and judge values"
        return plan
    var_y = float(y_a.var(ddof=1))
    var_f = float(fa.var(ddof=1)) if total > 1 else 0.0
    cov = float(np.cov(y_a, f_a, ddof=1)[0, 1])
    if var_y == 0:
        plan.note = "every pilot case has the same human value: the variance, and so the plan, is undefined"
        return plan
    plan.human_labels = math.ceil((z ** 2) * var_y / half_width ** 2)
    n = np.arange(min(max(min_labels, 2), max(total - 1, 2)), max(total - 1, 2) + 1, dtype=float)
    unl = np.maximum(total - n, 1)
    lam = np.clip(cov / ((1 + n / unl) * var_f), 0, 1) if var_f > 0 else np.zeros_like(n)
    var = lam ** 2 * var_f / unl + (var_y - 2 * lam * cov + lam ** 2 * float(f_a.var(ddof=1))) / n
    ok = np.nonzero(z * np.sqrt(np.maximum(var, 0)) <= half_width)[0]
    every = z * math.sqrt(var_y / total)
    notes = []
    if len(ok):
        plan.ppi_labels = int(n[ok[0]])
        plan.lam = float(lam[ok[0]])
    else:
        notes.append(f"no number of labels among the {total} judged cases reaches ±{half_width:g} (labelling "
                     f"every case gives ±{every:.4f}): judge more cases, or accept a wider interval")
    if plan.ppi_labels == max(min_labels, 2) and min_labels > 2:
        notes.append(f"{min_labels} labels at least: the interval is a normal approximation and λ is estimated")
    if plan.human_labels > total:  # more labels than cases exist: not a plan, a bound
        plan.human_labels_needed, plan.human_labels = plan.human_labels, None
        notes.append(f"humans alone would need {plan.human_labels_needed} labels for ±{half_width:g}, more than "
                     f"the {total} cases there are (labelling all {total} gives ±{every:.4f})")
    plan.note = "; ".join(notes) or None
    return plan


def plan_from_records(testset: Any, judge: str = "llm", *, labels: Any = None, human: str = "human",
                      metrics: Iterable[str] | str | None = None, half_width: float = 0.05, alpha: float = 0.05,
                      price_per_label: float | None = None, system: str | None = None) -> list[LabelPlan]:
    """:func:`plan_labels` for each metric, the pilot being the records' fully labelled cases.

    Example:
        >>> rows = [
        ...     {
        ...         "id": f"q{i}",
        ...         "retrieved_contexts": ["alpha beta"],
        ...         "reference_contexts": ["alpha beta" if i % 2 else "delta"],
        ...     }
        ...     for i in range(400)
        ... ]
        >>> labs = [{"query_id": f"q{i}", "rank": 1, "verdict": i % 2} for i in range(10)]
        >>> p = plan_from_records(
        ...     rows, "containment", labels=labs, metrics=["hit_rate@1"], half_width=0.1
        ... )[0]
        >>> p.pilot, p.total, p.ppi_labels < p.human_labels
        (10, 400, True)
    """
    names, judged, humans, _ = _case_values(testset, judge, human, _one_system(labels, system), k=None,
                                            metrics=metrics, unscorable="zero", incomplete="zero",
                                            relevance_level=1, judging={})
    lab = [q for q in judged if q in humans]
    return [plan_labels([humans[q][m] for q in lab], [judged[q][m] for q in lab], [judged[q][m] for q in judged],
                        half_width, alpha=alpha, metric=m, price_per_label=price_per_label) for m in names]


@dataclass
class PPIGate:
    """A gate decided by paired PPI: per metric, the estimated change and whether it fails."""

    result: PPIResult
    max_drop: float
    verdicts: dict[str, str]

    @property
    def exit_code(self) -> int:
        """1 when a metric fails, 2 when one cannot be decided (no interval), else 0."""
        if "fail" in self.verdicts.values():
            return 1
        return 2 if "undecided" in self.verdicts.values() else 0


def ppi_gate(sets: Mapping[str, Any], judge: str = "llm", *, labels: Any = None, metrics: Any = None,
             max_drop: float = 0.01, alpha: float = 0.05, allow_mismatch: bool = False) -> PPIGate:
    """Fail a metric when the PPI estimate of candidate − baseline drops by more than ``max_drop``
    and the drop is significant (the whole interval below 0); undecided when no interval can be
    given. ``sets`` holds two systems: baseline first, candidate second."""
    res = ppi_compare(sets, judge, labels=labels, metrics=metrics, alpha=alpha, baseline=0,
                      allow_mismatch=allow_mismatch)
    verdicts = {}
    for key, e in res.estimates.items():
        if e.ci is None or e.estimate is None:
            verdicts[key] = "undecided"
        elif e.estimate < -max_drop and e.ci[1] < 0:
            verdicts[key] = "fail"
        else:
            verdicts[key] = "pass"
    return PPIGate(res, max_drop, verdicts)
