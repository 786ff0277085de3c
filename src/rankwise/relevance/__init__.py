"""Where verdicts come from (docs/metrics.md §4): ids, ground-truth text or spans, human labels, an
LLM judge, the generator's own answers.

The sources live in :mod:`~rankwise.relevance.verdicts` (the dispatcher, :class:`GroundTruth`, case
status), :mod:`~rankwise.relevance.text`, :mod:`~rankwise.relevance.ids`,
:mod:`~rankwise.relevance.human`, :mod:`~rankwise.relevance.llm_judge` (the LLM judge over
:mod:`rankwise.llm`), :mod:`~rankwise.relevance.utility` and :mod:`~rankwise.relevance.agreement`.
This face re-exports them; the modules never import it.

Example:
    >>> from rankwise.data.records import records_from_testset
    >>> from rankwise.relevance import assign_verdicts
    >>> recs = records_from_testset(
    ...     [
    ...         {
    ...             "id": "q1",
    ...             "retrieved_contexts": ["Paris is the capital.", "Rome."],
    ...             "reference_contexts": ["paris is the capital"],
    ...         }
    ...     ]
    ... )
    >>> truth = assign_verdicts(recs, "containment")
    >>> recs[0].verdicts("containment"), truth["q1"].n_relevant
    ([1, 0], 1)
"""

from __future__ import annotations

from rankwise.relevance.verdicts import (
    SOURCES,
    TEXT_SOURCES,
    GroundTruth,
    assign_verdicts,
    case_status,
    pooled_truth,
    with_progress,
)

__all__ = ["GroundTruth", "TEXT_SOURCES", "SOURCES", "assign_verdicts", "pooled_truth", "case_status", "with_progress"]
