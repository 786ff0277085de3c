"""k-sweeps: a metric at every cutoff K = 1..N for every system, to see where systems cross.

Each run is joined with the qrels once; every cutoff is then a cheap pass over the same relevance
matrix.

Example:
    >>> qrels = {"q1": {"a": 1, "b": 1}}
    >>> s = ksweep(qrels, [{"q1": ["a", "x", "b"]}, {"q1": ["x", "a", "b"]}], "recall", max_k=3)
    >>> s.ks, s.values["run1"].tolist(), s.values["run2"].tolist()
    ([1, 2, 3], [0.5, 0.5, 1.0], [0.0, 0.5, 1.0])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankwise.analysis.system_warnings import collect_warnings, name_warnings
from rankwise.errors import InputError, warn

__all__ = ["KSweep", "ksweep", "ksweep_records", "sweep_measures", "default_sweep_metric"]


@dataclass
class KSweep:
    """A metric's mean at each cutoff, per system.

    Attributes:
        metric: the swept metric without cutoff (``ndcg``, ``wcp(decay=linear)``).
        ks: the cutoffs, 1..N.
        systems: system names, in input order.
        values: system -> array of means, one per K.
        summary: queries (or cases) per system, and any left out.
    """

    metric: str
    ks: list[int]
    systems: list[str]
    values: dict[str, np.ndarray]
    summary: dict[str, Any] = field(default_factory=dict)

    def name_at(self, k: int) -> str:
        """The metric's canonical name at cutoff ``k`` (``ndcg@5``)."""
        return f"{self.metric}@{k}"

    def rows(self) -> list[dict[str, Any]]:
        """One row per K: ``{"k": k, system: value, ...}``."""
        return [{"k": k, **{s: float(self.values[s][i]) for s in self.systems}} for i, k in enumerate(self.ks)]

    def best_k(self, system: str) -> int:
        """The smallest K where ``system`` reaches its highest mean."""
        return self.ks[int(np.argmax(self.values[system]))]

    def crossings(self, a: str, b: str) -> list[int]:
        """Cutoffs K where the sign of ``a - b`` changes from K-1 to K (ties skipped)."""
        diff = self.values[a] - self.values[b]
        out, last = [], 0.0
        for k, d in zip(self.ks, diff.tolist(), strict=True):
            sign = 0.0 if abs(d) <= 1e-12 else np.sign(d)
            if sign and last and sign != last:
                out.append(k)
            if sign:
                last = sign
        return out

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "ks": self.ks, "summary": self.summary,
                "values": {s: self.values[s].tolist() for s in self.systems}}


def sweep_measures(metric: str, max_k: int) -> list:
    """The :class:`~rankwise.metrics.registry.Measure` of ``metric`` at K = 1..max_k.

    Example:
        >>> [m.name for m in sweep_measures("P_10", 3)]
        ['precision@1', 'precision@2', 'precision@3']
    """
    from rankwise.metrics.registry import Measure, parse_measure

    measure = parse_measure(metric)
    if measure.metric.cutoff == "none":
        raise InputError(f"metric {measure.metric.name!r} has no cutoff to sweep", field="metric")
    if max_k < 1:
        raise InputError(f"max K must be at least 1, not {max_k}", field="max_k")
    return [Measure(measure.metric, k, measure.params) for k in range(1, max_k + 1)]


def _base_name(measures: list) -> str:
    return measures[0].name.rsplit("@", 1)[0]


def ksweep(qrels: Any, runs: Sequence[Any], metric: str = "ndcg", *, max_k: int = 20,
           names: Sequence[str] | None = None, relevance_level: int = 1, missing: str = "zero") -> KSweep:
    """``metric`` at every K = 1..``max_k`` for every run, means over the qrels queries.

    Args:
        qrels: qrels (object, dict, DataFrame or path).
        runs: runs (objects, dicts, DataFrames or paths); named as in :func:`rankwise.compare`.
        metric: a metric that takes a cutoff; any cutoff in the name is ignored (``ndcg@10`` ->
            ``ndcg``).
        max_k: the largest cutoff.
        relevance_level, missing: as in :func:`rankwise.evaluate`.

    Example:
        >>> qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
        >>> bm25 = {"q1": {"d1": 2.0, "x": 1.0}, "q2": {"x": 2.0, "d2": 1.0}}
        >>> ksweep(qrels, [bm25], "recall", max_k=2, names=["bm25"]).values["bm25"].tolist()
        [0.5, 1.0]
    """
    from rankwise.analysis.compare import system_names
    from rankwise.data.load import load_qrels, load_run
    from rankwise.metrics.engine import evaluate_matrix
    from rankwise.metrics.matrix import join

    measures = sweep_measures(metric, max_k)
    runs = list(runs)
    labels = system_names(runs, names)
    q = load_qrels(qrels)
    values: dict[str, np.ndarray] = {}
    summary: dict[str, Any] = {}
    for label, run in zip(labels, runs, strict=True):
        matrix, info = join(q, load_run(run, name=label), relevance_level=relevance_level, missing=missing)
        if not matrix.query_ids:
            raise InputError(f"run {label!r} has no query to evaluate", field="query_id")
        result = evaluate_matrix(matrix, measures, info, label)
        values[label] = np.array([result.mean[m.name] for m in measures])
        summary[label] = info
    return KSweep(_base_name(measures), list(range(1, max_k + 1)), labels, values, summary)


# ------------------------------------------------------------------------------------ RAG records
def ksweep_records(records: Mapping[str, Sequence[Any]], source: str, metric: str = "wcp", *,
                   max_k: int = 10, relevance_level: int = 1) -> KSweep:
    """``metric`` at every K = 1..``max_k`` from per-case records, scored by
    :func:`rankwise.evaluate_rag` under verdict ``source`` (so the numbers match ``rankwise
    eval-rag``).

    ``records`` maps a system name to its records (:class:`~rankwise.data.records.CaseRecord`
    objects, dicts of the same shape, a records file or a test set).

    Example:
        >>> recs = {"a": [{"id": "c1", "reference_context_ids": ["d2"],
        ...                "chunks": [{"rank": 1, "id": "d1"}, {"rank": 2, "id": "d2"}]}]}
        >>> ksweep_records(recs, "ids", "precision", max_k=2).values["a"].tolist()
        [0.0, 0.5]
    """
    from rankwise.metrics.rag import evaluate_rag

    measures = sweep_measures(metric, max_k)
    names = [m.name for m in measures]
    values: dict[str, np.ndarray] = {}
    summary: dict[str, Any] = {}
    warned: dict[str, list[str]] = {}
    for system, recs in records.items():
        with collect_warnings() as warned[system]:
            result = evaluate_rag(recs, source, metrics=names, relevance_level=relevance_level)
        values[system] = np.array([result.mean[n] for n in names])
        summary[system] = {k: result.summary[k] for k in ("cases", "evaluated", "unscorable", "incomplete")
                           if k in result.summary}
    for line in name_warnings(warned):  # each system's warnings, named
        warn(line)
    return KSweep(_base_name(measures), list(range(1, max_k + 1)), list(records), values, summary)


def default_sweep_metric(metrics: Sequence[str]) -> str | None:
    """The first metric that takes a cutoff (what ``--html``/``--plot`` sweep when no ``--sweep`` is
    given).

    Example:
        >>> default_sweep_metric(["map", "ndcg@10"]), default_sweep_metric(["r_precision"])
        ('map', None)
    """
    from rankwise.metrics.registry import parse_measure

    for m in metrics:
        try:
            measure = parse_measure(m)
        except InputError:
            continue
        if measure.metric.cutoff != "none":
            return measure.name.rsplit("@", 1)[0]
    return None
