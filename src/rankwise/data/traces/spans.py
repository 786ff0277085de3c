"""From spans to test cases: every retriever span under one root trace becomes one retrieval call of one case.

The readers (:mod:`rankwise.data.traces.readers`) turn each format's spans into :class:`Span`; :func:`assemble`
groups them by trace, orders a trace's retriever spans by start time and builds one
:class:`~rankwise.data.testset.TestCase` per trace, in time order (id: the trace id; a trace matched to a test-set
case takes that case's id, ``#2``, ``#3`` added for later traces of the same question). A trace with one retriever call is an
ordinary single-list case (its chunks are that call's list, so its numbers equal the adapter path's); a trace
with several keeps them as ``case.calls`` (:class:`~rankwise.data.testset.RetrievalCall`) and its chunks are the
merged list. Chunk ids follow the adapters' rules (:func:`rankwise.data.items.item_chunk`).

What cannot be a case is skipped and counted, never dropped unsaid: a trace with no retriever span, a retriever
span with no documents, a trace with no root span (kept; its question is then its first call's query).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rankwise.data.items import item_chunk, to_item
from rankwise.data.testset import ReferencePassage, RetrievalCall, TestCase, TestSet, merge_calls
from rankwise.errors import InputError

__all__ = ["Span", "TraceImport", "assemble", "text_of"]

#: fields of a JSON input / output read as the question / answer, in this order
QUESTION_KEYS = ("question", "user_input", "input", "query", "messages", "prompt")
ANSWER_KEYS = ("answer", "response", "output", "result", "text", "content")
#: attributes (or metadata fields) read as the id of a test-set case
CASE_ID_KEYS = ("case_id", "rankwise.case_id", "session.id")


@dataclass
class Span:
    """One span as a reader found it, in the terms assembling needs.

    ``documents`` is None when a retriever span carries no documents at all, else a list of mappings
    ``{id, text, score, metadata}`` (each with ``position``, the 0-based document position in the span).
    """

    trace_id: str
    span_id: str
    parent_id: str | None = None
    name: str | None = None
    start: int | None = None  # nanoseconds since the epoch (only the order matters)
    retriever: bool = False
    input: str | None = None
    output: str | None = None
    documents: list[dict] | None = None
    case_key: str | None = None
    line: int | None = None
    where: str = ""


@dataclass
class TraceImport:
    """What :func:`rankwise.data.traces.import_traces` read: the test set, every case's calls (a single-call case's
    one call too, for its span id), what was skipped.

    Example:
        >>> imp = TraceImport(TestSet([TestCase("t1", "q?")]), {"t1": []}, Counter(), [], 0)
        >>> imp.summary()["cases"]
        1
    """

    testset: TestSet
    calls: dict[str, list[RetrievalCall]]
    skipped: Counter
    notes: list[str]
    labelled: int
    format: str = ""
    id_rules: Counter = field(default_factory=Counter)
    trace_ids: dict[str, str] = field(default_factory=dict)  #: case id -> trace id

    def summary(self) -> dict:
        """Counts: cases, retrieval calls, skipped (by reason), cases given labels from the test set."""
        return {"format": self.format, "cases": len(self.testset),
                "calls": sum(len(v) for v in self.calls.values()),
                "multi_call_cases": sum(1 for v in self.calls.values() if len(v) > 1),
                "skipped": dict(self.skipped), "labelled_from_testset": self.labelled,
                "id_from": dict(self.id_rules)}


def text_of(value: Any, keys: tuple[str, ...]) -> str | None:
    """A question or answer from a span's input/output: the string itself, a JSON object's first string
    field among ``keys`` (or its only string field), else the JSON text.

    Example:
        >>> text_of('{"question": "Capital?", "k": 3}', QUESTION_KEYS), text_of("Paris", ANSWER_KEYS)
        ('Capital?', 'Paris')
    """
    if value is None:
        return None
    if isinstance(value, str):
        s = value.strip()
        if not s or s[0] not in "{[\"":
            return value
        try:
            value = json.loads(s)
        except (ValueError, RecursionError):
            return value
        if isinstance(value, str):
            return value
    if isinstance(value, Mapping):
        for k in keys:
            if isinstance(value.get(k), str):
                return value[k]
        strings = [v for v in value.values() if isinstance(v, str)]
        if len(strings) == 1:
            return strings[0]
    if isinstance(value, list) and value and isinstance(value[-1], Mapping):  # chat messages: the last one
        return text_of(value[-1], keys)
    return json.dumps(value, ensure_ascii=False, default=str)


def _call(span: Span, position: int, source: str, rules: Counter, id_opts: dict) -> RetrievalCall:
    chunks = []
    for rank, doc in enumerate(span.documents or [], start=1):
        if doc.get("text") is None and doc.get("id") is None:
            raise InputError(f"retriever span {span.span_id}: document {doc.get('position', rank - 1)} has neither "
                             "content nor id", source=source, line=span.line, field=f"{span.where}document.content")
        chunk, rule, _bad = item_chunk(to_item(doc), rank, **id_opts)
        rules[rule] += 1
        chunks.append(chunk.to_chunk())
    return RetrievalCall(chunks=chunks, query=span.input, position=position, span_id=span.span_id,
                      trace_id=span.trace_id,
                      meta={"name": span.name, "document_positions": [d.get("position", i)
                                                                       for i, d in enumerate(span.documents or [])]})


def _case(trace_id: str, spans: list[Span], source: str, skipped: Counter, notes: list[str], rules: Counter,
          id_opts: dict) -> tuple[TestCase, list[RetrievalCall]] | None:
    order = {id(s): i for i, s in enumerate(spans)}
    roots = [s for s in spans if s.parent_id is None]
    root = min(roots, key=lambda s: (s.start is None, s.start or 0, order[id(s)])) if roots else None
    retrievers = sorted((s for s in spans if s.retriever),
                        key=lambda s: (s.start is None, s.start or 0, order[id(s)]))
    calls = []
    for s in retrievers:
        if s.documents is None:
            skipped["retriever span without documents"] += 1
            notes.append(f"trace {trace_id}: retriever span {s.span_id} holds no documents "
                         f"(no retrieval.documents); the call was skipped")
            continue
        calls.append(_call(s, len(calls), source, rules, id_opts))
    if not calls:
        if not retrievers:
            skipped["trace without a retriever span"] += 1
        else:
            skipped["trace whose retriever spans hold no documents"] += 1
        return None
    if root is None:
        skipped["trace without a root span (kept; question from its first call)"] += 1
        notes.append(f"trace {trace_id}: no root span (a span without parent); the question is the first "
                     f"retriever call's query")
    question = root.input if root is not None and root.input else calls[0].query
    response = root.output if root is not None and not root.retriever else None
    if len(calls) == 1:  # an ordinary single-list case: its numbers are the adapter path's
        return TestCase(id=trace_id, question=question, chunks=list(calls[0].chunks), response=response), calls
    return TestCase(id=trace_id, question=question, chunks=merge_calls(calls), response=response,
                    calls=calls), calls


def _case_key(spans: list[Span]) -> str | None:
    for s in sorted(spans, key=lambda s: s.parent_id is not None):  # the root's first
        if s.case_key:
            return s.case_key
    return None


def _label(case: TestCase, key: str | None, testset: TestSet | None, by_question: dict) -> str | None:
    """Reference passages/ids of the test-set case matched by id attribute or exact question join ``case``;
    the matched case's id (None when none matched)."""
    if testset is None:
        return None
    ref = testset[key] if key is not None and key in testset else by_question.get((case.question or "").strip())
    if ref is None:
        return None
    case.reference_contexts = [ReferencePassage(p.text, p.doc_id, p.start, p.end, p.hop)
                               for p in ref.reference_contexts]
    case.reference_context_ids = None if ref.reference_context_ids is None else list(ref.reference_context_ids)
    case.reference = ref.reference
    case.fields = {**ref.fields, **case.fields}  # the test set's own fields (style ...): to slice the traces by
    return ref.id


def _trace_order(by_trace: dict[str, list[Span]]) -> list[str]:
    """Traces in time order (their earliest span), file order among equals and for traces without times."""
    first = {t: i for i, t in enumerate(by_trace)}
    starts = {t: min((s.start for s in g if s.start is not None), default=None) for t, g in by_trace.items()}
    return sorted(by_trace, key=lambda t: (starts[t] is None, starts[t] or 0, first[t]))


def assemble(spans: list[Span], *, source: str, testset: TestSet | None = None, fmt: str = "",
             id_key: str | None = None, doc_id_key: str | None = None) -> TraceImport:
    """Group spans by trace and build one case per trace with a retriever call (see the module docstring).

    Example:
        >>> s = [Span("t1", "a", name="rag", input="Capital?", output="Paris"),
        ...      Span("t1", "b", parent_id="a", retriever=True, input="capital of France",
        ...           documents=[{"id": "c1", "text": "Paris is the capital.", "position": 0}])]
        >>> imp = assemble(s, source="<spans>")
        >>> case = imp.testset["t1"]
        >>> case.question, case.response, [c.id for c in case.chunks]
        ('Capital?', 'Paris', ['c1'])
    """
    by_trace: dict[str, list[Span]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    skipped: Counter = Counter()
    rules: Counter = Counter()
    notes: list[str] = []
    by_question = {} if testset is None else {(c.question or "").strip(): c for c in testset if c.question}
    cases, calls, trace_ids, labelled = [], {}, {}, 0
    id_opts = {"id_key": id_key, "doc_id_key": doc_id_key}
    used: Counter = Counter()
    for trace_id in _trace_order(by_trace):
        group = by_trace[trace_id]
        built = _case(trace_id, group, source, skipped, notes, rules, id_opts)
        if built is None:
            continue
        case, case_calls = built
        matched = _label(case, _case_key(group), testset, by_question)
        if matched is not None:  # the test set's name for the question: runs of it pair up case by case
            labelled += 1
            used[matched] += 1
            case.id = matched if used[matched] == 1 else f"{matched}#{used[matched]}"
        cases.append(case)
        calls[case.id] = case_calls
        trace_ids[case.id] = trace_id
    if not cases:
        found = ", ".join(f"{n} {why}" for why, n in skipped.items()) or "no span"
        raise InputError(f"no trace holds a retriever call with documents ({len(by_trace)} traces: {found}); "
                         "rankwise reads OpenInference RETRIEVER spans, LangSmith runs of run_type 'retriever' and "
                         "MLflow RETRIEVER spans", source=source)
    return TraceImport(TestSet(cases, source), calls, skipped, notes, labelled, fmt, rules, trace_ids)
