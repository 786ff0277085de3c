"""How far a judge's labels can stand in for human ones: label agreement and system-level agreement.

Two label sets over the same (query, doc) pairs — human qrels and a judge's qrels — and several
runs: how often the labels agree, and whether the judge ranks the runs as the humans do.

The statistics and their thresholds: docs/judge-check.md.

Example (the judge agrees with the humans except on one pair of four):
    >>> human = {"q1": {"a": 2, "b": 0}, "q2": {"c": 1, "d": 0}}
    >>> judge = {"q1": {"a": 2, "b": 1}, "q2": {"c": 1, "d": 0}}
    >>> runs = {"x": {"q1": ["a", "b"], "q2": ["c"]}, "y": {"q1": ["b", "a"], "q2": ["d", "c"]},
    ...         "z": {"q1": ["b"], "q2": ["d"]}}
    >>> c = judge_check(human, judge, runs, metric="P@1", resamples=200)
    >>> c.labels.n, c.labels.confusion, c.labels.kappa, c.labels.leniency
    (4, [[1, 1], [0, 2]], 0.5, 0.25)
    >>> c.systems.human_means, c.systems.judge_means, c.systems.tau
    ({'x': 1.0, 'y': 0.0, 'z': 0.0}, {'x': 1.0, 'y': 0.5, 'z': 0.5}, 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankwise.errors import InputError

__all__ = ["LabelAgreement", "SystemAgreement", "PairDecision", "JudgeCheck", "judge_check", "kendall_tau_b",
           "kappa_of_confusion", "circularity_warnings"]

TIE = 1e-12  # two mean scores closer than this are tied (as the significance module's TIE_TOLERANCE)


# -----------------------------------------------------------------------------------------------
# arithmetic
def kappa_of_confusion(confusion: Any, weights: str | None = None) -> float | None:
    """Cohen's kappa of a square confusion matrix (rows: rater a, columns: rater b, labels in value
    order, one apart); ``weights`` None (unweighted), ``linear`` or ``quadratic``. None when
    undefined (no pair, or no expected disagreement: one class only). The same value as
    :func:`~rankwise.relevance.agreement.weighted_kappa` on the pairs.

    Example:
        >>> kappa_of_confusion([[1, 1], [0, 2]])
        0.5
        >>> kappa_of_confusion([[3, 0], [0, 0]]) is None  # one class only
        True
    """
    m = np.asarray(confusion, dtype=np.float64)
    n = m.sum()
    if n == 0:
        return None
    k = m.shape[0]
    i, j = np.indices((k, k))
    w = (i != j).astype(np.float64) if weights is None else (np.abs(i - j) if weights == "linear" else (i - j) ** 2)
    expected = np.outer(m.sum(axis=1), m.sum(axis=0)) / n
    den = float((w * expected).sum())
    if den <= 1e-12 * n:
        return None
    return 1.0 - float((w * m).sum()) / den


def _kappas(confusions: np.ndarray, weights: str | None) -> np.ndarray:
    """Kappa of each of a stack of confusion matrices (B x k x k); NaN where undefined (bootstrap
    only)."""
    n = confusions.sum(axis=(1, 2))
    k = confusions.shape[1]
    i, j = np.indices((k, k))
    w = (i != j).astype(np.float64) if weights is None else (i - j) ** 2.0
    expected = confusions.sum(axis=2)[:, :, None] * confusions.sum(axis=1)[:, None, :] / np.maximum(n, 1)[:, None, None]
    den = (w * expected).sum(axis=(1, 2))
    num = (w * confusions).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1.0 - num / den
    out[den <= 1e-12 * np.maximum(n, 1)] = np.nan
    return out


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two score lists (as ``scipy.stats.kendalltau``; values closer than 1e-12
    are tied); None when undefined: fewer than 2 items, or every item tied in one list.

    Example:
        >>> kendall_tau_b([3, 2, 1, 0], [3, 1, 2, 0])  # one discordant pair of 6
        0.6666666666666666
    """
    out = _taus(np.asarray(x, dtype=np.float64)[:, None], np.asarray(y, dtype=np.float64)[:, None])[0]
    return None if np.isnan(out) else float(out)


def _taus(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Tau-b per column of two (systems x replicates) arrays; NaN where undefined."""
    n = x.shape[0]
    if n < 2:
        return np.full(x.shape[1], np.nan)
    a, b = np.triu_indices(n, 1)
    dx, dy = x[a] - x[b], y[a] - y[b]
    sx = np.where(np.abs(dx) > TIE, np.sign(dx), 0.0)
    sy = np.where(np.abs(dy) > TIE, np.sign(dy), 0.0)
    den = np.sqrt((sx != 0).sum(axis=0) * (sy != 0).sum(axis=0).astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (sx * sy).sum(axis=0) / den
    out[den == 0] = np.nan
    return out


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """Percentile interval of the defined bootstrap replicates; None when fewer than half are
    defined."""
    ok = values[~np.isnan(values)]
    if len(ok) < max(1, len(values) // 2):
        return None
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ok, [tail, 1.0 - tail])
    return float(lo), float(hi)


# -------------------------------------------------------------------------------------------------
# results
@dataclass
class LabelAgreement:
    """Agreement of the judge's labels with the human ones over the ``n`` pairs both label.

    ``confusion``: binarised ``[[h0 j0, h0 j1], [h1 j0, h1 j1]]``; ``graded_confusion``: rows the
    human grades ``grades[0]..grades[-1]``, columns the judge's; ``leniency``: mean judge - human
    grade; ``binary_leniency``: judge's relevant share - human's.
    """

    n: int
    topics: int
    human_level: int
    judge_level: int
    confusion: list[list[int]]
    grades: list[int]
    graded_confusion: list[list[int]]
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    graded_kappa: float | None
    graded_kappa_ci: tuple[float, float] | None
    leniency: float
    leniency_ci: tuple[float, float] | None
    binary_leniency: float
    only_human: int = 0
    only_judge: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        for key in ("kappa_ci", "graded_kappa_ci", "leniency_ci"):
            out[key] = list(out[key]) if out[key] is not None else None
        return out


@dataclass
class PairDecision:
    """One pair of systems tested under both label sets: each decision is ``a``, ``b`` (that system
    significantly better) or ``none``; ``flip`` when they differ."""

    a: str
    b: str
    human_p: float
    judge_p: float
    human: str
    judge: str

    @property
    def flip(self) -> bool:
        return self.human != self.judge

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "flip": self.flip}


@dataclass
class SystemAgreement:
    """The systems' mean ``metric`` under each label set, the taus between the two orders, the
    pairwise decisions (``test``, ``alpha``, ``correction``) and how many flip."""

    metric: str
    topics: int
    human_means: dict[str, float]
    judge_means: dict[str, float]
    tau: float | None
    tau_ci: tuple[float, float] | None
    top_k: int
    top_systems: list[str]
    top_k_tau: float | None
    top_k_tau_ci: tuple[float, float] | None
    test: str
    alpha: float
    correction: str
    pairs: list[PairDecision] = field(default_factory=list)

    @property
    def flips(self) -> int:
        return sum(p.flip for p in self.pairs)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "pairs"}
        for key in ("tau_ci", "top_k_tau_ci"):
            out[key] = list(out[key]) if out[key] is not None else None
        out["flips"] = self.flips
        out["pairs"] = [p.to_dict() for p in self.pairs]
        return out


@dataclass
class JudgeCheck:
    """What :func:`judge_check` found: label and system agreement, the bootstrap's settings,
    warnings (circularity) and notes (why an estimate is missing)."""

    labels: LabelAgreement
    systems: SystemAgreement
    resamples: int
    confidence: float
    seed: int
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    judge: dict[str, Any] = field(default_factory=dict)  # who judged, at what cost (filled by the runner)

    def to_dict(self) -> dict[str, Any]:
        return {"labels": self.labels.to_dict(), "systems": self.systems.to_dict(), "resamples": self.resamples,
                "confidence": self.confidence, "seed": self.seed, "warnings": list(self.warnings),
                "notes": list(self.notes), "judge": dict(self.judge)}


# ---------------------------------------------------------------------------------------------- the
# check
def _as_dict(labels: Any, what: str) -> dict[str, dict[str, int]]:
    from rankwise.data.load import load_qrels

    out = load_qrels(labels).to_dict()
    if not out:
        raise InputError(f"the {what} labels hold no judgement", field=what)
    return out


def _compared(human: dict, judge: dict) -> tuple[list[str], list[tuple[str, str, int, int]], int, int]:
    """Topics with a pair both label (sorted), those pairs (topic, doc, human, judge), and the pairs
    only one side labels."""
    pairs, only_h, only_j = [], 0, 0
    for q in sorted(set(human) | set(judge)):
        h, j = human.get(q, {}), judge.get(q, {})
        only_h += len(set(h) - set(j))
        only_j += len(set(j) - set(h))
        pairs.extend((q, d, h[d], j[d]) for d in sorted(set(h) & set(j)))
    return sorted({p[0] for p in pairs}), pairs, only_h, only_j


def _label_agreement(pairs: list, topics: list[str], human_level: int, judge_level: int, idx: np.ndarray,
                     confidence: float, notes: list[str]) -> LabelAgreement:
    tpos = {t: i for i, t in enumerate(topics)}
    lo = min(min(p[2], p[3]) for p in pairs)
    grades = list(range(lo, max(max(p[2], p[3]) for p in pairs) + 1))
    k, T = len(grades), len(topics)
    graded = np.zeros((T, k, k))
    binary = np.zeros((T, 2, 2))
    diff = np.zeros(T)
    for q, _d, h, j in pairs:
        t = tpos[q]
        graded[t, h - lo, j - lo] += 1
        binary[t, int(h >= human_level), int(j >= judge_level)] += 1
        diff[t] += j - h
    n = len(pairs)
    conf, gconf = binary.sum(axis=0), graded.sum(axis=0)
    kappa, gkappa = kappa_of_confusion(conf), kappa_of_confusion(gconf, "quadratic")
    if kappa is None:
        notes.append("binarised kappa: undefined, both label sets give one class only on the compared pairs")
    else:
        for who, marg in (("human", conf.sum(axis=1)), ("judge", conf.sum(axis=0))):
            if (marg == 0).any():
                what = "relevant" if marg[0] == 0 else "not relevant"
                notes.append(f"binarised kappa: the {who} labels call every compared pair {what}, so kappa is 0 "
                             "whatever the other side says")
    if gkappa is None:
        notes.append("graded kappa: undefined, both label sets give one grade only on the compared pairs")
    boot_b, boot_g = binary[idx].sum(axis=1), graded[idx].sum(axis=1)  # (B, k, k)
    counts = boot_b.sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        len_boot = diff[idx].sum(axis=1) / counts
    return LabelAgreement(
        n=n, topics=T, human_level=human_level, judge_level=judge_level,
        confusion=conf.astype(int).tolist(), grades=grades, graded_confusion=gconf.astype(int).tolist(),
        kappa=kappa, kappa_ci=_interval(_kappas(boot_b, None), confidence) if kappa is not None else None,
        graded_kappa=gkappa,
        graded_kappa_ci=_interval(_kappas(boot_g, "quadratic"), confidence) if gkappa is not None else None,
        leniency=float(diff.sum() / n), leniency_ci=_interval(len_boot, confidence),
        binary_leniency=float((conf[0][1] - conf[1][0]) / n))


def _scores(qrels: dict, runs: Mapping[str, Any], metric: str, level: int, topics: list[str]) -> np.ndarray:
    """(systems x topics) per-topic scores of ``metric`` under ``qrels`` (a topic a run lacks scores
    0)."""
    from rankwise.metrics.engine import evaluate

    rows = []
    for run in runs.values():
        r = evaluate(qrels, run, [metric], relevance_level=level)
        col = r.per_query.column(r.names[0])
        pos = {q: i for i, q in enumerate(r.per_query.query_ids)}
        rows.append([float(col[pos[t]]) if t in pos and not np.isnan(col[pos[t]]) else 0.0 for t in topics])
    return np.asarray(rows, dtype=np.float64)


def _decisions(names: list[str], h: np.ndarray, j: np.ndarray, test: str, alpha: float, correction: str,
               permutations: int, seed: int) -> list[PairDecision]:
    from rankwise.analysis.significance import correct_pvalues, paired_test

    pairs = [(a, b) for a in range(len(names)) for b in range(a + 1, len(names))]
    out = []
    ps = {}
    for side, m in (("human", h), ("judge", j)):
        raw = [paired_test(m[a] - m[b], test, permutations=permutations, seed=seed) for a, b in pairs]
        ps[side] = correct_pvalues(raw, correction)
    for i, (a, b) in enumerate(pairs):
        verdicts = []
        for side, m in (("human", h), ("judge", j)):
            p, mean = ps[side][i], float((m[a] - m[b]).mean())
            verdicts.append("none" if not p < alpha else names[a] if mean > 0 else names[b])
        out.append(PairDecision(names[a], names[b], ps["human"][i], ps["judge"][i], *verdicts))
    return out


def _system_agreement(human: dict, judge: dict, runs: Mapping[str, Any], topics: list[str], *, metric: str,
                      human_level: int, judge_level: int, top_k: int, idx: np.ndarray, confidence: float,
                      test: str, alpha: float, correction: str, permutations: int, seed: int,
                      notes: list[str]) -> SystemAgreement:
    from rankwise.metrics.registry import parse_measures

    name = parse_measures([metric])[0].name
    names = list(runs)
    h = _scores(human, runs, metric, human_level, topics)
    j = _scores(judge, runs, metric, judge_level, topics)
    hm, jm = h.mean(axis=1), j.mean(axis=1)
    tau = kendall_tau_b(hm, jm) if len(names) >= 3 else None
    if len(names) < 3:
        notes.append(f"tau: undefined with {len(names)} systems (a ranking of fewer than 3 says nothing)")
    elif tau is None:
        notes.append("tau: undefined, every system has the same mean under one of the label sets")
    order = sorted(range(len(names)), key=lambda i: (-hm[i], names[i]))
    top = order[:min(top_k, len(names))]
    top_tau = kendall_tau_b(hm[top], jm[top]) if len(top) >= 3 else None
    if len(top) < 3:
        notes.append(f"top-{top_k} tau: undefined, it needs at least 3 systems (top {len(top)} here)")
    elif top_tau is None:
        notes.append(f"top-{top_k} tau: undefined, the top {len(top)} systems tie under one of the label sets")
    bh, bj = h[:, idx].mean(axis=2), j[:, idx].mean(axis=2)  # (systems, B)
    tau_ci = _interval(_taus(bh, bj), confidence) if tau is not None else None
    top_ci = _interval(_taus(bh[top], bj[top]), confidence) if top_tau is not None else None
    pairs = _decisions(names, h, j, test, alpha, correction, permutations, seed) if len(names) >= 2 else []
    return SystemAgreement(metric=name, topics=len(topics), human_means=dict(zip(names, hm.tolist(), strict=True)),
                           judge_means=dict(zip(names, jm.tolist(), strict=True)), tau=tau, tau_ci=tau_ci,
                           top_k=top_k, top_systems=[names[i] for i in top], top_k_tau=top_tau, top_k_tau_ci=top_ci,
                           test=test, alpha=alpha, correction=correction, pairs=pairs)


def circularity_warnings(judge_model: str | None, runs: Mapping[str, str | None],
                         reranked_by: Mapping[str, str] | None = None) -> list[str]:
    """A warning per run the judge's own model reranked: said by ``reranked_by`` (run name ->
    model), or by the run's tag or name (``runs``: name -> tag) holding ``llm:MODEL`` (as ``rankwise
    run --rerank llm:MODEL`` is spelled) or the model's name.

    Example:
        >>> w = circularity_warnings(
        ...     "qwen2.5:7b", {"bm25": "bm25", "bm25+llm": None}, {"bm25+llm": "qwen2.5:7b"}
        ... )
        >>> print(*w)
        bm25+llm was reranked by qwen2.5:7b, the judge's model: the judge grades an order it chose itself, so its agreement on this run is circular
    """
    given = dict(reranked_by or {})
    unknown = sorted(set(given) - set(runs))
    if unknown:  # a misspelt run name is said whatever the judge (labels from a file included)
        raise InputError(f"--reranked-by names no run {unknown[0]!r} (runs: {', '.join(runs)})", field="reranked_by")
    if not judge_model:
        return []
    out = []
    low = judge_model.lower()
    for name, tag in runs.items():
        said = given.get(name)
        if said is not None:
            hit = said.removeprefix("llm:").lower() == low
        else:
            hit = any(low in text.lower() for text in (name, tag or "") if text)
        if hit:
            out.append(f"{name} was reranked by {judge_model}, the judge's model: the judge grades an order it "
                       "chose itself, so its agreement on this run is circular")
    return out


def judge_check(human: Any, judge: Any, runs: Mapping[str, Any], *, metric: str = "ndcg@10",
                human_level: int = 1, judge_level: int | None = None, top_k: int = 3, resamples: int = 1000,
                confidence: float = 0.95, seed: int = 42, test: str = "randomization", alpha: float = 0.05,
                correction: str = "holm", permutations: int = 10_000, judge_model: str | None = None,
                reranked_by: Mapping[str, str] | None = None, tags: Mapping[str, str | None] | None = None
                ) -> JudgeCheck:
    """Compare ``judge``'s labels with ``human``'s (qrels: dicts, :class:`~rankwise.data.Qrels` or
    files) over the pairs both label, and the systems' order under each (``runs``: name -> run); see
    the module doc.

    ``judge_level``: the judge's grade from which a pair is relevant (default ``human_level``);
    ``judge_model``, ``reranked_by`` (run name -> model) and ``tags`` (run name -> its TREC tag):
    for the circularity warning. Raises :class:`~rankwise.errors.InputError` when the two share no
    pair or no run is given.

    Example:
        >>> human = {"q1": {"a": 1, "b": 0}, "q2": {"c": 1, "d": 0}}
        >>> c = judge_check(
        ...     human, human, {"x": {"q1": ["a"]}, "y": {"q1": ["b"]}}, metric="P@1", resamples=50
        ... )
        >>> c.labels.kappa, c.systems.tau, c.notes
        (1.0, None, ['tau: undefined with 2 systems (a ranking of fewer than 3 says nothing)', 'top-3 tau: undefined, it needs at least 3 systems (top 2 here)'])
    """
    from rankwise.analysis.significance import CORRECTIONS, TESTS

    if test not in TESTS:
        raise InputError(f"unknown test {test!r}; choose from {', '.join(TESTS)}", field="test")
    if correction not in CORRECTIONS:
        raise InputError(f"unknown correction {correction!r}; choose from {', '.join(CORRECTIONS)}", field="correction")
    if not 0 < alpha < 1 or not 0 < confidence < 1:
        raise InputError("alpha and confidence must be between 0 and 1", field="alpha")
    if resamples < 1 or top_k < 1:
        raise InputError("resamples and top-k must be >= 1", field="resamples" if resamples < 1 else "top_k")
    if not runs:
        raise InputError("give at least one run", field="runs")
    judge_level = human_level if judge_level is None else judge_level
    h, j = _as_dict(human, "human"), _as_dict(judge, "judge")
    topics, pairs, only_h, only_j = _compared(h, j)
    if not pairs:
        raise InputError("the human and the judge's labels share no (query, doc) pair: nothing to compare",
                         field="judge")
    notes: list[str] = []
    idx = np.random.default_rng(seed).integers(0, len(topics), size=(resamples, len(topics)))
    labels = _label_agreement(pairs, topics, human_level, judge_level, idx, confidence, notes)
    labels.only_human, labels.only_judge = only_h, only_j
    keep_h = {q: {d: h[q][d] for d in h[q] if d in j.get(q, {})} for q in topics}
    keep_j = {q: {d: j[q][d] for d in j[q] if d in h.get(q, {})} for q in topics}
    systems = _system_agreement(keep_h, keep_j, runs, topics, metric=metric, human_level=human_level,
                                judge_level=judge_level, top_k=top_k, idx=idx, confidence=confidence, test=test,
                                alpha=alpha, correction=correction, permutations=permutations, seed=seed,
                                notes=notes)
    warnings = circularity_warnings(judge_model, {n: (tags or {}).get(n) for n in runs}, reranked_by)
    return JudgeCheck(labels, systems, resamples, confidence, seed, warnings, notes)
