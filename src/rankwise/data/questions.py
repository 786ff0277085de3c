"""The questions of a test set, records or a ``{case_id: question}`` mapping, as empty records to
retrieve for."""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.data.records import CaseRecord, as_records
from rankwise.errors import InputError

__all__ = ["records_queries"]


def _known_fields(rows: list) -> list:
    """Rows with only the test-set fields: a question file may carry its own (``kind``,
    ``tags``...)."""
    from rankwise.data.testset import KNOWN_FIELDS

    return [{k: v for k, v in r.items() if k in KNOWN_FIELDS} if isinstance(r, Mapping) else r for r in rows]


def _with_fields(records: list[CaseRecord], rows: list, lines: list | None = None,
                 source: str | None = None) -> list[CaseRecord]:
    """The records with the user's own fields of their rows (``kind``, ``tags``...), which were set
    aside while the rows were read: kept, so that the records can be sliced by them."""
    from rankwise.data.testset import user_fields

    for i, (r, row) in enumerate(zip(records, rows, strict=True)):
        if isinstance(row, Mapping):
            r.fields = user_fields(row, source=source, line=None if lines is None else lines[i])
    return records


def records_queries(testset: Any) -> list[CaseRecord]:
    """Empty records (question + ground truth) from a test set, records, or a ``{case_id:
    question}`` mapping.

    A question file needs no retrieved contexts (that is what the retriever is for); fields of its
    own (``kind``, ``tags``...) are not read as the test set's but kept in each record's ``fields``.

    Example:
        >>> [r.question for r in records_queries({"q1": "capital of France?"})]
        ['capital of France?']
    """
    from rankwise.data.records import is_records_file, records_from_testset
    from rankwise.data.testset import testset_from_rows

    if isinstance(testset, Mapping) and testset and all(isinstance(v, str) for v in testset.values()):
        return [CaseRecord(id=str(k), question=v) for k, v in testset.items()]
    if (isinstance(testset, (str, PathLike)) and Path(testset).suffix.lower() in (".jsonl", ".ndjson")
            and Path(testset).is_file() and not is_records_file(testset)):
        from rankwise.data.text import iter_json_lines

        rows = list(iter_json_lines(Path(testset)))
        records = _with_fields(records_from_testset(testset_from_rows(
            _known_fields([o for _, o in rows]), source=str(testset), lines=[n for n, _ in rows])),
            [o for _, o in rows], [n for n, _ in rows], str(testset))
    elif (isinstance(testset, (list, tuple)) and testset and all(isinstance(r, Mapping) for r in testset)
          and not any("chunks" in r for r in testset)):
        records = _with_fields(records_from_testset(testset_from_rows(_known_fields(list(testset)))), list(testset))
    else:
        records = as_records(testset)
    for r in records:
        if not r.question:
            raise InputError(f"case {r.id!r} has no question to retrieve for", field="question")
        r.chunks = []
        r.passages_found, r.scores, r.status = {}, {}, {}
        r.extra.pop("retrieval", None)
    return records
