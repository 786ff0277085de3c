"""Per-case records (docs/metrics.md §6): what an evaluation of a RAG test set keeps for every
question.

One JSON object per line::

    {"id", "question", "reference", "response", "reference_contexts": [{text, doc_id, start, end}],
     "reference_context_ids": [...],
     "chunks": [{"rank", "id", "text", "doc_id", "start", "end", "score",
                 "verdicts": {source: {verdict, grade, type, reason, status, error, meta}}}],
     "passages_found": {source: [[passage indices matched by the chunk at rank 1], ...]},
     "scores": {source: {metric: value | null}},
     "status": {source: "ok" | "incomplete: ..." | "unscorable: ..."},
     "truth": {source: {"n_relevant": R, "ideal_gains": [...], "basis": "reference passages" | ...}},
     "calls": [{"position", "query", "span_id", "trace_id", "meta", "chunks": [chunk records as above]}],
     "fields": {the test set's own fields of the case, as given: "style", "difficulty", ...}}

``fields`` is written only for a case that has some (:attr:`rankwise.data.testset.TestCase.fields`):
they slice the results (``rankwise eval-rag --by style``). ``calls`` is written only for a case
retrieved several times (an agent, a multi-hop pipeline); ``chunks`` is then the calls merged
(:func:`rankwise.data.testset.merge_calls`) and holds the verdicts: a chunk seen in two calls is
judged once, and each call's chunk shows the verdicts of the merged chunk with its
:func:`~rankwise.data.testset.chunk_key` (id, else span, else text).

:func:`write_records` and :func:`load_records` round-trip without loss: keys this module does not
know are kept in ``extra`` and written back.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.data.finite import finite_json
from rankwise.data.testset import (
    Chunk,
    ReferencePassage,
    RetrievalCall,
    TestCase,
    TestSet,
    chunk_key,
    load_testset,
)
from rankwise.data.text import INT64_MAX, INT64_MIN, iter_json_lines
from rankwise.errors import InputError

__all__ = ["Verdict", "ChunkRecord", "CallRecord", "CaseRecord", "write_records", "load_records",
           "records_from_testset", "testset_from_records", "is_rag_file", "copy_record", "VERDICT_STATUSES",
           "VERDICT_TYPES", "dump_record", "record_from_dict", "is_records_file", "as_records"]

VERDICT_STATUSES = ("ok", "failed", "missing")
VERDICT_TYPES = ("answer", "partial", "topic_only", "supports_wrong_answer", "irrelevant")
_VERDICT_KEYS = ("verdict", "grade", "type", "reason", "status", "error", "meta")
_CHUNK_KEYS = ("rank", "id", "text", "doc_id", "start", "end", "score", "verdicts")
_CASE_KEYS = ("id", "question", "reference", "response", "reference_contexts", "reference_context_ids",
              "chunks", "passages_found", "scores", "status", "truth", "answer_score", "answer_score_source",
              "calls", "fields")
_CALL_KEYS = ("position", "query", "span_id", "trace_id", "meta", "chunks")


@dataclass(slots=True)  # one per chunk and source: no per-instance __dict__
class Verdict:
    """One source's verdict on one chunk.

    Attributes:
        verdict: 1 relevant, 0 not, None when there is none (status ``failed`` or ``missing``).
        grade: graded relevance (qrels grade, LLM 0-3 scale), None if the source gives none.
        type: human label type (``answer``, ``partial``, ``topic_only``, ``supports_wrong_answer``,
            ``irrelevant``) or None.
        reason: the judge's or annotator's reason, if any.
        status: ``ok``, ``failed`` (could not be had: parse failure, refusal, timeout) or
            ``missing`` (never given, e.g. an unlabelled chunk).
        error: what went wrong when status is ``failed``.
        meta: anything else the source wants kept (LLM mode/model/prompt_version, match details).

    Example:
        >>> Verdict(1, reason="states the answer").to_dict()["status"]
        'ok'
    """

    verdict: int | None = None
    grade: int | None = None
    type: str | None = None
    reason: str | None = None
    status: str = "ok"
    error: str | None = None
    meta: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.verdict is not None

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "grade": self.grade, "type": self.type, "reason": self.reason,
                "status": self.status, "error": self.error, "meta": self.meta}


@dataclass(slots=True, kw_only=True)  # one per retrieved chunk
class ChunkRecord(Chunk):
    """A retrieved chunk (:class:`~rankwise.data.testset.Chunk`) at a rank, with every source's
    verdict on it.

    Example:
        >>> c = ChunkRecord(rank=1, id="c1", text="Paris", verdicts={"human": Verdict(1)})
        >>> isinstance(c, Chunk), c.to_chunk()
        (True, Chunk(text='Paris', id='c1', doc_id=None, start=None, end=None, score=None))
    """

    rank: int
    verdicts: dict[str, Verdict] = field(default_factory=dict)

    def to_chunk(self) -> Chunk:
        """The chunk alone, as a test set holds it (no rank, no verdicts)."""
        return Chunk(self.text, self.id, self.doc_id, self.start, self.end, self.score)

    def to_dict(self) -> dict:
        return {"rank": self.rank, "id": self.id, "text": self.text, "doc_id": self.doc_id,
                "start": self.start, "end": self.end, "score": self.score,
                "verdicts": {s: v.to_dict() for s, v in self.verdicts.items()}}


@dataclass
class CallRecord(RetrievalCall):
    """A retrieval call (:class:`~rankwise.data.testset.RetrievalCall`) whose chunks are records
    (rank 1, 2 ...).

    Example:
        >>> CallRecord(
        ...     [ChunkRecord(rank=1, id="c1")], query="sub-question", position=1
        ... ).to_call().position
        1
    """

    chunks: list[ChunkRecord] = field(default_factory=list)  # type: ignore[assignment]

    def to_call(self) -> RetrievalCall:
        """The call as a test set holds it (plain chunks)."""
        return RetrievalCall([c.to_chunk() for c in self.chunks], query=self.query, position=self.position,
                             span_id=self.span_id, trace_id=self.trace_id, meta=dict(self.meta))


@dataclass
class CaseRecord(TestCase):
    """A test case (:class:`~rankwise.data.testset.TestCase`) with what an evaluation kept for it:
    chunks with verdicts, passages found, scores, status.

    Example:
        >>> r = CaseRecord("q1", question="Capital of France?",
        ...                chunks=[ChunkRecord(rank=1, id="c1", verdicts={"human": Verdict(1)})])
        >>> r.verdicts("human"), isinstance(r, TestCase)
        ([1], True)
    """

    __test__ = False  # not a pytest class

    chunks: list[ChunkRecord] = field(default_factory=list)  # type: ignore[assignment]
    calls: list[CallRecord] = field(default_factory=list)  # type: ignore[assignment]
    passages_found: dict[str, list[list[int]]] = field(default_factory=dict)
    scores: dict[str, dict[str, float | None]] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)
    truth: dict[str, dict] = field(default_factory=dict)
    answer_score: float | None = None
    answer_score_source: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def call_index(self) -> list[list[int | None]]:
        """Per call, per rank: the index in ``chunks`` (the merged list) of the same chunk, None if
        absent.

        Example:
            >>> r = CaseRecord(
            ...     "q",
            ...     chunks=[ChunkRecord(rank=1, id="a"), ChunkRecord(rank=2, id="b")],
            ...     calls=[
            ...         CallRecord([ChunkRecord(rank=1, id="b")]),
            ...         CallRecord([ChunkRecord(rank=1, id="c")]),
            ...     ],
            ... )
            >>> r.call_index()
            [[1], [None]]
        """
        where: dict = {}
        for i, c in enumerate(self.chunks):
            where.setdefault(chunk_key(c), i)
        return [[where.get(chunk_key(c)) if chunk_key(c) is not None else None for c in call.chunks]
                for call in self.calls]

    def call_chunks(self) -> list[list[ChunkRecord]]:
        """Each call's chunks with the verdicts shared from the merged list (a call's own where
        absent there)."""
        out = []
        for call, index in zip(self.calls, self.call_index(), strict=True):
            rows = []
            for c, i in zip(call.chunks, index, strict=True):
                shared = dict(c.verdicts) if i is None else {**c.verdicts, **self.chunks[i].verdicts}
                rows.append(ChunkRecord(rank=c.rank, id=c.id, text=c.text, doc_id=c.doc_id, start=c.start,
                                        end=c.end, score=c.score, verdicts=shared))
            out.append(rows)
        return out

    def verdicts(self, source: str) -> list[int | None]:
        """The source's verdict per rank (None where failed, missing or absent)."""
        out = []
        for c in self.chunks:
            v = c.verdicts.get(source)
            out.append(v.verdict if v is not None and v.status == "ok" else None)
        return out

    def sources(self) -> list[str]:
        """Verdict sources present on any chunk, in first-seen order."""
        seen: dict[str, None] = {}
        for c in self.chunks:
            for s in c.verdicts:
                seen.setdefault(s, None)
        return list(seen)

    def to_case(self) -> TestCase:
        return TestCase(id=self.id, question=self.question, chunks=[c.to_chunk() for c in self.chunks],
                        reference_contexts=list(self.reference_contexts),
                        reference_context_ids=None if self.reference_context_ids is None
                        else list(self.reference_context_ids),
                        reference=self.reference, response=self.response,
                        calls=[c.to_call() for c in self.calls], fields=_copy_value(self.fields))

    def to_dict(self) -> dict:
        out = {"id": self.id, "question": self.question, "reference": self.reference,
               "response": self.response,
               "reference_contexts": [p.to_dict() for p in self.reference_contexts],
               "reference_context_ids": self.reference_context_ids,
               "chunks": [c.to_dict() for c in self.chunks],
               "passages_found": self.passages_found, "scores": self.scores, "status": self.status}
        if self.truth:
            out["truth"] = self.truth
        if self.answer_score is not None:
            out["answer_score"] = self.answer_score
            out["answer_score_source"] = self.answer_score_source
        if self.calls:
            out["calls"] = [_call_dict(call, chunks) for call, chunks in zip(self.calls, self.call_chunks(),
                                                                             strict=True)]
        if self.fields:
            out["fields"] = self.fields
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out


def _call_dict(call: CallRecord, chunks: list[ChunkRecord]) -> dict:
    out: dict[str, Any] = {"position": call.position, "query": call.query, "span_id": call.span_id,
                           "trace_id": call.trace_id}
    if call.meta:
        out["meta"] = call.meta
    out["chunks"] = [c.to_dict() for c in chunks]
    return out


def dump_record(record: CaseRecord) -> str:
    """One JSON line (NaN/inf scores are written as null)."""
    obj = record.to_dict()
    try:  # the common case, every number finite: no second walk through the record
        return json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(finite_json(obj), ensure_ascii=False, allow_nan=False)


def write_records(records: Iterable[CaseRecord], path: str | PathLike) -> Path:
    """Write records as JSON Lines, one case a line; returns the path.

    Example:
        >>> write_records([CaseRecord("q1")], "/tmp/records.jsonl")  # doctest: +SKIP
    """
    from rankwise._atomic import atomic_write

    path = Path(path)
    try:
        if path.parent and not path.parent.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as fh:  # whole or not at all: a signal waits for the end, then stops the command
            for r in records:
                fh.write(dump_record(r) + "\n")
    except OSError as exc:  # full disk, no permission, a file where a folder should be ...
        raise InputError(f"cannot write the records: {exc.strerror or exc}", source=path, field="records") from None
    return path


# -----------------------------------------------------------------------------------------------
# reading


def _expect(value, types, what, *, source, line, field_name, optional=True):
    if value is None and optional:
        return None
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise InputError(f"expected {what}, got {value!r}", source=source, line=line, field=field_name)
    if not isinstance(value, types):
        raise InputError(f"expected {what}, got {type(value).__name__} {str(value)[:40]!r}", source=source,
                         line=line, field=field_name)
    if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
        raise InputError(f"integer out of range (beyond 64 bits): {str(value)[:40]}", source=source, line=line,
                         field=field_name)
    return value


def _verdict(obj, *, source, line, where) -> Verdict:
    kw = {"source": source, "line": line}
    _expect(obj, Mapping, "an object", field_name=where, optional=False, **kw)
    v = obj.get("verdict")
    if v is not None and (isinstance(v, bool) or v not in (0, 1)):
        raise InputError(f"verdict must be 0, 1 or null, got {v!r}", field=f"{where}.verdict", **kw)
    status = obj.get("status", "ok")
    if status not in VERDICT_STATUSES:
        raise InputError(f"status must be one of {list(VERDICT_STATUSES)}, got {status!r}",
                         field=f"{where}.status", **kw)
    meta = obj.get("meta") or {}
    _expect(meta, Mapping, "an object", field_name=f"{where}.meta", **kw)
    grade = _expect(obj.get("grade"), int, "an integer", field_name=f"{where}.grade", **kw)
    return Verdict(verdict=None if v is None else int(v), grade=grade,
                   type=_expect(obj.get("type"), str, "a string", field_name=f"{where}.type", **kw),
                   reason=_expect(obj.get("reason"), str, "a string", field_name=f"{where}.reason", **kw),
                   status=status,
                   error=_expect(obj.get("error"), str, "a string", field_name=f"{where}.error", **kw),
                   meta=dict(meta))


def _chunk_record(obj, *, source, line, where, rank) -> ChunkRecord:
    kw = {"source": source, "line": line}
    _expect(obj, Mapping, "an object", field_name=where, optional=False, **kw)
    verdicts_obj = obj.get("verdicts") or {}
    _expect(verdicts_obj, Mapping, "an object", field_name=f"{where}.verdicts", **kw)
    r = obj.get("rank", rank)
    _expect(r, int, "an integer rank", field_name=f"{where}.rank", optional=False, **kw)
    if r != rank:
        raise InputError(f"rank {r} at position {rank}; chunks must be listed in rank order 1, 2, ...",
                         field=f"{where}.rank", **kw)
    score = obj.get("score")
    if score is not None:
        score = float(_expect(score, (int, float), "a number", field_name=f"{where}.score", **kw))  # _expect bounds ints
    ident = obj.get("id")
    if isinstance(ident, int) and not isinstance(ident, bool):
        ident = str(ident)
    return ChunkRecord(
        rank=r, id=_expect(ident, str, "a string", field_name=f"{where}.id", **kw),
        text=_expect(obj.get("text"), str, "a string", field_name=f"{where}.text", **kw),
        doc_id=_expect(obj.get("doc_id"), str, "a string", field_name=f"{where}.doc_id", **kw),
        start=_expect(obj.get("start"), int, "an integer", field_name=f"{where}.start", **kw),
        end=_expect(obj.get("end"), int, "an integer", field_name=f"{where}.end", **kw),
        score=score,
        verdicts={str(s): _verdict(v, where=f"{where}.verdicts.{s}", **kw) for s, v in verdicts_obj.items()},
    )


def _call_record(obj, *, source, line, index) -> CallRecord:
    kw = {"source": source, "line": line}
    where = f"calls[{index}]"
    _expect(obj, Mapping, "an object {position, query, span_id, trace_id, chunks}", field_name=where,
            optional=False, **kw)
    unknown = sorted(set(obj) - set(_CALL_KEYS))
    if unknown:
        raise InputError(f"unknown key(s) {unknown}; a call has {', '.join(_CALL_KEYS)}", field=where, **kw)
    position = obj.get("position", index)
    _expect(position, int, "an integer position", field_name=f"{where}.position", optional=False, **kw)
    if position < 0:
        raise InputError(f"position must be >= 0, got {position}", field=f"{where}.position", **kw)
    meta = _expect(obj.get("meta") or {}, Mapping, "an object", field_name=f"{where}.meta", **kw)
    if "chunks" not in obj:
        raise InputError("a call needs chunks (a list, empty when the call found nothing)",
                         field=f"{where}.chunks", **kw)
    chunks = _expect(obj["chunks"], list, "a list", field_name=f"{where}.chunks", optional=False, **kw)
    return CallRecord(
        chunks=[_chunk_record(c, where=f"{where}.chunks[{i}]", rank=i + 1, **kw) for i, c in enumerate(chunks)],
        query=_expect(obj.get("query"), str, "a string", field_name=f"{where}.query", **kw),
        position=position,
        span_id=_expect(obj.get("span_id"), str, "a string", field_name=f"{where}.span_id", **kw),
        trace_id=_expect(obj.get("trace_id"), str, "a string", field_name=f"{where}.trace_id", **kw),
        meta=dict(meta))


def _call_records(obj, *, source, line) -> list[CallRecord]:
    raw = _expect(obj.get("calls") or [], list, "a list of calls", field_name="calls", source=source, line=line)
    calls = [_call_record(c, source=source, line=line, index=i) for i, c in enumerate(raw)]
    for i, c in enumerate(calls):
        if i and c.position <= calls[i - 1].position:
            raise InputError(f"position {c.position} after {calls[i - 1].position}; calls are listed in "
                             f"trajectory order, each at its own position", source=source, line=line,
                             field=f"calls[{i}].position")
    return calls


def record_from_dict(obj: Any, *, source: str | None = None, line: int | None = None) -> CaseRecord:
    """Parse one record object (as written by :func:`write_records`)."""
    kw = {"source": source, "line": line}
    _expect(obj, Mapping, "a JSON object per line", field_name=None, optional=False, **kw)
    if "id" not in obj or obj["id"] is None:
        raise InputError("record has no id", field="id", **kw)
    rid = obj["id"]
    rid = str(rid) if isinstance(rid, int) and not isinstance(rid, bool) else rid
    _expect(rid, str, "a string", field_name="id", optional=False, **kw)
    passages = []
    for i, p in enumerate(_expect(obj.get("reference_contexts") or [], list, "a list",
                                  field_name="reference_contexts", **kw)):
        where = f"reference_contexts[{i}]"
        if isinstance(p, str):
            passages.append(ReferencePassage(text=p))
            continue
        _expect(p, Mapping, "an object", field_name=where, optional=False, **kw)
        hop = _expect(p.get("hop"), int, "an integer hop", field_name=f"{where}.hop", **kw)
        if hop is not None and hop < 0:
            raise InputError(f"hop must be >= 0, got {hop}", field=f"{where}.hop", **kw)
        passages.append(ReferencePassage(
            text=_expect(p.get("text"), str, "a string", field_name=f"{where}.text", **kw),
            doc_id=_expect(p.get("doc_id"), str, "a string", field_name=f"{where}.doc_id", **kw),
            start=_expect(p.get("start"), int, "an integer", field_name=f"{where}.start", **kw),
            end=_expect(p.get("end"), int, "an integer", field_name=f"{where}.end", **kw), hop=hop))
    ref_ids = _expect(obj.get("reference_context_ids"), list, "a list", field_name="reference_context_ids",
                      **kw)
    chunks = [_chunk_record(c, where=f"chunks[{i}]", rank=i + 1, **kw)
              for i, c in enumerate(_expect(obj.get("chunks") or [], list, "a list", field_name="chunks",
                                            **kw))]
    found = _expect(obj.get("passages_found") or {}, Mapping, "an object", field_name="passages_found", **kw)
    for s, lists in found.items():
        _expect(lists, list, "a list per rank", field_name=f"passages_found.{s}", optional=False, **kw)
        if len(lists) != len(chunks):
            raise InputError(f"{len(lists)} entries for {len(chunks)} chunks", field=f"passages_found.{s}",
                             **kw)
    scores = _expect(obj.get("scores") or {}, Mapping, "an object", field_name="scores", **kw)
    status = _expect(obj.get("status") or {}, Mapping, "an object", field_name="status", **kw)
    truth = _expect(obj.get("truth") or {}, Mapping, "an object", field_name="truth", **kw)
    for s, t in truth.items():
        _expect(t, Mapping, "an object", field_name=f"truth.{s}", optional=False, **kw)
        n = t.get("n_relevant")
        gains = t.get("ideal_gains", [])
        if not (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
            raise InputError(f"n_relevant must be an integer >= 0, got {n!r}", field=f"truth.{s}.n_relevant", **kw)
        if not (isinstance(gains, list) and all(isinstance(g, int) and not isinstance(g, bool) for g in gains)):
            raise InputError("ideal_gains must be a list of integers", field=f"truth.{s}.ideal_gains", **kw)
    answer_score = obj.get("answer_score")
    if answer_score is not None and (isinstance(answer_score, bool) or not isinstance(answer_score, (int, float))
                                     or not math.isfinite(answer_score)):
        raise InputError(f"answer_score must be a number, got {answer_score!r}", field="answer_score", **kw)
    return CaseRecord(
        id=rid,
        answer_score=None if answer_score is None else float(answer_score),
        answer_score_source=_expect(obj.get("answer_score_source"), str, "a string",
                                    field_name="answer_score_source", **kw),
        question=_expect(obj.get("question"), str, "a string", field_name="question", **kw),
        reference=_expect(obj.get("reference"), str, "a string", field_name="reference", **kw),
        response=_expect(obj.get("response"), str, "a string", field_name="response", **kw),
        reference_contexts=passages,
        reference_context_ids=None if ref_ids is None else [str(x) for x in ref_ids],
        chunks=chunks,
        passages_found={str(s): [list(x) for x in v] for s, v in found.items()},
        scores={str(s): dict(v) for s, v in scores.items()},
        status={str(s): v for s, v in status.items()},
        truth={str(s): dict(t) for s, t in truth.items()},
        extra={k: v for k, v in obj.items() if k not in _CASE_KEYS},
        calls=_call_records(obj, **kw),
        fields=dict(_expect(obj.get("fields") or {}, Mapping, "an object of your own fields", field_name="fields",
                            **kw)),
    )


def load_records(path: str | PathLike) -> list[CaseRecord]:
    """Read records written by :func:`write_records` (or by ``rankwise eval-rag/judge --records``).

    Example:
        >>> records = load_records("out/records.jsonl")  # doctest: +SKIP
        >>> records[0].chunks[0].verdicts["llm"].verdict  # doctest: +SKIP
        1
    """
    path = Path(path)
    out: list[CaseRecord] = []
    seen: dict[str, int] = {}
    for n, obj in iter_json_lines(path, objects_only=False):
        rec = record_from_dict(obj, source=str(path), line=n)
        if rec.id in seen:
            raise InputError(f"case id {rec.id!r} appears twice (first on line {seen[rec.id]})", source=path,
                             line=n, field="id")
        seen[rec.id] = n
        out.append(rec)
    return out


def is_records_file(path: str | PathLike) -> bool:
    """True when the first non-blank line of a JSON Lines file is a per-case record (it has
    ``chunks``)."""
    p = Path(path)
    if p.suffix.lower() not in (".jsonl", ".ndjson", "") or not p.is_file():
        return False
    try:
        with open(p, encoding="utf-8") as fh:
            first = next((line for line in fh if line.strip()), "")
        obj = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and "chunks" in obj


_RAG_KEYS = ("chunks", "retrieved_contexts", "retrieved_context_ids", "contexts", "reference_contexts",
             "question", "user_input")


def is_rag_file(path: str | PathLike) -> bool:
    """True when a JSON Lines file holds RAG cases (records or a test set), not a run or qrels.

    Example:
        >>> is_rag_file("runs/bm25.trec")
        False
    """
    p = Path(path)
    if p.suffix.lower() not in (".jsonl", ".ndjson", ".json") or not p.is_file():
        return False
    try:
        with open(p, encoding="utf-8-sig") as fh:
            first = next((line for line in fh if line.strip()), "")
        obj = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and any(k in obj for k in _RAG_KEYS)


def as_records(obj: Any, *, copy: bool = True) -> list[CaseRecord]:
    """Per-case records from records (a list or a records file) or from any test set
    ``load_testset`` reads.

    A list of records is deep-copied unless ``copy=False``, so callers can add verdicts freely.

    Example:
        >>> [r.id for r in as_records([{"id": "q1", "retrieved_contexts": ["a chunk"]}])]
        ['q1']
    """
    if isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], CaseRecord):
        return [copy_record(r) for r in obj] if copy else list(obj)
    if isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], Mapping) and "chunks" in obj[0]:
        out, seen = [], set()
        for i, item in enumerate(obj):
            rec = record_from_dict(item, line=i + 1)
            if rec.id in seen:
                raise InputError(f"case id {rec.id!r} appears twice", line=i + 1, field="id")
            seen.add(rec.id)
            out.append(rec)
        return out
    if isinstance(obj, (str, PathLike)) and is_records_file(obj):
        return load_records(obj)
    return records_from_testset(obj)


def copy_record(record: CaseRecord) -> CaseRecord:
    """A deep copy of a record, as ``copy.deepcopy`` makes it, several times faster (a sweep copies
    every record of every cell): the record types are rebuilt from their own dataclass fields,
    JSON-like values copied by type.

    Example:
        >>> r = CaseRecord(
        ...     "q1", chunks=[ChunkRecord(rank=1, id="c1", verdicts={"ids": Verdict(1)})]
        ... )
        >>> c = copy_record(r)
        >>> c.chunks[0].verdicts["ids"].verdict = 0
        >>> r.verdicts("ids"), c == r
        ([1], False)
    """
    return _copy_value(record)


_IMMUTABLE = (str, int, float, bool, type(None))
_FIELDS: dict[type, tuple[str, ...]] = {}  # the record types copied field by field, and their fields


def _copy_value(value: Any) -> Any:
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is dict:
        return {k: v if type(v) in _IMMUTABLE else _copy_value(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _IMMUTABLE else _copy_value(v) for v in value]
    names = _FIELDS.get(kind)
    if names is None:
        if kind not in (CaseRecord, ChunkRecord, CallRecord, Verdict, ReferencePassage):
            import copy as _copy

            return _copy.deepcopy(value)
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return kind(**{name: v if type(v) in _IMMUTABLE else _copy_value(v)  # every field is an init field
                   for name in names for v in (getattr(value, name),)})


def records_from_testset(testset: Any) -> list[CaseRecord]:
    """One empty record (no verdicts yet) per case of a test set (anything :func:`load_testset`
    reads).

    Example:
        >>> recs = records_from_testset([{"id": "q1", "retrieved_contexts": ["a", "b"]}])
        >>> [c.rank for c in recs[0].chunks]
        [1, 2]
    """
    ts = load_testset(testset)
    return [
        CaseRecord(id=c.id, question=c.question, reference=c.reference, response=c.response,
                   reference_contexts=list(c.reference_contexts),
                   reference_context_ids=None if c.reference_context_ids is None else list(c.reference_context_ids),
                   chunks=_chunk_records(c.chunks),
                   calls=[CallRecord(_chunk_records(call.chunks), call.query, call.position, call.span_id,
                                     call.trace_id, dict(call.meta)) for call in c.calls],
                   fields=_copy_value(c.fields))
        for c in ts
    ]


def _chunk_records(chunks: list[Chunk]) -> list[ChunkRecord]:
    return [ChunkRecord(rank=i + 1, id=ch.id, text=ch.text, doc_id=ch.doc_id, start=ch.start, end=ch.end,
                        score=ch.score) for i, ch in enumerate(chunks)]


def testset_from_records(records: Iterable[CaseRecord]) -> TestSet:
    """The test set the records were made from (verdicts and scores left out)."""
    return TestSet([r.to_case() for r in records])


testset_from_records.__test__ = False  # a name pytest would otherwise collect
