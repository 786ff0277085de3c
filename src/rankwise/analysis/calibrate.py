"""Which retrieval metric predicts your generator's answers: rank metric x K x discount candidates
by how well their per-case values predict the answer score (docs/calibrate.md).

The candidates, the statistic and the held-out check: docs/calibrate.md, "Calibration".

Example:
    >>> import random
    >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
    >>> rng = random.Random(0)
    >>> recs = []
    >>> for i in range(80):
    ...     v = [rng.choice([0, 1]) for _ in range(5)]
    ...     rec = CaseRecord(
    ...         f"c{i}",
    ...         chunks=[
    ...             ChunkRecord(rank=r + 1, verdicts={"llm": Verdict(x)}) for r, x in enumerate(v)
    ...         ],
    ...     )
    ...     rec.answer_score = float(
    ...         v[0]
    ...     )  # the generator answers right iff the first chunk is relevant
    ...     recs.append(rec)
    >>> calibrate(recs, "llm").best.name
    'hit_rate@1'
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankwise.errors import InputError, RankwiseWarning

__all__ = ["calibrate", "candidate_metrics", "CalibrationResult", "Candidate", "DEFAULT_KS", "DISCOUNTS"]

DEFAULT_KS: tuple[int | None, ...] = (1, 3, 5, 10, None)
DISCOUNTS = ("decay=log", "decay=linear", "decay=rbp,p=0.5", "decay=rbp,p=0.8", "decay=rbp,p=0.95", "decay=flat")
_FAMILIES = ("hit_rate", "precision", "recall", "mrr", "ndcg", "acp")


def candidate_metrics(ks: Sequence[int | None] = DEFAULT_KS, curve: str | None = None) -> list[str]:
    """Every candidate: hit rate, precision, recall, MRR, nDCG, acp and wcp under each discount, at
    each K (None: the list as fed).

    Example:
        >>> candidate_metrics([5])[:3], len(candidate_metrics())
        (['hit_rate@5', 'precision@5', 'recall@5'], 60)
    """
    discounts = list(DISCOUNTS) + ([f"decay=curve,curve={curve}"] if curve else [])
    out = []
    for k in ks:
        at = "" if k is None else f"@{k}"
        out += [f"{f}{at}" for f in _FAMILIES]
        out += [f"wcp({d}){at}" for d in discounts]
    return out


@dataclass
class Candidate:
    """One metric's fit: the statistic on the training and held-out cases, and its bootstrap
    interval."""

    name: str
    train: float
    held_out: float
    ci_low: float | None = None
    ci_high: float | None = None
    system_tau: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.name, "train": _num(self.train), "held_out": _num(self.held_out),
                "ci_low": _num(self.ci_low), "ci_high": _num(self.ci_high), "system_tau": _num(self.system_tau)}


def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


@dataclass
class CalibrationResult:
    """What :func:`calibrate` returns: candidates ranked by the training statistic (best first)."""

    statistic: str
    source: str
    cases: int
    train_cases: int
    held_out_cases: int
    systems: list[str]
    candidates: list[Candidate]
    refused: str | None = None
    notes: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def best(self) -> Candidate | None:
        """The recommended candidate (None when calibration refused)."""
        return None if self.refused or not self.candidates else self.candidates[0]

    def sentence(self) -> str:
        """The recommendation in one plain sentence."""
        if self.refused:
            return f"No recommendation: {self.refused}."
        b = self.best
        assert b is not None
        stat = "tau" if self.statistic == "kendall_tau_b" else "AUC"
        ci = f" [{b.ci_low:.2f}, {b.ci_high:.2f}]" if b.ci_low is not None else ""
        text = f"{b.name} predicts the answer score best: {stat} {b.held_out:.2f}{ci} held out"
        return text + ("; " + "; ".join(self.notes) if self.notes else "") + "."

    def to_json(self) -> dict[str, Any]:
        return {"statistic": self.statistic, "source": self.source, "cases": self.cases,
                "train_cases": self.train_cases, "held_out_cases": self.held_out_cases, "systems": self.systems,
                "recommendation": None if self.best is None else self.best.name, "sentence": self.sentence(),
                "refused": self.refused, "notes": self.notes, "summary": self.summary,
                "candidates": [c.to_dict() for c in self.candidates]}


def _pair_matrices(x: np.ndarray, y: np.ndarray, binary: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The statistic as quadratic forms in the case weights c (1 each, or bootstrap multiplicities):
    value = c'Nc / sqrt(c'Ac · c'Bc) (tau-b: concordance over pairs untied in x and in y) or c'Nc /
    (c'A)(c'B) (AUC: positives above negatives, ties 1/2)."""
    if binary:
        pos = (y >= 0.5).astype(np.float64)
        h = np.sign(x[:, None] - x[None, :]) * 0.5 + 0.5  # 1 above, 1/2 tied, 0 below
        return h * pos[:, None] * (1 - pos)[None, :], pos, 1 - pos
    sx = np.sign(x[:, None] - x[None, :])
    sy = np.sign(y[:, None] - y[None, :])
    return sx * sy, np.abs(sx), np.abs(sy)


def _quadratic(weights: np.ndarray, m: np.ndarray) -> np.ndarray:
    """c'Mc for each row c of ``weights``, as a matrix product (BLAS; numpy's einsum of the same is
    a plain triple loop, ~10x slower at 1,000 resamples). Exact either way: the weights are whole
    numbers and M's entries multiples of 1/2, so every partial sum is exact and the order of
    summation changes nothing."""
    return ((weights @ m) * weights).sum(axis=1)


def _statistics(x: np.ndarray, y: np.ndarray, binary: bool, weights: np.ndarray) -> np.ndarray:
    """Kendall's tau-b (or the AUC) of x against y for each row of case weights; NaN where
    undefined."""
    num_m, a_m, b_m = _pair_matrices(x, y, binary)
    num = _quadratic(weights, num_m)
    with np.errstate(invalid="ignore", divide="ignore"):
        if binary:
            den = (weights @ a_m) * (weights @ b_m)
        else:
            den = np.sqrt(_quadratic(weights, a_m) * _quadratic(weights, b_m))
        out = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    return out


def _statistic_of(x: np.ndarray, y: np.ndarray, binary: bool) -> float:
    if len(x) < 2:
        return float("nan")
    return float(_statistics(x, y, binary, np.ones((1, len(x))))[0])


def _tau_b(x: np.ndarray, y: np.ndarray) -> float:
    return _statistic_of(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), False)


def _record_sets(records: Any, source: str) -> dict[str, list[Any]]:
    from rankwise.metrics.rag import judged_records

    if isinstance(records, Mapping):
        items = dict(records)
    else:
        items = {"system": records}
    return {name: judged_records(value, source)[0] for name, value in items.items()}


def calibrate(records: Any, source: str, *, answer_scores: Mapping[str, float] | None = None,
              ks: Sequence[int | None] = DEFAULT_KS, curve: str | None = None, min_cases: int = 30,
              test_share: float = 0.5, seed: int = 42, resamples: int = 1000,
              confidence: float = 0.95) -> CalibrationResult:
    """Rank candidate metrics by how well they predict the answer score of each case.

    Args:
        records: per-case records (a list, a records file, a test set) or ``{system: records}`` for
            several systems; the verdicts of ``source`` are used as stored (or judged now for a test
            set).
        source: the verdict source (``containment``, ``span``, ``ids``, ``human``, ``llm``,
            ``utility`` ...).
        answer_scores: ``{case_id: score}`` overriding the records' ``answer_score``.
        ks: cutoffs of the candidates (None: the list as fed).
        curve: a position-curve file to add ``wcp(decay=curve)`` candidates.
        min_cases: fewest cases with answer scores for a recommendation.
        test_share: share of the cases held out.
        seed, resamples, confidence: the split and the bootstrap interval of the held-out statistic.

    Example (the answer is right exactly when the reference chunk comes first):
        >>> cases = [
        ...     {
        ...         "id": f"c{i}",
        ...         "reference_context_ids": ["g"],
        ...         "retrieved_context_ids": ["x", "y"] if i % 3 == 0 else ["g", "x"],
        ...     }
        ...     for i in range(12)
        ... ]
        >>> answers = {f"c{i}": 0.0 if i % 3 == 0 else 1.0 for i in range(12)}
        >>> result = calibrate(cases, "ids", answer_scores=answers, ks=[1, 2], min_cases=4)
        >>> result.statistic, result.train_cases, result.held_out_cases, result.best.name
        ('auc', 6, 6, 'hit_rate@1')
    """
    if not 0.0 < test_share < 1.0:
        raise InputError(f"test share must be between 0 and 1, not {test_share}", field="test_share")
    if min_cases < 4:
        raise InputError("min_cases must be at least 4", field="min_cases")
    sets = _record_sets(records, source)
    names = candidate_metrics(ks, curve)
    rows_case, rows_system, y, values, no_score = _scored_rows(sets, source, names, answer_scores)
    systems = list(sets)
    case_ids = sorted(set(rows_case), key=lambda c: c.encode("utf-8"))
    binary = bool(len(y)) and bool(np.all((y == 0.0) | (y == 1.0)))
    stat_name = "auc" if binary else "kendall_tau_b"
    summary = {"cases_without_answer_score": no_score, "observations": len(y), "seed": seed,
               "test_share": test_share, "resamples": resamples, "confidence": confidence}
    refused = None
    if len(case_ids) < min_cases:
        refused = (f"{len(case_ids)} cases have answer scores; at least {min_cases} are needed to choose a metric "
                   f"on one half and check it on the other")
    elif len(y) and np.all(y == y[0]):
        refused = "every answer score is the same, so no metric can predict it"
    test_ids = _stratified_split(case_ids, rows_case, y, test_share, seed)
    is_test = np.array([c in test_ids for c in rows_case], dtype=bool)
    candidates = _ranked_candidates(names, values, y, is_test, binary)
    _bootstrap_intervals(candidates[:10], values, names, y, is_test, binary, seed=seed, resamples=resamples,
                         confidence=confidence)
    if len(systems) >= 2:
        _system_taus(candidates, names, systems, rows_system, values, y)
    notes = _saturation_notes(candidates)
    if refused is None and candidates:
        refused = _undefined_reason(candidates[0], values[:, names.index(candidates[0].name)], y, is_test, binary)
    return CalibrationResult(stat_name, source, len(case_ids), len(case_ids) - len(test_ids), len(test_ids),
                             systems, candidates, refused, notes, summary)


def _scored_rows(sets: Mapping[str, list[Any]], source: str, names: list[str],
                 answer_scores: Mapping[str, float] | None
                 ) -> tuple[list[str], list[str], np.ndarray, np.ndarray, int]:
    """One row per (system, case) with an answer score: case ids, systems, answer scores, the
    candidates' values (rows x ``names``), and how many cases had no answer score."""
    from rankwise.metrics.rag import evaluate_rag

    rows_case, rows_system, rows_y, blocks = [], [], [], []
    no_score = 0
    for system, recs in sets.items():
        scored = []
        for r in recs:
            y = answer_scores.get(r.id) if answer_scores is not None and r.id in answer_scores else r.answer_score
            if y is None:
                no_score += 1
                continue
            scored.append((r, float(y)))
        if not scored:
            continue
        with warnings.catch_warnings():  # the candidate grid's cutoffs are ours, not the user's
            warnings.simplefilter("ignore", RankwiseWarning)
            result = evaluate_rag([r for r, _ in scored], source, metrics=names)
        index = {q: i for i, q in enumerate(result.per_query.query_ids)}
        for r, y in scored:
            rows_case.append(r.id)
            rows_system.append(system)
            rows_y.append(y)
            blocks.append(result.per_query.values[index[r.id]])
    values = np.array(blocks, dtype=np.float64).reshape(len(blocks), len(names))
    return rows_case, rows_system, np.array(rows_y, dtype=np.float64), values, no_score


def _ranked_candidates(names: list[str], values: np.ndarray, y: np.ndarray, is_test: np.ndarray,
                       binary: bool) -> list[Candidate]:
    """Every candidate's statistic on the training and held-out rows, best on training first."""
    candidates = []
    for j, name in enumerate(names):
        col = values[:, j] if len(values) else np.zeros(0)
        ok = ~np.isnan(col)
        train = _statistic_of(col[ok & ~is_test], y[ok & ~is_test], binary) if (ok & ~is_test).sum() > 1 \
            else float("nan")
        held = _statistic_of(col[ok & is_test], y[ok & is_test], binary) if (ok & is_test).sum() > 1 \
            else float("nan")
        candidates.append(Candidate(name, train, held))
    candidates.sort(key=lambda c: (-(c.train if not math.isnan(c.train) else -math.inf),
                                   -(c.held_out if not math.isnan(c.held_out) else -math.inf)))
    return candidates


def _system_taus(candidates: list[Candidate], names: list[str], systems: list[str], rows_system: list[str],
                 values: np.ndarray, y: np.ndarray) -> None:
    """Several systems: each candidate's ``system_tau``, Kendall's tau-b between the systems' metric
    means and their answer-score means (None with fewer than two systems scored)."""
    for c in candidates:
        j = names.index(c.name)
        means_m, means_y = [], []
        for s in systems:
            rows = [i for i, sys_ in enumerate(rows_system) if sys_ == s and not np.isnan(values[i, j])]
            if rows:
                means_m.append(float(np.mean(values[rows, j])))
                means_y.append(float(np.mean(y[rows])))
        c.system_tau = _tau_b(np.array(means_m), np.array(means_y)) if len(means_m) >= 2 else None


def _bootstrap_intervals(candidates: list[Candidate], values: np.ndarray, names: list[str], y: np.ndarray,
                         is_test: np.ndarray, binary: bool, *, seed: int, resamples: int,
                         confidence: float) -> None:
    """Percentile bootstrap intervals of the held-out statistic, set on ``candidates`` (where
    defined)."""
    test_rows = np.flatnonzero(is_test)
    tail = (1 - confidence) / 2
    if len(test_rows) > 1:
        boot = np.random.default_rng(seed + 1)
        draws = boot.integers(0, len(test_rows), size=(resamples, len(test_rows)))
        multiplicity = np.zeros((resamples, len(test_rows)))
        np.add.at(multiplicity, (np.arange(resamples)[:, None], draws), 1.0)
        for c in candidates[:10]:
            col = values[test_rows, names.index(c.name)]
            ok = ~np.isnan(col)
            stats = _statistics(col[ok], y[test_rows][ok], binary, multiplicity[:, ok])
            stats = stats[~np.isnan(stats)]
            if len(stats) >= max(10, resamples // 2):
                c.ci_low, c.ci_high = (float(x) for x in np.quantile(stats, [tail, 1 - tail]))


def _stratified_split(case_ids: list[str], rows_case: list[str], y: np.ndarray, test_share: float,
                      seed: int) -> set[str]:
    """The held-out case ids, stratified by outcome: cases ordered by their mean answer score
    (random order among equals), then every ``1/test_share``-th taken from a random start, so each
    outcome (each class, for binary scores) is split in proportion and both halves hold both classes
    when each class has two cases or more."""
    if not case_ids:
        return set()
    total: dict[str, float] = {}
    seen: dict[str, int] = {}
    for c, v in zip(rows_case, y.tolist(), strict=True):
        total[c] = total.get(c, 0.0) + v
        seen[c] = seen.get(c, 0) + 1
    rng = np.random.default_rng(seed)
    tiebreak = rng.permutation(len(case_ids))
    order = sorted(range(len(case_ids)), key=lambda i: (total[case_ids[i]] / seen[case_ids[i]], tiebreak[i]))
    start = float(rng.random())
    picked = {case_ids[i] for pos, i in enumerate(order)
              if math.floor((pos + 1) * test_share + start) > math.floor(pos * test_share + start)}
    if not picked:  # a share too small for the cases: hold out one
        picked = {case_ids[order[len(order) // 2]]}
    return picked


def _undefined_reason(best: Candidate, col: np.ndarray, y: np.ndarray, is_test: np.ndarray,
                      binary: bool) -> str | None:
    """Why the leading candidate's statistic is undefined (no recommendation then), or None."""
    stat = "AUC" if binary else "Kendall tau-b"
    for half, rows, value in (("training", ~is_test, best.train), ("held-out", is_test, best.held_out)):
        if not math.isnan(value):
            continue
        ok = rows & ~np.isnan(col)
        yy, xx = y[ok], col[ok]
        lead = (f"the {stat} is undefined on the training half for every candidate" if half == "training"
                else f"{best.name} ranks first on the training half, but its {stat} on the held-out half is "
                     "undefined")
        if len(yy) < 2:
            why = f"the {half} half holds {len(yy)} case{'' if len(yy) == 1 else 's'} with a value"
        elif binary and len(set((yy >= 0.5).tolist())) == 1:
            what = "correct" if yy[0] >= 0.5 else "wrong"
            why = (f"every answer of the {half} half is {what} ({len(yy)} cases), so no metric can separate "
                   "right from wrong answers there; score more cases, or cases with both outcomes")
        elif not binary and np.all(yy == yy[0]):
            why = f"every answer score of the {half} half is the same ({yy[0]:g}, {len(yy)} cases)"
        elif np.all(xx == xx[0]):
            why = f"{best.name} has the same value ({xx[0]:g}) on every case of the {half} half"
        else:
            why = f"the {half} half gives no untied pair"
        return f"{lead}: {why}"
    return None


def _saturation_notes(candidates: list[Candidate]) -> list[str]:
    """"recall past K=5 no longer moves answers": the K after which recall's held-out statistic
    stops rising."""
    recall = {}
    for c in candidates:
        if c.name.startswith("recall@") and not math.isnan(c.held_out):
            recall[int(c.name.split("@")[1])] = c.held_out
    ks = sorted(recall)
    for i, k in enumerate(ks[:-1]):
        if all(recall[later] <= recall[k] + 0.01 for later in ks[i + 1:]):
            return [f"recall past K={k} no longer moves answers"]
    return []
