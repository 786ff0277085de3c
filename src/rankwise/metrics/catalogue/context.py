"""The RAG context metrics (docs/context-metrics.md): rank-weighted and average context precision,
context and character recall, their F1s, and the order-blind id-set metrics.

Example:
    >>> [m.name for m in CONTEXT_METRICS][:2], CONTEXT_METRICS[0].param("decay").default
    (['wcp', 'acp'], 'log')
"""

from __future__ import annotations

from rankwise.metrics import context
from rankwise.metrics.catalogue.citations import RAGAS, RANKWISE
from rankwise.metrics.declare import RANGE_UNIT, Metric, Param

__all__ = ["CONTEXT_METRICS"]

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


CONTEXT_METRICS: list[Metric] = [
    Metric("wcp", context.wcp, "rank-weighted share of the top K that is relevant",
           ("weighted_context_precision",), params=(_DECAY, _IDEAL, _P, _A, _CURVE),
           formula="sum_{i<=k} w_i rel_i / sum_{i<=k} w_i, w_i the decay (log 1/log2(i+1), linear 1/i, "
                   "rbp p^(i-1), power i^-a, flat, curve)",
           reference=RANKWISE, value_range=RANGE_UNIT),
    Metric("acp", context.acp, "mean precision@i over relevant ranks (Ragas context precision)",
           ("average_context_precision", "context_precision"), params=(_RAGAS,),
           formula="sum_{i<=k} P@i rel_i / sum_{i<=k} rel_i (ragas_compat=true: + 1e-10 in the denominator)",
           reference=RAGAS, value_range=RANGE_UNIT),
    Metric("context_recall", context.context_recall, "share of ground-truth passages found in the top K",
           ("ctx_recall",),
           formula="reference passages found in the top k / reference passages",
           reference=RAGAS + "; " + RANKWISE, value_range=RANGE_UNIT),
    Metric("char_recall", context.char_recall, "share of reference-passage characters covered by the top K "
           "chunks' spans", requires=("char_spans",),
           formula="|reference characters covered by the top-k spans| / |reference characters|",
           reference=RANKWISE, value_range=RANGE_UNIT),
    Metric("f1_wcp", _f1_wcp, "harmonic mean of wcp@K and context_recall@K",
           params=(_DECAY, _IDEAL, _P, _A, _CURVE),
           formula="2 wcp@k CR@k / (wcp@k + CR@k)",
           reference=RANKWISE, value_range=RANGE_UNIT),
    Metric("f1_acp", _f1_acp, "harmonic mean of acp@K and context_recall@K", params=(_RAGAS,),
           formula="2 acp@k CR@k / (acp@k + CR@k)",
           reference=RANKWISE, value_range=RANGE_UNIT),
    Metric("id_precision", context.id_precision, "distinct relevant ids retrieved / distinct ids retrieved "
           "(order-blind; undefined when nothing was retrieved)", ("set_precision",), cutoff="none",
           undefined_is_nan=True,
           formula="|distinct relevant ids retrieved| / |distinct ids retrieved|",
           reference="DeepEval / Ragas id-based context precision; " + RANKWISE, value_range=RANGE_UNIT),
    Metric("id_recall", context.id_recall, "distinct gold ids retrieved / gold ids (order-blind; undefined "
           "without gold)", (), cutoff="none", undefined_is_nan=True,
           formula="|gold ids retrieved| / |gold ids|",
           reference="Ragas IDBasedContextRecall; " + RANKWISE, value_range=RANGE_UNIT),
]
