"""Verdicts back onto the spans they came from: OpenInference document evaluations, the shape
Phoenix takes.

One row per (source, retriever span, document position): ``context.span_id``, ``document_position``
(0-based, the document's place in the span), ``label`` (``relevant`` / ``irrelevant``), ``score``
(1.0 / 0.0), ``explanation`` (the judge's or annotator's reason), ``annotation_name`` (the verdict
source) and ``annotator_kind`` (``LLM`` for the judge, ``HUMAN`` for human labels, ``CODE``
otherwise). Written as Parquet
(``.parquet``: a DataFrame for ``px.Client().log_evaluations(DocumentEvaluations(...))`` or
``Client().spans.log_document_annotations_dataframe(...)``) or JSON Lines (any other suffix).

A verdict that could not be had (failed, missing) is not exported and is counted.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from rankwise._atomic import atomic_write
from rankwise.data.records import CaseRecord
from rankwise.data.testset import chunk_key
from rankwise.data.traces.spans import TraceImport
from rankwise.errors import InputError

__all__ = ["DocumentEvaluations", "document_evaluations", "write_document_evaluations", "EVALUATION_COLUMNS"]

EVALUATION_COLUMNS = ("context.span_id", "document_position", "label", "score", "explanation", "annotation_name",
                      "annotator_kind")


@dataclass
class DocumentEvaluations:
    """Rows of document evaluations and what could not be exported (counted by reason)."""

    rows: list[dict]
    not_exported: Counter

    def summary(self) -> dict:
        """Rows written, retriever spans they cover, verdicts not exported (by reason).

        Example:
            >>> DocumentEvaluations([], Counter({"span: verdict failed": 2})).summary()[
            ...     "not_exported"
            ... ]
            {'span: verdict failed': 2}
        """
        return {"rows": len(self.rows), "spans": len({r["context.span_id"] for r in self.rows}),
                "not_exported": dict(self.not_exported)}


def _kind(source: str) -> str:
    return "LLM" if source.startswith("llm") else "HUMAN" if source.startswith("human") else "CODE"


def _record_chunk(rec: CaseRecord, single: bool, rank: int, chunk):
    if single:
        c = rec.chunks[rank - 1] if rank - 1 < len(rec.chunks) else None
        return c if c is not None and chunk_key(c) == chunk_key(chunk) else None
    key = chunk_key(chunk)
    return next((c for c in rec.chunks if key is not None and chunk_key(c) == key), None)


def document_evaluations(records: list[CaseRecord], traces: TraceImport, *, sources: list[str] | None = None,
                         records_source: str = "<records>") -> DocumentEvaluations:
    """Each record's verdicts on the documents of the traced retriever spans they were read from.

    Records and traces pair by case id (as :func:`rankwise.data.traces.import_traces` named them);
    within a single-call case by rank, within a multi-call case by chunk key (id, else span, else
    text: the verdict on the merged list's chunk goes to every call that retrieved it).

    Example:
        >>> from rankwise.data.traces.spans import Span, assemble
        >>> from rankwise.data.records import ChunkRecord, Verdict
        >>> imp = assemble(
        ...     [
        ...         Span(
        ...             "t1",
        ...             "s1",
        ...             retriever=True,
        ...             input="q?",
        ...             documents=[{"id": "c1", "text": "x"}],
        ...         )
        ...     ],
        ...     source="<spans>",
        ... )
        >>> rec = CaseRecord(
        ...     "t1", chunks=[ChunkRecord(rank=1, id="c1", verdicts={"ids": Verdict(1)})]
        ... )
        >>> document_evaluations([rec], imp).rows[0]["label"]
        'relevant'
    """
    by_id = {r.id: r for r in records}
    _check_sources(records, sources, records_source)
    sources = None if sources is None else list(dict.fromkeys(sources))  # a source named twice: exported once
    unmatched = [r.id for r in records if r.id not in traces.calls]
    if records and len(unmatched) == len(records):
        raise InputError(f"no record's case id is a case of these traces (first record: {records[0].id!r}); "
                         "export the records of the test set `rankwise import-traces` made from these traces, "
                         "with the --testset given to import-traces", source=records_source, field="id")
    rows: list[dict] = []
    skipped: Counter = Counter()
    for case_id, calls in traces.calls.items():
        rec = by_id.get(case_id)
        if rec is None:
            skipped["trace without a record"] += 1
            continue
        wanted = sources if sources is not None else rec.sources()
        for call in calls:
            positions = call.meta.get("document_positions") or list(range(len(call.chunks)))
            for rank, (chunk, pos) in enumerate(zip(call.chunks, positions, strict=False), start=1):
                rc = _record_chunk(rec, len(calls) == 1, rank, chunk)
                if rc is None:
                    skipped["document not in the record (beyond its k, or another list)"] += 1
                    continue
                for source in wanted:
                    v = rc.verdicts.get(source)
                    if v is None or not v.ok:
                        skipped[f"{source}: verdict {'missing' if v is None else v.status}"] += 1
                        continue
                    rows.append({"context.span_id": call.span_id, "document_position": int(pos),
                                 "label": "relevant" if v.verdict else "irrelevant", "score": float(v.verdict),
                                 "explanation": v.reason, "annotation_name": source,
                                 "annotator_kind": _kind(source)})
    return DocumentEvaluations(rows, skipped)


def _check_sources(records: list[CaseRecord], sources: list[str] | None, records_source: str) -> None:
    """Every source asked for is one some record holds; else an error naming it and the sources
    present.

    Example:
        >>> from rankwise.data.records import ChunkRecord, Verdict
        >>> rec = CaseRecord(
        ...     "t1", chunks=[ChunkRecord(rank=1, id="c1", verdicts={"ids": Verdict(1)})]
        ... )
        >>> _check_sources([rec], ["nosuch"], "r.jsonl")
        Traceback (most recent call last):
        ...
        rankwise.errors.InputError: <input>: field 'sources': no verdict source 'nosuch' in r.jsonl (present: ids)
    """
    present = sorted({s for r in records for s in r.sources()})
    unknown = [s for s in dict.fromkeys(sources or []) if s not in present]
    if unknown:
        names = ", ".join(repr(s) for s in unknown)
        raise InputError(f"no verdict source {names} in {records_source} (present: {', '.join(present) or 'none'})",
                         field="sources")


def write_document_evaluations(evals: DocumentEvaluations, path: str | PathLike) -> Path:
    """Write the rows as Parquet (``.parquet``) or JSON Lines (any other suffix).

    Example:
        >>> import tempfile, os
        >>> p = write_document_evaluations(
        ...     DocumentEvaluations(
        ...         [
        ...             {
        ...                 "context.span_id": "ab",
        ...                 "document_position": 0,
        ...                 "label": "relevant",
        ...                 "score": 1.0,
        ...                 "explanation": None,
        ...                 "annotation_name": "ids",
        ...                 "annotator_kind": "CODE",
        ...             }
        ...         ],
        ...         Counter(),
        ...     ),
        ...     os.path.join(tempfile.mkdtemp(), "e.jsonl"),
        ... )
        >>> open(p).read().count("\\n")
        1
    """
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns = {c: [r[c] for r in evals.rows] for c in EVALUATION_COLUMNS}
        schema = pa.schema([("context.span_id", pa.string()), ("document_position", pa.int64()),
                            ("label", pa.string()), ("score", pa.float64()), ("explanation", pa.string()),
                            ("annotation_name", pa.string()), ("annotator_kind", pa.string())])
        with atomic_write(path, "wb") as fh:
            pq.write_table(pa.table(columns, schema=schema), fh)
        return path
    with atomic_write(path) as fh:
        for r in evals.rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path
