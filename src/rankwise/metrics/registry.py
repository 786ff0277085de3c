"""Metric registry: the catalogue's declarations (:mod:`rankwise.metrics.catalogue`) registered by
name, and every metric name parsed into a bound :class:`Measure`. Names parse once, here, into bound
:class:`Measure` objects; every command and API takes its metric names through
:func:`parse_measures`.

Canonical names are ``metric@k`` (``ndcg@10``, ``precision@5``, ``mrr``) with non-default parameters
in parentheses (``wcp(decay=linear)@5``). trec_eval names (``P_5``, ``ndcg_cut_10``, ``recip_rank``,
``success_3``, ``Rprec`` ...), trec_eval's list syntax (``P.5,10``, ``ndcg_cut.5,10``) and
ir_measures-like spellings (``P@5``, ``nDCG@10``, ``AP``) are accepted too. Definitions, formulas
and worked examples: ``docs/metrics.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from rankwise.errors import InputError
from rankwise.metrics._names import JG_NICKNAMES, PREFS_NICKNAMES, TREC_NICKNAMES, MeasureParamError
from rankwise.metrics.catalogue import CATALOGUE, TREC_BASES
from rankwise.metrics.declare import RANGE_NONNEGATIVE, RANGE_UNIT, Metric, Param, show
from rankwise.metrics.matrix import RelevanceMatrix

__all__ = ["Param", "Metric", "Measure", "METRICS", "UNIT_RANGE", "NONNEGATIVE", "parse_measure", "lookup_metric",
           "parse_measures", "split_metric_list", "known_names", "register", "asks_runid", "bind_named"]


_REQUIREMENTS = {
    "char_spans": ("character spans: retrieved chunks and reference passages with (doc_id, start, end), "
                   "scored with relevance 'span'"),
    "prefs": "preference judgements (rankwise eval -R prefs or -R qrels_prefs)",
    "qrels_jg": "qrels with judgement groups (rankwise eval -R qrels_jg)",
    "records": "per-case records (rankwise eval-rag on a test set or records; not a qrels + run)",
}


@dataclass(frozen=True)
class Measure:
    """A metric bound to a cutoff and parameters; calling it on a matrix gives per-query values.

    Example:
        >>> m = parse_measure("P_5")
        >>> m.name, m.k, m.trec_name
        ('precision@5', 5, 'P_5')
    """

    metric: Metric
    k: int | None = None
    params: tuple[tuple[str, Any], ...] = ()
    trec_text: str | None = field(default=None, compare=False)  # trec_eval's printed name, as written
    budget: int | None = None  # a context budget instead of a cutoff in chunks (metrics/budget.py)
    unit: str | None = None  # the budget's unit: c (characters) or t (tokens)

    @property
    def name(self) -> str:
        base = self.metric.name
        if self.params:
            base += "(" + ",".join(f"{k}={show(v)}" for k, v in self.params) + ")"
        if self.budget is not None:
            return f"{base}@{self.budget}{self.unit}"
        return base if self.k is None else f"{base}@{self.k}"

    @property
    def trec_name(self) -> str | None:
        if self.metric.trec_name is None or self.budget is not None:
            return None
        if self.trec_text is not None:
            return self.trec_text
        if self.metric.trec_param is not None:
            return self.metric.trec_name(self.k, **dict(self.params))
        if self.params:
            return None
        return self.metric.trec_name(self.k)

    @property
    def all_params(self) -> dict[str, Any]:
        return {**self.metric.defaults, **dict(self.params)}

    def check(self, matrix: RelevanceMatrix) -> None:
        """InputError when ``matrix`` lacks what this metric needs (e.g. character spans)."""
        for need in self.metric.requires:
            if not matrix.has(need):
                raise InputError(f"{self.name} needs {_REQUIREMENTS.get(need, need)}", field="metric")

    def __call__(self, matrix: RelevanceMatrix) -> np.ndarray:
        self.check(matrix)
        kwargs = self.all_params
        if self.budget is not None:
            from rankwise.metrics.budget import budget_values

            assert self.unit is not None
            return budget_values(self.metric.name, matrix, self.budget, self.unit, **kwargs)
        if self.metric.trec_reset:
            kwargs["bare"] = self.metric.trec_param not in dict(self.params)
        try:
            return self.metric.compute(matrix, self.k, **kwargs)
        except MeasureParamError as exc:  # a malformed gain map, coefficient list ...: one line
            raise InputError(f"{self.name}: {exc}", field="metric") from None

    def __str__(self) -> str:
        return self.name


METRICS: dict[str, Metric] = {}
_LOOKUP: dict[str, Metric] = {}
# trec_eval's base names for its dotted list syntax (``P.5,10``), beside the metric they mean
_TREC_BASES: dict[str, Metric] = {}


def register(metric: Metric, *, trec_bases: Iterable[str] = ()) -> Metric:
    """Add a metric to the registry (its name and aliases become parseable).

    ``trec_bases`` are trec_eval's names that take a dotted list (``P`` in ``P.5,10``).

    Example:
        >>> "char_recall" in METRICS and METRICS["char_recall"].requires
        ('char_spans',)
    """
    for n in (metric.name, *metric.aliases):
        if n.lower() in _LOOKUP and _LOOKUP[n.lower()] is not metric:
            raise ValueError(f"metric name {n!r} is already registered")
    METRICS[metric.name] = metric
    for n in (metric.name, *metric.aliases):
        _LOOKUP[n.lower()] = metric
    for b in trec_bases:
        _TREC_BASES[b.lower()] = metric
    return metric


for _m in CATALOGUE:
    register(_m, trec_bases=TREC_BASES.get(_m.name, ()))

#: the metrics whose every per-query value lies in [0, 1] at their default parameters
#: (``Metric.value_range``); with text or id ground truth this rests on the redundancy rule
#: (docs/context-metrics.md, "Redundant chunks")
UNIT_RANGE = frozenset(m.name for m in CATALOGUE if m.value_range == RANGE_UNIT)
#: the metrics whose values are counts or sums of non-negative gains: never below 0
#: (calls_to_evidence: >= 1)
NONNEGATIVE = frozenset(m.name for m in CATALOGUE if m.value_range == RANGE_NONNEGATIVE)

# parameters may nest one metric in another (``merged(metric=wcp(decay=linear))@5``): the outer
# parentheses take everything up to the last ")" before the cutoff
_NAME_RE = re.compile(r"^(?P<base>[A-Za-z][A-Za-z0-9_]*?)(?:\((?P<params>.*)\))?"
                      r"(?:@(?P<budget>\d+)(?P<unit>[ct])|(?:@|_cut_|_cut\.|_|\.)(?P<k>\d+))?$")
_TREC_LIST_RE = re.compile(r"^(?P<base>[A-Za-z0-9][A-Za-z0-9_]*)\.(?P<values>[0-9A-Za-z.=,\s+-]+)$")


def known_names() -> list[str]:
    """Every base name and alias, plus example spellings with cutoffs."""
    names = sorted(_LOOKUP)
    return names + ["ndcg@10", "precision@5", "recall@100", "P_5", "P.5,10", "ndcg_cut_10", "ndcg_cut.5,10",
                    "success_3", "map@100", "hit_rate@5", "wcp@5", "acp@5", "mrr@10", "Rprec", "char_recall@5"]


def split_metric_list(text: str) -> list[str]:
    """Split a comma-separated metric list; commas inside parentheses and trec_eval's dotted lists
    (``P.5,10``) stay with their metric.

    Example:
        >>> split_metric_list("P.5,10,wcp(decay=linear,ideal=k)@5, map")
        ['P.5,10', 'wcp(decay=linear,ideal=k)@5', 'map']
    """
    parts: list[str] = []
    depth, cur = 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    out: list[str] = []
    for p in parts:
        if not p:
            continue
        # a bare value continues the previous trec_eval list: "P.5" "10" -> "P.5,10"
        if out and re.fullmatch(r"[0-9.=+-]+", p) and _TREC_LIST_RE.match(out[-1]):
            out[-1] += "," + p
        else:
            out.append(p)
    return out


def _unknown(text: str) -> InputError:
    """The error for a name that is no metric: a cutoff below 1 says so; a misspelt base name keeps
    the cutoff and parameters the user wrote in its suggestions (``ndgc@5`` -> ``ndcg@5``)."""
    import difflib

    negative = re.fullmatch(r"(?P<base>[A-Za-z][A-Za-z0-9_]*?)(?:\([^)]*\))?(?:@|_cut_|_cut\.|_|\.)-\d+", text)
    if negative and negative["base"].lower() in _LOOKUP:
        return InputError(f"cutoff must be >= 1 in {text!r}", field="metric")
    match = _NAME_RE.match(text)
    close: list[str] = []
    if match and match["base"].lower() not in _LOOKUP:
        rest = text[len(match["base"]):]
        wanted = [n for n, m in _LOOKUP.items() if not (match["k"] and m.cutoff == "none")]
        found = difflib.get_close_matches(match["base"].lower(), wanted, n=5, cutoff=0.6)
        close = list(dict.fromkeys(_LOOKUP[n].name + rest for n in found))[:3]
    if not close:
        close = difflib.get_close_matches(text.lower(), [n.lower() for n in known_names()], n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return InputError(f"unknown metric {text!r}{hint} (`rankwise metrics` lists them all)", field="metric")


def _bind(metric: Metric, k: int | None, params: dict[str, Any], text: str, *, written: bool = False) -> Measure:
    """``metric`` at cutoff ``k`` with ``params``; those at their default are dropped from the name
    unless ``written`` (trec_eval's ``utility.1,-1,0,0`` prints ``utility_1,-1,0,0``, not
    ``utility``)."""
    if k is not None and metric.cutoff == "none":
        raise InputError(f"metric {metric.name!r} takes no cutoff (got {text!r})", field="metric")
    if k is None and metric.cutoff == "required":
        raise InputError(f"metric {metric.name!r} needs a cutoff, e.g. {metric.name}@10", field="metric")
    if k is not None and k < 1:
        raise InputError(f"cutoff must be >= 1 in {text!r}", field="metric")
    values = {**metric.defaults, **params}
    shown = []
    for p in metric.params:
        if p.required:
            if p.name not in params:
                example = ",".join(f"{q.name}={show(q.default)}" for q in metric.params if q.required)
                raise InputError(f"in {text!r}: {metric.name} needs {p.name}=..., e.g. {metric.name}({example})@5 "
                                 f"(`rankwise metrics {metric.name}` lists its parameters)", field="metric")
            shown.append((p.name, params[p.name]))
            continue
        if p.applies_when is not None:
            other, wanted = p.applies_when
            if values.get(other) != wanted:
                if p.name in params:
                    raise InputError(f"in {text!r}: {p.name} applies only with {other}={show(wanted)}",
                                     field="metric")
                continue
            shown.append((p.name, values[p.name]))
        elif p.name in params and (params[p.name] != p.default or written):
            shown.append((p.name, params[p.name]))
    return Measure(metric, k, tuple(shown))


def bind_named(name: str, k: int | None) -> Measure:
    """A metric named inside another metric's name (``merged(metric=wcp(decay=linear))@5``), with
    the parameters its name gives, at the outer cutoff (none when the named metric takes none).

    Example:
        >>> bind_named("wcp(decay=linear)", 5).name
        'wcp(decay=linear)@5'
    """
    base, _, rest = name.partition("(")
    metric = _LOOKUP[base.strip().lower()]
    params = _parse_params(metric, rest[:-1], name) if rest.endswith(")") else {}
    return _bind(metric, None if metric.cutoff == "none" else k, params, name)


def _parse_params(metric: Metric, raw: str, text: str) -> dict[str, Any]:
    bound: dict[str, Any] = {}
    for part in split_metric_list(raw):  # commas inside a nested metric's parentheses stay with it
        key, _, value = part.partition("=")
        declared = metric.param(key.strip())
        if declared is None:
            allowed = ", ".join(p.name for p in metric.params) or "none"
            raise InputError(f"metric {metric.name!r} has no parameter {key.strip()!r} (parameters: {allowed})",
                             field="metric")
        try:
            bound[declared.name] = declared.parse(value)
        except ValueError as exc:
            raise InputError(f"in {text!r}: {exc}", field="metric") from None
        if declared.nests:
            bind_named(bound[declared.name], 1)  # the nested metric's own parameters: refused now, not when scoring
    return bound


def _parse_trec_list(text: str) -> list[Measure] | None:
    """trec_eval's ``base.v1,v2`` syntax; None when ``text`` is not in it."""
    match = _TREC_LIST_RE.match(text)
    if not match:
        return None
    metric = _TREC_BASES.get(match["base"].lower()) or _LOOKUP.get(match["base"].lower())
    if metric is None:
        return None
    if metric.trec_param is None and "=" in match["values"]:  # a gain map: ndcg.1=1,2=3
        metric = _TREC_BASES.get(match["base"].lower() + "=", metric)
    values = [v.strip() for v in match["values"].split(",") if v.strip()]
    if metric.trec_param is not None:
        declared = metric.param(metric.trec_param)
        assert declared is not None, metric.name
        if declared.kind is str:  # the whole list is one value (a gain map: ndcg.1=1,2=3)
            return [_bind(metric, None, {declared.name: declared.parse(",".join(values))}, text,
                          written=metric.trec_reset)]
        out = []
        for v in values:
            try:
                measure = _bind(metric, None, {declared.name: declared.parse(v)}, text,
                                written=metric.trec_reset)
            except ValueError as exc:
                raise InputError(f"in {text!r}: {exc}", field="metric") from None
            if metric.trec_as_written and metric.trec_name is not None:  # set_F.1.0 prints set_F_1.0
                measure = replace(measure, trec_text=f"{metric.trec_name(None)}_{v}")
            out.append(measure)
        return out
    if metric.cutoff == "none":
        raise InputError(f"metric {metric.name!r} takes no cutoff (got {text!r})", field="metric")
    if any(re.fullmatch(r"-\d+", v) for v in values):
        raise InputError(f"cutoff must be >= 1 in {text!r}", field="metric")
    if not all(v.isdigit() for v in values):
        raise InputError(f"in {text!r}: trec_eval cutoffs must be integers", field="metric")
    return [_bind(metric, int(v), {}, text) for v in values]


def lookup_metric(name: str) -> Metric:
    """The metric a name means: a base name or alias as is (``per_call``, whose ``metric`` parameter
    a measure must give), else any spelling :func:`parse_measure` reads (``P@5``).

    Example:
        >>> lookup_metric("per_call").name, lookup_metric("P_5").name
        ('per_call', 'precision')
    """
    found = _LOOKUP.get(name.strip().lower())
    return found if found is not None else parse_measure(name).metric


def parse_measure(name: str | Measure) -> Measure:
    """Parse one metric name (canonical, alias or trec_eval's) into a :class:`Measure`.

    Example:
        >>> parse_measure("ndcg_cut_10").name
        'ndcg@10'
        >>> parse_measure("wcp(decay=linear)@3").name
        'wcp(decay=linear)@3'
    """
    if isinstance(name, Measure):
        return name
    found = parse_measures([name])
    if len(found) != 1:
        raise InputError(f"{name!r} names {len(found)} metrics; give one", field="metric")
    return found[0]


_NICKNAMES = {**TREC_NICKNAMES, **PREFS_NICKNAMES, **JG_NICKNAMES}


def asks_runid(names: Iterable[str | Measure] | str | None) -> bool:
    """Whether trec_eval would print its ``runid`` line for these measure names: when none are given
    (its default set, ``official``), or when they hold ``runid`` itself or a set that holds it
    (``official``, ``set``, ``all_trec``). ``runid`` is no metric: it names the run in trec_eval's
    output.

    Example:
        >>> (
        ...     asks_runid(None),
        ...     asks_runid(["P.5", "runid"]),
        ...     asks_runid("all_trec"),
        ...     asks_runid(["map"]),
        ... )
        (True, True, True, False)
    """
    if names is None:
        return True
    names = [names] if isinstance(names, str) else list(names)
    parts = [p for n in names if not isinstance(n, Measure) for p in split_metric_list(str(n))]
    if not parts and not any(isinstance(n, Measure) for n in names):
        return True
    return any(p.lower() == "runid" or "runid" in _NICKNAMES.get(p, ()) for p in parts)


def _check_parentheses(text: str) -> None:
    """A name whose parentheses do not pair up is refused: with nested metrics
    (``merged(metric=wcp(...))``) a missing ")" would otherwise read as the inner metric's defaults.
    """
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            break
    if depth:
        raise InputError(f"unbalanced parentheses in {text!r}", field="metric")


def _parse_one(text: str) -> list[Measure]:
    if text in _NICKNAMES:  # trec_eval's measure sets: all_trec, official, set
        return [m for part in _NICKNAMES[text] for m in _parse_one(part)]
    if text.lower() == "runid":  # trec_eval's runid line names the run: no metric (see asks_runid)
        return []
    if text.lower() in _LOOKUP:
        return [_bind(_LOOKUP[text.lower()], None, {}, text)]
    trec = _parse_trec_list(text)
    if trec is not None:
        return trec
    _check_parentheses(text)
    printed = re.fullmatch(r"(?P<base>[A-Za-z][A-Za-z0-9_]*?)_(?P<value>\d*\.?\d+)", text)
    if printed and getattr(_LOOKUP.get(printed["base"].lower()), "trec_param", None):
        return _parse_one(f"{printed['base']}.{printed['value']}")  # as printed: iprec_at_recall_0.10
    match = _NAME_RE.match(text)
    metric = _LOOKUP.get(match["base"].lower()) if match else None
    if metric is None or match is None:
        raise _unknown(text)
    k = int(match["k"]) if match["k"] else None
    measure = _bind(metric, k, _parse_params(metric, match["params"] or "", text), text)
    if match["budget"]:
        measure = _at_budget(measure, int(match["budget"]), match["unit"], text)
    return [measure]


def _at_budget(measure: Measure, budget: int, unit: str, text: str) -> Measure:
    """``measure`` cut at a context budget (``recall@1500c``): only the metrics
    :mod:`~rankwise.metrics.budget` defines take one."""
    from rankwise.metrics.budget import BUDGET_METRICS

    if measure.metric.name not in BUDGET_METRICS:
        raise InputError(f"{measure.metric.name} takes no budget cutoff (got {text!r}); budgets in characters "
                         f"(@1500c) or tokens (@512t) apply to {', '.join(BUDGET_METRICS)}", field="metric")
    if budget < 1:
        raise InputError(f"a budget must be at least 1 in {text!r}", field="metric")
    return replace(measure, budget=budget, unit=unit)


def parse_measures(names: Iterable[str | Measure] | str) -> list[Measure]:
    """Parse metric names into measures, dropping exact repeats but keeping order.

    Each item may be a comma-separated list (``"P@5,ndcg@10"``) or use trec_eval's syntax
    (``"P.5,10"`` is ``precision@5`` and ``precision@10``).

    Example:
        >>> [m.name for m in parse_measures(["P.5,10", "ndcg_cut.5", "map,recip_rank"])]
        ['precision@5', 'precision@10', 'ndcg@5', 'map', 'mrr']
    """
    if isinstance(names, str):
        names = [names]
    out: list[Measure] = []
    seen = set()
    for n in names:
        if isinstance(n, Measure):
            items: list[Measure] = [n]
        else:
            items = [m for part in split_metric_list(str(n)) for m in _parse_one(part)]
        for m in items:
            if m.name not in seen:
                seen.add(m.name)
                out.append(m)
    return out
