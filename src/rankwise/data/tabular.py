"""Delimited files with a header (BEIR qrels TSV, CSV) and JSON Lines, for runs and qrels."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from rankwise._atomic import atomic_write
from rankwise.data.columns import arrow_strings
from rankwise.data.qrels import Qrels
from rankwise.data.run import Run
from rankwise.data.text import (
    check_int_range,
    decode_text,
    first_line,
    iter_csv_rows,
    iter_json_lines,
    json_id,
    parse_float,
    parse_int,
    read_bytes,
)
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
    """Header and ``(line, fields)`` rows of a delimited file (UTF-8, BOM dropped, any line ending).
    """
    text = decode_text(read_bytes(path), path)
    if delimiter is None:
        first = first_line(text)
        delimiter = "\t" if "\t" in first else ","
    header: list[str] | None = None
    body = []
    for n, fields in iter_csv_rows(text, delimiter, source=path):
        if not any(f.strip() for f in fields):
            continue
        if header is None:
            header = [h.strip() for h in fields]
            continue
        if len(fields) != len(header):
            raise InputError(f"expected {len(header)} fields like the header, got {len(fields)}",
                             source=path, line=n)
        body.append((n, fields))
    if not body:
        raise InputError("no rows after the header", source=path)
    return header, body


def _ids(body, column: int, header: list[str], path: Path) -> list[str]:
    """The ids of one column; an empty cell is an error naming its line."""
    ids = [f[column] for _, f in body]
    if not all(ids):
        n = body[ids.index("")][0]
        raise InputError("empty id", source=path, line=n, field=header[column])
    return ids


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
    grades = [parse_int(f[gi].strip(), source=path, line=n, field=header[gi]) for n, f in body]
    return Qrels.from_columns(arrow_strings(_ids(body, qi, header, path)),
                              arrow_strings(_ids(body, di, header, path)),
                              np.asarray(grades, dtype=np.int64), source=str(path),
                              lines=np.asarray([n for n, _ in body]))


def read_delimited_run(path: str | Path, *, delimiter: str | None = None, query_column: str | None = None,
                       doc_column: str | None = None, score_column: str | None = None) -> Run:
    """Read a run from a CSV/TSV with a header (``query_id, doc_id, score``; no score column =
    ordered)."""
    path = Path(path)
    header, body = _rows(path, delimiter)
    qi = _pick(header, QUERY_COLUMNS, query_column, source=path, role="query id")
    di = _pick(header, DOC_COLUMNS, doc_column, source=path, role="doc id")
    si = next((header.index(c) for c in ([score_column] if score_column else SCORE_COLUMNS) if c in header), None)
    lines = np.asarray([n for n, _ in body])
    scores = None
    if si is not None:
        scores = np.asarray([parse_float(f[si].strip(), source=path, line=n, field=header[si]) for n, f in body])
    return Run.from_columns(arrow_strings(_ids(body, qi, header, path)),
                            arrow_strings(_ids(body, di, header, path)), scores,
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


def _json_score(value, *, source, line) -> float:
    """A score from JSON: a finite number or a numeric string (not a boolean)."""
    if isinstance(value, str):
        return parse_float(value.strip(), source=source, line=line, field="score")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"a score must be a number, got {type(value).__name__}", source=source, line=line,
                         field="score")
    try:
        score = float(value)
    except OverflowError:
        score = math.inf
    if not math.isfinite(score):
        raise InputError(f"not a finite number: {str(value)[:40]}", source=source, line=line, field="score")
    return score


def _json_grade(value, *, source, line) -> int:
    """A grade from JSON: an integer (or an integer-valued float or decimal string) within int64."""
    if isinstance(value, str):
        return parse_int(value.strip(), source=source, line=line, field="relevance")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"a grade must be an integer, got {str(value)[:40] if isinstance(value, float) else type(value).__name__}",
                         source=source, line=line, field="relevance")
    return check_int_range(value, source=source, line=line, field="relevance")


def read_jsonl_run(path: str | Path) -> Run:
    """Read a run from JSON Lines, one ``{"query_id", "doc_id", "score"}`` object a line.

    Ids are strings, or integers (read as their decimal text); ``null``, booleans, floats, lists and
    objects are errors. Without ``score`` fields the line order within each query is the ranking;
    either every line has a score or none does.
    """
    path = Path(path)
    qids, docs, scores, lines = [], [], [], []
    scored = unscored = None
    for n, obj in _json_rows(path):
        qids.append(json_id(_field(obj, QUERY_COLUMNS, source=path, line=n, role="query_id"),
                            source=path, line=n, field="query_id"))
        docs.append(json_id(_field(obj, DOC_COLUMNS, source=path, line=n, role="doc_id"),
                            source=path, line=n, field="doc_id"))
        s = _field(obj, SCORE_COLUMNS, source=path, line=n, role="score", required=False)
        if s is not None:
            scores.append(_json_score(s, source=path, line=n))
            scored = scored or n
        else:
            unscored = unscored or n
        if scored and unscored:
            raise InputError(f"line {scored} has a score and line {unscored} has none; give every line a score"
                             " or none", source=path, line=n, field="score")
        lines.append(n)
    return Run.from_columns(arrow_strings(qids), arrow_strings(docs),
                            np.asarray(scores) if scores else None, name=path.stem, source=str(path),
                            lines=np.asarray(lines))


def read_jsonl_qrels(path: str | Path) -> Qrels:
    """Read qrels from JSON Lines, one ``{"query_id", "doc_id", "relevance"}`` object a line.

    Ids are strings or integers; grades integers within int64.
    """
    path = Path(path)
    qids, docs, grades, lines = [], [], [], []
    for n, obj in _json_rows(path):
        qids.append(json_id(_field(obj, QUERY_COLUMNS, source=path, line=n, role="query_id"),
                            source=path, line=n, field="query_id"))
        docs.append(json_id(_field(obj, DOC_COLUMNS, source=path, line=n, role="doc_id"),
                            source=path, line=n, field="doc_id"))
        g = _field(obj, GRADE_COLUMNS, source=path, line=n, role="relevance")
        grades.append(_json_grade(g, source=path, line=n))
        lines.append(n)
    return Qrels.from_columns(arrow_strings(qids), arrow_strings(docs),
                              np.asarray(grades, dtype=np.int64), source=str(path), lines=np.asarray(lines))


def write_jsonl_run(run: Run, path: str | Path) -> None:
    """Write a run as JSON Lines (``query_id``, ``doc_id``, ``rank`` and ``score`` when scored)."""
    ranks = run.ranks().tolist()
    qcodes = run.query_codes().tolist()
    with atomic_write(path) as fh:
        for i, doc in enumerate(run.doc_ids.to_pylist()):
            row = {"query_id": run.queries[qcodes[i]], "doc_id": doc, "rank": ranks[i]}
            if run.scores is not None:
                row["score"] = float(run.scores[i])
            fh.write(json.dumps(row) + "\n")


def write_jsonl_qrels(qrels: Qrels, path: str | Path) -> None:
    """Write qrels as JSON Lines (``query_id``, ``doc_id``, ``relevance``)."""
    qcodes = qrels.query_codes().tolist()
    grades = qrels.grades.tolist()
    with atomic_write(path) as fh:
        for i, doc in enumerate(qrels.doc_ids.to_pylist()):
            fh.write(json.dumps({"query_id": qrels.queries[qcodes[i]], "doc_id": doc, "relevance": grades[i]}) + "\n")
