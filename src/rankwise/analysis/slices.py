"""Results per slice of the cases: by a field of the test set (``style``, ``difficulty``...) or any
per-case label.

A slice is the cases that share one label. Its mean of each metric is taken over the same per-case
values as the overall mean (so the slices' cases add up to the cases in the means), with a
percentile bootstrap interval from the project's one routine
(:func:`rankwise.analysis.significance.bootstrap_ci`, seeded). In a comparison each slice also gets
every candidate's paired difference from the baseline, with its interval.

Where labels come from and how slices are compared: docs/eval.md, "Per slice of the questions".

Example:
    >>> import numpy as np
    >>> s = slice_values({"run": np.array([[1.0], [0.0], [1.0]])}, ["a", "b", "c"], ["hit_rate@5"],
    ...                  {"a": "plain", "b": "paraphrased", "c": "plain"}, by="style")
    >>> (
    ...     s.names,
    ...     s.means["run"]["paraphrased"]["hit_rate@5"].mean,
    ...     s.means["run"]["plain"]["hit_rate@5"].n,
    ... )
    (['paraphrased', 'plain'], 0.0, 2)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankwise.analysis.significance import bootstrap_ci
from rankwise.errors import InputError

__all__ = ["NO_VALUE", "SliceStat", "Slices", "case_labels", "slice_values", "slice_result", "slice_comparison"]

#: the slice of the cases that lack the field (or hold null)
NO_VALUE = "(none)"
#: the label of an empty text
EMPTY = "(empty)"


@dataclass(frozen=True)
class SliceStat:
    """One metric over one slice: the mean (or mean difference), its bootstrap interval, the cases
    counted.

    ``n`` counts the cases whose value is defined (a metric undefined for a case leaves it out, as
    in the overall mean); ``mean`` and the interval are None when no case of the slice has a value.

    Example:
        >>> SliceStat(0.5, 0.0, 1.0, 2).to_dict()
        {'mean': 0.5, 'ci_low': 0.0, 'ci_high': 1.0, 'n': 2}
    """

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}


@dataclass
class Slices:
    """Per-slice means (and, in a comparison, differences from the baseline) of every metric.

    Attributes:
        by: what the cases were sliced by, as named (a field, ``provenance.style``, a label such as
            ``class``).
        kind: ``value`` (one slice per value) or ``length`` (a list-valued field: one slice per
            length).
        names: the slices, in order (numbers by value, texts alphabetically, :data:`NO_VALUE` last).
        cases: slice -> its case ids, in the results' order.
        metrics, systems: what was sliced; ``baseline`` is None for one system (``eval-rag``).
        means: system -> slice -> metric -> :class:`SliceStat`.
        deltas: candidate -> slice -> metric -> :class:`SliceStat` of the paired ``candidate -
            baseline``.
        settings: the bootstrap's ``resamples``, ``confidence`` and ``seed``.
    """

    by: str
    kind: str
    names: list[str]
    cases: dict[str, list[str]]
    metrics: list[str]
    systems: list[str]
    baseline: str | None
    means: dict[str, dict[str, dict[str, SliceStat]]]
    deltas: dict[str, dict[str, dict[str, SliceStat]]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        """What the slices are, for a table's heading: ``style``, or ``subqueries (length)``."""
        return self.by if self.kind == "value" else f"{self.by} ({self.kind})"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: one entry per slice with its cases, its means (``{metric: stat}`` for
        one system, ``{system: {metric: stat}}`` in a comparison) and, in a comparison, its
        ``deltas``.

        Example:
            >>> s = slice_values(
            ...     {"run": np.array([[1.0], [0.0]])}, ["a", "b"], ["mrr"], {"a": "x"}, by="style"
            ... )
            >>> s.to_json()["slices"][1]
            {'name': '(none)', 'cases': 1, 'means': {'mrr': {'mean': 0.0, 'ci_low': 0.0, 'ci_high': 0.0, 'n': 1}}}
        """
        single = self.baseline is None and len(self.systems) == 1
        rows = []
        for name in self.names:
            row: dict[str, Any] = {"name": name, "cases": len(self.cases[name])}
            if single:
                row["means"] = _stats_json(self.means[self.systems[0]][name])
            else:
                row["means"] = {s: _stats_json(self.means[s][name]) for s in self.systems}
                row["deltas"] = {s: _stats_json(self.deltas[s][name]) for s in self.deltas}
            rows.append(row)
        out: dict[str, Any] = {"by": self.by, "kind": self.kind, "metrics": self.metrics}
        if not single:
            out.update({"systems": self.systems, "baseline": self.baseline})
        out.update({**self.settings, "slices": rows})
        return out


def _stats_json(stats: Mapping[str, SliceStat]) -> dict[str, dict[str, Any]]:
    return {m: s.to_dict() for m, s in stats.items()}


# ----------------------------------------------------------------------------------------------
# labels
def _lookup(record: Any, by: str) -> tuple[bool, Any]:
    """(found, value) of ``by`` in a record's own fields, else in keys added to it (or, for a dict,
    among its keys: a test set's row); ``a.b`` reads key ``b`` of field ``a``."""
    places = [_get(record, "fields"), _get(record, "extra")]
    if isinstance(record, Mapping):
        places.append(record)
    for where in places:
        if isinstance(where, Mapping) and by in where:
            return True, where[by]
    head, dot, rest = by.partition(".")
    if dot and rest:
        found, value = _lookup(record, head)
        if found and isinstance(value, Mapping):
            return _lookup({"fields": value}, rest)
    return False, None


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _scalar_label(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format(value, "g") if math.isfinite(value) else NO_VALUE if math.isnan(value) else str(value)
    text = str(value)
    return text if text != "" else EMPTY


def _field_names(records: Sequence[Any]) -> list[str]:
    names: dict[str, None] = {}
    for r in records:
        for key in _get(r, "fields") or {}:
            names.setdefault(str(key), None)
    return sorted(names)


def case_labels(records: Sequence[Any], by: str) -> tuple[dict[str, str], str]:
    """Each case's label by the field ``by`` (see the module's rules) and the kind of slicing,
    ``value`` or ``length``.

    Records are :class:`~rankwise.data.records.CaseRecord` objects or dicts of the same shape. A
    field no case holds, an object-valued field, or one that is a list in some cases only is an
    :class:`InputError` naming it.

    Example:
        >>> recs = [
        ...     {"id": "a", "fields": {"subqueries": ["x", "y"]}},
        ...     {"id": "b", "fields": {"subqueries": []}},
        ...     {"id": "c", "fields": {}},
        ... ]
        >>> case_labels(recs, "subqueries")
        ({'a': '2', 'b': '0', 'c': '(none)'}, 'length')
    """
    found: dict[str, tuple[bool, Any]] = {str(_get(r, "id")): _lookup(r, by) for r in records}
    present = {cid: v for cid, (ok, v) in found.items() if ok and v is not None}
    if not any(ok for ok, _ in found.values()):
        names = _field_names(records)
        have = f"the cases' own fields: {', '.join(names)}" if names else "the cases have no fields of their own"
        raise InputError(f"no case has a field {by!r} to slice by ({have})", field="by")
    lists = [cid for cid, v in present.items() if isinstance(v, list)]
    for cid, v in present.items():
        if isinstance(v, Mapping):
            keys = ", ".join(f"{by}.{k}" for k in list(v)[:3]) or "a key of it"
            raise InputError(f"field {by!r} holds an object in case {cid!r}; slice by one of its keys ({keys})",
                             field="by")
    if lists and len(lists) != len(present):
        other = next(cid for cid in present if cid not in set(lists))
        raise InputError(f"field {by!r} is a list in case {lists[0]!r} but a {type(present[other]).__name__} in "
                         f"case {other!r}: slice by a field with one kind of value", field="by")
    kind = "length" if lists else "value"
    labels = {cid: (NO_VALUE if v is None or not ok else str(len(v)) if kind == "length" else _scalar_label(v))
              for cid, (ok, v) in found.items()}
    return labels, kind


def _order(labels: Sequence[str], order: Sequence[str] | None) -> list[str]:
    """Slices in ``order`` when given (then any others), else numbers by value, texts
    alphabetically; the cases without a value last."""
    distinct = list(dict.fromkeys(labels))
    if order is not None:
        return [x for x in order if x in distinct] + sorted(x for x in distinct if x not in set(order))
    named = [x for x in distinct if x != NO_VALUE]

    def number(x: str) -> float | None:
        try:
            return float(x)
        except ValueError:
            return None

    if named and all(number(x) is not None for x in named):
        named.sort(key=lambda x: (number(x), x))
    else:
        named.sort()
    return named + ([NO_VALUE] if NO_VALUE in distinct else [])


# ----------------------------------------------------------------------------------------------
# numbers
def _aggregate(col: np.ndarray, metric: str) -> float:
    """The mean as the overall results take it (a count measure's sum, trec_eval's geometric mean).
    """
    from rankwise.metrics.engine import aggregate, sequential_mean

    try:
        return aggregate(col, metric)
    except InputError:  # per-case values from elsewhere, under a name that is not a registered metric
        return sequential_mean(col[~np.isnan(col)])


def _is_mean(metric: str) -> bool:
    """True when the metric's value over cases is the arithmetic mean (the bootstrap's interval is
    of a mean)."""
    from rankwise.metrics.registry import parse_measure

    try:
        return parse_measure(metric).metric.aggregate == "mean"
    except InputError:
        return True


def _stat(values: np.ndarray, metric: str, settings: Mapping[str, Any], mean: float | None = None) -> SliceStat:
    ok = values[~np.isnan(values)]
    if not len(ok):
        return SliceStat(None, None, None, 0)
    value = _aggregate(ok, metric) if mean is None else mean
    if not _is_mean(metric):
        return SliceStat(None if math.isnan(value) else value, None, None, len(ok))
    lo, hi = bootstrap_ci(ok, resamples=settings["resamples"], confidence=settings["confidence"],
                          seed=settings["seed"])
    return SliceStat(value, lo, hi, len(ok))


def _delta(a: np.ndarray, b: np.ndarray, metric: str, settings: Mapping[str, Any]) -> SliceStat:
    """The paired difference over the cases where both are defined: mean(a) - mean(b), the interval
    of the mean difference (as ``compare`` gives it for all cases)."""
    ok = ~(np.isnan(a) | np.isnan(b))
    if not ok.any():
        return SliceStat(None, None, None, 0)
    delta = _aggregate(a[ok], metric) - _aggregate(b[ok], metric)
    return _stat(a[ok] - b[ok], metric, settings, mean=delta)


def slice_values(values: Mapping[str, np.ndarray], case_ids: Sequence[str], metrics: Sequence[str],
                 labels: Mapping[str, str] | Callable[[str], Any], *, by: str, kind: str = "value",
                 baseline: str | None = None, order: Sequence[str] | None = None, resamples: int = 10_000,
                 confidence: float = 0.95, seed: int | None = 42) -> Slices:
    """Per-slice means of per-case values (system -> array cases x metrics, rows in ``case_ids``
    order, NaN = undefined) and, with a ``baseline``, every other system's paired difference from it
    per slice.

    ``labels`` maps a case id to its slice (or is a function of the case id); a case it lacks is in
    :data:`NO_VALUE`. ``order`` fixes the order of the slices (e.g. failure classes in their
    decision order).

    Example:
        >>> v = {"a": np.array([[0.0], [1.0], [1.0]]), "b": np.array([[1.0], [1.0], [0.0]])}
        >>> s = slice_values(
        ...     v,
        ...     ["q1", "q2", "q3"],
        ...     ["hit_rate@1"],
        ...     {"q1": "x", "q2": "x", "q3": "y"},
        ...     by="style",
        ...     baseline="a",
        ... )
        >>> s.deltas["b"]["x"]["hit_rate@1"].mean, s.deltas["b"]["y"]["hit_rate@1"].mean
        (0.5, -1.0)
    """
    get = labels if callable(labels) else (lambda cid: labels.get(cid))
    case_ids = [str(c) for c in case_ids]
    case_label = {}
    for cid in case_ids:
        label = get(cid)
        case_label[cid] = NO_VALUE if label is None else str(label)
    names = _order(list(case_label.values()), order)
    rows = {name: [i for i, cid in enumerate(case_ids) if case_label[cid] == name] for name in names}
    settings = {"resamples": resamples, "confidence": confidence, "seed": seed}
    arrays = {s: np.asarray(v, dtype=np.float64).reshape(len(case_ids), len(metrics)) for s, v in values.items()}
    means = {s: {name: {m: _stat(a[rows[name], j], m, settings) for j, m in enumerate(metrics)} for name in names}
             for s, a in arrays.items()}
    deltas = {}
    if baseline is not None:
        base = arrays[baseline]
        deltas = {s: {name: {m: _delta(a[rows[name], j], base[rows[name], j], m, settings)
                             for j, m in enumerate(metrics)} for name in names}
                  for s, a in arrays.items() if s != baseline}
    return Slices(by, kind, names, {name: [case_ids[i] for i in rows[name]] for name in names}, list(metrics),
                  list(arrays), baseline, means, deltas, settings)


# ----------------------------------------------------------------------------------------------
# results
def slice_result(result: Any, by: str, *, records: Sequence[Any] | None = None,
                 labels: Mapping[str, str] | None = None, kind: str = "value", order: Sequence[str] | None = None,
                 resamples: int = 10_000, confidence: float = 0.95, seed: int | None = 42,
                 system: str = "run", attach: bool = True) -> Slices:
    """The slices of one evaluation (:func:`rankwise.evaluate_rag`'s result) by the field ``by`` of
    its records (or by ``labels``, a label per case id computed elsewhere). The cases are those in
    the result's means.

    The values are under ``means[system]`` (``"run"`` unless named). ``attach`` also puts the slices
    in ``result.summary["slices"]``, so that the JSON summary carries them.

    Example:
        >>> from rankwise.metrics.rag import evaluate_rag
        >>> cases = [
        ...     {
        ...         "id": f"q{i}",
        ...         "retrieved_context_ids": ["d"] if i % 2 else ["x"],
        ...         "reference_context_ids": ["d"],
        ...         "style": "plain" if i % 2 else "paraphrased",
        ...     }
        ...     for i in range(4)
        ... ]
        >>> s = slice_result(evaluate_rag(cases, "ids", metrics=["hit_rate@1"]), "style")
        >>> {n: s.means["run"][n]["hit_rate@1"].mean for n in s.names}
        {'paraphrased': 0.0, 'plain': 1.0}
    """
    case_ids = list(result.per_query.query_ids)
    if labels is None:
        labels, kind = case_labels(records if records is not None else result.records, by)
    out = slice_values({system: result.per_query.values}, case_ids, list(result.names), labels, by=by, kind=kind,
                       order=order, resamples=resamples, confidence=confidence, seed=seed)
    if attach:
        result.summary["slices"] = out.to_json()
    return out


def _shared_labels(records: Mapping[str, Sequence[Any]], by: str, case_ids: Sequence[str]
                   ) -> tuple[dict[str, str], str]:
    """One label per case from every system's records; systems that label a case differently are an
    error."""
    labels: dict[str, str] = {}
    owner: dict[str, str] = {}
    kinds: set[str] = set()
    wanted = set(case_ids)
    missing = []
    for system, recs in records.items():
        try:
            got, kind = case_labels(recs, by)
        except InputError as exc:
            if exc.problem.startswith("no case has a field"):
                missing.append(exc)
                continue
            raise InputError(f"system {system!r}: {exc.problem}", field="by") from None
        kinds.add(kind)
        for cid, label in got.items():
            if cid not in wanted or label == NO_VALUE:
                continue
            if cid in labels and labels[cid] != label:
                raise InputError(f"case {cid!r} has {by} {labels[cid]!r} in system {owner[cid]!r} and {label!r} in "
                                 f"system {system!r}: slice records made from the same test set", field="by")
            labels[cid], owner[cid] = label, system
    if not kinds:
        raise missing[0]
    if len(kinds) > 1:
        raise InputError(f"field {by!r} is a list in some systems' records and not in others'", field="by")
    return labels, kinds.pop()


def slice_comparison(comparison: Any, by: str, *, records: Mapping[str, Sequence[Any]] | None = None,
                     labels: Mapping[str, str] | None = None, kind: str = "value",
                     order: Sequence[str] | None = None, attach: bool = True) -> Slices:
    """The slices of a comparison (:func:`rankwise.analysis.compare.compare_records`): each system's
    per-slice means and each candidate's paired difference from the baseline, with the comparison's
    bootstrap settings.

    Labels come from ``records`` (system -> records; every system must label a case alike) or
    ``labels``. ``attach`` also puts the slices in ``comparison.summary["slices"]`` (the JSON
    output).

    Example:
        >>> from rankwise.analysis.compare import compare_records
        >>> def case(i, hit):
        ...     return {
        ...         "id": f"q{i}",
        ...         "retrieved_context_ids": ["d"] if hit else ["x"],
        ...         "reference_context_ids": ["d"],
        ...         "style": "plain" if i % 2 else "paraphrased",
        ...     }
        >>> sets = {"a": [case(i, i % 2) for i in range(4)], "b": [case(i, True) for i in range(4)]}
        >>> s = slice_comparison(compare_records(sets, "ids", "hit_rate@1"), "style", records=sets)
        >>> {n: s.deltas["b"][n]["hit_rate@1"].mean for n in s.names}
        {'paraphrased': 1.0, 'plain': 0.0}
    """
    case_ids = list(comparison.query_ids)
    if labels is None:
        if records is None:
            raise InputError("slicing a comparison by a field needs the systems' records", field="by")
        labels, kind = _shared_labels(records, by, case_ids)
    s = comparison.settings
    out = slice_values(comparison.values, case_ids, list(comparison.metrics), labels, by=by, kind=kind,
                       baseline=comparison.baseline, order=order, resamples=s["resamples"],
                       confidence=s["confidence"], seed=s["seed"])
    if attach:
        comparison.summary["slices"] = out.to_json()
    return out
