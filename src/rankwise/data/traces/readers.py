"""Trace readers: each format's spans as :class:`~rankwise.data.traces.spans.Span`. Plain JSON needs
no tracing package.

The formats and the OpenInference attributes read: docs/traces.md.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from rankwise.data.text import check_surrogates, decode_text, read_bytes
from rankwise.data.traces.spans import (
    ANSWER_KEYS,
    ATTRIBUTE_LIMIT,
    CASE_ID_KEYS,
    QUESTION_KEYS,
    Span,
    text_of,
)
from rankwise.errors import InputError

__all__ = ["TRACE_FORMATS", "read_spans", "detect_format"]

TRACE_FORMATS = ("auto", "otlp", "console", "phoenix", "langsmith", "mlflow")
_DOC_ATTR = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|content|score|metadata)$")
_RERANK_ATTR = {side: re.compile(rf"^reranker\.{side}_documents\.(\d+)\.document\.(id|content|score|metadata)$")
                for side in ("input", "output")}
_HEX = re.compile(r"^(0x)?[0-9a-fA-F]{16}([0-9a-fA-F]{16})?$")


# ------------------------------------------------------------------------------------------------
# helpers


def _nothing(n: int = 1) -> None:
    """The progress callback when there is no bar."""


def _json_values(path: Path, advance: Callable[[int], None] = _nothing) -> list[tuple[int, Any]]:
    """Every JSON value in the file with the line it starts on: one document, JSON Lines, or objects
    one after another (the console exporter's output). Truncated or invalid JSON names its line.
    ``advance(n)`` is told the bytes of each value read (a progress bar's)."""
    data = read_bytes(path)
    text = decode_text(data, path)
    decoder = json.JSONDecoder()
    out, i, n, done = [], 0, len(text), 0
    scale = len(data) / max(n, 1)  # bytes per character, to tell the bar bytes
    while True:
        while i < n and text[i] in " \t\r\n\ufeff":
            i += 1
        if i >= n:
            advance(len(data) - done)
            return out
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            what = "truncated JSON (the file ends inside a value)" if exc.pos >= n - 1 or "Unterminated" in exc.msg \
                else f"not valid JSON: {exc.msg}"
            raise InputError(f"{what} (column {exc.colno})", source=path, line=exc.lineno) from None
        except RecursionError:
            raise InputError("JSON nested too deeply", source=path, line=text.count("\n", 0, i) + 1) from None
        line = text.count("\n", 0, i) + 1
        if "\\u" in text[i:end]:
            check_surrogates(value, source=path, line=line)
        out.append((line, value))
        step = min(int(end * scale), len(data))
        advance(step - done)
        done = step
        i = end


def _span_id(value: Any, *, source, line, field: str, optional: bool = False) -> str | None:
    """Span/trace ids as lower-case hex: hex as written (OTLP JSON, ``0x``-prefixed console ids,
    Phoenix), base64 (protobuf JSON, MLflow) decoded."""
    if value is None or value == "":
        if optional:
            return None
        raise InputError("missing id", source=source, line=line, field=field)
    if not isinstance(value, str):
        raise InputError(f"expected an id string, got {json.dumps(value, default=str)[:40]}", source=source,
                         line=line, field=field)
    if _HEX.match(value):
        return value.removeprefix("0x").lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value  # an id of another shape (LangSmith uuids, MLflow's "tr-..."): kept as written
    return raw.hex() if len(raw) in (8, 16) else value


def _time_ns(value: Any, *, source, line, field: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InputError(f"expected a time, got {value}", source=source, line=line, field=field)
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"expected a time, got {value}", source=source, line=line, field=field)
        return int(value)
    if isinstance(value, datetime):
        return int(value.timestamp() * 1e9)
    if isinstance(value, str):
        if value.isdecimal() and value.isascii():
            return int(value)
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
        except ValueError:
            pass
    raise InputError(f"expected a time (nanoseconds or ISO 8601), got {str(value)[:40]!r}", source=source,
                     line=line, field=field)


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _json_or_text(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def _need(obj: Any, key: str, types, *, source, line, where: str, what: str) -> Any:
    if not isinstance(obj, Mapping) or key not in obj or obj[key] is None:
        raise InputError(f"missing {what}", source=source, line=line, field=f"{where}{key}")
    if not isinstance(obj[key], types):
        raise InputError(f"expected {what}, got {json.dumps(obj[key], default=str)[:40]}", source=source,
                         line=line, field=f"{where}{key}")
    return obj[key]


# ----------------------------------------------------------------------------------- OpenInference
# attributes


def _oi_documents(attrs: Mapping[str, Any], *, source, line, where: str, pattern: re.Pattern = _DOC_ATTR
                  ) -> list[dict] | None:
    docs: dict[int, dict] = {}
    for key, value in attrs.items():
        m = pattern.match(str(key))
        if m is None:
            continue
        i, part = int(m.group(1)), m.group(2)
        field = f"{where}{key}"
        d = docs.setdefault(i, {"position": i})
        if part == "content":
            if value is not None and not isinstance(value, str):
                raise InputError("expected the document text", source=source, line=line, field=field)
            d["text"] = value
        elif part == "id":
            d["id"] = None if value in (None, "") else str(value)
        elif part == "score":
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float, str))):
                raise InputError("expected a number", source=source, line=line, field=field)
            d["score"] = value
        else:
            meta = _maybe_json(value)
            if meta is not None and not isinstance(meta, Mapping):
                raise InputError("expected a JSON object of metadata", source=source, line=line, field=field)
            d["metadata"] = dict(meta or {})
    if not docs:
        out = _maybe_json(attrs.get("output.value"))
        if pattern is _DOC_ATTR and isinstance(out, Mapping) and out.get("documents") == []:
            return []  # the retriever returned nothing: an empty call, not a missing one
        return None if pattern is _DOC_ATTR else []
    if pattern is not _DOC_ATTR:
        return [docs[i] for i in sorted(docs)]
    ordered = [docs[i] for i in sorted(docs)]
    out = _maybe_json(attrs.get("output.value"))  # LangChain's instrumentor: ids only in the output
    listed = out.get("documents") if isinstance(out, Mapping) else None
    if isinstance(listed, list) and len(listed) == len(ordered):
        for d, o in zip(ordered, listed, strict=True):
            if d.get("id") is None and isinstance(o, Mapping) and o.get("id") not in (None, ""):
                d["id"] = str(o["id"])
    return ordered


def _case_key(attrs: Mapping[str, Any], extra: Any = None) -> str | None:
    for source in (attrs, _maybe_json(attrs.get("metadata")), extra):
        if isinstance(source, Mapping):
            for k in CASE_ID_KEYS:
                if source.get(k) not in (None, ""):
                    return str(source[k])
    return None


def _kind(value: Any, expected: str) -> tuple[bool, str | None]:
    """Whether a span kind is ``expected`` (any case), and the kind as found when it is not a
    string."""
    if value is None or value == "":
        return False, None
    if isinstance(value, str):
        return value.upper() == expected.upper(), None
    return False, f"{type(value).__name__} {json.dumps(value, default=str)[:40]}"


def _dropped(value: Any) -> int:
    """OTLP's ``droppedAttributesCount`` as a count (anything else: 0, nothing known to be lost)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, str) and value.isdecimal() and value.isascii():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else 0


def _incomplete(docs: list[dict]) -> bool:
    """A document list with a hole: positions not 0, 1, ... or a part (id, content) that some
    documents have and others lack (the SDK drops a full span's oldest attributes: the first
    documents, then their parts)."""
    if [d["position"] for d in docs] != list(range(len(docs))):
        return True
    return any(0 < sum(1 for d in docs if d.get(k) is not None) < len(docs) for k in ("id", "text"))


def _oi_span(attrs: Mapping[str, Any], *, trace_id, span_id, parent_id, name, start, kind, source, line,
             where: str, dropped: int = 0) -> Span:
    found = attrs.get("openinference.span.kind") if kind is None or kind == "" else kind
    retriever, bad_kind = _kind(found, "RETRIEVER")
    reranker, _ = _kind(found, "RERANKER")
    docs = _oi_documents(attrs, source=source, line=line, where=where) if retriever else None
    first_stage = None
    if reranker:  # the reranked list is what the generator reads; its input is the first stage (docs/failures.md)
        retriever = True
        docs = _oi_documents(attrs, source=source, line=line, where=where, pattern=_RERANK_ATTR["output"])
        first_stage = _oi_documents(attrs, source=source, line=line, where=where, pattern=_RERANK_ATTR["input"])
    if retriever and not dropped and len(attrs) == ATTRIBUTE_LIMIT and docs and _incomplete(docs):
        dropped = -1  # the SDK's default limit, full, and a list with a hole: the console exporter says no more
    query = attrs.get("input.value")
    return Span(trace_id=trace_id, span_id=span_id, parent_id=parent_id, name=name, start=start,
                retriever=retriever, input=text_of(query, QUESTION_KEYS),
                output=text_of(attrs.get("output.value"), ANSWER_KEYS), documents=docs,
                case_key=_case_key(attrs), line=line, where=where, dropped_attributes=dropped if retriever else 0,
                bad_kind=bad_kind, first_stage=first_stage)


# ------------------------------------------------------------------------------------------------
# formats


def _any_value(v: Any, *, source, line, field: str) -> Any:
    if not isinstance(v, Mapping):
        raise InputError("expected an OTLP AnyValue object ({\"stringValue\": ...})", source=source, line=line,
                         field=field)
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            raise InputError(f"intValue is not a whole number: {str(v['intValue'])[:30]!r}", source=source,
                             line=line, field=field) from None
    for k in ("doubleValue", "boolValue", "bytesValue"):
        if k in v:
            return v[k]
    if "arrayValue" in v:
        values = v["arrayValue"].get("values") if isinstance(v["arrayValue"], Mapping) else None
        if not isinstance(values, list):
            raise InputError("expected {\"values\": [...]}", source=source, line=line, field=field)
        return [_any_value(x, source=source, line=line, field=field) for x in values]
    if "kvlistValue" in v:
        return _otlp_attrs((v["kvlistValue"] or {}).get("values") if isinstance(v["kvlistValue"], Mapping) else 0,
                           source=source, line=line, where=f"{field}.")
    return None


def _otlp_attrs(items: Any, *, source, line, where: str) -> dict:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise InputError("expected a list of {key, value} attributes", source=source, line=line,
                         field=f"{where}attributes")
    out = {}
    for i, kv in enumerate(items):
        if not isinstance(kv, Mapping) or not isinstance(kv.get("key"), str):
            raise InputError("expected {\"key\": ..., \"value\": {...}}", source=source, line=line,
                             field=f"{where}attributes[{i}]")
        out[kv["key"]] = _any_value(kv.get("value"), source=source, line=line, field=f"{where}attributes.{kv['key']}")
    return out


def _otlp(values: list[tuple[int, Any]], source: Path) -> list[Span]:
    spans = []
    for line, doc in values:
        for r, rs in enumerate(_need(doc, "resourceSpans", list, source=source, line=line, where="",
                                     what="the list of resource spans")):
            for s, ss in enumerate(_need(rs, "scopeSpans", list, source=source, line=line,
                                         where=f"resourceSpans[{r}].", what="the list of scope spans")):
                base = f"resourceSpans[{r}].scopeSpans[{s}]."
                for k, sp in enumerate(_need(ss, "spans", list, source=source, line=line, where=base,
                                             what="the list of spans")):
                    where = f"{base}spans[{k}]."
                    kw = {"source": source, "line": line}
                    if not isinstance(sp, Mapping):
                        raise InputError("expected a span object", field=where.rstrip("."), **kw)
                    attrs = _otlp_attrs(sp.get("attributes"), where=where, **kw)
                    spans.append(_oi_span(
                        attrs, trace_id=_span_id(sp.get("traceId"), field=f"{where}traceId", **kw),
                        span_id=_span_id(sp.get("spanId"), field=f"{where}spanId", **kw),
                        parent_id=_span_id(sp.get("parentSpanId"), field=f"{where}parentSpanId", optional=True, **kw),
                        name=sp.get("name"), kind=None,
                        start=_time_ns(sp.get("startTimeUnixNano"), field=f"{where}startTimeUnixNano", **kw),
                        where=where, dropped=_dropped(sp.get("droppedAttributesCount")), **kw))
    return spans


def _each(values: list[tuple[int, Any]]):
    """Each object of each line with the field prefix naming it: a line holds one object or a list
    of them."""
    for line, doc in values:
        if isinstance(doc, list):
            for k, item in enumerate(doc):
                yield line, f"[{k}].", item
        else:
            yield line, "", doc


def _console(values: list[tuple[int, Any]], source: Path) -> list[Span]:
    spans = []
    for line, where, sp in _each(values):
        kw = {"source": source, "line": line}
        ctx = _need(sp, "context", Mapping, where=where, what="the span context", **kw)
        attrs = sp.get("attributes") or {}
        if not isinstance(attrs, Mapping):
            raise InputError("expected an object of attributes", field=f"{where}attributes", **kw)
        spans.append(_oi_span(
            attrs, trace_id=_span_id(ctx.get("trace_id"), field=f"{where}context.trace_id", **kw),
            span_id=_span_id(ctx.get("span_id"), field=f"{where}context.span_id", **kw),
            parent_id=_span_id(sp.get("parent_id"), field=f"{where}parent_id", optional=True, **kw),
            name=sp.get("name"), kind=None,
            start=_time_ns(sp.get("start_time"), field=f"{where}start_time", **kw), where=where, **kw))
    return spans


def _phoenix_docs(value: Any, *, source, line) -> dict:
    """``attributes.retrieval.documents`` (a list of dicts) as flat OpenInference attributes."""
    flat: dict = {}
    if value is None:
        return flat
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, list):
        raise InputError("expected a list of documents", source=source, line=line,
                         field="attributes.retrieval.documents")
    for i, d in enumerate(value):
        if not isinstance(d, Mapping):
            raise InputError("expected a document object", source=source, line=line,
                             field=f"attributes.retrieval.documents[{i}]")
        d = dict(d.get("document") or {}) if isinstance(d.get("document"), Mapping) else {
            str(k).removeprefix("document."): v for k, v in d.items()}
        for part in ("id", "content", "score", "metadata"):
            if d.get(part) is not None:
                flat[f"retrieval.documents.{i}.document.{part}"] = d[part]
    return flat


def _phoenix(path: Path) -> list[Span]:
    from rankwise.data.stream import parquet_error, read_parquet_table

    table = read_parquet_table(path)
    try:
        rows = table.to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors, named by parquet_error
        raise parquet_error(exc, path) from None
    need = ("context.trace_id", "context.span_id")
    missing = [c for c in need if c not in table.column_names]
    if missing:
        raise InputError(f"no column {missing[0]!r}: a Phoenix span dataframe (px.Client().get_spans_dataframe()) "
                         f"saved with to_parquet() has context.trace_id, context.span_id, parent_id, span_kind and "
                         f"attributes.* columns (found: {', '.join(table.column_names[:8])})", source=path,
                         field=missing[0])
    spans = []
    for line, row in enumerate(rows, start=1):
        attrs = {k.removeprefix("attributes."): v for k, v in row.items()
                 if k.startswith("attributes.") and v is not None and k != "attributes.retrieval.documents"}
        attrs.update(_phoenix_docs(row.get("attributes.retrieval.documents"), source=path, line=line))
        kw = {"source": path, "line": line}
        spans.append(_oi_span(
            attrs, trace_id=_span_id(row.get("context.trace_id"), field="context.trace_id", **kw),
            span_id=_span_id(row.get("context.span_id"), field="context.span_id", **kw),
            parent_id=_span_id(row.get("parent_id"), field="parent_id", optional=True, **kw),
            name=row.get("name"), kind=row.get("span_kind"),
            start=_time_ns(row.get("start_time"), field="start_time", **kw), where="", **kw))
    return spans


def _langsmith_runs(values: list[tuple[int, Any]]) -> list[tuple[int, str, Any]]:
    out = []
    for line, doc in values:
        runs = doc.get("runs") if isinstance(doc, Mapping) and "runs" in doc else doc
        for k, run in enumerate(runs if isinstance(runs, list) else [runs]):
            out.append((line, f"[{k}]." if isinstance(runs, list) else "", run))
    return out


def _langsmith(values: list[tuple[int, Any]], source: Path) -> list[Span]:
    spans = []
    for line, where, run in _langsmith_runs(values):
        kw = {"source": source, "line": line}
        if not isinstance(run, Mapping):
            raise InputError("expected a run object", field=where.rstrip(".") or None, **kw)
        run_id = _span_id(run.get("id"), field=f"{where}id", **kw)
        trace_id = _span_id(run.get("trace_id"), field=f"{where}trace_id", optional=True, **kw) or run_id
        retriever, bad_kind = _kind(run.get("run_type"), "retriever")
        outputs = run.get("outputs")
        docs = None
        if retriever:
            listed = outputs.get("documents") if isinstance(outputs, Mapping) else outputs
            if listed is not None and not isinstance(listed, list):
                raise InputError("expected a list of documents", field=f"{where}outputs.documents", **kw)
            docs = None if listed is None else [dict(_doc_mapping(d, where=f"{where}outputs.documents[{i}]", **kw),
                                                     position=i) for i, d in enumerate(listed)]
        extra = run.get("extra") if isinstance(run.get("extra"), Mapping) else {}
        meta = extra.get("metadata") if isinstance(extra.get("metadata"), Mapping) else run.get("metadata")
        spans.append(Span(
            trace_id=trace_id, span_id=run_id, name=run.get("name"),
            parent_id=_span_id(run.get("parent_run_id"), field=f"{where}parent_run_id", optional=True, **kw),
            start=_time_ns(run.get("start_time"), field=f"{where}start_time", **kw), retriever=retriever,
            input=text_of(run.get("inputs"), QUESTION_KEYS),
            output=None if outputs is None or retriever else text_of(outputs, ANSWER_KEYS),
            documents=docs, case_key=_case_key({}, meta), line=line, where=where, bad_kind=bad_kind))
    return spans


def _doc_mapping(d: Any, *, source, line, where: str) -> dict:
    if isinstance(d, str):
        return {"text": d}
    if not isinstance(d, Mapping):
        raise InputError("expected a document object ({page_content, metadata})", source=source, line=line,
                         field=where)
    text = d.get("page_content", d.get("content", d.get("text")))
    if text is not None and not isinstance(text, str):
        raise InputError("expected the document text", source=source, line=line, field=f"{where}.page_content")
    meta = d.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise InputError("expected an object of metadata", source=source, line=line, field=f"{where}.metadata")
    return {"id": None if d.get("id") in (None, "") else str(d["id"]), "text": text, "score": d.get("score"),
            "metadata": dict(meta)}


def _mlflow(values: list[tuple[int, Any]], source: Path) -> list[Span]:
    """Each trace's spans, keyed by the trace's own id; a trace whose id an earlier, different trace
    has (other span ids) is kept apart as ``id#2``, ``id#3`` ... (a copy with the same span ids is a
    duplicate, read once)."""
    spans: list[Span] = []
    keys: dict[str, list[frozenset]] = {}
    for line, base, trace in _each(values):
        kw = {"source": source, "line": line}
        info = _need(trace, "info", Mapping, where=base, what="the trace info", **kw)
        data = _need(trace, "data", Mapping, where=base, what="the trace data", **kw)
        trace_meta = {}
        for key in ("tags", "trace_metadata"):
            if isinstance(info.get(key), Mapping):
                trace_meta.update(info[key])
        own = [_mlflow_span(sp, info, trace_meta, where=f"{base}data.spans[{i}].", **kw)
               for i, sp in enumerate(_need(data, "spans", list, where=f"{base}data.", what="the list of spans", **kw))]
        if not own:
            continue
        seen = keys.setdefault(own[0].trace_id, [])
        ids = frozenset(s.span_id for s in own)
        if ids not in seen:
            seen.append(ids)
        n = seen.index(ids) + 1
        for s in own:
            s.trace_id = s.trace_id if n == 1 else f"{s.trace_id}#{n}"
        spans.extend(own)
    return spans


def _mlflow_span(sp: Any, info: Mapping, trace_meta: Mapping, *, source, line, where: str) -> Span:
    kw = {"source": source, "line": line}
    if not isinstance(sp, Mapping):
        raise InputError("expected a span object", field=where.rstrip("."), **kw)
    attrs = sp.get("attributes") or {}
    if not isinstance(attrs, Mapping):
        raise InputError("expected an object of attributes", field=f"{where}attributes", **kw)
    attrs = {k: _json_or_text(v) for k, v in attrs.items()}  # MLflow writes every attribute JSON-encoded
    kind = attrs.get("mlflow.spanType")
    retriever, bad_kind = _kind(sp.get("span_type") if kind is None or kind == "" else kind, "RETRIEVER")
    outputs = attrs.get("mlflow.spanOutputs")
    docs = None
    if retriever and outputs is not None:
        if isinstance(outputs, Mapping) and isinstance(outputs.get("documents"), list):
            outputs = outputs["documents"]
        if not isinstance(outputs, list):
            raise InputError("a RETRIEVER span's outputs must be a list of documents ({page_content, metadata, id})",
                             field=f"{where}attributes.mlflow.spanOutputs", **kw)
        docs = [dict(_doc_mapping(d, where=f"{where}attributes.mlflow.spanOutputs[{i}]", **kw), position=i)
                for i, d in enumerate(outputs)]
    trace_id = info.get("trace_id") or info.get("request_id")
    return Span(trace_id=_span_id(trace_id, field="info.trace_id", **kw),
                span_id=_span_id(sp.get("span_id"), field=f"{where}span_id", **kw),
                parent_id=_span_id(sp.get("parent_span_id") or sp.get("parent_id"), field=f"{where}parent_span_id",
                                   optional=True, **kw),
                name=sp.get("name"), retriever=retriever,
                start=_time_ns(sp.get("start_time_unix_nano", sp.get("start_time_ns")),
                               field=f"{where}start_time_unix_nano", **kw),
                input=text_of(attrs.get("mlflow.spanInputs"), QUESTION_KEYS),
                output=None if retriever else text_of(outputs, ANSWER_KEYS), documents=docs,
                case_key=_case_key(attrs, trace_meta), line=line, where=where, bad_kind=bad_kind)


def detect_format(first: Any) -> str | None:
    """The format of a JSON trace file from its first value (None when it is none of them).

    Example:
        >>> detect_format({"resourceSpans": []}), detect_format([{"run_type": "chain", "id": "x"}])
        ('otlp', 'langsmith')
    """
    if isinstance(first, list):
        return detect_format(first[0]) if first else None
    if not isinstance(first, Mapping):
        return None
    if "resourceSpans" in first:
        return "otlp"
    if "runs" in first or "run_type" in first:
        return "langsmith"
    if "info" in first and "data" in first:
        return "mlflow"
    if isinstance(first.get("context"), Mapping) and "span_id" in first["context"]:
        return "console"
    return None


PROTO_SUFFIXES = (".pb", ".binpb", ".proto")  #: OTLP protobuf files (the collector's file exporter, ``format: proto``)
PROGRESS_MIN_BYTES = 8 * 2**20  #: a trace file at least this big shows a progress bar while it is read


@contextmanager
def _reading(path: Path, quiet: bool) -> Iterator[Callable[[int], None]]:
    """``advance(bytes)`` of a bar over the file's size on stderr (none when ``quiet`` or the file
    is small)."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    if quiet or size < PROGRESS_MIN_BYTES:
        yield _nothing
        return
    from rankwise.progress import progress

    with progress(f"reading {path.name} (bytes)", size) as advance:
        yield advance


def _starts_with_nul(path: Path) -> bool:
    """A first byte 0: no JSON text starts so; a length-prefixed protobuf message under 16 MiB does.
    """
    try:
        with open(path, "rb") as fh:
            return fh.read(1) == b"\0"
    except OSError:
        return False  # the reader names the error


def _fixed32_frames(data: bytes) -> list[tuple[int, bytes]] | None:
    """Messages each after its length as 4 bytes big-endian (the collector's file exporter,
    ``format: proto``)."""
    out, i = [], 0
    while i < len(data):
        n = int.from_bytes(data[i:i + 4], "big")
        if i + 4 > len(data) or n == 0 or i + 4 + n > len(data):
            return None
        out.append((i, data[i + 4:i + 4 + n]))
        i += 4 + n
    return out


def _varint_frames(data: bytes) -> list[tuple[int, bytes]] | None:
    """Messages each after its length as a varint (protobuf's delimited streams: the OTLP
    file-exporter spec)."""
    out, i = [], 0
    while i < len(data):
        start, n, shift = i, 0, 0
        while True:
            if i >= len(data) or shift > 63:
                return None
            n |= (data[i] & 0x7F) << shift
            shift, i = shift + 7, i + 1
            if not data[i - 1] & 0x80:
                break
        if n == 0 or i + n > len(data):
            return None
        out.append((start, data[i:i + n]))
        i += n
    return out


def _otlp_proto(path: Path, advance: Callable[[int], None]) -> list[Span]:
    """OTLP protobuf: an ``ExportTraceServiceRequest`` (or ``TracesData``, the same bytes) alone, or
    several each after its length (4 bytes big-endian, or a varint). Read as its JSON mapping is; a
    message's number (from 1) stands where a JSON file's line would."""
    try:
        from google.protobuf.json_format import MessageToDict
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:
        raise InputError('reading OTLP protobuf needs opentelemetry-proto: pip install "rankwise[traces]"',
                         source=path) from None

    def parsed(frames: list[tuple[int, bytes]]) -> list | str:
        messages = []
        for k, (at, raw) in enumerate(frames, start=1):
            try:
                messages.append(ExportTraceServiceRequest.FromString(raw))
            except (DecodeError, RuntimeError, ValueError) as exc:
                return f"message {k} (byte {at}): {str(exc) or type(exc).__name__}"
        return messages

    data = read_bytes(path)
    whole = [(0, data)]
    framings = [f for f in ([whole] if data[:1] == b"\n" else []) + [_fixed32_frames(data), _varint_frames(data)]
                if f is not None]
    failed = None  # the first framing that covers the file but holds a bad message: its error names the message
    for frames in framings:
        messages = parsed(frames)
        if isinstance(messages, list) and all(m.resource_spans for m in messages):
            break
        failed = failed or (messages if isinstance(messages, str) and len(frames) > 1 else None)
    else:
        messages, frames = parsed(whole), whole
        if isinstance(messages, str):
            raise InputError("not an OTLP protobuf trace export (an ExportTraceServiceRequest, alone or each after its "
                             f"length): {failed or messages.split(': ', 1)[-1]}", source=path)
    ends = [at for at, _ in frames[1:]] + [len(data)]
    values = []
    for k, (m, (at, _), end) in enumerate(zip(messages, frames, ends, strict=True), start=1):
        values.append((k, MessageToDict(m)))
        advance(end - at)
    return _otlp(values, path)


def read_spans(path: str | Path, fmt: str = "auto", *, quiet: bool = True) -> tuple[list[Span], str]:
    """The spans of a trace file and the format they were read as (a file of
    :data:`PROGRESS_MIN_BYTES` or more shows a progress bar on stderr unless ``quiet``).

    Example:
        >>> import json, tempfile, os
        >>> f = os.path.join(tempfile.mkdtemp(), "t.json")
        >>> _ = open(f, "w").write(
        ...     json.dumps(
        ...         {
        ...             "resourceSpans": [
        ...                 {
        ...                     "scopeSpans": [
        ...                         {
        ...                             "spans": [
        ...                                 {
        ...                                     "traceId": "5d27cd8d41ef33f30305e646ad80c2aa",
        ...                                     "spanId": "fbd159065a44841f",
        ...                                     "attributes": [
        ...                                         {
        ...                                             "key": "openinference.span.kind",
        ...                                             "value": {"stringValue": "RETRIEVER"},
        ...                                         }
        ...                                     ],
        ...                                 }
        ...                             ]
        ...                         }
        ...                     ]
        ...                 }
        ...             ]
        ...         }
        ...     )
        ... )
        >>> spans, fmt = read_spans(f)
        >>> fmt, spans[0].retriever, spans[0].documents
        ('otlp', True, None)
    """
    path = Path(path)
    if fmt not in TRACE_FORMATS:
        raise InputError(f"trace format must be one of {list(TRACE_FORMATS)}, not {fmt!r}", field="--format")
    if fmt == "phoenix" or (fmt == "auto" and path.suffix.lower() == ".parquet"):
        return _phoenix(path), "phoenix"
    if fmt in ("auto", "otlp") and (path.suffix.lower() in PROTO_SUFFIXES or _starts_with_nul(path)):
        with _reading(path, quiet) as advance:
            return _otlp_proto(path, advance), "otlp"
    with _reading(path, quiet) as advance:
        values = _json_values(path, advance)
    if not values:
        raise InputError("file has no JSON value", source=path)
    found = fmt if fmt != "auto" else detect_format(values[0][1])
    if found is None:
        raise InputError("not a trace export rankwise knows: expected OTLP JSON (resourceSpans), console-exporter "
                         "spans (context.span_id), LangSmith runs (run_type) or MLflow traces (info, data.spans), "
                         "or a Phoenix span dataframe as .parquet; name it with --format", source=path,
                         line=values[0][0])
    reader = {"otlp": _otlp, "console": _console, "langsmith": _langsmith, "mlflow": _mlflow}[found]
    return reader(values, path), found
