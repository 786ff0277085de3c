"""Delimited files with a header (BEIR qrels TSV, CSV) and JSON Lines, for runs and qrels."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from rankwise.data._text import iter_json_lines, iter_lines, parse_float, parse_int, read_bytes
from rankwise.data.qrels import Qrels
from rankwise.data.run import Run
from rankwise.errors import InputError

__all__ = ["read_beir_qrels", "read_delimited_run", "read_jsonl_qrels", "read_jsonl_run",
           "write_jsonl_run", "write_jsonl_qrels"]

QUERY_COLUMNS = ("query_id", "query-id", "qid", "query")
DOC_COLUMNS = ("doc_id", "corpus-id", "docid", "docno", "doc", "chunk_id", "id")
GRADE_COLUMNS = ("relevance", "score", "grade", "rel", "label")
SCORE_COLUMNS = ("score", "sim", "similarity")


def _pick(header: list[str], wanted, explicit: str | None, *, source, role: str) -> int:
    names = [explicit] if explicit else list(wanted)
    for n in names:
        if n in header:
            return header.index(n)
    raise InputError(f"no {role} column; expected one of {names}, found {header}", source=source, line=1)


def _rows(path: Path, delimiter: str | None):
    data = read_bytes(path)
    lines = [(n, line) for n, line in iter_lines(data, path) if line.strip()]
    if delimiter is None:
        delimiter = "\t" if "\t" in lines[0][1] else ","
    header = next(csv.reader([lines[0][1]], delimiter=delimiter))
    header = [h.strip() for h in header]
    body = []
    for n, line in lines[1:]:
        fields = next(csv.reader(io.StringIO(line), delimiter=delimiter))
        if len(fields) != len(header):
            raise InputError(f"expected {len(header)} fields like the header, got {len(fields)}",
                             source=path, line=n)
        body.append((n, fields))
    if not body:
        raise InputError("no rows after the header", source=path)
    return header, body


def read_beir_qrels(path: str | Path, *, delimiter: str | None = None, query_column: str | None = None,
                    doc_column: str | None = None, grade_column: str | None = None) -> Qrels:
    """Read qrels from a delimited file with a header, e.g. BEIR's ``query-id corpus-id score`` TSV.

    Example:
        >>> qrels = read_beir_qrels("beir/scifact/qrels/test.tsv")  # doctest: +SKIP
    """
    path = Path(path)
    header, body = _rows(path, delimiter)
    qi = _pick(header, QUERY_COLUMNS, query_column, source=path, role="query id")
    di = _pick(header, DOC_COLUMNS, doc_column, source=path, role="doc id")
    gi = _pick(header, GRADE_COLUMNS, grade_column, source=path, role="relevance")
    grades = [parse_int(f[gi], source=path, line=n, field=header[gi]) for n, f in body]
    return Qrels.from_columns(pa.array([f[qi] for _, f in body], pa.string()),
                              pa.array([f[di] for _, f in body], pa.string()),
                              np.asarray(grades, dtype=np.int64), source=str(path),
                              lines=np.asarray([n for n, _ in body]))


def read_delimited_run(path: str | Path, *, delimiter: str | None = None, query_column: str | None = None,
                       doc_column: str | None = None, score_column: str | None = None) -> Run:
    """Read a run from a CSV/TSV with a header (``query_id, doc_id, score``; no score column = ordered)."""
    path = Path(path)
    header, body = _rows(path, delimiter)
    qi = _pick(header, QUERY_COLUMNS, query_column, source=path, role="query id")
    di = _pick(header, DOC_COLUMNS, doc_column, source=path, role="doc id")
    si = next((header.index(c) for c in ([score_column] if score_column else SCORE_COLUMNS) if c in header), None)
    lines = np.asarray([n for n, _ in body])
    scores = None
    if si is not None:
        scores = np.asarray([parse_float(f[si], source=path, line=n, field=header[si]) for n, f in body])
    return Run.from_columns(pa.array([f[qi] for _, f in body], pa.string()),
                            pa.array([f[di] for _, f in body], pa.string()), scores,
                            name=path.stem, source=str(path), lines=lines)


def _json_rows(path: Path):
    return iter_json_lines(path)


def _field(obj: dict, names, *, source, line, role: str, required: bool = True):
    for name in names:
        if name in obj:
            return obj[name]
    if required:
        raise InputError(f"missing; expected one of {list(names)}", source=source, line=line, field=role)
    return None


def read_jsonl_run(path: str | Path) -> Run:
    """Read a run from JSON Lines, one ``{"query_id", "doc_id", "score"}`` object a line.

    Without ``score`` fields the line order within each query is the ranking.
    """
    path = Path(path)
    qids, docs, scores, lines = [], [], [], []
    for n, obj in _json_rows(path):
        qids.append(str(_field(obj, QUERY_COLUMNS, source=path, line=n, role="query_id")))
        docs.append(str(_field(obj, DOC_COLUMNS, source=path, line=n, role="doc_id")))
        s = _field(obj, SCORE_COLUMNS, source=path, line=n, role="score", required=False)
        if s is not None:
            scores.append(parse_float(str(s), source=path, line=n, field="score"))
        lines.append(n)
    if scores and len(scores) != len(docs):
        raise InputError("some lines have a score and others do not", source=path, field="score")
    return Run.from_columns(pa.array(qids, pa.string()), pa.array(docs, pa.string()),
                            np.asarray(scores) if scores else None, name=path.stem, source=str(path),
                            lines=np.asarray(lines))


def read_jsonl_qrels(path: str | Path) -> Qrels:
    """Read qrels from JSON Lines, one ``{"query_id", "doc_id", "relevance"}`` object a line."""
    path = Path(path)
    qids, docs, grades, lines = [], [], [], []
    for n, obj in _json_rows(path):
        qids.append(str(_field(obj, QUERY_COLUMNS, source=path, line=n, role="query_id")))
        docs.append(str(_field(obj, DOC_COLUMNS, source=path, line=n, role="doc_id")))
        g = _field(obj, GRADE_COLUMNS, source=path, line=n, role="relevance")
        grades.append(parse_int(str(g), source=path, line=n, field="relevance"))
        lines.append(n)
    return Qrels.from_columns(pa.array(qids, pa.string()), pa.array(docs, pa.string()),
                              np.asarray(grades, dtype=np.int64), source=str(path), lines=np.asarray(lines))


def write_jsonl_run(run: Run, path: str | Path) -> None:
    """Write a run as JSON Lines (``query_id``, ``doc_id``, ``rank`` and ``score`` when scored)."""
    ranks = run.ranks().tolist()
    qcodes = run.query_codes().tolist()
    with open(path, "w", encoding="utf-8") as fh:
        for i, doc in enumerate(run.doc_ids.to_pylist()):
            row = {"query_id": run.queries[qcodes[i]], "doc_id": doc, "rank": ranks[i]}
            if run.scores is not None:
                row["score"] = float(run.scores[i])
            fh.write(json.dumps(row) + "\n")


def write_jsonl_qrels(qrels: Qrels, path: str | Path) -> None:
    """Write qrels as JSON Lines (``query_id``, ``doc_id``, ``relevance``)."""
    qcodes = qrels.query_codes().tolist()
    grades = qrels.grades.tolist()
    with open(path, "w", encoding="utf-8") as fh:
        for i, doc in enumerate(qrels.doc_ids.to_pylist()):
            fh.write(json.dumps({"query_id": qrels.queries[qcodes[i]], "doc_id": doc, "relevance": grades[i]}) + "\n")
