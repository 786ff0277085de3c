"""Metric registry: each metric is a declarative object (name, parameters, aliases, description),
kept apart from the function that computes it. Names parse once, here, into bound :class:`Measure`
objects; every command and API takes its metric names through :func:`parse_measures`.

Canonical names are ``metric@k`` (``ndcg@10``, ``precision@5``, ``mrr``) with non-default parameters
in parentheses (``wcp(decay=linear)@5``). trec_eval names (``P_5``, ``ndcg_cut_10``, ``recip_rank``,
``success_3``, ``Rprec`` ...), trec_eval's list syntax (``P.5,10``, ``ndcg_cut.5,10``) and
ir_measures-like spellings (``P@5``, ``nDCG@10``, ``AP``) are accepted too. Definitions, formulas and
worked examples: ``docs/metrics.md``.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from rankwise.errors import InputError
from rankwise.metrics import context, ir
from rankwise.metrics._names import (
    JG_NICKNAMES,
    PREFS_MEASURES,
    PREFS_NICKNAMES,
    TREC_NICKNAMES,
    MeasureParamError,
)
from rankwise.metrics._references import REFERENCES
from rankwise.metrics.matrix import RelevanceMatrix

__all__ = ["Param", "Metric", "Measure", "METRICS", "UNIT_RANGE", "NONNEGATIVE", "parse_measure", "lookup_metric",
           "parse_measures", "split_metric_list", "known_names", "register", "asks_runid", "trec_metrics",
           "call_metrics"]


@dataclass(frozen=True)
class Param:
    """One declared parameter of a metric (as ir_measures' ``SUPPORTED_PARAMS``).

    Attributes:
        name: the parameter's name in metric names (``decay`` in ``wcp(decay=linear)@5``).
        kind: ``str``, ``bool``, ``int`` or ``float``.
        default: the value when the name does not give one.
        description: one line, shown by ``rankwise metrics``.
        choices: the allowed values (empty: any value of ``kind``).
        bounds: for numbers, the open interval the value must lie in.
        applies_when: ``(other parameter, value)`` this one qualifies (``p`` applies when ``decay=rbp``):
            refused otherwise, and always spelled out in the name when it applies.
        required: the name must give it (``metric`` in ``per_call(metric=recall,call=1)@5``); always shown.
        nests: the value is a metric name with its own parameters allowed (``merged(metric=wcp(decay=linear))``).

    Example:
        >>> Param("decay", str, "log", "rank discount", ("log", "linear")).parse("linear")
        'linear'
    """

    name: str
    kind: type
    default: Any
    description: str
    choices: tuple = ()
    bounds: tuple[float, float] | None = None
    applies_when: tuple[str, Any] | None = None
    required: bool = False
    #: the value names a metric that may carry its own parameters (``metric=wcp(decay=linear)``)
    nests: bool = False

    def parse(self, raw: str) -> Any:
        """The value of ``raw`` (text from a metric name); ValueError naming the allowed values."""
        text = raw.strip()
        value: Any
        if self.kind is bool:
            lowered = text.lower()
            if lowered in ("true", "1", "yes"):
                value = True
            elif lowered in ("false", "0", "no"):
                value = False
            else:
                raise ValueError(f"{self.name} must be true or false, not {text!r}")
        elif self.kind in (int, float):
            try:
                value = self.kind(text)
            except ValueError:
                raise ValueError(f"{self.name} must be a number ({self.kind.__name__}), not {text!r}") from None
        else:
            value = text
        base = value.split("(", 1)[0].strip() if self.nests and isinstance(value, str) else value
        if self.choices and base not in self.choices:
            raise ValueError(f"{self.name} must be one of {', '.join(map(str, self.choices))}, not {text!r}")
        if self.bounds is not None and not self.bounds[0] < value < self.bounds[1]:
            raise ValueError(f"{self.name} must be between {self.bounds[0]:g} and {self.bounds[1]:g} "
                             f"(exclusive), not {text!r}")
        return value

    def describe(self) -> str:
        allowed = "|".join(_show(c) for c in self.choices) if self.choices else self.kind.__name__
        if self.bounds is not None:
            allowed += f" in ({self.bounds[0]:g}, {self.bounds[1]:g})"
        if self.required:
            return f"{self.name} (required, e.g. {self.name}={_show(self.default)}; {allowed}): {self.description}"
        return f"{self.name}={_show(self.default)} ({allowed}): {self.description}"


@dataclass(frozen=True)
class Metric:
    """A metric's declaration.

    Attributes:
        name: canonical base name (``ndcg``).
        compute: ``(matrix, k, **params) -> per-query values``.
        description: one line, shown in ``rankwise metrics`` and the docs.
        aliases: other base names (matched case-insensitively).
        cutoff: ``"optional"``, ``"required"`` or ``"none"``.
        params: declared parameters (:class:`Param`).
        trec_name: trec_eval's name for a cutoff (``lambda k: f"P_{k}"``), None if trec_eval has none.
        aggregate: ``"mean"``, ``"sum"`` (counts) or ``"gmean"`` (geometric mean) over queries.
        undefined_is_nan: the metric returns NaN for queries where it is undefined (id-set metrics).
        requires: what the relevance matrix must carry (``"char_spans"``), checked before computing.
        trec_param: the parameter trec_eval's dotted list fills (``iprec_at_recall.0.1,0.2``); None: the
            list gives cutoffs (``P.5,10``).
        trec_as_written: trec_eval prints the parameter as it was written (``set_F.0.50`` prints
            ``set_F_0.50``), not formatted from its value.
        formula: the definition in one line (notation in :mod:`rankwise.metrics._references`).
        reference: where the metric is defined (paper, or the tool whose behaviour it follows).
        trec_reset: trec_eval resets the value of queries missing from the run (``-c``) only under the
            bare name; ``compute`` takes ``bare`` (False when ``trec_param`` is written out, even at its
            default: ``utility.1,-1,0,0`` prints ``utility_1,-1,0,0`` and keeps the placeholder's value).
        undefined_when: when ``undefined_is_nan``, the sentence saying when a case has no value (summaries).
        value_range: the closed interval every per-query value lies in at the default parameters, on any
            input and under every verdict source (None: unbounded, or bounded only for some gains);
            tests/conformance/test_rag_invariants.py holds each declared range on random records. Metrics listed in
            :data:`UNIT_RANGE` get ``(0.0, 1.0)`` when registered, those in :data:`NONNEGATIVE` ``(0.0, inf)``.
    """

    name: str
    compute: Callable[..., np.ndarray]
    description: str
    aliases: tuple[str, ...] = ()
    cutoff: str = "optional"
    params: tuple[Param, ...] = ()
    trec_name: Callable[..., str | None] | None = None
    aggregate: str = "mean"
    undefined_is_nan: bool = False
    requires: tuple[str, ...] = ()
    trec_param: str | None = None
    trec_as_written: bool = False
    formula: str = ""
    reference: str = ""
    trec_reset: bool = False
    undefined_when: str = ""
    value_range: tuple[float, float] | None = None

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    @property
    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}


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
            base += "(" + ",".join(f"{k}={_show(v)}" for k, v in self.params) + ")"
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


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return getattr(v, "__name__", str(v))


def _cut(fmt_k: str, fmt_all: str | None = None):
    def name(k):
        if k is None:
            return fmt_all
        return fmt_k.format(k=k)

    return name


class _Deferred:
    """A measure function imported on its first call: trec_eval's less common measures (``metrics/trec.py``),
    the preference (``prefs.py``) and judgement-group (``jg.py``) ones are declared here without importing
    their modules, so ``rankwise eval`` of the common measures starts without them."""

    __slots__ = ("module", "attr", "key", "_fn")

    def __init__(self, module: str, attr: str, key: str | None = None):
        self.module, self.attr, self.key, self._fn = module, attr, key, None

    def resolve(self) -> Callable[..., Any]:
        if self._fn is None:
            found = getattr(importlib.import_module(self.module), self.attr)
            self._fn = found if self.key is None else found[self.key][0]
        return self._fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<measure {self.module}.{self.key or self.attr}>"


class _DeferredModule:
    """``trec.iprec_at_recall`` in the declarations below: a :class:`_Deferred` of that function."""

    def __init__(self, module: str):
        self._module = module

    def __getattr__(self, attr: str) -> _Deferred:
        return _Deferred(self._module, attr)


trec = _DeferredModule("rankwise.metrics.trec")
calls = _DeferredModule("rankwise.metrics.calls")
jg = _DeferredModule("rankwise.metrics.jg")


_DECAY = Param("decay", str, "log", "rank discount: log 1/log2(i+1), linear 1/i, rbp p^(i-1), power i^-a, "
               "flat 1, curve = a measured position curve", context.DECAYS)
_P = Param("p", float, 0.8, "decay=rbp: patience p, the weight of each next rank", bounds=(0.0, 1.0),
           applies_when=("decay", "rbp"))
_A = Param("a", float, 1.0, "decay=power: exponent a of i^-a", bounds=(0.0, 100.0),
           applies_when=("decay", "power"))
_CURVE = Param("curve", str, "", "decay=curve: path of a position-curve JSON file (rankwise position-curve)",
               applies_when=("decay", "curve"))
_IDEAL = Param("ideal", str, "k", "denominator: all K positions (k) or only min(K, R) (attainable)",
               ("k", "attainable"))
_RAGAS = Param("ragas_compat", bool, False, "add Ragas' 1e-10 to the denominator (a perfect list scores "
               "0.9999999999)", (False, True))


def _f1_wcp(m, k=None, decay="log", ideal="k", p=0.8, a=1.0, curve=""):
    return context.harmonic_mean(context.wcp(m, k, decay, ideal, p, a, curve), context.context_recall(m, k))


def _f1_acp(m, k=None, ragas_compat=False):
    return context.harmonic_mean(context.acp(m, k, ragas_compat), context.context_recall(m, k))


def _with(base: str, param: str, fmt: str | Callable[[Any], str] = "{}"):
    """trec_eval's printed name: ``base`` alone at the default, ``base_<value>`` otherwise."""
    def name(k, **params):
        value = params.get(param)
        if value in (None, ""):
            return base
        return f"{base}_{fmt(value) if callable(fmt) else fmt.format(value)}"

    return name


def _rbp_name(base: str):
    def name(k, p=None, gains=""):
        spec = ",".join(x for x in ((f"p={p}" if p is not None else ""), gains) if x)
        return base if not spec else f"{base}_{spec}"

    return name


def _short(value: float) -> str:
    """A float as one would write it in a name: 2.0 -> 2, 0.5 -> 0.5."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


_BETA = Param("beta", float, 1.0, "relative importance of recall to precision, as trec_eval's set_F.beta "
              "(used as is, not squared)", bounds=(0.0, math.inf))
_GAINS = Param("gains", str, "", "trec_eval gain map level=gain,... (default: gain = grade)")
_P_RBP = Param("p", float, 0.9, "persistence: the chance of reading on to the next rank")
_NERR = (Param("min_rel", int, 0, "grade of gain 0"), Param("max_rel", int, 4, "grade of gain 1"))


def trec_metrics() -> list[Metric]:
    """The rest of trec_eval 10.0's measures, plus ``judged`` and ``err`` (see docs/trec-measures.md)."""
    return [
        Metric("iprec_at_recall", trec.iprec_at_recall, "interpolated precision at a recall level: max P@i "
               "over ranks at or past where recall reaches it", cutoff="none",
               params=(Param("recall", float, 0.0, "recall level in [0, 1]"),), trec_param="recall",
               trec_name=lambda k, recall=0.0: f"iprec_at_recall_{recall:3.2f}"),
        Metric("11pt_avg", trec.eleven_pt_avg, "mean interpolated precision at recall 0, 0.1, ..., 1",
               ("eleven_pt_avg",), cutoff="none",
               params=(Param("points", str, "", "recall points, comma-separated (default the 11)"),),
               trec_param="points", trec_name=_with("11pt_avg", "points")),
        Metric("gm_map", trec.average_precision_seq, "geometric mean of AP over queries (floor 1e-5); per "
               "query: AP", cutoff="none", aggregate="gmean", trec_name=_cut("gm_map", "gm_map")),
        Metric("gm_bpref", trec.bpref_seq, "geometric mean of bpref over queries (floor 1e-5); per query: "
               "bpref", cutoff="none", aggregate="gmean", trec_name=_cut("gm_bpref", "gm_bpref")),
        Metric("inf_ap", trec.inf_ap, "inferred AP (Yilmaz & Aslam): AP estimated from a sampled pool",
               ("infAP",), cutoff="none", trec_name=_cut("infAP", "infAP")),
        Metric("Rprec_mult", trec.rprec_mult, "precision at rank mult * R (past the list: relevant "
               "retrieved / that rank)", cutoff="none",
               params=(Param("mult", float, 1.0, "multiple of R"),), trec_param="mult",
               trec_name=lambda k, mult=1.0: f"Rprec_mult_{mult:3.2f}"),
        Metric("set_map", trec.set_map, "relevant retrieved^2 / (retrieved * R)", cutoff="none",
               trec_name=_cut("set_map", "set_map")),
        Metric("set_relative_P", trec.set_relative_p, "relevant retrieved / min(retrieved, R)",
               cutoff="none", trec_name=_cut("set_relative_P", "set_relative_P")),
        Metric("relative_P", trec.relative_p, "relevant in the top k / min(k, R)",
               trec_name=_cut("relative_P_{k}")),
        Metric("utility", trec.utility, "a*relret + b*nonrelret + c*relmissed + d*nonrelmissed "
               "(default 1,-1,0,0)", cutoff="none",
               params=(Param("coefficients", str, "1,-1,0,0", "a,b,c,d"),
                       Param("num_docs", int, 0, "documents in the collection (trec_eval -N)")),
               trec_param="coefficients", trec_name=_with("utility", "coefficients"), trec_reset=True),
        Metric("num_nonrel_judged_ret", trec.num_nonrel_judged_ret, "judged non-relevant items retrieved",
               cutoff="none", aggregate="sum", trec_name=_cut("num_nonrel_judged_ret", "num_nonrel_judged_ret")),
        Metric("ndcg_gains", trec.ndcg_gains, "nDCG over the whole ranking under a trec_eval gain map "
               "(ndcg.1=1,2=3,3=7)", cutoff="none", params=(_GAINS,), trec_param="gains",
               trec_name=_with("ndcg", "gains")),
        Metric("ndcg_rel", trec.ndcg_rel, "nDCG averaged over the relevant documents", cutoff="none",
               params=(_GAINS,), trec_param="gains", trec_name=_with("ndcg_rel", "gains")),
        Metric("Rndcg", trec.rndcg, "nDCG averaged over the ends of the ideal ranking's grade levels",
               cutoff="none", params=(_GAINS,), trec_param="gains", trec_name=_with("Rndcg", "gains")),
        Metric("ndcg_p", trec.ndcg_p, "nDCG with discount 1 at rank 1, 1/log2(i) after", cutoff="none",
               params=(_GAINS,), trec_param="gains", trec_name=_with("ndcg_p", "gains")),
        Metric("dcg", trec.dcg, "discounted cumulative gain, sum gain_i / log2(i + 1)", cutoff="none",
               params=(_GAINS,), trec_param="gains", trec_name=_with("dcg", "gains")),
        Metric("ideal_dcg", trec.ideal_dcg, "DCG of the ideal ranking", cutoff="none", params=(_GAINS,),
               trec_param="gains", trec_name=_with("ideal_dcg", "gains")),
        Metric("G", trec.g_measure, "trec_eval's normalized gain G", ("g_measure",), cutoff="none",
               params=(_GAINS,), trec_param="gains", trec_name=_with("G", "gains")),
        Metric("binG", trec.bin_g, "mean over relevant items of 1 / log2(2 + non-relevant above it)",
               cutoff="none", trec_name=_cut("binG", "binG")),
        Metric("rbp", trec.rbp, "rank-biased precision (1 - p) sum gain_i p^(i-1)", cutoff="none",
               params=(_P_RBP, _GAINS), trec_param="gains", trec_name=_rbp_name("rbp")),
        Metric("rbp_resid", trec.rbp_resid, "RBP's residual: the most unjudged items could add",
               cutoff="none", params=(_P_RBP, _GAINS), trec_param="gains", trec_name=_rbp_name("rbp_resid")),
        Metric("unj", trec.unj, "unjudged items in the top k / k", ("unjudged",), trec_name=_cut("unj_{k}")),
        Metric("judged", trec.judged, "share of the top k that has a judgement (ir_measures Judged@k)",
               ("judged_at",)),
        Metric("yaap", trec.yaap, "yet another AP: log((1 + S) / (1 + R - S)), S the sum of P@rel",
               cutoff="none", trec_name=_cut("yaap", "yaap")),
        Metric("relstring", trec.relstring, "the first N items' grades as text (- not in qrels, . unjudged)",
               cutoff="none", params=(Param("length", int, 10, "items shown"),), trec_param="length",
               trec_name=_with("relstring", "length"), trec_reset=True),
        Metric("err", trec.err, "expected reciprocal rank, R = (2^grade - 1) / 2^max_grade",
               params=(Param("max_grade", int, 4, "the top grade (gdeval.pl: 4)"),)),
        Metric("nerr8", trec.nerr8, "not-but-nearly ERR, eq. 8 (C/W/L, truncated at k)", cutoff="required",
               params=_NERR),
        Metric("nerr9", trec.nerr9, "not-but-nearly ERR, eq. 9 (C/W/L, rank-discounted, truncated at k)",
               cutoff="required", params=_NERR),
    ]


#: the metrics a metric over calls may wrap (per_call, call_mean, merged)
CALL_INNER = ("hit_rate", "precision", "recall", "f1", "mrr", "map", "ndcg", "ndcg_exp", "r_precision", "wcp",
              "acp", "context_recall", "char_recall", "f1_wcp", "f1_acp", "id_precision", "id_recall")
_INNER = Param("metric", str, "recall", "the metric scored, at the same cutoff (with its own parameters, e.g. "
               "wcp(decay=linear))", CALL_INNER, required=True, nests=True)
_CALL = Param("call", int, 0, "the call's place in the trajectory, 0 = the first", bounds=(-1, 10**6),
              required=True)
_ORDER = Param("order", str, "interleave", "merge order: interleave (rank 1 of every call, then rank 2 ...), "
               "score (highest score first), concat (call after call)", ("interleave", "score", "concat"))
_DEDUP = Param("dedup", str, "id", "duplicates kept once: id (same id, else span, else text), span (also "
               "overlapping spans of one document), none", ("id", "span", "none"))


def _inner(name: str, k: int | None) -> Measure:
    """The wrapped metric at the wrapper's cutoff, with the parameters its name gives (``wcp(decay=linear)``)."""
    base, _, rest = name.partition("(")
    metric = _LOOKUP[base.strip().lower()]
    params = _parse_params(metric, rest[:-1], name) if rest.endswith(")") else {}
    return _bind(metric, None if metric.cutoff == "none" else k, params, name)


def _per_call(m, k=None, metric="recall", call=0):
    return calls.per_call(m, _inner(metric, k), call)


def _call_mean(m, k=None, metric="recall"):
    return calls.call_mean(m, _inner(metric, k))


def _merged(m, k=None, metric="recall", order="interleave", dedup="id"):
    return calls.merged(m, _inner(metric, k), order, dedup)


def call_metrics() -> list[Metric]:
    """The metrics over the retrieval calls of cases retrieved several times (``metrics/calls.py``)."""
    some = "the case made fewer calls than that, or the wrapped metric is undefined on them"
    return [
        Metric("per_call", _per_call, "a metric on one retrieval call of the case (per_call(metric=recall,"
               "call=1)@5: recall@5 of the second call)", params=(_INNER, _CALL), requires=("records",),
               undefined_is_nan=True, undefined_when=some),
        Metric("call_mean", _call_mean, "a metric on every retrieval call of the case, averaged over its calls",
               params=(_INNER,), requires=("records",), undefined_is_nan=True,
               undefined_when="the wrapped metric is undefined on every call"),
        Metric("merged", _merged, "a metric on one list merged from the case's calls (duplicates once)",
               params=(_INNER, _ORDER, _DEDUP), requires=("records",), undefined_is_nan=True,
               undefined_when="the wrapped metric is undefined on the merged list"),
        Metric("evidence_coverage", calls.evidence_coverage, "share of the reference passages found by any call "
               "within its top k", requires=("records",)),
        Metric("all_hops_covered", calls.all_hops_covered, "1 if every hop of the reference passages has a "
               "passage found by some call within its top k", requires=("records",), undefined_is_nan=True,
               undefined_when="the case's reference passages carry no hop"),
        Metric("calls_to_evidence", calls.calls_to_evidence, "calls made until every reference passage was "
               "found (within each call's top k)", requires=("records",), undefined_is_nan=True,
               undefined_when="the evidence was never complete (or the case has no ground truth)"),
        Metric("call_redundancy", calls.call_redundancy, "share of the calls' top-k chunks already retrieved by "
               "an earlier call (context budget spent twice)", requires=("records",), undefined_is_nan=True,
               undefined_when="no call retrieved anything"),
    ]


_DEFS: list[Metric] = [
    Metric("hit_rate", ir.hit_rate, "1 if any relevant item is in the top k", ("success", "hits", "hit"),
           trec_name=_cut("success_{k}")),
    Metric("precision", ir.precision, "relevant items in the top k / k", ("p", "prec"),
           trec_name=_cut("P_{k}")),
    Metric("recall", ir.recall, "relevant items in the top k / R", ("r", "rec"),
           trec_name=_cut("recall_{k}")),
    Metric("f1", ir.f1, "harmonic mean of precision@k and recall@k", ("f", "f_measure"),
           trec_name=_cut("f1_{k}")),
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
    Metric("set_P", ir.precision, "trec_eval's set_P: relevant retrieved / retrieved (whole list)",
           cutoff="none", trec_name=_cut("set_P", "set_P")),
    Metric("set_recall", ir.recall, "trec_eval's set_recall: relevant retrieved / R (0 when R = 0)",
           cutoff="none", trec_name=_cut("set_recall", "set_recall")),
    Metric("set_F", trec.set_f, "trec_eval's set_F: (beta + 1) P R / (beta P + R) of set_P and set_recall "
           "(beta 1: their harmonic mean)", cutoff="none", params=(_BETA,), trec_param="beta",
           trec_name=_with("set_F", "beta", _short), trec_as_written=True),
    Metric("wcp", context.wcp, "rank-weighted share of the top K that is relevant",
           ("weighted_context_precision",), params=(_DECAY, _IDEAL, _P, _A, _CURVE)),
    Metric("acp", context.acp, "mean precision@i over relevant ranks (Ragas context precision)",
           ("average_context_precision", "context_precision"), params=(_RAGAS,)),
    Metric("context_recall", context.context_recall, "share of ground-truth passages found in the top K",
           ("ctx_recall",)),
    Metric("char_recall", context.char_recall, "share of reference-passage characters covered by the top K "
           "chunks' spans", requires=("char_spans",)),
    Metric("f1_wcp", _f1_wcp, "harmonic mean of wcp@K and context_recall@K",
           params=(_DECAY, _IDEAL, _P, _A, _CURVE)),
    Metric("f1_acp", _f1_acp, "harmonic mean of acp@K and context_recall@K", params=(_RAGAS,)),
    Metric("id_precision", context.id_precision, "distinct relevant ids retrieved / distinct ids retrieved "
           "(order-blind; undefined when nothing was retrieved)", ("set_precision",), cutoff="none",
           undefined_is_nan=True),
    Metric("id_recall", context.id_recall, "distinct gold ids retrieved / gold ids (order-blind; undefined "
           "without gold)", (), cutoff="none", undefined_is_nan=True),
    Metric("num_q", ir.num_q, "queries evaluated", cutoff="none", trec_name=_cut("num_q", "num_q"),
           aggregate="sum"),
    Metric("num_ret", ir.num_ret, "items retrieved", trec_name=_cut("num_ret", "num_ret"), cutoff="none",
           aggregate="sum"),
    Metric("num_rel", ir.num_rel, "relevant judgements (R)", cutoff="none",
           trec_name=_cut("num_rel", "num_rel"), aggregate="sum"),
    Metric("num_rel_ret", ir.num_rel_ret, "relevant items retrieved", cutoff="none",
           trec_name=_cut("num_rel_ret", "num_rel_ret"), aggregate="sum"),
    # --- the rest of trec_eval 10.0 (metrics/trec.py, docs/trec-measures.md) and ir_measures' Judged/ERR
    *trec_metrics(),
    # --- trec_eval's preference (-R prefs, metrics/prefs.py) and judgement-group (-R qrels_jg, metrics/jg.py)
    *(Metric(n, _Deferred("rankwise.metrics.prefs", "MEASURES", n), d, cutoff="none", aggregate=a,
             requires=("prefs",), trec_name=_cut(n, n))
      for n, (d, a) in PREFS_MEASURES.items()),
    # --- over the retrieval calls of a case retrieved several times (metrics/calls.py)
    *call_metrics(),
    Metric("map_avgjg", jg.map_avgjg, "AP per judgement group, averaged over the groups", cutoff="none",
           requires=("qrels_jg",), trec_name=_cut("map_avgjg", "map_avgjg")),
    Metric("P_avgjg", jg.p_avgjg, "P@k per judgement group, averaged over the groups", cutoff="required",
           requires=("qrels_jg",), trec_name=_cut("P_avgjg_{k}")),
    Metric("Rprec_mult_avgjg", jg.rprec_mult_avgjg, "precision at rank mult * R per judgement group, averaged "
           "over the groups", cutoff="none", params=(Param("mult", float, 1.0, "multiple of R"),),
           trec_param="mult", requires=("qrels_jg",),
           trec_name=lambda k, mult=1.0: f"Rprec_mult_avgjg_{mult:3.2f}"),
]

#: the metrics whose every per-query value lies in [0, 1] at their default parameters (``Metric.value_range``);
#: with text or id ground truth this rests on the redundancy rule (docs/context-metrics.md, "Redundant chunks")
UNIT_RANGE = frozenset({
    "hit_rate", "precision", "recall", "f1", "mrr", "map", "r_precision", "ndcg", "ndcg_exp", "bpref", "set_P",
    "set_recall", "set_F", "wcp", "acp", "context_recall", "char_recall", "f1_wcp", "f1_acp", "id_precision",
    "id_recall", "iprec_at_recall", "11pt_avg", "gm_map", "gm_bpref", "inf_ap", "Rprec_mult", "set_map",
    "set_relative_P", "relative_P", "ndcg_gains", "ndcg_rel", "Rndcg", "ndcg_p", "binG", "unj", "judged",
    "per_call", "call_mean", "merged", "evidence_coverage", "all_hops_covered", "call_redundancy",
})

#: the metrics whose values are counts or sums of non-negative gains: never below 0 (calls_to_evidence: >= 1)
NONNEGATIVE = frozenset({"num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret", "dcg", "ideal_dcg",
                         "rbp", "rbp_resid"})

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
    if metric.value_range is None and metric.name in UNIT_RANGE | NONNEGATIVE | {"calls_to_evidence"}:
        low = 1.0 if metric.name == "calls_to_evidence" else 0.0
        metric = replace(metric, value_range=(low, 1.0 if metric.name in UNIT_RANGE else math.inf))
    if not metric.reference and metric.name in REFERENCES:
        formula, reference = REFERENCES[metric.name]
        metric = replace(metric, formula=metric.formula or formula, reference=reference)
    METRICS[metric.name] = metric
    for n in (metric.name, *metric.aliases):
        _LOOKUP[n.lower()] = metric
    for b in trec_bases:
        _TREC_BASES[b.lower()] = metric
    return metric


_BASES = {"precision": ("P",), "recall": ("recall",), "ndcg": ("ndcg_cut",), "map": ("map_cut",),
          "hit_rate": ("success",), "ndcg_gains": ("ndcg=",)}
for _m in _DEFS:
    register(_m, trec_bases=_BASES.get(_m.name, ()))

# parameters may nest one metric in another (``merged(metric=wcp(decay=linear))@5``): the outer parentheses
# take everything up to the last ")" before the cutoff
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
    """The error for a name that is no metric: a cutoff below 1 says so; a misspelt base name keeps the
    cutoff and parameters the user wrote in its suggestions (``ndgc@5`` -> ``ndcg@5``)."""
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
    """``metric`` at cutoff ``k`` with ``params``; those at their default are dropped from the name unless
    ``written`` (trec_eval's ``utility.1,-1,0,0`` prints ``utility_1,-1,0,0``, not ``utility``)."""
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
                example = ",".join(f"{q.name}={_show(q.default)}" for q in metric.params if q.required)
                raise InputError(f"in {text!r}: {metric.name} needs {p.name}=..., e.g. {metric.name}({example})@5 "
                                 f"(`rankwise metrics {metric.name}` lists its parameters)", field="metric")
            shown.append((p.name, params[p.name]))
            continue
        if p.applies_when is not None:
            other, wanted = p.applies_when
            if values.get(other) != wanted:
                if p.name in params:
                    raise InputError(f"in {text!r}: {p.name} applies only with {other}={_show(wanted)}",
                                     field="metric")
                continue
            shown.append((p.name, values[p.name]))
        elif p.name in params and (params[p.name] != p.default or written):
            shown.append((p.name, params[p.name]))
    return Measure(metric, k, tuple(shown))


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
            _inner(bound[declared.name], 1)  # the nested metric's own parameters: refused now, not when scoring
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
    """The metric a name means: a base name or alias as is (``per_call``, whose ``metric`` parameter a
    measure must give), else any spelling :func:`parse_measure` reads (``P@5``).

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
    (``official``, ``set``, ``all_trec``). ``runid`` is no metric: it names the run in trec_eval's output.

    Example:
        >>> asks_runid(None), asks_runid(["P.5", "runid"]), asks_runid("all_trec"), asks_runid(["map"])
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
    """A name whose parentheses do not pair up is refused: with nested metrics (``merged(metric=wcp(...))``) a
    missing ")" would otherwise read as the inner metric's defaults."""
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
    """``measure`` cut at a context budget (``recall@1500c``): only the metrics :mod:`~rankwise.metrics.budget`
    defines take one."""
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
