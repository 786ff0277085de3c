"""Failure classes and headroom for an evaluated system, attached to its result (docs/failures.md).

:func:`diagnose` is what ``eval-rag`` calls after scoring: each case's failure class (kept in its record as
``failure_class``), the counts per class and the headroom go into the result's summary, so the table's notes,
the JSON and the records carry the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankwise.analysis.failures import failure_classes
from rankwise.analysis.headroom import headroom

__all__ = ["diagnose", "diagnosis_k"]


def diagnosis_k(result: Any) -> int:
    """The K failure classes are decided at: the result's largest metric cutoff (10 when none has one).

    Example:
        >>> from rankwise.metrics.rag import evaluate_rag
        >>> diagnosis_k(evaluate_rag([{"id": "q", "retrieved_contexts": ["a"], "reference_contexts": ["a"]}],
        ...                          k=[1, 3], metrics=["recall@3", "mrr"]))
        3
    """
    return max((m.k for m in result.measures if getattr(m, "k", None)), default=10)


def diagnose(result: Any, *, k: int | None = None, before: Mapping[str, Any] | None = None,
             first_stage: Any = None) -> Any:
    """Add failure classes and headroom to an ``evaluate_rag`` result (summary and records); returns it.

    Args:
        result: an :func:`~rankwise.metrics.rag.evaluate_rag` result.
        k: the cutoff a hit must be within (default :func:`diagnosis_k`).
        before: case id -> the first-stage record (before reranking), for ``demoted by the reranker``.
        first_stage: or the first-stage test set / records (path or rows), judged here by the result's source
            with its parameters.

    Example:
        >>> from rankwise.metrics.rag import evaluate_rag
        >>> r = diagnose(evaluate_rag([{"id": "q", "retrieved_contexts": ["Rome.", "Paris is the capital."],
        ...                             "reference_contexts": ["paris is the capital"]}], k=1))
        >>> r.summary["failure_classes"]["counts"]["ranked too low"], r.records[0].extra["failure_class"]
        (1, {'containment': 'ranked too low'})
    """
    source = result.relevance
    k = k or diagnosis_k(result)
    params = result.summary.get("parameters") or {}
    if first_stage is not None and before is None:
        from rankwise.metrics.rag import judged_records

        keep = ("min_overlap", "threshold", "id_field", "relevance_level", "min_evidence_chars")
        records, _ = judged_records(first_stage, source, **{p: params[p] for p in keep if p in params})
        before = {r.id: r for r in records}
    classes = failure_classes(result.records, source, k, before=before, id_field=params.get("id_field"),
                              relevance_level=params.get("relevance_level", 1))
    for record in result.records:
        record.extra.setdefault("failure_class", {})[source] = classes.by_case[record.id]
    result.summary["failure_classes"] = {"k": k, "counts": classes.counts}
    result.summary["headroom"] = headroom(result, classes=classes).to_json()
    return result
