"""From spans to test cases: every retriever span under one root trace becomes one retrieval call of
one case.

The readers (:mod:`rankwise.data.traces.readers`) turn each format's spans into :class:`Span`;
:func:`assemble` groups them by trace, orders a trace's retriever spans by start time and builds one
:class:`~rankwise.data.testset.TestCase` per trace, in time order (id: the trace id; a trace matched
to a test-set case takes that case's id, ``#2``, ``#3`` added for later traces of the same
question). A trace with one retriever call is an ordinary single-list case (its chunks are that
call's list, so its numbers equal the adapter path's); a trace with several keeps them as
``case.calls`` (:class:`~rankwise.data.testset.RetrievalCall`) and its chunks are the merged list.
Chunk ids follow the adapters' rules (:func:`rankwise.data.items.item_chunk`).

What cannot be a case is skipped and counted, never dropped unsaid: a trace with no retriever span,
a retriever span with no documents, a span that lost attributes to OpenTelemetry's per-span limit
(its document list is incomplete), a document with neither content nor id, a span whose kind is not
a string, a trace with no root span (kept; its question is then its first call's query). A span seen
twice (the same trace and span id: an exporter that appended twice, duplicated rows) is read once
and the duplicates counted; an empty retriever span nested in (or around) a retriever span with
documents is the framework's wrapper of that call, not a lost call. Offsets that cannot be
(negative, past 2**63, not whole numbers) are dropped and counted, the chunk kept without them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rankwise.data.items import END_KEYS, START_KEYS, doc_id_of, item_chunk, to_item
from rankwise.data.testset import ReferencePassage, RetrievalCall, TestCase, TestSet, merge_calls
from rankwise.data.text import INT64_MAX
from rankwise.errors import InputError

__all__ = ["Span", "TraceImport", "assemble", "text_of", "ATTRIBUTE_LIMIT"]

#: fields of a JSON input / output read as the question / answer, in this order
QUESTION_KEYS = ("question", "user_input", "input", "query", "messages", "prompt")
ANSWER_KEYS = ("answer", "response", "output", "result", "text", "content")
#: attributes (or metadata fields) read as the id of a test-set case
CASE_ID_KEYS = ("case_id", "rankwise.case_id", "session.id")
#: OpenTelemetry's default limit of attributes per span (``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``)
ATTRIBUTE_LIMIT = 128


@dataclass
class Span:
    """One span as a reader found it, in the terms assembling needs.

    ``documents`` is None when a retriever span carries no documents at all, else a list of mappings
    ``{id, text, score, metadata}`` (each with ``position``, the 0-based document position in the
    span).
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
    dropped_attributes: int = 0  #: attributes the SDK dropped (OTLP ``droppedAttributesCount``); -1: probably some
    bad_kind: str | None = None  #: the span kind as found when it is not a string (the span is then not read)
    first_stage: list[dict] | None = None  #: a RERANKER span's input documents (``documents``: its output)


@dataclass
class TraceImport:
    """What :func:`rankwise.data.traces.import_traces` read: the test set, every case's calls (a
    single-call case's one call too, for its span id), what was skipped.

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
    duplicates: Counter = field(default_factory=Counter)  #: (trace id, span id) -> copies beyond the first
    bad_offsets: list[str] = field(default_factory=list)  #: "span S document N: start ..., end ..." (dropped)
    located: Counter = field(default_factory=Counter)  #: chunks placed in the corpus or passages, by how
    first_stage: dict[str, list] = field(default_factory=dict)  #: case id -> chunks before reranking (RERANKER)

    def summary(self) -> dict:
        """Counts: cases, retrieval calls, skipped (by reason), cases given labels from the test
        set, duplicate spans read once, chunks whose offsets were dropped, chunks located in the
        corpus (by how), chunks (of every call) and those without a document span (which span
        verdicts cannot judge)."""
        return {"format": self.format, "cases": len(self.testset),
                "calls": sum(len(v) for v in self.calls.values()),
                "multi_call_cases": sum(1 for v in self.calls.values() if len(v) > 1),
                "skipped": dict(self.skipped), "labelled_from_testset": self.labelled,
                "id_from": dict(self.id_rules), "duplicate_spans": sum(self.duplicates.values()),
                "bad_offsets": len(self.bad_offsets), "located": dict(self.located),
                "chunks": sum(len(c.chunks) for v in self.calls.values() for c in v),
                "chunks_without_offsets": sum(1 for v in self.calls.values() for c in v for x in c.chunks
                                              if x.span is None)}

    def warnings(self) -> list[str]:
        """One sentence per thing read differently from the file: duplicate spans, dropped offsets.

        Example:
            >>> imp = TraceImport(
            ...     TestSet([]), {}, Counter(), [], 0, duplicates=Counter({("t1", "s1"): 1})
            ... )
            >>> imp.warnings()
            ['1 span seen more than once (the same trace and span id) was read once: span s1 of trace t1 (twice)']
        """
        out = []
        if self.duplicates:
            n = sum(self.duplicates.values())
            named = ", ".join(f"span {s} of trace {t} ({'twice' if k == 1 else f'{k + 1} times'})"
                              for (t, s), k in list(self.duplicates.items())[:3])
            more = f" and {len(self.duplicates) - 3} more" if len(self.duplicates) > 3 else ""
            out.append(f"{n} span{'s' if n != 1 else ''} seen more than once (the same trace and span id) "
                       f"{'were' if n != 1 else 'was'} read once: {named}{more}")
        if self.bad_offsets:
            one = len(self.bad_offsets) == 1
            out.append(f"{len(self.bad_offsets)} chunk{'' if one else 's'} carr{'ies' if one else 'y'} impossible "
                       f"offsets (negative, end before start, past 2**63 or not whole numbers; first: "
                       f"{self.bad_offsets[0]}); kept without offsets, so span verdicts cannot use them")
        return out


def text_of(value: Any, keys: tuple[str, ...]) -> str | None:
    """A question or answer from a span's input/output: the string itself, a JSON object's first
    string field among ``keys`` (or its only string field, or the first field among ``keys`` of an
    object nested in it), else the JSON text.

    Example:
        >>> (
        ...     text_of('{"question": "Capital?", "k": 3}', QUESTION_KEYS),
        ...     text_of("Paris", ANSWER_KEYS),
        ... )
        ('Capital?', 'Paris')
        >>> text_of('{"data": {"retriever": {"query": "Capital?", "top_k": null}}}', QUESTION_KEYS)
        'Capital?'
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
        nested = _nested_field(value, keys)
        if nested is not None:  # Haystack's Pipeline.run: {"data": {"retriever": {"query": ...}}}
            return nested
    if isinstance(value, list) and value and isinstance(value[-1], Mapping):  # chat messages: the last one
        return text_of(value[-1], keys)
    return json.dumps(value, ensure_ascii=False, default=str)


def _nested_field(value: Mapping, keys: tuple[str, ...], depth: int = 3) -> str | None:
    """The first string field among ``keys`` in the objects nested in ``value`` (a few levels down).
    """
    if depth == 0:
        return None
    inner = [v for v in value.values() if isinstance(v, Mapping)]
    for v in inner:
        for k in keys:
            if isinstance(v.get(k), str):
                return v[k]
    for v in inner:
        found = _nested_field(v, keys, depth - 1)
        if found is not None:
            return found
    return None


@dataclass
class _Reading:
    """What assembling counts as it goes (skips, notes, id rules, dropped offsets) and how it names
    chunks."""

    source: str
    id_opts: dict
    locator: Any = None  #: a :class:`rankwise.data.traces.locate.Locator` when a corpus was given
    skipped: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    rules: Counter = field(default_factory=Counter)
    bad_offsets: list[str] = field(default_factory=list)
    first_stage: dict = field(default_factory=dict)  #: trace id -> the reranker's input chunks

    def skip(self, why: str, note: str | None = None) -> None:
        self.skipped[why] += 1
        if note:
            self.notes.append(note)

    def absorb(self, part: _Reading) -> None:
        """Take the counts of one trace's reading."""
        self.skipped.update(part.skipped)
        self.notes.extend(part.notes)
        self.rules.update(part.rules)
        self.bad_offsets.extend(part.bad_offsets)
        self.first_stage.update(part.first_stage)


def _whole(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, str) and value.strip().lstrip("-").isdigit()


def _raw_offset(doc: Mapping, keys: tuple[str, ...], own: str) -> Any:
    if doc.get(own) is not None:
        return doc[own]
    meta = doc.get("metadata") or {}
    return next((meta[k] for k in keys if isinstance(meta, Mapping) and meta.get(k) is not None), None)


def _offsets_problem(item, doc: Mapping) -> str | None:
    """Why the item's offsets cannot be used (not whole numbers, past 2**63), else None (they are
    cleared)."""
    raw = {"start": _raw_offset(doc, START_KEYS, "start"), "end": _raw_offset(doc, END_KEYS, "end")}
    bad = [f"{k} {json.dumps(v, default=str)[:30]}" for k, v in raw.items() if v is not None and not _whole(v)]
    bad += [f"{k} {v}" for k, v in (("start", item.start), ("end", item.end)) if v is not None and abs(v) > INT64_MAX]
    if item.start is not None and item.end is None and item.text is not None \
            and item.start + len(item.text) > INT64_MAX:
        bad.append(f"start {item.start}")
    if not bad:
        return None
    item.start = item.end = None
    return ", ".join(bad)


def _chunk(span: Span, rank: int, doc: Mapping, reading: _Reading):
    """The chunk of one document (None when it has neither content nor id: counted), its offsets
    checked and, with a corpus, located."""
    item = to_item(doc)
    where = f"span {span.span_id} document {doc.get('position', rank - 1)}"
    bad = _offsets_problem(item, doc)
    if reading.locator is not None:
        reading.locator.place(item, doc_id_of(item, reading.id_opts.get("doc_id_key")))
    chunk, rule, bad_span = item_chunk(item, rank, **reading.id_opts)
    if bad or bad_span:
        reading.bad_offsets.append(f"{where}: {bad or bad_span}")
    if chunk.id is None and chunk.text is None:
        reading.skip("document with neither content nor id (left out of its call)",
                     f"{where} has neither content nor id: left out of the call")
        return None
    reading.rules[rule] += 1
    return chunk.to_chunk()


def _lost_attributes(span: Span) -> str:
    n = span.dropped_attributes
    lost = f"lost {n} attributes" if n > 0 else f"holds exactly {ATTRIBUTE_LIMIT} attributes"
    return (f"retriever span {span.span_id} {lost} to OpenTelemetry's limit of attributes per span (default "
            f"{ATTRIBUTE_LIMIT}; OpenInference writes 3-4 a document, so ~32 documents): its document list is "
            f"incomplete. Set OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT (e.g. 10000) where the traced application runs, and "
            f"trace again")


def _call(span: Span, position: int, reading: _Reading) -> RetrievalCall | None:
    if span.dropped_attributes:
        reading.skip("retriever span that lost attributes to OpenTelemetry's limit (set "
                     "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and trace again)", _lost_attributes(span))
        return None
    chunks, positions = [], []
    for i, doc in enumerate(span.documents or []):
        chunk = _chunk(span, len(chunks) + 1, doc, reading)
        if chunk is not None:
            chunks.append(chunk)
            positions.append(doc.get("position", i))
    if span.documents and not chunks:
        reading.skip("retriever span whose documents have neither content nor id")
        return None
    return RetrievalCall(chunks=chunks, query=span.input, position=position, span_id=span.span_id,
                         trace_id=span.trace_id, meta={"name": span.name, "document_positions": positions})


def _wrappers(spans: list[Span]) -> set[int]:
    """Retriever spans without documents that hold, or are held by, a retriever span with documents:
    a framework's wrapper of that call (LlamaIndex's ``BaseRetriever.retrieve`` around
    ``_retrieve``)."""
    by_id = {s.span_id: s for s in spans}
    full = {s.span_id for s in spans if s.retriever and s.documents is not None}
    out = set()
    for s in spans:
        if not s.retriever or s.documents is not None:
            continue
        seen, p = set(), s.parent_id
        while p is not None and p in by_id and p not in seen:
            if p in full:
                out.add(id(s))
                break
            seen.add(p)
            p = by_id[p].parent_id
    for s in spans:
        p, seen = (by_id[s.span_id].parent_id if s.span_id in full else None), set()
        while p is not None and p in by_id and p not in seen:
            if by_id[p].retriever and by_id[p].documents is None:
                out.add(id(by_id[p]))
            seen.add(p)
            p = by_id[p].parent_id
    return out


def _doc_key(doc: Mapping) -> Any:
    return doc.get("id") or doc.get("text")


def _fed_to_reranker(span: Span, rerankers: list[Span]) -> bool:
    """A retriever span whose documents all went into a reranker of the same trace: its first stage,
    not a call of its own (the reranker's output is the list the generator reads)."""
    if span.first_stage is not None or not span.documents:
        return False
    keys = {_doc_key(d) for d in span.documents}
    return any(keys <= {_doc_key(d) for d in r.first_stage or []} for r in rerankers)


def _first_stage(trace_id: str, rerankers: list[Span], reading: _Reading) -> None:
    """The first reranker's input documents as the case's first-stage chunks
    (``reading.first_stage``)."""
    if not rerankers or not rerankers[0].first_stage:
        return
    r = rerankers[0]
    before = _call(Span(r.trace_id, r.span_id, r.parent_id, r.name, r.start, True, r.input,
                        documents=r.first_stage, line=r.line, where=r.where), 0, reading)
    if before is not None:
        reading.first_stage[trace_id] = list(before.chunks)


def _case(trace_id: str, spans: list[Span], reading: _Reading) -> tuple[TestCase, list[RetrievalCall]] | None:
    order = {id(s): i for i, s in enumerate(spans)}
    for s in spans:
        if s.bad_kind is not None:
            reading.skip("span whose kind is not a string (not read)",
                         f"trace {trace_id}: span {s.span_id}'s kind is {s.bad_kind}, not a string: not read")
    roots = [s for s in spans if s.parent_id is None]
    root = min(roots, key=lambda s: (s.start is None, s.start or 0, order[id(s)])) if roots else None
    wrappers = _wrappers(spans)
    retrievers = sorted((s for s in spans if s.retriever and id(s) not in wrappers),
                        key=lambda s: (s.start is None, s.start or 0, order[id(s)]))
    rerankers = [s for s in retrievers if s.first_stage is not None]
    retrievers = [s for s in retrievers if not _fed_to_reranker(s, rerankers)]
    _first_stage(trace_id, rerankers, reading)
    calls = []
    for s in retrievers:
        if s.documents is None:
            reading.skip("retriever span without documents", f"trace {trace_id}: retriever span {s.span_id} "
                         "holds no documents (no retrieval.documents); the call was skipped")
            continue
        call = _call(s, len(calls), reading)
        if call is not None:
            calls.append(call)
    if not calls:
        if not retrievers:
            reading.skip("trace without a retriever span")
        else:
            reading.skip("trace whose retriever spans hold no documents")
        return None
    if root is None:
        reading.skip("trace without a root span (kept; question from its first call)",
                     f"trace {trace_id}: no root span (a span without parent); the question is the first "
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
    """Reference passages/ids of the test-set case matched by id attribute or exact question join
    ``case``; the matched case's id (None when none matched)."""
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
    """Traces in time order (their earliest span), file order among equals and for traces without
    times."""
    first = {t: i for i, t in enumerate(by_trace)}
    starts = {t: min((s.start for s in g if s.start is not None), default=None) for t, g in by_trace.items()}
    return sorted(by_trace, key=lambda t: (starts[t] is None, starts[t] or 0, first[t]))


def _placed_by_passages(trace_id: str, group: list[Span], case: TestCase, case_calls: list[RetrievalCall],
                        part: _Reading, located: Counter):
    """The case rebuilt with its chunks placed by its own reference passages (those that say where
    they sit) when some chunk has no offsets; else as it was."""
    from rankwise.data.traces.locate import PassageLocator

    if all(c.span is not None for c in case.chunks):
        return case, case_calls, part
    passages = PassageLocator.from_testset([case])
    if passages is None:
        return case, case_calls, part
    again = _Reading(part.source, part.id_opts, passages)
    rebuilt, rebuilt_calls = _case(trace_id, group, again)
    rebuilt.reference_contexts, rebuilt.reference_context_ids = case.reference_contexts, case.reference_context_ids
    rebuilt.reference = case.reference
    located.update(passages.counts)
    return rebuilt, rebuilt_calls, again


def _unique(spans: list[Span]) -> tuple[list[Span], Counter]:
    """The spans, each (trace id, span id) once (the first copy), and how many copies each had
    beyond it."""
    seen: set = set()
    out, dup = [], Counter()
    for s in spans:
        key = (s.trace_id, s.span_id)
        if key in seen:
            dup[key] += 1
            continue
        seen.add(key)
        out.append(s)
    return out, dup


def assemble(spans: list[Span], *, source: str, testset: TestSet | None = None, fmt: str = "",
             id_key: str | None = None, doc_id_key: str | None = None, locator: Any = None) -> TraceImport:
    """Group spans by trace and build one case per trace with a retriever call (see the module
    docstring); ``locator`` (:class:`rankwise.data.traces.locate.Locator`) gives chunks without
    offsets theirs.

    Example:
        >>> s = [Span("t1", "a", name="rag", input="Capital?", output="Paris"),
        ...      Span("t1", "b", parent_id="a", retriever=True, input="capital of France",
        ...           documents=[{"id": "c1", "text": "Paris is the capital.", "position": 0}])]
        >>> imp = assemble(s + s[1:], source="<spans>")
        >>> case = imp.testset["t1"]
        >>> (
        ...     case.question,
        ...     case.response,
        ...     [c.id for c in case.chunks],
        ...     imp.summary()["duplicate_spans"],
        ... )
        ('Capital?', 'Paris', ['c1'], 1)
    """
    spans, duplicates = _unique(spans)
    by_trace: dict[str, list[Span]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    reading = _Reading(source, {"id_key": id_key, "doc_id_key": doc_id_key}, locator)
    by_question = {} if testset is None else {(c.question or "").strip(): c for c in testset if c.question}
    cases, calls, trace_ids, labelled = [], {}, {}, 0
    first_stage: dict[str, list] = {}
    used: Counter = Counter()
    located: Counter = Counter()
    for trace_id in _trace_order(by_trace):
        group = by_trace[trace_id]
        part = _Reading(source, reading.id_opts, locator)
        built = _case(trace_id, group, part)
        if built is None:
            reading.absorb(part)
            continue
        case, case_calls = built
        matched = _label(case, _case_key(group), testset, by_question)
        if matched is not None and locator is None:  # the test set's own documents where it has them
            case, case_calls, part = _placed_by_passages(trace_id, group, case, case_calls, part, located)
        reading.absorb(part)
        if matched is not None:  # the test set's name for the question: runs of it pair up case by case
            labelled += 1
            used[matched] += 1
            case.id = matched if used[matched] == 1 else f"{matched}#{used[matched]}"
        cases.append(case)
        calls[case.id] = case_calls
        trace_ids[case.id] = trace_id
        if trace_id in part.first_stage:
            first_stage[case.id] = part.first_stage[trace_id]
    if not cases:
        found = ", ".join(f"{n} {why}" for why, n in reading.skipped.items()) or "no span"
        first = f"; first: {reading.notes[0]}" if reading.notes else ""
        raise InputError(f"no trace holds a retriever call with documents ({len(by_trace)} traces: {found}{first}); "
                         "rankwise reads OpenInference RETRIEVER spans, LangSmith runs of run_type 'retriever' and "
                         "MLflow RETRIEVER spans", source=source)
    return TraceImport(TestSet(cases, source), calls, reading.skipped, reading.notes, labelled, fmt, reading.rules,
                       trace_ids, duplicates, reading.bad_offsets, located if locator is None else locator.counts,
                       first_stage)
