"""Rank effect versus verdict effect (docs/context-metrics.md, "Rank vs verdict").

For one ordered verdict list, per metric: the score; the best and worst scores reachable by
re-ordering the same verdicts (the rank effect); the change from flipping each single verdict in
place (the verdict effect). For two verdict sources on the same chunks (human vs LLM, with vs
without reference), the
score difference is entirely due to verdicts, since the order is shared: reported per case and on
average, beside each source's own re-ordering range.

Every variant is a row of one :class:`~rankwise.metrics.RelevanceMatrix`, so each metric is
evaluated once, by the same engine as ``rankwise eval``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import permutations
from typing import Any

import numpy as np

from rankwise.errors import InputError
from rankwise.metrics.matrix import RelevanceMatrix, record_truth, verdict_grade
from rankwise.metrics.registry import Measure, parse_measures

__all__ = ["MetricProbe", "ProbeResult", "SourceComparison", "probe_verdicts", "probe_records",
           "default_probe_metrics", "parse_verdicts"]

_BRUTE_FORCE_LIMIT = 8  # lists up to this length: every distinct ordering is tried


def default_probe_metrics(k: int) -> list[str]:
    """precision@k, wcp@k (log and linear), acp@k, ndcg@k and mrr."""
    return [f"precision@{k}", f"wcp@{k}", f"wcp(decay=linear)@{k}", f"acp@{k}", f"ndcg@{k}", "mrr"]


def parse_verdicts(text: str) -> list[int]:
    """``"1,0,1"`` -> ``[1, 0, 1]`` (grades >= 0 allowed, e.g. ``"2,0,1"``).

    Example:
        >>> parse_verdicts("1, 0,1")
        [1, 0, 1]
    """
    out = []
    for i, part in enumerate(p.strip() for p in text.split(",")):
        if part == "" and text.strip() == "":
            return []
        if not part.isdigit():
            raise InputError(f"verdict {i + 1} is {part!r}; give 0/1 (or grades) separated by commas",
                             field="verdicts")
        out.append(int(part))
    return out


@dataclass
class MetricProbe:
    """One metric's probe of one verdict list.

    Attributes:
        name: canonical metric name.
        score: the value for the verdicts as ordered.
        best, worst: extreme values over every re-ordering of the same verdicts.
        best_order, worst_order: an ordering reaching each.
        flip_deltas: per rank, the change from flipping that verdict in place (1 -> 0, 0 -> 1).
    """

    name: str
    score: float
    best: float
    worst: float
    best_order: list[int]
    worst_order: list[int]
    flip_deltas: list[float]

    @property
    def rank_range(self) -> float:
        """best - worst: how much the order alone can move this metric for these verdicts."""
        return self.best - self.worst

    def to_dict(self) -> dict:
        return {"score": self.score, "best": self.best, "worst": self.worst, "rank_range": self.rank_range,
                "best_order": self.best_order, "worst_order": self.worst_order,
                "flip_deltas": self.flip_deltas}


@dataclass
class ProbeResult:
    """:func:`probe_verdicts`' answer: one :class:`MetricProbe` per metric."""

    verdicts: list[int]
    k: int
    n_relevant: int | None
    metrics: list[MetricProbe]

    def __getitem__(self, name: str) -> MetricProbe:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)

    def to_json(self) -> dict:
        return {"verdicts": self.verdicts, "k": self.k, "n_relevant": self.n_relevant,
                "metrics": {m.name: m.to_dict() for m in self.metrics}}


def _flip(v: int) -> int:
    return 0 if v >= 1 else 1


def _orderings(verdicts: list[int]) -> list[tuple[int, ...]]:
    if len(verdicts) <= _BRUTE_FORCE_LIMIT:
        return sorted(set(permutations(verdicts)))
    # every metric rankwise has is monotone in moving a better grade up, so the sorted orders are
    # extreme
    return [tuple(sorted(verdicts, reverse=True)), tuple(sorted(verdicts))]


def probe_verdicts(verdicts: Sequence[int], metrics: Iterable[str | Measure] | None = None, *,
                   k: int | None = None, n_relevant: int | None = None) -> ProbeResult:
    """Score, best/worst over re-orderings, and single-flip deltas of one ordered verdict list.

    Args:
        verdicts: 0/1 (or grades) in rank order.
        metrics: metric names; default :func:`default_probe_metrics` with ``k`` = list length.
        k: cutoff for the default metrics.
        n_relevant: R for recall-type metrics and nDCG's ideal; default: the relevant items in the
            list (recomputed for each flipped variant).

    Example:
        >>> p = probe_verdicts([1, 0, 1])
        >>> a = p["acp@3"]
        >>> round(a.score, 4), a.best, round(a.worst, 4), [round(d, 4) for d in a.flip_deltas]
        (0.8333, 1.0, 0.5833, [-0.5, 0.1667, 0.1667])
    """
    v = [int(x) for x in verdicts]
    if any(x < 0 for x in v):
        raise InputError("verdicts must be >= 0", field="verdicts")
    if not v:
        raise InputError("give at least one verdict", field="verdicts")
    k = len(v) if k is None else k
    measures = parse_measures(metrics or default_probe_metrics(k))
    orders, flips = _variants(v)
    rows = [v, *[list(o) for o in orders], *flips]
    m = RelevanceMatrix.from_verdicts(rows, n_relevant=None if n_relevant is None else [n_relevant] * len(rows))
    values = {measure.name: measure(m) for measure in measures}
    out = [_metric_probe(name, float(vals[0]), vals[1:], v, orders) for name, vals in values.items()]
    return ProbeResult(v, k, n_relevant, out)


def _variants(v: list[int]) -> tuple[list[tuple[int, ...]], list[list[int]]]:
    """Every re-ordering to try, and the list with each single verdict flipped."""
    return _orderings(v), [[_flip(x) if j == i else x for j, x in enumerate(v)] for i in range(len(v))]


def _metric_probe(name: str, base: float, variant_values: np.ndarray, v: list[int],
                  orders: list[tuple[int, ...]]) -> MetricProbe:
    n_ord = len(orders)
    ordered = variant_values[:n_ord]
    desc = orders.index(tuple(sorted(v, reverse=True)))
    asc = orders.index(tuple(sorted(v)))
    # prefer the plainest ordering among ties: relevant-first for best, relevant-last for worst
    bi = desc if ordered[desc] == ordered.max() else int(np.argmax(ordered))
    wi = asc if ordered[asc] == ordered.min() else int(np.argmin(ordered))
    flip_vals = variant_values[n_ord:]
    return MetricProbe(name, base, float(ordered[bi]), float(ordered[wi]), list(orders[bi]), list(orders[wi]),
                       [float(x) - base for x in flip_vals])


def _probe_case(record, source: str, base: dict[str, float], measures: list[Measure],
                relevance_level: int) -> dict[str, MetricProbe]:
    """Probe one case under one source: its score as eval-rag computes it (``base``), and the scores
    of every re-ordering and single flip of its verdicts under the same ground truth (same R)."""
    v = [verdict_grade(c.verdicts.get(source), source) for c in record.chunks]
    orders, flips = _variants(v)
    rows = [*[list(o) for o in orders], *flips]
    truth = record_truth(record, source, relevance_level=relevance_level)
    if truth["basis"] == "pooled verdicts":
        m = RelevanceMatrix.from_verdicts(rows, relevance_level=relevance_level)
    else:
        R = truth["n_relevant"]
        lists = record.passages_found.get(source)
        found_as_ordered = _new_found(lists) if lists is not None else [1 if x >= relevance_level else 0 for x in v]
        total = min(R, sum(found_as_ordered))
        n_rows = len(orders)
        found_rows, earned_rows = [], []
        for i, row in enumerate(rows):
            if i < n_rows:
                budget = total
            else:  # a flip: the flipped chunk gains or loses the passages it found
                j = i - n_rows
                budget = total - found_as_ordered[j] if v[j] >= relevance_level else min(R, total + 1)
            found_rows.append(_first_found(row, budget, relevance_level))
            # the redundancy rule: a relevant chunk finding nothing new is no new relevant item
            earned_rows.append([f > 0 or x < relevance_level for x, f in zip(row, found_rows[-1], strict=True)])
        m = RelevanceMatrix.from_verdicts(rows, n_relevant=[R] * len(rows),
                                          ideal_gains=[truth["ideal_gains"]] * len(rows), found=found_rows,
                                          relevance_level=relevance_level, r_basis=truth["basis"],
                                          earned=earned_rows)
    return {measure.name: _metric_probe(measure.name, base[measure.name], measure(m), v, orders)
            for measure in measures}


def _new_found(lists: Sequence[Sequence[int]]) -> list[int]:
    seen: set = set()
    out = []
    for items in lists:
        new = [x for x in items if x not in seen]
        seen.update(new)
        out.append(len(new))
    return out


def _first_found(row: Sequence[int], budget: int, relevance_level: int) -> list[int]:
    """The first ``budget`` relevant items each find one new reference item; later ones find none.
    """
    out = []
    for x in row:
        if x >= relevance_level and budget > 0:
            out.append(1)
            budget -= 1
        else:
            out.append(0)
    return out


# -------------------------------------------------------------------------------------- two sources


@dataclass
class SourceComparison:
    """Two verdict sources on the same chunks: per case and metric, each source's score, the
    verdict-attributable difference (b - a: the order is shared, so all of it is due to verdicts)
    and each source's re-ordering range (the rank effect)."""

    sources: list[str]
    k: int | None
    metrics: list[str]
    cases: list[dict] = field(default_factory=list)
    mean: dict[str, dict[str, float]] = field(default_factory=dict)
    incomplete: dict[str, str] = field(default_factory=dict)
    r_basis: dict[str, str] = field(default_factory=dict)

    def to_json(self, *, per_case: bool = True) -> dict:
        out: dict[str, Any] = {"sources": self.sources, "k": self.k, "mean": self.mean,
                               "incomplete": self.incomplete, "r_basis": self.r_basis}
        if per_case:
            out["cases"] = self.cases
        return out


def probe_records(records: Sequence, sources: Sequence[str], metrics: Iterable[str] | None = None, *,
                  k: int | None = None, relevance_level: int = 1) -> SourceComparison:
    """Probe per-case records under one or two verdict sources.

    Each case's score is the one ``eval-rag`` gives for the same stored verdicts (same relevance
    matrix, same R: docs/context-metrics.md, "What R is"); re-orderings and flips keep that R.
    Failed or missing verdicts count as not relevant; their cases are listed in ``incomplete``. A
    case without ground truth under a source (an unanswerable question) is left out of the means and
    listed, as ``eval-rag`` does.

    Example:
        >>> from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
        >>> rec = CaseRecord(
        ...     "q1",
        ...     chunks=[
        ...         ChunkRecord(rank=i + 1, verdicts={"human": Verdict(h), "llm": Verdict(l)})
        ...         for i, (h, l) in enumerate([(1, 1), (0, 1), (1, 1)])
        ...     ],
        ... )
        >>> c = probe_records([rec], ["human", "llm"], ["acp@3"])
        >>> round(c.mean["acp@3"]["verdict_effect"], 4)
        0.1667
    """
    sources = list(sources)
    if not 1 <= len(sources) <= 2:
        raise InputError(f"give one or two verdict sources, got {sources}", field="sources")
    if not records:
        raise InputError("no records to probe")
    for s in sources:
        if not any(s in r.sources() for r in records):
            present = sorted({x for r in records for x in r.sources()})
            raise InputError(f"no {s!r} verdicts in the records (sources present: {present or 'none'})",
                             field="sources")
    depth = max(len(r.chunks) for r in records)
    kk = depth if k is None else k
    measures = parse_measures(metrics or default_probe_metrics(kk))
    names = [m.name for m in measures]
    result = SourceComparison(sources, kk, names)
    sums: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    unanswerable = {r.id for r in records if any(r.status.get(s) == "unscorable: no ground truth" for s in sources)}
    cases = sorted((r for r in records if r.chunks and r.id not in unanswerable), key=lambda r: r.id.encode("utf-8"))
    for r in records:
        if not r.chunks:
            result.incomplete[r.id] = "no retrieved chunks"
        elif r.id in unanswerable:  # left out of the means, as eval-rag leaves it out (--unscorable skip)
            result.incomplete[r.id] = "no ground truth: left out of the means"
    base: dict[str, dict[str, np.ndarray]] = {}
    for s in sources:
        # each case's score exactly as eval-rag computes it from the same stored verdicts
        matrix = RelevanceMatrix.from_records(cases, s, relevance_level=relevance_level)
        base[s] = {m.name: m(matrix) for m in measures}
        result.r_basis[s] = matrix.r_basis
    for i, r in enumerate(cases):
        entry: dict[str, Any] = {"id": r.id, "verdicts": {}, "metrics": {}}
        probes = {}
        for s in sources:
            raw = r.verdicts(s)
            if any(x is None for x in raw):
                result.incomplete[r.id] = f"{sum(x is None for x in raw)} failed/missing {s} verdicts"
            entry["verdicts"][s] = raw
            probes[s] = _probe_case(r, s, {n: float(base[s][n][i]) for n in names}, measures, relevance_level)
        if len(sources) == 2:
            a, b = sources
            entry["differing_ranks"] = [i + 1 for i, (x, y) in enumerate(
                zip(entry["verdicts"][a], entry["verdicts"][b], strict=True)) if x != y]
        for n in names:
            row: dict[str, float] = {}
            for s in sources:
                p = probes[s][n]
                row[s] = p.score
                row[f"{s}_best"] = p.best
                row[f"{s}_worst"] = p.worst
                row[f"{s}_rank_range"] = p.rank_range
            if len(sources) == 2:
                row["verdict_effect"] = row[sources[1]] - row[sources[0]]
            entry["metrics"][n] = row
            for key, val in row.items():
                sums[n].setdefault(key, []).append(val)
        result.cases.append(entry)
    result.mean = {n: {key: float(np.add.accumulate(vals)[-1] / len(vals)) for key, vals in d.items()}
                   for n, d in sums.items()}
    return result
