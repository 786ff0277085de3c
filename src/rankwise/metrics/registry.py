"""Metric registry: each metric is a declarative object (name, parameters, aliases, description),
kept apart from the function that computes it. Names parse into bound :class:`Measure` objects.

Canonical names are ``metric@k`` (``ndcg@10``, ``precision@5``, ``mrr``) with non-default parameters
in parentheses (``wcp(decay=linear)@5``). trec_eval names (``P_5``, ``ndcg_cut_10``, ``recip_rank``,
``success_3``, ``Rprec`` ...) and ir_measures-like spellings (``P@5``, ``nDCG@10``, ``AP``) are aliases.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rankwise.errors import InputError
from rankwise.metrics import context, ir
from rankwise.metrics.matrix import RelevanceMatrix

__all__ = ["Metric", "Measure", "METRICS", "parse_measure", "parse_measures", "known_names"]


@dataclass(frozen=True)
class Metric:
    """A metric's declaration.

    Attributes:
        name: canonical base name (``ndcg``).
        compute: ``(matrix, k, **params) -> per-query values``.
        description: one line, shown in ``rankwise metrics`` and the README table.
        aliases: other base names (matched case-insensitively).
        cutoff: ``"optional"``, ``"required"`` or ``"none"``.
        params: parameter defaults; allowed values are checked by ``compute``.
        trec_name: trec_eval's name for a cutoff (``lambda k: f"P_{k}"``), None if trec_eval has none.
        aggregate: ``"mean"`` or ``"sum"`` (counts) over queries.
        undefined_is_nan: the metric returns NaN for queries where it is undefined (set metrics).
    """

    name: str
    compute: Callable[..., np.ndarray]
    description: str
    aliases: tuple[str, ...] = ()
    cutoff: str = "optional"
    params: dict[str, Any] = field(default_factory=dict)
    trec_name: Callable[[int | None], str | None] | None = None
    aggregate: str = "mean"
    undefined_is_nan: bool = False


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

    @property
    def name(self) -> str:
        base = self.metric.name
        if self.params:
            base += "(" + ",".join(f"{k}={_show(v)}" for k, v in self.params) + ")"
        return base if self.k is None else f"{base}@{self.k}"

    @property
    def trec_name(self) -> str | None:
        if self.metric.trec_name is None or self.params:
            return None
        return self.metric.trec_name(self.k)

    def __call__(self, matrix: RelevanceMatrix) -> np.ndarray:
        params = {**self.metric.params, **dict(self.params)}
        return self.metric.compute(matrix, self.k, **params)

    def __str__(self) -> str:
        return self.name


def _show(v: Any) -> str:
    return getattr(v, "__name__", str(v))


def _cut(fmt_k: str, fmt_all: str | None = None):
    def name(k):
        if k is None:
            return fmt_all
        return fmt_k.format(k=k)

    return name


def _set_precision(m: RelevanceMatrix, k=None) -> np.ndarray:
    values = ir.precision(m, None)
    return np.where(m.lengths > 0, values, np.nan)


def _set_recall(m: RelevanceMatrix, k=None) -> np.ndarray:
    values = ir.recall(m, None)
    return np.where(m.n_relevant > 0, values, np.nan)


def _f1_wcp(m, k=None, decay="log", ideal="k"):
    return context.harmonic_mean(context.wcp(m, k, decay, ideal), context.context_recall(m, k))


def _f1_acp(m, k=None, ragas_compat=False):
    return context.harmonic_mean(context.acp(m, k, ragas_compat), context.context_recall(m, k))


_DEFS = [
    Metric("hit_rate", ir.hit_rate, "1 if any relevant item is in the top k", ("success", "hits", "hit"),
           trec_name=_cut("success_{k}")),
    Metric("precision", ir.precision, "relevant items in the top k / k", ("p", "prec"),
           trec_name=_cut("P_{k}", "set_P")),
    Metric("recall", ir.recall, "relevant items in the top k / R", ("r", "rec"),
           trec_name=_cut("recall_{k}", "set_recall")),
    Metric("f1", ir.f1, "harmonic mean of precision@k and recall@k", ("f", "f_measure"),
           trec_name=_cut("f1_{k}", "set_F")),
    Metric("mrr", ir.mrr, "1 / rank of the first relevant item (0 past k)", ("recip_rank", "rr"),
           trec_name=_cut("recip_rank_{k}", "recip_rank")),
    Metric("map", ir.average_precision, "sum of precision@i at relevant ranks i <= k, / R",
           ("ap", "map_cut"), trec_name=_cut("map_cut_{k}", "map")),
    Metric("r_precision", ir.r_precision, "relevant items in the top R / R", ("rprec", "r_prec"),
           cutoff="none", trec_name=_cut("Rprec", "Rprec")),
    Metric("ndcg", ir.ndcg, "DCG@k / ideal DCG@k, gain = grade (trec_eval)", ("ndcg_cut",),
           trec_name=_cut("ndcg_cut_{k}", "ndcg")),
    Metric("ndcg_exp", lambda m, k=None: ir.ndcg(m, k, gain="exp"),
           "nDCG with gain 2^grade - 1 (Burges)", ("ndcg_burges",)),
    Metric("bpref", ir.bpref, "trec_eval's bpref: relevant ranked above judged non-relevant",
           cutoff="none", trec_name=_cut("bpref", "bpref")),
    Metric("wcp", context.wcp, "rank-weighted share of the top K that is relevant",
           ("weighted_context_precision",), params={"decay": "log", "ideal": "k"}),
    Metric("acp", context.acp, "mean precision@i over relevant ranks (Ragas context precision)",
           ("average_context_precision", "context_precision"), params={"ragas_compat": False}),
    Metric("context_recall", context.context_recall, "share of ground-truth passages found in the top K",
           ("ctx_recall",)),
    Metric("f1_wcp", _f1_wcp, "harmonic mean of wcp@K and context_recall@K",
           params={"decay": "log", "ideal": "k"}),
    Metric("f1_acp", _f1_acp, "harmonic mean of acp@K and context_recall@K", params={"ragas_compat": False}),
    Metric("set_precision", _set_precision, "distinct relevant retrieved / distinct retrieved (order-blind)",
           ("id_precision",), cutoff="none", undefined_is_nan=True),
    Metric("set_recall", _set_recall, "distinct gold retrieved / distinct gold (order-blind)",
           ("id_recall",), cutoff="none", undefined_is_nan=True),
    Metric("num_q", ir.num_q, "queries evaluated", cutoff="none", trec_name=_cut("num_q", "num_q"),
           aggregate="sum"),
    Metric("num_ret", ir.num_ret, "items retrieved", trec_name=_cut("num_ret", "num_ret"), cutoff="none",
           aggregate="sum"),
    Metric("num_rel", ir.num_rel, "relevant judgements (R)", cutoff="none",
           trec_name=_cut("num_rel", "num_rel"), aggregate="sum"),
    Metric("num_rel_ret", ir.num_rel_ret, "relevant items retrieved", cutoff="none",
           trec_name=_cut("num_rel_ret", "num_rel_ret"), aggregate="sum"),
]

METRICS: dict[str, Metric] = {m.name: m for m in _DEFS}
_LOOKUP: dict[str, Metric] = {}
for _m in _DEFS:
    for _n in (_m.name, *_m.aliases):
        _LOOKUP[_n.lower()] = _m

_PARAM_VALUES = {"decay": ("log", "linear"), "ideal": ("k", "attainable"), "ragas_compat": (False, True)}
_NAME_RE = re.compile(r"^(?P<base>[A-Za-z][A-Za-z0-9_]*?)(?:\((?P<params>[^)]*)\))?"
                      r"(?:(?:@|_cut_|_cut\.|_|\.)(?P<k>\d+))?$")


def known_names() -> list[str]:
    """Every base name and alias, plus example spellings with cutoffs."""
    names = sorted(_LOOKUP)
    return names + ["ndcg@10", "precision@5", "recall@100", "P_5", "ndcg_cut_10", "success_3", "map@100",
                    "hit_rate@5", "wcp@5", "acp@5", "mrr@10", "Rprec"]


def _parse_value(key: str, raw: str):
    raw = raw.strip()
    if key == "ragas_compat":
        if raw.lower() in ("true", "1", "yes"):
            return True
        if raw.lower() in ("false", "0", "no"):
            return False
    elif raw in _PARAM_VALUES.get(key, ()):
        return raw
    raise ValueError(f"{key} must be one of {list(_PARAM_VALUES.get(key, ()))}, not {raw!r}")


def parse_measure(name: str | Measure) -> Measure:
    """Parse a metric name (canonical or alias) into a :class:`Measure`.

    Example:
        >>> parse_measure("ndcg_cut_10").name
        'ndcg@10'
        >>> parse_measure("wcp(decay=linear)@3").name
        'wcp(decay=linear)@3'
    """
    if isinstance(name, Measure):
        return name
    text = str(name).strip()
    metric, k, params = None, None, ""
    if text.lower() in _LOOKUP:
        metric = _LOOKUP[text.lower()]
    else:
        match = _NAME_RE.match(text)
        if match:
            metric = _LOOKUP.get(match["base"].lower())
            k = int(match["k"]) if match["k"] else None
            params = match["params"] or ""
    if metric is None:
        close = difflib.get_close_matches(text.lower(), [n.lower() for n in known_names()], n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InputError(f"unknown metric {text!r}{hint} (`rankwise metrics` lists them all)", field="metric")
    if k is not None and metric.cutoff == "none":
        raise InputError(f"metric {metric.name!r} takes no cutoff (got {text!r})", field="metric")
    if k is None and metric.cutoff == "required":
        raise InputError(f"metric {metric.name!r} needs a cutoff, e.g. {metric.name}@10", field="metric")
    if k is not None and k < 1:
        raise InputError(f"cutoff must be >= 1 in {text!r}", field="metric")
    bound: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in params.split(","))):
        key, _, raw = part.partition("=")
        key = key.strip()
        if key not in metric.params:
            allowed = ", ".join(metric.params) or "none"
            raise InputError(f"metric {metric.name!r} has no parameter {key!r} (parameters: {allowed})",
                             field="metric")
        try:
            bound[key] = _parse_value(key, raw)
        except ValueError as exc:
            raise InputError(f"in {text!r}: {exc}", field="metric") from None
    nondefault = tuple(sorted((k_, v) for k_, v in bound.items() if metric.params.get(k_) != v))
    return Measure(metric, k, nondefault)


def parse_measures(names: Iterable[str | Measure]) -> list[Measure]:
    """Parse many names, dropping exact repeats but keeping order."""
    out: list[Measure] = []
    seen = set()
    for n in names:
        m = parse_measure(n)
        if m.name not in seen:
            seen.add(m.name)
            out.append(m)
    return out
