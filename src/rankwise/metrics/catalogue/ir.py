"""The ranked-list metrics every IR toolkit has (precision, recall, MRR, AP, nDCG, bpref,
trec_eval's set measures) and trec_eval's counts: one declaration each, with its formula and
citation.

Example:
    >>> [m.name for m in RANKED][:3], COUNTS[0].aggregate
    (['hit_rate', 'precision', 'recall'], 'sum')
"""

from __future__ import annotations

import math

from rankwise.metrics import ir
from rankwise.metrics.catalogue.citations import BURGES, BV, JK, KANTOR, MANNING, TREC, TREC_BOOK
from rankwise.metrics.declare import (
    RANGE_NONNEGATIVE,
    RANGE_UNIT,
    Metric,
    Param,
    cut,
    deferred_module,
    short,
    with_param,
)

__all__ = ["RANKED", "COUNTS"]

trec = deferred_module("rankwise.metrics.trec")

_BETA = Param("beta", float, 1.0, "relative importance of recall to precision, as trec_eval's set_F.beta "
              "(used as is, not squared)", bounds=(0.0, math.inf))

#: ranked-list metrics, in the order `rankwise metrics` lists them
RANKED: list[Metric] = [
    Metric("hit_rate", ir.hit_rate, "1 if any relevant item is in the top k", ("success", "hits", "hit"),
           trec_name=cut("success_{k}"),
           formula="1 if sum_{i<=k} rel_i > 0 else 0",
           reference=MANNING, value_range=RANGE_UNIT),
    Metric("precision", ir.precision, "relevant items in the top k / k", ("p", "prec"),
           trec_name=cut("P_{k}"),
           formula="sum_{i<=k} rel_i / k",
           reference=MANNING, value_range=RANGE_UNIT),
    Metric("recall", ir.recall, "relevant items in the top k / R", ("r", "rec"),
           trec_name=cut("recall_{k}"),
           formula="sum_{i<=k} rel_i / R",
           reference=MANNING, value_range=RANGE_UNIT),
    Metric("f1", ir.f1, "harmonic mean of precision@k and recall@k", ("f", "f_measure"),
           trec_name=cut("f1_{k}"),
           formula="2 P@k R@k / (P@k + R@k)",
           reference="van Rijsbergen, Information Retrieval, 2nd ed., Butterworths 1979",
           value_range=RANGE_UNIT),
    Metric("mrr", ir.mrr, "1 / rank of the first relevant item (0 past k)", ("recip_rank", "rr"),
           trec_name=cut("recip_rank_{k}", "recip_rank"),
           formula="1 / min{i <= k : rel_i = 1} (0 if none)",
           reference=KANTOR, value_range=RANGE_UNIT),
    Metric("map", ir.average_precision, "sum of precision@i at relevant ranks i <= k, / R",
           ("ap", "map_cut"), trec_name=cut("map_cut_{k}", "map"),
           formula="sum_{i<=k} rel_i P@i / R",
           reference=TREC_BOOK, value_range=RANGE_UNIT),
    Metric("r_precision", ir.r_precision, "relevant items in the top R / R", ("rprec", "r_prec"),
           cutoff="none", trec_name=cut("Rprec", "Rprec"),
           formula="sum_{i<=R} rel_i / R",
           reference=TREC_BOOK, value_range=RANGE_UNIT),
    Metric("ndcg", ir.ndcg, "DCG@k / ideal DCG@k, gain = grade (trec_eval)", ("ndcg_cut",),
           trec_name=cut("ndcg_cut_{k}", "ndcg"),
           formula="sum_{i<=k} g_i / log2(i+1) / IDCG@k",
           reference=JK, value_range=RANGE_UNIT),
    Metric("ndcg_exp", lambda m, k=None: ir.ndcg(m, k, gain="exp"),
           "nDCG with gain 2^grade - 1 (Burges)", ("ndcg_burges",),
           formula="sum_{i<=k} (2^g_i - 1) / log2(i+1) / IDCG@k",
           reference=BURGES, value_range=RANGE_UNIT),
    Metric("bpref", ir.bpref, "trec_eval's bpref: relevant ranked above judged non-relevant",
           cutoff="none", trec_name=cut("bpref", "bpref"),
           formula="1/R sum_{relevant r} (1 - min(|judged non-rel above r|, R) / min(R, N))",
           reference=BV, value_range=RANGE_UNIT),
    Metric("set_P", ir.precision, "trec_eval's set_P: relevant retrieved / retrieved (whole list)",
           cutoff="none", trec_name=cut("set_P", "set_P"),
           formula="sum_{i<=|ret|} rel_i / |ret|",
           reference=TREC, value_range=RANGE_UNIT),
    Metric("set_recall", ir.recall, "trec_eval's set_recall: relevant retrieved / R (0 when R = 0)",
           cutoff="none", trec_name=cut("set_recall", "set_recall"),
           formula="sum_{i<=|ret|} rel_i / R",
           reference=TREC, value_range=RANGE_UNIT),
    Metric("set_F", trec.set_f, "trec_eval's set_F: (beta + 1) P R / (beta P + R) of set_P and set_recall "
           "(beta 1: their harmonic mean)", cutoff="none", params=(_BETA,), trec_param="beta",
           trec_name=with_param("set_F", "beta", short), trec_as_written=True,
           formula="(beta^2 + 1) P R / (beta^2 P + R) over the whole list",
           reference="van Rijsbergen 1979; " + TREC, value_range=RANGE_UNIT),
]

#: trec_eval's counts (summed over queries)
COUNTS: list[Metric] = [
    Metric("num_q", ir.num_q, "queries evaluated", cutoff="none", trec_name=cut("num_q", "num_q"),
           aggregate="sum",
           formula="number of queries evaluated",
           reference=TREC, value_range=RANGE_NONNEGATIVE),
    Metric("num_ret", ir.num_ret, "items retrieved", trec_name=cut("num_ret", "num_ret"), cutoff="none",
           aggregate="sum",
           formula="|ret|",
           reference=TREC, value_range=RANGE_NONNEGATIVE),
    Metric("num_rel", ir.num_rel, "relevant judgements (R)", cutoff="none",
           trec_name=cut("num_rel", "num_rel"), aggregate="sum",
           formula="R",
           reference=TREC, value_range=RANGE_NONNEGATIVE),
    Metric("num_rel_ret", ir.num_rel_ret, "relevant items retrieved", cutoff="none",
           trec_name=cut("num_rel_ret", "num_rel_ret"), aggregate="sum",
           formula="sum_{i<=|ret|} rel_i",
           reference=TREC, value_range=RANGE_NONNEGATIVE),
]
