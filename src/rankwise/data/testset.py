"""RAG test sets: questions with their retrieved chunks and ground truth (reference passages or
ids).

Accepted shapes (see docs/context-metrics.md and docs/datasets.md):

- JSON Lines, one case a line, with Ragas' field names — ``user_input`` (or ``question``),
  ``retrieved_contexts`` (or ``contexts``), ``retrieved_context_ids``, ``reference_contexts``,
  ``reference_context_ids``, ``reference`` (or ``ground_truth``, ``ground_truths``), ``response``;
  ``id`` names the case — or our richer form, where an item of ``retrieved_contexts`` may be an
  object ``{id, text, doc_id, start, end, score}`` and an item of ``reference_contexts`` an object
  ``{text, doc_id, start, end}``. LangChain documents (``{page_content, metadata}`` or ``Document``
  objects) are chunks too: ``metadata`` may give ``id``, ``doc_id`` (or ``source``), ``start_index``
  and ``score``.
- Several retrieval calls per question (agents, multi-hop pipelines): ``calls``, a list of
  ``{position, query, span_id, trace_id, meta, chunks}`` objects (``chunks`` as
  ``retrieved_contexts``); the case's ``chunks`` are then the calls merged by :func:`merge_calls`
  unless ``retrieved_contexts`` is given too. A reference passage may carry ``hop`` (0, 1, ...): the
  references grouped by hop.
- CSV/TSV with the same columns (list fields as JSON strings), a JSON array of case objects, a JSON
  object of lists, a pandas/polars DataFrame, a dict of lists (Hugging Face / Ragas dataset shape),
  a list of dicts, or any object with ``to_list()`` / ``to_pandas()`` (Ragas ``EvaluationDataset``).

Any other field of a case (``style``, ``difficulty``, ``subqueries``, synth's ``provenance`` ...) is
the user's own: it is kept as given in :attr:`TestCase.fields`, written back by
:func:`case_to_dict`, carried into the per-case records (``fields``) and can slice the results
(``rankwise eval-rag --by style``).

A case that cannot be read raises :class:`~rankwise.errors.InputError` naming line and field.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise._atomic import atomic_write
from rankwise.data.text import (
    INT64_MAX,
    check_surrogates,
    decode_text,
    iter_csv_rows,
    iter_json_lines,
    json_loads,
    read_bytes,
)
from rankwise.errors import InputError

__all__ = ["Chunk", "ReferencePassage", "RetrievalCall", "TestCase", "TestSet", "load_testset",
           "testset_from_rows", "case_from_mapping", "merge_calls", "chunk_key", "case_to_dict", "write_testset",
           "MERGE_ORDERS", "DEDUP_RULES", "user_fields"]

# Field names and the aliases we accept for them.
ID_FIELDS = ("id", "query_id", "qid", "question_id", "case_id")
QUESTION_FIELDS = ("user_input", "question", "query")
RETRIEVED_FIELDS = ("retrieved_contexts", "contexts")
RETRIEVED_ID_FIELDS = ("retrieved_context_ids",)
REFERENCE_CONTEXT_FIELDS = ("reference_contexts",)
REFERENCE_ID_FIELDS = ("reference_context_ids",)
REFERENCE_FIELDS = ("reference", "ground_truth", "ground_truths")
RESPONSE_FIELDS = ("response", "answer")
CALL_FIELDS = ("calls",)
LIST_FIELDS = RETRIEVED_FIELDS + RETRIEVED_ID_FIELDS + REFERENCE_CONTEXT_FIELDS + REFERENCE_ID_FIELDS
_CHUNK_KEYS = {"id", "text", "doc_id", "start", "end", "score", "page_content", "content", "metadata", "type"}
_PASSAGE_KEYS = {"text", "doc_id", "start", "end", "hop", "page_content", "content", "metadata", "type"}
_CALL_KEYS = {"position", "query", "span_id", "trace_id", "meta", "chunks"}
#: every case field read; anything else is the user's own (:attr:`TestCase.fields`), kept as given
KNOWN_FIELDS = frozenset(ID_FIELDS + QUESTION_FIELDS + LIST_FIELDS + REFERENCE_FIELDS + RESPONSE_FIELDS
                         + CALL_FIELDS)
#: how :func:`merge_calls` orders the merged list, and how it collapses duplicates
MERGE_ORDERS = ("interleave", "score", "concat")
DEDUP_RULES = ("id", "span", "none")
ACCEPTED_NAMES = ("id (or query_id, qid, question_id, case_id); user_input (or question, query); "
                  "retrieved_contexts (or contexts; strings, {id, text, doc_id, start, end, score} objects or "
                  "LangChain {page_content, metadata}); retrieved_context_ids; reference_contexts; "
                  "reference_context_ids; reference (or ground_truth, ground_truths); response (or answer); "
                  "calls ([{position, query, span_id, trace_id, chunks}], several retrieval calls)")


def _span(doc_id: str | None, start: int | None, end: int | None) -> tuple[str, int, int] | None:
    return None if doc_id is None or start is None or end is None else (doc_id, start, end)


@dataclass(slots=True)  # one per retrieved chunk
class Chunk:
    """One retrieved chunk. Every field is optional except that a chunk needs a text or an id.

    Example:
        >>> Chunk(text="Paris is the capital.", id="c1", doc_id="d1", start=0, end=21).span
        ('d1', 0, 21)
    """

    text: str | None = None
    id: str | None = None
    doc_id: str | None = None
    start: int | None = None
    end: int | None = None
    score: float | None = None

    @property
    def span(self) -> tuple[str, int, int] | None:
        """``(doc_id, start, end)`` when all three are known."""
        return _span(self.doc_id, self.start, self.end)

    def to_dict(self) -> dict:
        return {"id": self.id, "text": self.text, "doc_id": self.doc_id, "start": self.start,
                "end": self.end, "score": self.score}


@dataclass
class ReferencePassage:
    """A ground-truth passage that answers the question (text, and optionally where it sits).

    Example:
        >>> ReferencePassage("Paris is the capital.", doc_id="d1", start=0, end=21).span
        ('d1', 0, 21)
    """

    text: str | None = None
    doc_id: str | None = None
    start: int | None = None
    end: int | None = None
    hop: int | None = None  #: the hop (0, 1, ...) of a multi-hop question this passage belongs to

    @property
    def span(self) -> tuple[str, int, int] | None:
        """``(doc_id, start, end)`` when all three are known."""
        return _span(self.doc_id, self.start, self.end)

    def to_dict(self) -> dict:
        out = {"text": self.text, "doc_id": self.doc_id, "start": self.start, "end": self.end}
        if self.hop is not None:
            out["hop"] = self.hop
        return out


@dataclass
class RetrievalCall:
    """One retrieval call of a case retrieved several times (an agent's sub-question, a follow-up
    hop).

    Attributes:
        chunks: what this call retrieved, in rank order.
        query: the query this call sent (a rewrite, a sub-question), if known.
        position: the call's order in the trajectory, 0-based.
        span_id, trace_id: where the call came from in a trace, if it came from one.
        meta: anything else kept about the call (retriever name, latency ...).

    Example:
        >>> call = RetrievalCall(
        ...     [Chunk("Paris is the capital.", id="c1")], query="capital of France", position=0
        ... )
        >>> call.to_dict()["chunks"][0]["id"]
        'c1'
    """

    chunks: list[Chunk]
    query: str | None = None
    position: int = 0
    span_id: str | None = None
    trace_id: str | None = None
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"position": self.position, "query": self.query, "span_id": self.span_id,
                               "trace_id": self.trace_id}
        if self.meta:
            out["meta"] = self.meta
        out["chunks"] = [c.to_dict() for c in self.chunks]
        return out


@dataclass
class TestCase:
    """One question of a RAG test set: what was retrieved (in rank order) and the ground truth.

    Example:
        >>> case = TestCase("q1", "Capital of France?", chunks=[Chunk("Paris is the capital.")],
        ...                 reference_contexts=[ReferencePassage("Paris is the capital")])
        >>> len(case.chunks), case.has_ground_truth
        (1, True)
    """

    __test__ = False  # not a pytest class

    id: str
    question: str | None = None
    chunks: list[Chunk] = field(default_factory=list)
    reference_contexts: list[ReferencePassage] = field(default_factory=list)
    reference_context_ids: list[str] | None = None
    reference: str | None = None
    response: str | None = None
    calls: list[RetrievalCall] = field(default_factory=list)  #: empty: one retrieval, ``chunks``
    fields: dict[str, Any] = field(default_factory=dict)  #: the user's own fields (style, difficulty ...), as given

    @property
    def has_ground_truth(self) -> bool:
        """True when the case lists reference passages or reference ids."""
        return bool(self.reference_contexts) or bool(self.reference_context_ids)

    def to_dict(self) -> dict:
        """The case as one JSON Lines object of a test set (see :func:`case_to_dict`)."""
        return case_to_dict(self)


@dataclass
class TestSet:
    """An ordered collection of :class:`TestCase` with unique ids.

    Example:
        >>> ts = load_testset({"user_input": ["Capital of France?"],
        ...                    "retrieved_contexts": [["Paris is the capital."]],
        ...                    "reference_contexts": [["Paris is the capital"]]})
        >>> ts.ids, ts["1"].chunks[0].text
        (['1'], 'Paris is the capital.')
    """

    __test__ = False  # not a pytest class

    cases: list[TestCase]
    source: str | None = None

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise InputError(f"case id {case.id!r} appears twice", source=self.source, field="id")
            seen.add(case.id)
        self._index = {c.id: i for i, c in enumerate(self.cases)}

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[TestCase]:
        return iter(self.cases)

    def __getitem__(self, key: str | int) -> TestCase:
        if isinstance(key, int):
            return self.cases[key]
        return self.cases[self._index[key]]

    def __contains__(self, key: object) -> bool:
        return key in self._index

    @property
    def ids(self) -> list[str]:
        return [c.id for c in self.cases]


# ------------------------------------------------------------------------------------------ several
# calls


def chunk_key(chunk: Any) -> tuple | None:
    """What makes two retrieved chunks the same chunk: the id, else the span, else the text.

    Verdicts are shared by this key between the calls of a case and its merged list.

    Example:
        >>> chunk_key(Chunk("a", id="c1")), chunk_key(Chunk("a", doc_id="d", start=0, end=1))
        (('id', 'c1'), ('span', ('d', 0, 1)))
    """
    if getattr(chunk, "id", None) is not None:
        return ("id", chunk.id)
    span = _span(getattr(chunk, "doc_id", None), getattr(chunk, "start", None), getattr(chunk, "end", None))
    if span is not None:
        return ("span", span)
    text = getattr(chunk, "text", None)
    return None if text is None else ("text", text)


def _overlaps(a: Any, b: Any) -> bool:
    sa = _span(a.doc_id, a.start, a.end)
    sb = _span(b.doc_id, b.start, b.end)
    if sa is None or sb is None:
        return False
    return sa[0] == sb[0] and (sa[1] < sb[2] and sb[1] < sa[2] or sa == sb)


def _call_chunks(call: Any) -> list:
    return list(call) if isinstance(call, (list, tuple)) else list(call.chunks)


def merge_calls(calls: Sequence[Any], order: str = "interleave", dedup: str = "id") -> list:
    """One ranked list from several retrieval calls; the chunks themselves, not copies.

    ``order``: ``interleave`` (rank 1 of every call in call order, then rank 2 ...), ``score``
    (every chunk by its score, highest first; ties keep call then rank order; needs a score on every
    chunk) or
    ``concat`` (call after call). ``dedup``: ``id`` (a chunk whose :func:`chunk_key` — id, else
    span, else text — was already placed is dropped), ``span`` (also dropped when its span overlaps
    a placed chunk's span in the same document) or ``none``. ``calls`` are :class:`RetrievalCall`
    objects (or anything with ``chunks``, or plain lists), in trajectory order.

    Example:
        >>> a = RetrievalCall([Chunk("x", id="1"), Chunk("y", id="2")])
        >>> b = RetrievalCall([Chunk("y", id="2"), Chunk("z", id="3")], position=1)
        >>> (
        ...     [c.id for c in merge_calls([a, b])],
        ...     [c.id for c in merge_calls([a, b], "concat", "none")],
        ... )
        (['1', '2', '3'], ['1', '2', '2', '3'])
    """
    if order not in MERGE_ORDERS:
        raise InputError(f"merge order must be one of {', '.join(MERGE_ORDERS)}, not {order!r}", field="order")
    if dedup not in DEDUP_RULES:
        raise InputError(f"dedup must be one of {', '.join(DEDUP_RULES)}, not {dedup!r}", field="dedup")
    lists = [_call_chunks(c) for c in calls]
    if order == "concat":
        flat = [c for chunks in lists for c in chunks]
    elif order == "interleave":
        depth = max((len(x) for x in lists), default=0)
        flat = [chunks[r] for r in range(depth) for chunks in lists if r < len(chunks)]
    else:
        flat = [c for chunks in lists for c in chunks]
        unscored = sum(1 for c in flat if getattr(c, "score", None) is None)
        if unscored:
            raise InputError(f"merge by score needs a score on every chunk; {unscored} of {len(flat)} have "
                             f"none (merge with order=interleave)", field="score")
        flat = sorted(flat, key=lambda c: -c.score)  # stable: ties keep call, then rank order
    if dedup == "none":
        return flat
    out: list = []
    keys: set = set()
    for c in flat:
        key = chunk_key(c)
        if key is not None and key in keys:
            continue
        if dedup == "span" and any(_overlaps(c, placed) for placed in out):
            continue
        if key is not None:
            keys.add(key)
        out.append(c)
    return out


# -----------------------------------------------------------------------------------------------
# parsing


def _first(row: Mapping, names: Sequence[str]) -> tuple[str | None, Any]:
    """The first of ``names`` present in ``row`` with a non-missing value: (field, value)."""
    for n in names:
        if n in row and not _is_missing(row[n]):
            return n, row[n]
    return None, None


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, float) and math.isnan(value)


def _as_list(value: Any, *, source, line, field_name, from_text: bool) -> list:
    """A list field: a list/tuple/array, or (from CSV cells) a JSON or Python-literal list in a
    string."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, str) and from_text:
        text = value.strip()
        if text == "":
            return []
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            try:
                with warnings.catch_warnings():  # "invalid escape sequence" would be a second stderr line
                    warnings.simplefilter("ignore")
                    value = ast.literal_eval(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise InputError(f"expected a JSON list, got {_short(text)}", source=source, line=line,
                                 field=field_name) from None
        if isinstance(value, tuple):
            value = list(value)
        check_surrogates(value, source=source, line=line)
    if not isinstance(value, list):
        raise InputError(f"expected a list, got {type(value).__name__} {_short(value)}", source=source,
                         line=line, field=field_name)
    return value


def _short(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def _opt_str(value: Any, *, source, line, field_name) -> str | None:
    if type(value) is str:  # the common case, first: same value as the checks below give it
        return value
    if _is_missing(value):
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"expected a string, got {type(value).__name__} {_short(value)}", source=source,
                         line=line, field=field_name)
    return str(value)


def _str_list(values: list, field: str, kw: dict) -> list[str | None]:
    """A list of ids, each through ``_opt_str``; a list of plain strings is copied without a call
    per item."""
    if all(type(x) is str for x in values):
        return list(values)
    return [_opt_str(x, field_name=f"{field}[{i}]", **kw) for i, x in enumerate(values)]


def _opt_offset(value: Any, *, source, line, field_name) -> int | None:
    if _is_missing(value):
        return None
    if isinstance(value, bool):
        raise InputError(f"expected a character offset, got {value!r}", source=source, line=line,
                         field=field_name)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or not 0 <= value <= INT64_MAX:
        raise InputError(f"expected a character offset (integer >= 0), got {_short(value)}", source=source,
                         line=line, field=field_name)
    return int(value)


def _opt_score(value: Any, *, source, line, field_name) -> float | None:
    if _is_missing(value):
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        score = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"expected a number, got {_short(value)}", source=source, line=line,
                         field=field_name) from None
    if not math.isfinite(score):
        raise InputError(f"expected a finite number, got {value!r}", source=source, line=line,
                         field=field_name)
    return score


def _opt_hop(value: Any, *, source, line, field_name) -> int | None:
    if _is_missing(value):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10_000:
        raise InputError(f"expected a hop number (integer 0, 1, ...), got {_short(value)}", source=source,
                         line=line, field=field_name)
    return int(value)


def _call(item: Any, index: int, *, source, line) -> RetrievalCall:
    where = f"calls[{index}]"
    kw = {"source": source, "line": line}
    if not isinstance(item, Mapping):
        raise InputError(f"expected an object {{position, query, span_id, trace_id, chunks}}, got {_short(item)}",
                         field=where, **kw)
    unknown = set(item) - _CALL_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)}; a call has position, query, span_id, trace_id, "
                         f"meta, chunks", field=where, **kw)
    if "chunks" not in item or _is_missing(item["chunks"]):
        raise InputError("a call needs chunks (a list, empty when the call found nothing)",
                         field=f"{where}.chunks", **kw)
    chunks = _as_list(item["chunks"], field_name=f"{where}.chunks", from_text=False, **kw)
    position = item.get("position", index)
    if isinstance(position, float) and position.is_integer():
        position = int(position)
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position <= INT64_MAX:
        raise InputError(f"expected a position (integer >= 0), got {_short(position)}",
                         field=f"{where}.position", **kw)
    meta = item.get("meta")
    if _is_missing(meta):
        meta = {}
    if not isinstance(meta, Mapping):
        raise InputError(f"expected an object, got {_short(meta)}", field=f"{where}.meta", **kw)
    return RetrievalCall(
        chunks=[_chunk(c, where=f"{where}.chunks[{i}]", **kw) for i, c in enumerate(chunks)],
        query=_opt_str(item.get("query"), field_name=f"{where}.query", **kw), position=int(position),
        span_id=_opt_str(item.get("span_id"), field_name=f"{where}.span_id", **kw),
        trace_id=_opt_str(item.get("trace_id"), field_name=f"{where}.trace_id", **kw), meta=dict(meta))


def _calls(value: Any, *, source, line, from_text: bool) -> list[RetrievalCall]:
    """The ``calls`` field: a list of calls, sorted by position (each position once)."""
    items = _as_list(value, field_name="calls", from_text=from_text, source=source, line=line)
    calls = [_call(item, i, source=source, line=line) for i, item in enumerate(items)]
    seen: dict[int, int] = {}
    for i, c in enumerate(calls):
        if c.position in seen:
            raise InputError(f"position {c.position} is also calls[{seen[c.position]}]'s; each call has its own "
                             f"place in the trajectory", source=source, line=line, field=f"calls[{i}].position")
        seen[c.position] = i
    return sorted(calls, key=lambda c: c.position)


def _check_span(start, end, *, source, line, field_name) -> None:
    if start is not None and end is not None and end < start:
        raise InputError(f"end {end} is before start {start}", source=source, line=line,
                         field=f"{field_name}.end")


def _document_fields(item: Any) -> Any:
    """A LangChain ``Document`` (object or ``{page_content, metadata}``) as our flat chunk/passage
    keys."""
    if not isinstance(item, Mapping) and hasattr(item, "page_content"):
        item = {"page_content": item.page_content, "metadata": dict(getattr(item, "metadata", None) or {})}
    if not isinstance(item, Mapping) or not ({"page_content", "content", "metadata", "type"} & set(item)):
        return item
    flat = {k: v for k, v in item.items() if k not in ("page_content", "content", "metadata", "type")}
    text = item.get("page_content", item.get("content"))
    if text is not None:
        flat.setdefault("text", text)
    meta = item.get("metadata") or {}
    if isinstance(meta, Mapping):
        for key, names in (("id", ("id", "chunk_id")), ("doc_id", ("doc_id", "source", "document_id")),
                           ("start", ("start", "start_index")), ("end", ("end",)), ("score", ("score",))):
            for name in names:
                if meta.get(name) is not None:
                    flat.setdefault(key, meta[name])
                    break
        if flat.get("end") is None and isinstance(flat.get("start"), int) and isinstance(flat.get("text"), str):
            flat["end"] = flat["start"] + len(flat["text"])
    return flat


def _chunk(item: Any, *, source, line, where: str) -> Chunk:
    if isinstance(item, str):
        return Chunk(text=item)
    item = _document_fields(item)
    if not isinstance(item, Mapping):
        raise InputError(f"expected a string or an object {{id, text, doc_id, start, end, score}}, got "
                         f"{_short(item)}", source=source, line=line, field=where)
    unknown = set(item) - _CHUNK_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)}; a chunk has id, text, doc_id, start, end, score "
                         f"(or LangChain's page_content and metadata)",
                         source=source, line=line, field=where)
    text = item.get("text")
    if text is not None and not isinstance(text, str):
        raise InputError(f"expected a string, got {_short(text)}", source=source, line=line,
                         field=f"{where}.text")
    kw = {"source": source, "line": line}
    c = Chunk(text=text, id=_opt_str(item.get("id"), field_name=f"{where}.id", **kw),
              doc_id=_opt_str(item.get("doc_id"), field_name=f"{where}.doc_id", **kw),
              start=_opt_offset(item.get("start"), field_name=f"{where}.start", **kw),
              end=_opt_offset(item.get("end"), field_name=f"{where}.end", **kw),
              score=_opt_score(item.get("score"), field_name=f"{where}.score", **kw))
    _check_span(c.start, c.end, field_name=where, **kw)
    if c.text is None and c.id is None and c.span is None:
        raise InputError("a chunk needs a text, an id or (doc_id, start, end)", source=source, line=line,
                         field=where)
    return c


def _passage(item: Any, *, source, line, where: str) -> ReferencePassage:
    if isinstance(item, str):
        return ReferencePassage(text=item)
    item = _document_fields(item)
    if not isinstance(item, Mapping):
        raise InputError(f"expected a string or an object {{text, doc_id, start, end}}, got {_short(item)}",
                         source=source, line=line, field=where)
    unknown = set(item) - _PASSAGE_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)}; a reference passage has text, doc_id, start, end, hop "
                         f"(or LangChain's page_content and metadata)",
                         source=source, line=line, field=where)
    text = item.get("text")
    if text is not None and not isinstance(text, str):
        raise InputError(f"expected a string, got {_short(text)}", source=source, line=line,
                         field=f"{where}.text")
    kw = {"source": source, "line": line}
    p = ReferencePassage(text=text, doc_id=_opt_str(item.get("doc_id"), field_name=f"{where}.doc_id", **kw),
                         start=_opt_offset(item.get("start"), field_name=f"{where}.start", **kw),
                         end=_opt_offset(item.get("end"), field_name=f"{where}.end", **kw),
                         hop=_opt_hop(item.get("hop"), field_name=f"{where}.hop", **kw))
    _check_span(p.start, p.end, field_name=where, **kw)
    if p.text is None and p.span is None:
        raise InputError("a reference passage needs a text or (doc_id, start, end)", source=source,
                         line=line, field=where)
    return p


def case_from_mapping(row: Mapping, *, default_id: str, source: str | None = None, line: int | None = None,
                      from_text: bool = False) -> TestCase:
    """Parse one case from a mapping with Ragas' (or our richer) field names.

    ``from_text`` says the values come from a text table (CSV): list fields may be JSON strings.

    Example:
        >>> c = case_from_mapping({"question": "q?", "retrieved_contexts": ["a", "b"],
        ...                        "retrieved_context_ids": ["c1", "c2"]}, default_id="1")
        >>> [(x.id, x.text) for x in c.chunks]
        [('c1', 'a'), ('c2', 'b')]
    """
    if not isinstance(row, Mapping):
        raise InputError(f"expected an object per case, got {type(row).__name__}", source=source, line=line)
    kw = {"source": source, "line": line}
    id_field, raw_id = _first(row, ID_FIELDS)
    case_id = default_id if raw_id is None else _opt_str(raw_id, field_name=id_field, **kw)
    if case_id is None or case_id == "":
        case_id = default_id
    q_field, question = _first(row, QUESTION_FIELDS)
    question = _opt_str(question, field_name=q_field, **kw) if question is not None else None

    def text_field(names):
        f, v = _first(row, names)
        if v is None:
            return None
        if f == "ground_truths":  # older Ragas: a list of reference answers
            items = _as_list(v, field_name=f, from_text=from_text, **kw)
            if not all(isinstance(x, str) for x in items):
                raise InputError(f"expected a list of strings, got {_short(items)}", field=f, **kw)
            return "\n".join(items) if items else None
        if not isinstance(v, str):
            raise InputError(f"expected a string, got {_short(v)}", field=f, **kw)
        return v

    def list_field(names):
        f, v = _first(row, names)
        if v is None:
            return f, None
        return f, _as_list(v, field_name=f, from_text=from_text, **kw)

    rc_field, retrieved = list_field(RETRIEVED_FIELDS)
    rid_field, retrieved_ids = list_field(RETRIEVED_ID_FIELDS)
    chunks = [_chunk(item, where=f"{rc_field}[{i}]", **kw) for i, item in enumerate(retrieved or [])]
    if retrieved_ids is not None:
        ids = _str_list(retrieved_ids, rid_field, kw)
        if retrieved is None:
            chunks = [Chunk(id=x) for x in ids]
        elif len(ids) != len(chunks):
            raise InputError(f"{len(ids)} ids for {len(chunks)} retrieved contexts; the two lists pair up "
                             f"item by item", field=rid_field, **kw)
        else:
            for i, (c, x) in enumerate(zip(chunks, ids, strict=True)):
                if c.id is not None and x is not None and c.id != x:
                    raise InputError(f"id {x!r} disagrees with {rc_field}[{i}].id {c.id!r}",
                                     field=f"{rid_field}[{i}]", **kw)
                if c.id is None:
                    c.id = x
    # A chunk id may repeat (document-level ids); human labels then name the rank.

    ref_field, refs = list_field(REFERENCE_CONTEXT_FIELDS)
    passages = [_passage(item, where=f"{ref_field}[{i}]", **kw) for i, item in enumerate(refs or [])]
    refid_field, ref_ids = list_field(REFERENCE_ID_FIELDS)
    if ref_ids is not None:
        ref_ids = _str_list(ref_ids, refid_field, kw)
        if any(x is None for x in ref_ids):
            raise InputError("null in the list of reference ids", field=refid_field, **kw)
    _, raw_calls = _first(row, CALL_FIELDS)
    calls = [] if raw_calls is None else _calls(raw_calls, from_text=from_text, **kw)
    if calls and retrieved is None and retrieved_ids is None:
        chunks = merge_calls(calls)
    return TestCase(id=case_id, question=question, chunks=chunks, reference_contexts=passages,
                    reference_context_ids=ref_ids, reference=text_field(REFERENCE_FIELDS),
                    response=text_field(RESPONSE_FIELDS), calls=calls,
                    fields=user_fields(row, from_text=from_text, **kw))


def user_fields(row: Mapping, *, source: str | None = None, line: int | None = None,
                from_text: bool = False) -> dict[str, Any]:
    """The fields of a case this module does not read (the user's own), as JSON values.

    Missing values (None, NaN from a DataFrame) are None; numpy values become Python ones; a text
    cell (``from_text``: CSV) holding a JSON list or object is read as one, any other cell stays
    text.

    Example:
        >>> user_fields(
        ...     {"id": "q1", "style": "paraphrased", "subqueries": ["a", "b"], "bm25_rank": None}
        ... )
        {'style': 'paraphrased', 'subqueries': ['a', 'b'], 'bm25_rank': None}
        >>> user_fields({"subqueries": '["a", "b"]', "note": "[draft]"}, from_text=True)
        {'subqueries': ['a', 'b'], 'note': '[draft]'}
    """
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key in KNOWN_FIELDS:
            continue
        if from_text and isinstance(value, str) and value.strip()[:1] in ("[", "{"):
            with contextlib.suppress(json.JSONDecodeError, RecursionError):  # not JSON: the text as it is
                value = json.loads(value)
        out[str(key)] = _json_value(value, source=source, line=line, where=str(key))
    return out


def _json_value(value: Any, *, source, line, where: str) -> Any:
    """``value`` as JSON data: numpy scalars and arrays as Python numbers and lists, NaN as None, a
    date as its ISO text; anything else JSON cannot hold is an error naming the field."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy scalar or array
        return _json_value(value.tolist(), source=source, line=line, where=where)
    if isinstance(value, (list, tuple)):
        return [_json_value(v, source=source, line=line, where=f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {str(k): _json_value(v, source=source, line=line, where=f"{where}.{k}") for k, v in value.items()}
    if hasattr(value, "isoformat"):  # datetime, date, pandas Timestamp
        return value.isoformat()
    raise InputError(f"cannot keep a {type(value).__name__} value ({_short(value)}); a field of your own holds "
                     f"text, numbers, booleans, lists or objects", source=source, line=line, field=where)


def case_to_dict(case: TestCase) -> dict:
    """One case as a JSON Lines object :func:`load_testset` reads back to the same case.

    ``retrieved_contexts`` is left out when the case has calls and its chunks are their default
    merge.

    Example:
        >>> case_to_dict(TestCase("q1", "Why?", chunks=[Chunk("a", id="c1")]))["retrieved_contexts"]
        [{'id': 'c1', 'text': 'a', 'doc_id': None, 'start': None, 'end': None, 'score': None}]
    """
    out: dict[str, Any] = {"id": case.id, "user_input": case.question}
    if not case.calls or case.chunks != merge_calls(case.calls):
        out["retrieved_contexts"] = [c.to_dict() for c in case.chunks]
    if case.calls:
        out["calls"] = [c.to_dict() for c in case.calls]
    out["reference_contexts"] = [p.to_dict() for p in case.reference_contexts]
    for key, value in (("reference_context_ids", case.reference_context_ids), ("reference", case.reference),
                       ("response", case.response)):
        if value is not None:
            out[key] = value
    for key, value in case.fields.items():  # the user's own fields, as they were given
        out.setdefault(key, value)
    return out


def write_testset(testset: Any, path: str | PathLike) -> Path:
    """Write a test set as JSON Lines, one :func:`case_to_dict` object a line; returns the path.

    Example:
        >>> write_testset(
        ...     [TestCase("q1", chunks=[Chunk("a")])], "/tmp/testset.jsonl"
        ... )  # doctest: +SKIP
    """
    ts = load_testset(testset)
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as fh:
            for case in ts:
                fh.write(json.dumps(case_to_dict(case), ensure_ascii=False) + "\n")
    except OSError as exc:
        raise InputError(f"cannot write the test set: {exc.strerror or exc}", source=path) from None
    return path


def testset_from_rows(rows, *, source: str | None = None, from_text: bool = False,
                      lines: Sequence[int] | None = None) -> TestSet:
    """A :class:`TestSet` from case mappings; ``lines`` gives each row's line number for errors.

    Cases without an ``id`` are named by their 1-based position (``"1"``, ``"2"``, ...).
    """
    cases = []
    seen: dict[str, int | None] = {}
    unknown: dict[str, int] = {}
    for i, row in enumerate(rows):
        if isinstance(row, Mapping):
            for key in row:
                if key not in KNOWN_FIELDS:
                    unknown[str(key)] = unknown.get(str(key), 0) + 1
        line = lines[i] if lines is not None else (None if source is None else i + 1)
        case = case_from_mapping(row, default_id=str(i + 1), source=source, line=line, from_text=from_text)
        if case.id in seen:
            where = f" (first on line {seen[case.id]})" if seen[case.id] is not None else ""
            raise InputError(f"case id {case.id!r} appears twice{where}", source=source, line=line, field="id")
        seen[case.id] = line
        cases.append(case)
    if not cases:
        raise InputError("the test set holds no case", source=source)
    _check_fields(cases, unknown, source)
    return TestSet(cases, source)


def _check_fields(cases: list[TestCase], unknown: dict[str, int], source: str | None) -> None:
    """Name the fields not read when they may have been meant: an error when no case has a retrieved
    chunk, a warning when some case has no ground truth."""
    if not unknown:
        return
    names = ", ".join(f"'{k}' ({n} case{'s' if n != 1 else ''})" for k, n in sorted(unknown.items()))
    if not any(c.chunks for c in cases):
        raise InputError(f"no case has retrieved contexts; fields not recognised: {names}. Accepted fields: "
                         f"{ACCEPTED_NAMES}", source=source)
    missing = sum(1 for c in cases if not c.has_ground_truth and c.reference is None)
    if missing:
        from rankwise.errors import warn

        warn(f"{source or 'test set'}: {missing} case{'s have' if missing != 1 else ' has'} no ground truth and "
             f"fields not recognised were not read as ground truth (kept as the case's own): {names}. Accepted "
             f"fields: {ACCEPTED_NAMES}")


def _dict_of_lists_rows(obj: Mapping, source: str) -> list[dict]:
    lengths = {k: len(v) for k, v in obj.items() if isinstance(v, (list, tuple)) or hasattr(v, "__len__")
               and not isinstance(v, (str, bytes, Mapping))}
    if not lengths:
        raise InputError("expected a dict of equal-length lists (one item per case)", source=source)
    n = next(iter(lengths.values()))
    for k, length in lengths.items():
        if length != n:
            raise InputError(f"column has {length} items, others have {n}", source=source, field=k)
    cols = {k: list(v) for k, v in obj.items() if k in lengths}
    return [{k: cols[k][i] for k in cols} for i in range(n)]


def _read_jsonl(path: Path) -> TestSet:
    rows, lines = [], []
    for n, obj in iter_json_lines(path, objects_only=False):
        rows.append(obj)
        lines.append(n)
    return testset_from_rows(rows, source=str(path), lines=lines)


def _read_json(path: Path) -> TestSet:
    obj = json_loads(decode_text(read_bytes(path), path), source=path, line=None)
    if isinstance(obj, list):
        return testset_from_rows(obj, source=str(path), lines=[None] * len(obj))
    if isinstance(obj, Mapping):
        if any(k in obj for k in QUESTION_FIELDS + RETRIEVED_FIELDS) and all(
                isinstance(v, list) for v in obj.values()):
            rows = _dict_of_lists_rows(obj, str(path))
            return testset_from_rows(rows, source=str(path), lines=[None] * len(rows))
        return testset_from_rows([obj], source=str(path), lines=[1])
    raise InputError("expected a JSON array of cases or an object of lists", source=path)


def _read_csv(path: Path) -> TestSet:
    text = decode_text(read_bytes(path), path)
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    header = None
    rows, lines = [], []
    for start, fields in iter_csv_rows(text, delimiter, source=path):
        if header is None:
            header = [h.strip() for h in fields]
            continue
        if not any(f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            raise InputError(f"expected {len(header)} fields like the header, got {len(fields)}",
                             source=path, line=start)
        rows.append({h: (None if f == "" else f) for h, f in zip(header, fields, strict=True)})
        lines.append(start)
    if header is None:
        raise InputError("file is empty", source=path)
    return testset_from_rows(rows, source=str(path), from_text=True, lines=lines)


def _read_parquet(path: Path) -> TestSet:
    import pyarrow as pa

    from rankwise.data.stream import parquet_error, read_parquet_table

    table = read_parquet_table(path)
    try:
        rows = table.to_pylist()
    except (pa.ArrowException, UnicodeDecodeError) as exc:  # a string column holding bytes that are not UTF-8
        raise parquet_error(exc, path) from None
    return testset_from_rows(rows, source=str(path), lines=[i + 1 for i in range(len(rows))])


def load_testset(obj: Any) -> TestSet:
    """A :class:`TestSet` from a file, DataFrame, dict of lists, list of dicts, or Ragas/HF dataset.

    Files: ``.jsonl`` (default), ``.json`` (array of cases or object of lists), ``.csv``/``.tsv``
    (list fields as JSON strings), ``.parquet``.

    Example:
        >>> ts = load_testset(
        ...     [
        ...         {
        ...             "id": "q1",
        ...             "user_input": "Capital of France?",
        ...             "retrieved_contexts": [{"id": "c1", "text": "Paris is the capital."}],
        ...             "reference_contexts": ["Paris is the capital"],
        ...         }
        ...     ]
        ... )
        >>> ts["q1"].chunks[0].id
        'c1'
    """
    if isinstance(obj, TestSet):
        return obj
    if isinstance(obj, (str, PathLike)):
        path = Path(obj)
        suffix = path.suffix.lower()
        if suffix in (".csv", ".tsv"):
            return _read_csv(path)
        if suffix == ".json":
            return _read_json(path)
        if suffix == ".parquet":
            return _read_parquet(path)
        return _read_jsonl(path)
    from rankwise.data.frames import is_dataframe

    if is_dataframe(obj):
        if type(obj).__module__.startswith("polars"):
            rows = obj.to_dicts()
        else:
            rows = obj.to_dict(orient="records")
        return testset_from_rows(rows, source="<DataFrame>", lines=[i + 1 for i in range(len(rows))])
    if isinstance(obj, Mapping):
        return testset_from_rows(_dict_of_lists_rows(obj, "<dict>"), source="<dict>",
                                 lines=[i + 1 for i in range(len(next(iter(obj.values()), [])))])
    if isinstance(obj, (list, tuple)):
        if obj and isinstance(obj[0], TestCase):
            return TestSet(list(obj))
        return testset_from_rows(list(obj), source="<list>", lines=[i + 1 for i in range(len(obj))])
    if hasattr(obj, "to_list"):  # Ragas EvaluationDataset, HF Dataset
        return load_testset(list(obj.to_list()))
    if hasattr(obj, "to_pandas"):
        return load_testset(obj.to_pandas())
    raise InputError(f"cannot read a test set from {type(obj).__name__}; pass a path, DataFrame, dict of lists "
                     f"or list of dicts")


testset_from_rows.__test__ = False  # a name pytest would otherwise collect
