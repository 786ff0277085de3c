"""Verdicts from human labels (docs/metrics.md §4): a CSV/TSV or JSONL file, one label per
(question, chunk).

Columns / keys:

- question: ``query_id`` (or ``question_id``, ``case_id``, ``qid``, ``id``) — the test set's case
  id;
- chunk: ``chunk_id`` (or ``chunk``) and/or ``rank`` (1-based) — at least one; both must agree;
- ``verdict``: 1/0 (also ``yes``/``no``, ``true``/``false``, ``relevant``/``irrelevant``);
- optional ``type``: ``answer`` | ``partial`` | ``topic_only`` | ``supports_wrong_answer`` |
  ``irrelevant``;
- optional ``grade`` (integer), ``reason`` (or ``note``), ``annotator``;
- optional ``system``: the system whose list the chunk was judged in (labelling sheets of several
  systems, ``rankwise sample-labels``); other columns (question, chunk text) are ignored.

A bad row raises :class:`~rankwise.errors.InputError` naming file, line and field; so does a label
for a case or chunk the test set does not hold, or a second label for the same chunk. Chunks left
without a label get a ``missing`` verdict: the case is reported incomplete, counted, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise._words import count
from rankwise.data.records import VERDICT_TYPES, CaseRecord, Verdict
from rankwise.data.text import (
    INT64_MAX,
    INT64_MIN,
    decode_text,
    first_line,
    iter_csv_rows,
    iter_lines,
    json_loads,
    read_bytes,
)
from rankwise.errors import InputError

__all__ = ["labels_of_system", "Label", "read_labels", "apply_labels"]

QUESTION_KEYS = ("query_id", "question_id", "case_id", "qid", "id")
CHUNK_KEYS = ("chunk_id", "chunk")
_TRUE = {"1", "yes", "y", "true", "relevant", "rel"}
_FALSE = {"0", "no", "n", "false", "irrelevant", "not_relevant", "nonrelevant"}
# a type that contradicts the verdict is a labelling mistake
_TYPE_VERDICT = {"answer": 1, "partial": 1, "irrelevant": 0}


@dataclass
class Label:
    """One human judgement of one retrieved chunk."""

    case_id: str
    verdict: int
    chunk_id: str | None = None
    rank: int | None = None
    type: str | None = None
    grade: int | None = None
    reason: str | None = None
    annotator: str | None = None
    line: int | None = None
    source: str | None = None
    system: str | None = None


def _label_reason(label: Label) -> str:
    """The reason of a label that gives none: where the label is and what it says.

    Example:
        >>> _label_reason(Label("q1", 1, rank=2, type="answer", line=7, source="labels.csv"))
        'labelled 1 (answer) at labels.csv:7'
    """
    what = f"labelled {label.verdict}" + (f" ({label.type})" if label.type else "")
    if label.source:
        return what + f" at {label.source}" + (f":{label.line}" if label.line is not None else "")
    return what + (f" on line {label.line}" if label.line is not None else "")


def _verdict_value(raw: Any, *, source, line) -> int:
    if isinstance(raw, bool):
        return int(raw)
    if isinstance(raw, (int, float)) and raw in (0, 1):
        return int(raw)
    text = str(raw).strip().lower() if raw is not None else ""
    if text in _TRUE:
        return 1
    if text in _FALSE:
        return 0
    raise InputError(f"verdict must be 1 or 0 (yes/no, true/false, relevant/irrelevant), got {raw!r}",
                     source=source, line=line, field="verdict")


def _label(row: Mapping, *, source, line) -> Label:
    def get(keys):
        for k in keys:
            v = row.get(k)
            if v is not None and not (isinstance(v, str) and v.strip() == ""):
                return k, v
        return None, None

    _, qid = get(QUESTION_KEYS)
    if qid is None:
        raise InputError(f"no question id; give one of {list(QUESTION_KEYS)}", source=source, line=line,
                         field="query_id")
    _, chunk_id = get(CHUNK_KEYS)
    _, rank = get(("rank",))
    if chunk_id is None and rank is None:
        raise InputError("no chunk: give chunk_id or rank", source=source, line=line, field="chunk_id")
    if rank is not None:
        try:
            if isinstance(rank, bool):
                raise ValueError
            rank_f = float(rank)
            if not rank_f.is_integer() or not 1 <= rank_f <= INT64_MAX:
                raise ValueError
            rank = int(rank_f)
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"rank must be an integer >= 1, got {rank!r}", source=source, line=line,
                             field="rank") from None
    if "verdict" not in row or row["verdict"] is None or str(row["verdict"]).strip() == "":
        raise InputError("no verdict", source=source, line=line, field="verdict")
    verdict = _verdict_value(row["verdict"], source=source, line=line)
    _, kind = get(("type",))
    if kind is not None:
        kind = str(kind).strip().lower()
        if kind not in VERDICT_TYPES:
            raise InputError(f"type must be one of {list(VERDICT_TYPES)}, got {kind!r}", source=source,
                             line=line, field="type")
        if kind in _TYPE_VERDICT and _TYPE_VERDICT[kind] != verdict:
            raise InputError(f"type {kind!r} contradicts verdict {verdict}", source=source, line=line,
                             field="type")
    _, grade = get(("grade",))
    if grade is not None:
        try:
            g = float(grade)
            if not g.is_integer() or not INT64_MIN <= g <= INT64_MAX:
                raise ValueError
            grade = int(g)
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"grade must be an integer, got {grade!r}", source=source, line=line,
                             field="grade") from None
    _, reason = get(("reason", "note", "notes", "comment"))
    _, annotator = get(("annotator", "labeler", "rater"))
    _, system = get(("system",))
    return Label(case_id=str(qid), verdict=verdict, chunk_id=None if chunk_id is None else str(chunk_id),
                 rank=rank, type=kind, grade=grade, reason=None if reason is None else str(reason),
                 annotator=None if annotator is None else str(annotator), line=line, source=source,
                 system=None if system is None else str(system))


def read_labels(obj: str | PathLike | Iterable[Mapping] | Any) -> list[Label]:
    """Labels from a CSV/TSV/JSONL file, a DataFrame, or a list of dicts.

    Example:
        >>> read_labels([{"query_id": "q1", "rank": 1, "verdict": 1, "type": "answer"}])[0].type
        'answer'
    """
    if isinstance(obj, (str, PathLike)):
        path = Path(obj)
        data = read_bytes(path)
        if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
            out = []
            for n, text in iter_lines(data, path):
                if not text.strip():
                    continue
                row = json_loads(text, source=path, line=n)
                if not isinstance(row, Mapping):
                    raise InputError("expected a JSON object per line", source=path, line=n)
                out.append(_label(row, source=str(path), line=n))
            return out
        text = decode_text(data, path)
        first = first_line(text)
        delimiter = "\t" if path.suffix.lower() == ".tsv" or "\t" in first else ","
        header = None
        out = []
        for start, fields in iter_csv_rows(text, delimiter, source=path):
            if header is None:
                header = [h.strip().lower() for h in fields]
                continue
            if any(f.strip() for f in fields):
                if len(fields) != len(header):
                    raise InputError(f"expected {len(header)} fields like the header, got {len(fields)}",
                                     source=path, line=start)
                out.append(_label(dict(zip(header, fields, strict=True)), source=str(path), line=start))
        return out
    from rankwise.data.frames import is_dataframe

    if is_dataframe(obj):
        obj = obj.to_dicts() if type(obj).__module__.startswith("polars") else obj.to_dict(orient="records")
    if isinstance(obj, Iterable):
        rows = list(obj)
        if rows and isinstance(rows[0], Label):
            return rows
        return [_label(r, source="<labels>", line=i + 1) for i, r in enumerate(rows)]
    raise InputError(f"cannot read labels from {type(obj).__name__}; pass a CSV/JSONL path or a list of dicts")


def labels_of_system(labels: Any, system: str | None) -> list[Label]:
    """The labels of ``system``: a sheet of one system (or none named) whole; of a sheet naming
    several systems in its ``system`` column, the rows naming ``system`` and the rows naming none.

    Example:
        >>> rows = [{"query_id": "q1", "rank": 1, "verdict": 1, "system": "bm25"},
        ...         {"query_id": "q1", "rank": 1, "verdict": 0, "system": "dense"}]
        >>> [lab.verdict for lab in labels_of_system(rows, "dense")]
        [0]
    """
    rows = read_labels(labels)
    named = {lab.system for lab in rows} - {None}
    if len(named) <= 1:  # a sheet of one system: its rows, whatever the system is called
        return rows
    if system is None or system not in named:
        first = next(lab for lab in rows if lab.system is not None)
        which = (f"none is {system!r} (name the records file like the sheet's system column)" if system
                 else "say which system these records are (system=...)")
        raise InputError(f"the labels name systems {sorted(named)}; {which}", source=first.source, line=first.line,
                         field="system")
    return [lab for lab in rows if lab.system in (None, system)]


def apply_labels(records: list[CaseRecord], labels: Any, source: str = "human", *,
                 system: str | None = None) -> dict[str, int]:
    """Put each label on its chunk as ``verdicts[source]``; unlabelled chunks get ``missing``
    verdicts.

    A sheet naming several systems in its ``system`` column gives ``system``'s rows
    (:func:`labels_of_system`). Returns counts ``{"labels": n, "missing": m}``.
    """
    labels = labels_of_system(labels, system)
    by_id = {r.id: r for r in records}
    placed: dict[tuple[str, int], Label] = {}
    for lab in labels:
        kw = {"source": lab.source, "line": lab.line}
        rec = by_id.get(lab.case_id)
        if rec is None:
            raise InputError(f"question id {lab.case_id!r} is not in the test set", field="query_id", **kw)
        rank = lab.rank
        if lab.chunk_id is not None:
            ranks = [c.rank for c in rec.chunks if c.id == lab.chunk_id]
            if not ranks:
                raise InputError(f"chunk {lab.chunk_id!r} was not retrieved for question {lab.case_id!r}",
                                 field="chunk_id", **kw)
            if rank is None and len(ranks) > 1:
                raise InputError(f"chunk id {lab.chunk_id!r} appears at ranks {ranks} of question "
                                 f"{lab.case_id!r}; give the rank too", field="rank", **kw)
            if rank is not None and rank not in ranks:
                raise InputError(f"chunk {lab.chunk_id!r} is at rank {ranks[0]}, the label says rank {rank}",
                                 field="rank", **kw)
            rank = rank if rank is not None else ranks[0]
        elif rank > len(rec.chunks):
            raise InputError(f"rank {rank}, but question {lab.case_id!r} has {count(len(rec.chunks), 'chunk')}",
                             field="rank", **kw)
        key = (lab.case_id, rank)
        if key in placed:
            first = placed[key].line
            raise InputError(f"second label for question {lab.case_id!r}, rank {rank}"
                             + (f" (first on line {first})" if first is not None else ""), field="chunk_id", **kw)
        placed[key] = lab
    missing = 0
    for rec in records:
        for c in rec.chunks:
            lab = placed.get((rec.id, c.rank))
            if lab is None:
                c.verdicts[source] = Verdict(None, status="missing", error="no label")
                missing += 1
            else:
                meta = {"annotator": lab.annotator} if lab.annotator else {}
                c.verdicts[source] = Verdict(lab.verdict, grade=lab.grade, type=lab.type,
                                             reason=lab.reason or _label_reason(lab), meta=meta)
    return {"labels": len(labels), "missing": missing}
