"""trec_eval's preference measures (``-R prefs``, ``-R qrels_prefs``: metrics/prefs.py) and
judgement-group measures (``-R qrels_jg``: metrics/jg.py), declared without importing either module.

Example:
    >>> PREFERENCE_METRICS[0].requires, JG_METRICS[0].name
    (('prefs',), 'map_avgjg')
"""

from __future__ import annotations

from rankwise.metrics._names import PREFS_MEASURES
from rankwise.metrics.catalogue.citations import JG, PREFS
from rankwise.metrics.declare import Deferred, Metric, Param, cut, deferred_module

__all__ = ["PREFERENCE_METRICS", "JG_METRICS"]

jg = deferred_module("rankwise.metrics.jg")

#: each preference measure's formula (descriptions and aggregates: metrics/_names.py)
_FORMULAS = {
    "prefs_num_prefs_poss": "preferences possible",
    "prefs_num_prefs_ful": "preferences fulfilled (implied ones included)",
    "prefs_num_prefs_ful_ret": "preferences fulfilled, both documents retrieved",
    "prefs_simp": "fulfilled / possible preferences over all judgement groups",
    "prefs_pair": "mean over document pairs of the fulfilled share",
    "prefs_avgjg": "mean over judgement groups of fulfilled / possible",
    "prefs_avgjg_Rnonrel": "prefs_avgjg with non-relevant documents counted as R",
    "prefs_simp_ret": "prefs_simp over pairs with both documents retrieved",
    "prefs_pair_ret": "prefs_pair over pairs with both documents retrieved",
    "prefs_avgjg_ret": "prefs_avgjg over pairs with both documents retrieved",
    "prefs_avgjg_Rnonrel_ret": "prefs_avgjg_Rnonrel over retrieved documents",
    "prefs_simp_imp": "prefs_simp without pairs where neither document is retrieved",
    "prefs_pair_imp": "prefs_pair without pairs where neither document is retrieved",
    "prefs_avgjg_imp": "prefs_avgjg without pairs where neither document is retrieved",
}

PREFERENCE_METRICS: list[Metric] = [
    Metric(n, Deferred("rankwise.metrics.prefs", "MEASURES", n), d, cutoff="none", aggregate=a,
           requires=("prefs",), trec_name=cut(n, n), formula=_FORMULAS[n], reference=PREFS)
    for n, (d, a) in PREFS_MEASURES.items()
]

JG_METRICS: list[Metric] = [
    Metric("map_avgjg", jg.map_avgjg, "AP per judgement group, averaged over the groups", cutoff="none",
           requires=("qrels_jg",), trec_name=cut("map_avgjg", "map_avgjg"),
           formula="mean over judgement groups of AP",
           reference=JG),
    Metric("P_avgjg", jg.p_avgjg, "P@k per judgement group, averaged over the groups", cutoff="required",
           requires=("qrels_jg",), trec_name=cut("P_avgjg_{k}"),
           formula="mean over judgement groups of P@k",
           reference=JG),
    Metric("Rprec_mult_avgjg", jg.rprec_mult_avgjg, "precision at rank mult * R per judgement group, "
           "averaged over the groups", cutoff="none", params=(Param("mult", float, 1.0, "multiple of R"),),
           trec_param="mult", requires=("qrels_jg",),
           trec_name=lambda k, mult=1.0: f"Rprec_mult_avgjg_{mult:3.2f}",
           formula="mean over judgement groups of Rprec_mult",
           reference=JG),
]
