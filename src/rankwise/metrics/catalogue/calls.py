"""The metrics over the retrieval calls of a case retrieved several times (metrics/calls.py): one
call, the mean over calls, one merged list, and the evidence the calls found together.

Example:
    >>> CALL_METRICS[0].name, [p.name for p in CALL_METRICS[0].params]
    ('per_call', ['metric', 'call'])
"""

from __future__ import annotations

from rankwise.metrics.catalogue.citations import CALLS
from rankwise.metrics.declare import RANGE_AT_LEAST_ONE, RANGE_UNIT, Metric, Param, deferred_module

__all__ = ["CALL_METRICS", "CALL_INNER"]

calls = deferred_module("rankwise.metrics.calls")

#: the metrics a metric over calls may wrap (per_call, call_mean, merged)
CALL_INNER = ("hit_rate", "precision", "recall", "f1", "mrr", "map", "ndcg", "ndcg_exp", "r_precision", "wcp",
              "acp", "context_recall", "char_recall", "f1_wcp", "f1_acp", "id_precision", "id_recall")
_INNER = Param("metric", str, "recall", "the metric scored, at the same cutoff (with its own parameters, "
               "e.g. wcp(decay=linear))", CALL_INNER, required=True, nests=True)
_CALL = Param("call", int, 0, "the call's place in the trajectory, 0 = the first", bounds=(-1, 10**6),
              required=True)
_ORDER = Param("order", str, "interleave", "merge order: interleave (rank 1 of every call, then rank 2 ...), "
               "score (highest score first), concat (call after call)", ("interleave", "score", "concat"))
_DEDUP = Param("dedup", str, "id", "duplicates kept once: id (same id, else span, else text), span (also "
               "overlapping spans of one document), none", ("id", "span", "none"))


_SOME = "the case made fewer calls than that, or the wrapped metric is undefined on them"

CALL_METRICS: list[Metric] = [
    Metric("per_call", calls.per_call_named, "a metric on one retrieval call of the case (per_call(metric=recall,"
           "call=1)@5: recall@5 of the second call)", params=(_INNER, _CALL), requires=("records",),
           undefined_is_nan=True, undefined_when=_SOME,
           formula="M@k on call c's ranked list alone (undefined when the case made fewer than c + 1 "
                   "calls)",
           reference=CALLS, value_range=RANGE_UNIT),
    Metric("call_mean", calls.call_mean_named, "a metric on every retrieval call of the case, averaged over its calls",
           params=(_INNER,), requires=("records",), undefined_is_nan=True,
           undefined_when="the wrapped metric is undefined on every call",
           formula="(1 / n_calls) sum_c M@k(call c)",
           reference=CALLS, value_range=RANGE_UNIT),
    Metric("merged", calls.merged_named, "a metric on one list merged from the case's calls (duplicates once)",
           params=(_INNER, _ORDER, _DEDUP), requires=("records",), undefined_is_nan=True,
           undefined_when="the wrapped metric is undefined on the merged list",
           formula="M@k on merge(calls, order, dedup): interleave = rank 1 of every call, then rank 2, "
                   "...; score = by score; duplicates (same id, or overlapping span) kept once",
           reference=CALLS, value_range=RANGE_UNIT),
    Metric("evidence_coverage", calls.evidence_coverage, "share of the reference passages found by any call "
           "within its top k", requires=("records",),
           formula="|union_c found(call c, top k)| / R",
           reference=CALLS, value_range=RANGE_UNIT),
    Metric("all_hops_covered", calls.all_hops_covered, "1 if every hop of the reference passages has a "
           "passage found by some call within its top k", requires=("records",), undefined_is_nan=True,
           undefined_when="the case's reference passages carry no hop",
           formula="prod_h [some reference passage of hop h in union_c found(call c, top k)]",
           reference=CALLS, value_range=RANGE_UNIT),
    Metric("calls_to_evidence", calls.calls_to_evidence, "calls made until every reference passage was "
           "found (within each call's top k)", requires=("records",), undefined_is_nan=True,
           undefined_when="the evidence was never complete (or the case has no ground truth)",
           formula="min{n : |union_{c<n} found(call c, top k)| = R} (undefined if never, or R = 0)",
           reference=CALLS, value_range=RANGE_AT_LEAST_ONE),
    Metric("call_redundancy", calls.call_redundancy, "share of the calls' top-k chunks already retrieved by "
           "an earlier call (context budget spent twice)", requires=("records",), undefined_is_nan=True,
           undefined_when="no call retrieved anything",
           formula="sum_c |{chunks of call c's top k seen in calls < c}| / sum_c |top k of call c|",
           reference=CALLS, value_range=RANGE_UNIT),
]
