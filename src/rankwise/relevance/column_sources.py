"""The verdict sources that work on columns, by name: :func:`judge_columns` gives a block of
cases' :class:`~rankwise.relevance.column_verdicts.ColumnVerdicts` by ``ids``
(:mod:`rankwise.relevance.ids_columns`) or ``span`` (:mod:`rankwise.relevance.span_columns`).

Example:
    >>> "ids" in COLUMN_SOURCES, "containment" in COLUMN_SOURCES
    (True, False)
"""

from __future__ import annotations

from rankwise.data.testset_columns import CaseColumns
from rankwise.relevance.column_verdicts import ColumnVerdicts
from rankwise.relevance.ids_columns import judge_ids_columns
from rankwise.relevance.span_columns import judge_span_columns

__all__ = ["COLUMN_SOURCES", "judge_columns"]

COLUMN_SOURCES = ("ids", "span")


def judge_columns(cases: CaseColumns, source: str, *, id_field: str | None = None,
                  min_overlap: float = 0.5) -> ColumnVerdicts:
    """``source``'s verdicts over ``cases``; ``id_field`` for ``ids`` and ``min_overlap`` for
    ``span`` as in :func:`~rankwise.relevance.verdicts.assign_verdicts`.

    Example:
        >>> import json, tempfile, pathlib
        >>> from rankwise.data.testset_columns import iter_case_columns
        >>> path = pathlib.Path(tempfile.mkdtemp(), "t.jsonl")
        >>> _ = path.write_text(json.dumps({"id": "q", "retrieved_context_ids": ["a", "b"],
        ...                                 "reference_context_ids": ["b"]}) + "\\n")
        >>> judge_columns(next(iter_case_columns(path)), "ids").grade.tolist()
        [0, 1]
    """
    if source == "ids":
        return judge_ids_columns(cases, id_field=id_field)
    if source == "span":
        return judge_span_columns(cases, min_overlap=min_overlap, id_field=id_field)
    raise ValueError(f"no columnar verdicts for {source!r}; use one of {COLUMN_SOURCES}")
