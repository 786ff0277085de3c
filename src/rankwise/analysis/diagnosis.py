"""Failure classes and headroom for an evaluated system, attached to its result (docs/failures.md).

:func:`diagnose` is what ``eval-rag`` calls after scoring: each case's failure class (kept in its
record as ``failure_class``), the counts per class and the headroom go into the result's summary, so
the table's notes, the JSON and the records carry the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankwise.analysis.failures import failure_classes
from rankwise.analysis.headroom import headroom

__all__ = ["diagnose", "diagnosis_k", "slice_by", "slice_comparison_by", "CLASS_FIELD"]

CLASS_FIELD = "class"  # ``--by class``: slice by failure class (the baseline's, in a comparison)


def diagnosis_k(result: Any) -> int:
    """The K failure classes are decided at: the result's largest metric cutoff (10 when none has
    one).

    Example:
        >>> from rankwise.metrics.rag import evaluate_rag
        >>> diagnosis_k(
        ...     evaluate_rag(
        ...         [{"id": "q", "retrieved_contexts": ["a"], "reference_contexts": ["a"]}],
        ...         k=[1, 3],
        ...         metrics=["recall@3", "mrr"],
        ...     )
        ... )
        3
    """
    return max((m.k for m in result.measures if getattr(m, "k", None)), default=10)


def diagnose(result: Any, *, k: int | None = None, before: Mapping[str, Any] | None = None,
             first_stage: Any = None) -> Any:
    """Add failure classes and headroom to an ``evaluate_rag`` result (summary and records); returns
    it.

    Args:
        result: an :func:`~rankwise.metrics.rag.evaluate_rag` result.
        k: the cutoff a hit must be within (default :func:`diagnosis_k`).
        before: case id -> the first-stage record (before reranking), for ``demoted by the
            reranker``.
        first_stage: or the first-stage test set / records (path or rows), judged here by the
            result's source with its parameters.

    Example:
        >>> from rankwise.metrics.rag import evaluate_rag
        >>> r = diagnose(
        ...     evaluate_rag(
        ...         [
        ...             {
        ...                 "id": "q",
        ...                 "retrieved_contexts": ["Rome.", "Paris is the capital."],
        ...                 "reference_contexts": ["paris is the capital"],
        ...             }
        ...         ],
        ...         k=1,
        ...     )
        ... )
        >>> (
        ...     r.summary["failure_classes"]["counts"]["ranked too low"],
        ...     r.records[0].extra["failure_class"],
        ... )
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
    result.summary["failure_classes"] = {"k": k, "counts": classes.counts, "by_case": classes.by_case}
    result.summary["headroom"] = headroom(result, classes=classes).to_json()
    return result


def slice_by(result: Any, by: str) -> Any:
    """``eval-rag --by``: :func:`~rankwise.analysis.slices.slice_result` by a field of the cases, or
    by failure class when ``by`` is ``class`` (in the classes' fixed order).

    Example:
        >>> from rankwise.metrics.rag import evaluate_rag
        >>> r = diagnose(
        ...     evaluate_rag(
        ...         [
        ...             {
        ...                 "id": "a",
        ...                 "retrieved_contexts": ["x y z"],
        ...                 "reference_contexts": ["x y z"],
        ...             },
        ...             {"id": "b", "retrieved_contexts": ["q"], "reference_contexts": ["x y z"]},
        ...         ],
        ...         metrics=["hit_rate@1"],
        ...         min_evidence_chars=0,
        ...     )
        ... )
        >>> s = slice_by(r, "class")
        >>> s.names, s.means["run"]["hit"]["hit_rate@1"].mean
        (['hit', 'not retrieved'], 1.0)
    """
    from rankwise.analysis.failures import FAILURE_CLASSES
    from rankwise.analysis.slices import slice_result

    if by != CLASS_FIELD:
        return slice_result(result, by)
    if "failure_classes" not in result.summary:
        diagnose(result)
    labels = dict(result.summary["failure_classes"]["by_case"])
    return slice_result(result, "failure class", labels=labels, order=list(FAILURE_CLASSES))


def slice_comparison_by(comparison: Any, by: str, records: Mapping[str, Any]) -> Any:
    """``compare-rag --by``: by a field of the cases, or (``class``) by the baseline system's
    failure class."""
    from rankwise.analysis.failures import FAILURE_CLASSES
    from rankwise.analysis.slices import slice_comparison

    if by != CLASS_FIELD:
        return slice_comparison(comparison, by, records=records)
    classes = (comparison.summary.get("failure_classes") or {}).get(comparison.baseline)
    if classes is None:
        from rankwise.errors import InputError

        raise InputError("--by class needs RAG records (failure classes are decided per case)", field="by")
    return slice_comparison(comparison, f"failure class of {comparison.baseline}", labels=dict(classes["by_case"]),
                            order=list(FAILURE_CLASSES))
