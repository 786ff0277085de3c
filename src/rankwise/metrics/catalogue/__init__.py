"""Every metric rankwise knows, declared once: one module per family, each declaration with its
formula, its citation and its value range (ir_measures' one small declaration per measure is the
model).

=================  ==========================================================================
``ir``             ranked-list metrics (precision, recall, MRR, AP, nDCG, bpref, set_*) and counts
``context``        the RAG context metrics (wcp, acp, context and character recall, id sets)
``trec``           the rest of trec_eval 10.0, ir_measures' Judged and ERR
``preferences``    trec_eval's preference and judgement-group measures
``calls``          metrics over the retrieval calls of a case retrieved several times
``citations``      the works the declarations cite
=================  ==========================================================================

The registry (:mod:`rankwise.metrics.registry`) registers :data:`CATALOGUE` in this order, which is
the order ``rankwise metrics`` lists them in. A metric of your own is a
:class:`~rankwise.metrics.declare.Metric` passed to :func:`~rankwise.metrics.registry.register`
(docs/architecture.md, "Adding a metric").

Example:
    >>> [m.name for m in CATALOGUE][:4], TREC_BASES["precision"]
    (['hit_rate', 'precision', 'recall', 'f1'], ('P',))
"""

from __future__ import annotations

from rankwise.metrics.catalogue.calls import CALL_METRICS
from rankwise.metrics.catalogue.context import CONTEXT_METRICS
from rankwise.metrics.catalogue.ir import COUNTS, RANKED
from rankwise.metrics.catalogue.preferences import JG_METRICS, PREFERENCE_METRICS
from rankwise.metrics.catalogue.trec import TREC_METRICS
from rankwise.metrics.declare import Metric

__all__ = ["CATALOGUE", "TREC_BASES"]

#: every declaration, in the order ``rankwise metrics`` lists them
CATALOGUE: list[Metric] = [*RANKED, *CONTEXT_METRICS, *COUNTS, *TREC_METRICS, *PREFERENCE_METRICS,
                           *CALL_METRICS, *JG_METRICS]

#: trec_eval's base names that take a dotted list (``P.5,10``), beside the metric they mean
TREC_BASES: dict[str, tuple[str, ...]] = {
    "precision": ("P",), "recall": ("recall",), "ndcg": ("ndcg_cut",), "map": ("map_cut",),
    "hit_rate": ("success",), "ndcg_gains": ("ndcg=",),
}
