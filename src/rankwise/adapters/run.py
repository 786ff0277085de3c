"""``run_retriever``: run any framework's retriever over a test set and keep what rank-aware
evaluation needs.

Nothing here imports LangChain, LlamaIndex or Haystack: the retriever is recognised by what it has.

What is recognised, how ids and offsets are resolved, the depth and retries: docs/adapters.md.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.data.ids import ID_STRATEGIES, looks_random, normalise_text
from rankwise.data.items import RawItem, item_chunk, to_item
from rankwise.data.questions import records_queries
from rankwise.data.records import CaseRecord, ChunkRecord, write_records
from rankwise.errors import (
    InputError,
    RetrieverDepthWarning,
    RetrieverRandomIdWarning,
    RetrieverShortListWarning,
)

__all__ = ["AdapterRun", "run_retriever", "build_retriever", "detect", "retriever_depth",
           "RetrieverRandomIdWarning", "RetrieverShortListWarning", "RetrieverDepthWarning", "short_list_warning",
           "item_chunk", "failure_kinds", "failure_line"]

DEFAULT_K = 10  # chunks per question when neither the caller nor the retriever says how many


# -------------------------------------------------------------------------------------------
# detection


def _module(obj: Any) -> str:
    return (type(obj).__module__ or "").split(".")[0]


def detect(retriever: Any) -> str:
    """Which kind of retriever this is: ``langchain-vectorstore``, ``langchain``, ``llamaindex``,
    ``haystack-pipeline``, ``haystack-component`` or ``callable``.

    Example:
        >>> detect(lambda q: ["a chunk"])
        'callable'
    """
    vs = getattr(retriever, "vectorstore", None)
    if (vs is not None and hasattr(vs, "similarity_search_with_score")
            and getattr(retriever, "search_type", "similarity") == "similarity"):
        return "langchain-vectorstore"
    if hasattr(retriever, "similarity_search_with_score"):
        return "langchain-vectorstore"
    if hasattr(retriever, "invoke") and hasattr(retriever, "batch"):
        return "langchain"
    if hasattr(retriever, "aretrieve") or (hasattr(retriever, "retrieve") and _module(retriever) == "llama_index"):
        return "llamaindex"
    if hasattr(retriever, "run") and hasattr(retriever, "inputs") and hasattr(retriever, "add_component"):
        return "haystack-pipeline"
    if hasattr(retriever, "run") and (hasattr(retriever, "__haystack_input__") or _module(retriever) == "haystack"):
        return "haystack-component"
    if hasattr(retriever, "retrieve") and callable(retriever.retrieve):
        return "llamaindex"
    if callable(retriever):
        return "callable"
    raise InputError(f"cannot use a {type(retriever).__name__} as a retriever: expected a LangChain retriever or "
                     "vector store, a LlamaIndex retriever, a Haystack Pipeline or retriever component, or a "
                     "callable query -> list of items", field="retriever")


def _accepts(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _haystack_docs(out: Any, output: str | None) -> list:
    if not isinstance(out, Mapping):
        raise TypeError(f"the Haystack pipeline returned {type(out).__name__}, not a dict of outputs")
    if output is not None:
        if output not in out:
            raise KeyError(f"no output from component {output!r} (outputs: {sorted(out)})")
        return list(out[output].get("documents") or [])
    found = [name for name, v in out.items() if isinstance(v, Mapping) and "documents" in v]
    if not found:
        raise KeyError(f"no component output holds 'documents' (outputs: {sorted(out)}); name one with output=")
    if len(found) > 1:
        raise KeyError(f"several outputs hold documents ({found}); name the one to score with output=")
    return list(out[found[0]]["documents"] or [])


def _sync_call(retriever: Any, kind: str, k: int, output: str | None, own: int | None = None) -> Callable[[str], list]:
    """One query's call. A retriever with its own depth (``own``) is asked as it is configured, in
    production; one without is asked for ``k`` where it takes a depth."""
    if kind == "langchain-vectorstore":
        vs = getattr(retriever, "vectorstore", None) or retriever
        kwargs = dict(getattr(retriever, "search_kwargs", None) or {}) if vs is not retriever else {}
        kwargs["k"] = own if own is not None else k  # a retriever's own search_kwargs k, else k
        return lambda q: vs.similarity_search_with_score(q, **kwargs)
    if kind == "langchain":
        return lambda q: retriever.invoke(q)
    if kind == "llamaindex":
        return lambda q: retriever.retrieve(q)
    if kind == "haystack-pipeline":
        inputs = retriever.inputs()
        wanted = {c: names for c, names in inputs.items() if "query" in names}
        if not wanted:
            raise InputError(f"no component of the Haystack pipeline takes a 'query' input (inputs: {inputs})",
                             field="retriever")

        def call(q):
            data = {c: {"query": q, **({"top_k": k} if "top_k" in names and own is None else {})}
                    for c, names in wanted.items()}
            return _haystack_docs(retriever.run(data), output)

        return call
    if kind == "haystack-component":
        top = own is None and _accepts(retriever.run, "top_k")
        return lambda q: _haystack_docs({"c": retriever.run(query=q, **({"top_k": k} if top else {}))}, "c")
    return lambda q: retriever(q)


# ---------------------------------------------------------------------------------------------
# running


@dataclass
class _Outcome:
    raw: list | None = None
    error: str | None = None
    attempts: int = 0
    latency_ms: float | None = None


def _with_timeout(fn: Callable[[str], Any], q: str, timeout: float | None) -> Any:
    if timeout is None:
        return fn(q)
    box: dict[str, Any] = {}

    def target():
        try:
            box["value"] = fn(q)
        except BaseException as exc:  # noqa: BLE001 - carried to the caller
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise TimeoutError(f"no answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


class _NotAList(TypeError):
    """The retriever answered, with something that is not a list of items (not retried: it would
    again)."""


def _as_list(value: Any) -> list:
    if value is None or isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise _NotAList(f"the retriever returned {type(value).__name__}, not a list of items")
    return list(value)


def build_retriever(factory: Callable[[], Any], name: str | None = None) -> Any:
    """``factory()``; whatever it raises (``SystemExit`` too) becomes one :class:`InputError` line.

    Example:
        >>> build_retriever(lambda: 1 / 0, "my_rag:build")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        rankwise.errors.InputError: <input>: field 'retriever': my_rag:build raised ZeroDivisionError: ...
    """
    if name is None:  # module:function, as given on the command line
        qualname = getattr(factory, "__qualname__", None)
        name = f"{getattr(factory, '__module__', '?')}:{qualname}" if qualname else "the retriever factory"
    try:
        return factory()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code: one line, never a traceback
        raise InputError(f"{name} raised {_describe(exc)} while building the retriever",
                         field="retriever") from None


def _run_sync(fn, queries: list[str], *, concurrency: int, retries: int, backoff: float,
              timeout: float | None, on_done: Callable[[], None]) -> list[_Outcome]:
    def one(q: str) -> _Outcome:
        out = _Outcome()
        for attempt in range(retries + 1):
            out.attempts = attempt + 1
            t0 = time.perf_counter()
            try:
                out.raw = _as_list(_with_timeout(fn, q, timeout))
                out.latency_ms = (time.perf_counter() - t0) * 1000
                out.error = None
                break
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - every failure is recorded, never raised
                out.latency_ms = (time.perf_counter() - t0) * 1000
                out.error = _describe(exc)
                if isinstance(exc, _NotAList):
                    break
                if attempt < retries:
                    time.sleep(backoff * (2 ** attempt))
        on_done()
        return out

    if concurrency <= 1 or len(queries) <= 1:
        return [one(q) for q in queries]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(queries))) as pool:
        return list(pool.map(one, queries))


def _run_async(afn, queries: list[str], *, concurrency: int, retries: int, backoff: float,
               timeout: float | None, on_done: Callable[[], None]) -> list[_Outcome]:
    async def main():
        sem = asyncio.Semaphore(max(1, concurrency))

        async def one(q: str) -> _Outcome:
            out = _Outcome()
            async with sem:
                for attempt in range(retries + 1):
                    out.attempts = attempt + 1
                    t0 = time.perf_counter()
                    try:
                        value = await asyncio.wait_for(afn(q), timeout) if timeout else await afn(q)
                        out.raw = _as_list(value)
                        out.latency_ms = (time.perf_counter() - t0) * 1000
                        out.error = None
                        break
                    except (Exception, SystemExit) as exc:  # noqa: BLE001
                        out.latency_ms = (time.perf_counter() - t0) * 1000
                        out.error = _describe(exc) if not isinstance(exc, asyncio.TimeoutError) \
                            else f"TimeoutError: no answer within {timeout:g} s"
                        if isinstance(exc, _NotAList):
                            break
                        if attempt < retries:
                            await asyncio.sleep(backoff * (2 ** attempt))
            on_done()
            return out

        return await asyncio.gather(*(one(q) for q in queries))

    return list(asyncio.run(main()))


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


# ------------------------------------------------------------------------------------------ the
# result


@dataclass
class AdapterRun:
    """What :func:`run_retriever` gives: per-case records and a summary.

    Attributes:
        records: one :class:`~rankwise.data.records.CaseRecord` per case, in test-set order, chunks
            in rank order (id, text, doc_id, start, end, score) and ``extra["retrieval"]``:
            ``status`` ("ok" or "failed: ..."), ``attempts``, ``latency_ms``, ``returned`` (items
            before the cut at k), ``duplicates`` (ranks repeating an earlier chunk) and per rank
            ``items``: ``native_id``, ``id_from`` (the id rule used) and ``metadata``.
        summary: ``retriever`` (kind), ``k`` (the depth evaluated), ``asked_k`` (the caller's, None
            when unset), ``retriever_k`` (the retriever's own depth, None without one), ``cases``,
            ``failed`` (+ ``failed_cases``), ``id_strategy`` (chunks per id rule), ``random_ids``,
            ``duplicates``, ``no_offsets``, ``short_lists`` (questions that got fewer than k
            chunks), latency (ms) ``mean``, ``p50``, ``p95``, ``max``, ``seconds``.
        warnings: what should be fixed (random ids, missing offsets, k asked deeper than the
            retriever goes, lists shorter than k), each with the fix.
    """

    records: list[CaseRecord]
    summary: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def write_records(self, path: str | PathLike) -> Path:
        """Write the records as JSON Lines (``rankwise eval-rag`` scores the file as it is)."""
        return write_records(self.records, path)

    def evaluate(self, relevance: str = "span", **options: Any):
        """Score the run with :func:`rankwise.evaluate_rag` (``span`` by default: the adapters'
        offsets)."""
        from rankwise.metrics.rag import evaluate_rag

        return evaluate_rag(self.records, relevance, **options)

    def ids(self, case_id: str) -> list[str | None]:
        """The chunk ids retrieved for one case, best first."""
        for r in self.records:
            if r.id == case_id:
                return [c.id for c in r.chunks]
        raise KeyError(case_id)


def _json_safe(value: Any, depth: int = 0) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth < 4 and isinstance(value, Mapping):
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if depth < 4 and isinstance(value, (list, tuple)):
        return [_json_safe(v, depth + 1) for v in value]
    return str(value)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _check_run_options(k: int | None, concurrency: int, id_strategy: str, id_key: str | None) -> None:
    """``run_retriever``'s settings checked: a bad one raises :class:`InputError` naming it."""
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise InputError(f"k must be a whole number >= 1, got {k!r}", field="k")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InputError(f"concurrency must be a whole number >= 1, got {concurrency!r}", field="concurrency")
    if id_strategy not in ID_STRATEGIES:
        raise InputError(f"id_strategy must be one of {list(ID_STRATEGIES)}, not {id_strategy!r}",
                         field="id_strategy")
    if id_strategy == "id_key" and not id_key:
        raise InputError("id_strategy 'id_key' needs id_key (the metadata field holding the chunk id)",
                         field="id_key")


def _retrieve_all(retriever: Any, kind: str, queries: list[str], k: int, output: str | None, *, concurrency: int,
                  retries: int, backoff: float, timeout: float | None, progress: bool,
                  own: int | None = None) -> list[_Outcome]:
    """Every query asked of the retriever (async for a LlamaIndex ``aretrieve`` outside a running
    loop)."""
    from rankwise.progress import progress as progress_bar

    lock = threading.Lock()
    with progress_bar(f"retrieving ({kind})", len(queries), quiet=not progress, eta=True) as advance:
        def done():
            with lock:
                advance(1)

        common = dict(concurrency=concurrency, retries=retries, backoff=backoff, timeout=timeout, on_done=done)
        if kind == "llamaindex" and hasattr(retriever, "aretrieve") and not _loop_running():
            return _run_async(retriever.aretrieve, queries, **common)
        return _run_sync(_sync_call(retriever, kind, k, output, own), queries, **common)


@dataclass
class _Tally:
    """What ``run_retriever`` counts over the chunks of every case."""

    strategies: Counter = field(default_factory=Counter)
    random_native: int = 0
    duplicates: int = 0
    no_offsets: int = 0
    bad_offsets: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    short: list[tuple[str, int]] = field(default_factory=list)  # (case, chunks returned) where fewer than k came


def _attach_chunks(rec: CaseRecord, out: _Outcome, kind: str, k: int, tally: _Tally, *, doc_id_key: str | None,
                   id_strategy: str, id_key: str | None) -> None:
    """One query's outcome onto its record: chunks with resolved ids and offsets,
    ``extra["retrieval"]``."""
    info: dict[str, Any] = {"status": "ok", "attempts": out.attempts,
                            "latency_ms": None if out.latency_ms is None else round(out.latency_ms, 3),
                            "retriever": kind}
    items: list[RawItem] = []
    if out.error is None:
        try:
            items = [to_item(x) for x in (out.raw or [])]
        except TypeError as exc:
            out.error = _describe(exc)
    if out.error is not None:
        info["status"] = f"failed: {out.error}"
        tally.failed[rec.id] = out.error
        rec.extra["retrieval"] = info
        return
    info["returned"] = len(items)
    if len(items) < k:
        tally.short.append((rec.id, len(items)))
    chunk_records: list[ChunkRecord] = []
    meta_rows: list[dict] = []
    seen: dict[str, int] = {}
    dups: list[int] = []
    for rank, it in enumerate(items[:k], start=1):
        chunk, rule, bad = item_chunk(it, rank, doc_id_key=doc_id_key, id_strategy=id_strategy, id_key=id_key)
        if bad:
            tally.bad_offsets.append(f"{rec.id} rank {rank}: {bad}")
        if chunk.start is None:
            tally.no_offsets += 1
        if looks_random(it.native_id):
            tally.random_native += 1
        tally.strategies[rule] += 1
        key = chunk.id if chunk.id is not None else f"text:{normalise_text(it.text or '')}"
        if key in seen:
            dups.append(rank)
        else:
            seen[key] = rank
        chunk_records.append(chunk)
        meta_rows.append({"native_id": it.native_id, "id_from": rule, "metadata": _json_safe(it.metadata)})
    tally.duplicates += len(dups)
    rec.chunks = chunk_records
    info["duplicates"] = dups
    info["items"] = meta_rows
    rec.extra["retrieval"] = info


def _id_warnings(kind: str, id_strategy: str, tally: _Tally) -> list[str]:
    """The warnings about the chunks' ids and offsets (random ids first, when there are any)."""
    n_chunks = sum(tally.strategies.values())
    warn: list[str] = []
    if tally.random_native:
        fix = {"langchain-vectorstore": "add documents with ids=[...] (e.g. f\"{source}#{start_index}\") or keep "
                                        "metadata['start_index'] via add_start_index=True",
               "langchain": "give documents stable ids, or keep metadata['start_index'] via add_start_index=True",
               "llamaindex": "give the node parser an id_func (e.g. lambda i, doc: f\"{doc.doc_id}#{i}\") and "
                             "set Document(doc_id=...)"}.get(kind, "give chunks stable ids")
        used = ("offsets/text hashes were used instead" if id_strategy == "auto"
                else "they were kept as ids (id_strategy='id'): scores by id will not survive a rerun")
        warn.append(f"{tally.random_native} of {n_chunks} chunk ids look like random uuids, which change on every "
                    f"run; {used}. Fix: {fix}, or pass id_key='<metadata field>'.")
    if tally.no_offsets and n_chunks:
        warn.append(f"{tally.no_offsets} of {n_chunks} chunks carry no start offset, so span verdicts cannot score "
                    "them; LangChain: split with add_start_index=True; LlamaIndex: nodes keep start_char_idx; "
                    "Haystack: DocumentSplitter sets split_idx_start.")
    if tally.bad_offsets:
        warn.append(f"{len(tally.bad_offsets)} of {n_chunks} chunks carry impossible offsets (negative, or end "
                    f"before start; first: {tally.bad_offsets[0]}); they are kept without offsets, so span "
                    "verdicts cannot score them")
    return warn


def failure_kinds(failed: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Failed cases counted by exception type, each with the first case and its message, most
    frequent first.

    Example:
        >>> failure_kinds(
        ...     {"q1": "ValueError: no index", "q2": "ValueError: no index", "q3": "TimeoutError"}
        ... )
        {'ValueError': {'cases': 2, 'first_case': 'q1', 'message': 'ValueError: no index'}, \
'TimeoutError': {'cases': 1, 'first_case': 'q3', 'message': 'TimeoutError'}}
    """
    kinds: dict[str, dict[str, Any]] = {}
    for case, error in failed.items():
        kind = error.split(":", 1)[0].strip() or "error"
        entry = kinds.setdefault(kind, {"cases": 0, "first_case": case, "message": error})
        entry["cases"] += 1
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1]["cases"]))


def failure_line(summary: Mapping[str, Any]) -> str | None:
    """One line for the failed cases of a run's summary: how many, by exception type, with the first
    message.

    Example:
        >>> failure_line(
        ...     {
        ...         "cases": 30,
        ...         "failed": 1,
        ...         "failure_kinds": failure_kinds({"q1": "ValueError: boom"}),
        ...     }
        ... )
        "1 of 30 cases failed: ValueError (1, first case 'q1': ValueError: boom)"
    """
    kinds = summary.get("failure_kinds") or {}
    if not summary.get("failed"):
        return None
    parts = [f"{kind} ({k['cases']}, first case {k['first_case']!r}: {k['message']})" for kind, k in kinds.items()]
    return f"{summary['failed']} of {summary.get('cases')} cases failed: " + "; ".join(parts)


def _run_summary(kind: str, depth: _Depth, n_cases: int, tally: _Tally, outcomes: list[_Outcome],
                 seconds: float) -> dict[str, Any]:
    """``AdapterRun.summary``: counts, the id rules used, timings and latency percentiles."""
    latencies = [o.latency_ms for o in outcomes if o.error is None and o.latency_ms is not None]
    return {
        "retriever": kind, "k": depth.k, "asked_k": depth.asked, "retriever_k": depth.own, "cases": n_cases,
        "failed": len(tally.failed), "failed_cases": tally.failed, "failure_kinds": failure_kinds(tally.failed),
        "chunks": sum(tally.strategies.values()), "id_strategy": dict(tally.strategies),
        "random_ids": tally.random_native, "duplicates": tally.duplicates, "no_offsets": tally.no_offsets,
        "bad_offsets": len(tally.bad_offsets), "short_lists": len(tally.short),
        "seconds": round(seconds, 4),
        "latency_ms": {"mean": round(sum(latencies) / len(latencies), 3) if latencies else None,
                       "p50": _round(_percentile(latencies, 0.5)), "p95": _round(_percentile(latencies, 0.95)),
                       "max": _round(max(latencies) if latencies else None)},
    }


def run_retriever(retriever: Any, testset: Any, k: int | None = None, concurrency: int = 8, *,
                  id_key: str | None = None, doc_id_key: str | None = None, id_strategy: str = "auto", retries: int = 2,
                  backoff: float = 0.5, timeout: float | None = 120.0, output: str | None = None,
                  progress: bool = False) -> AdapterRun:
    """Run a LangChain, LlamaIndex or Haystack retriever (or any callable) over every question of a
    test set.

    Args:
        retriever: see the module docstring for what is recognised.
        testset: a RAG test set (path, rows, :class:`~rankwise.data.testset.TestSet`), records, or a
            mapping ``{case_id: question}``. Ground truth (reference passages with offsets,
            reference ids) is kept.
        k: chunks kept per question. Default: the retriever's own depth, as it runs in production
            (LangChain ``search_kwargs["k"]``, LlamaIndex ``similarity_top_k``, Haystack ``top_k``;
            see :func:`retriever_depth`), else 10. A retriever with its own depth is run as
            configured and cut at k; a k deeper than its own depth is evaluated at its own depth,
            with one :class:`RetrieverDepthWarning` naming both. Bare vector stores and Haystack
            retrievers without a ``top_k`` are asked for k.
        concurrency: questions in flight at once.
        id_key: a metadata field holding a stable chunk id (rule 2 of :mod:`rankwise.data.ids`).
        doc_id_key: a metadata field holding the document id (tried before ``doc_id``, ``source``,
            ...).
        id_strategy: ``auto`` (the order of :mod:`rankwise.data.ids`) or one rule forced:
            ``id``, ``id_key``, ``offset``, ``text``.
        retries: extra attempts per question after a failure (backoff ``backoff * 2**attempt``
            seconds).
        timeout: seconds one attempt may take (None: no limit).
        output: Haystack pipeline: the component whose ``documents`` are scored, when several give
            some.
        progress: show a progress bar on stderr.

    Example:
        >>> chunks = {"a": "Paris is the capital of France.", "b": "Rome is in Italy."}
        >>> def search(q):
        ...     return [{"id": i, "text": t, "score": float(len(set(q.split()) & set(t.split())))}
        ...             for i, t in chunks.items()]
        >>> run = run_retriever(search, {"q1": "capital of France"}, k=1)
        >>> [c.id for c in run.records[0].chunks], run.summary["failed"]
        (['a'], 0)
    """
    _check_run_options(k, concurrency, id_strategy, id_key)
    kind = detect(retriever)
    records = records_queries(testset)
    if not records:
        raise InputError("the test set holds no case", field="testset")
    depth = _depth(retriever, kind, k, output)
    t0 = time.perf_counter()
    outcomes = _retrieve_all(retriever, kind, [r.question for r in records], depth.k, output,
                             concurrency=concurrency, retries=retries, backoff=backoff, timeout=timeout,
                             progress=progress, own=depth.own)
    seconds = time.perf_counter() - t0
    tally = _Tally()
    for rec, out in zip(records, outcomes, strict=True):
        _attach_chunks(rec, out, kind, depth.k, tally, doc_id_key=doc_id_key, id_strategy=id_strategy,
                       id_key=id_key)
    warn = _id_warnings(kind, id_strategy, tally)
    if tally.random_native:
        warnings.warn(warn[0], RetrieverRandomIdWarning, stacklevel=2)
    if depth.message:
        warn.append(depth.message)
        warnings.warn(depth.message, RetrieverDepthWarning, stacklevel=2)
    short_message = short_list_warning(retriever, kind, depth.k, tally.short, len(records) - len(tally.failed))
    if short_message:
        warn.append(short_message)
        warnings.warn(short_message, RetrieverShortListWarning, stacklevel=2)
    return AdapterRun(records, _run_summary(kind, depth, len(records), tally, outcomes, seconds), warn)


# ------------------------------------------------------------------------- the retriever's own
# depth


def _whole(value: Any) -> int | None:
    """A depth setting's value when it is a whole number >= 1, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _attr(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001 - a property of the user's object that raises: no setting
        return None


def _langchain_default_k(vectorstore: Any) -> int | None:
    """The ``k`` a LangChain vector store searches when ``search_kwargs`` gives none (4 in
    LangChain)."""
    try:
        default = inspect.signature(vectorstore.similarity_search).parameters["k"].default
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return _whole(default)


def _haystack_scored_component(pipeline: Any, output: str | None) -> Any:
    """The component of a Haystack pipeline whose ``documents`` are scored (``output``, else the
    only one with a ``documents`` output among the pipeline's outputs), or None."""
    name = output
    if name is None:
        try:
            outputs = pipeline.outputs()
        except Exception:  # noqa: BLE001 - not a pipeline we can read: no own depth
            return None
        found = [c for c, sockets in (outputs or {}).items() if isinstance(sockets, Mapping) and "documents" in sockets]
        name = found[0] if len(found) == 1 else None
    if name is None:
        return None
    try:
        return pipeline.get_component(name)
    except Exception:  # noqa: BLE001 - no such component: the run says so, per question
        return None


def retriever_depth(retriever: Any, kind: str | None = None, output: str | None = None) -> tuple[int | None, str]:
    """The number of chunks the retriever returns per question as it is configured, and that setting
    as the user wrote it: LangChain ``search_kwargs["k"]`` (LangChain's default 4 without one; a
    retriever's own ``k``), LlamaIndex ``similarity_top_k``, Haystack ``top_k`` (of the component
    whose documents are scored). ``(None, "")`` for a bare vector store or a callable: they have no
    depth of their own.

    Example:
        >>> class Retriever:  # a LlamaIndex-like retriever
        ...     similarity_top_k = 4
        ...     def retrieve(self, q): return []
        >>> retriever_depth(Retriever())
        (4, 'similarity_top_k=4')
        >>> retriever_depth(lambda q: [])
        (None, '')
    """
    kind = kind or detect(retriever)
    if kind.startswith("langchain"):
        vs, kwargs = _attr(retriever, "vectorstore"), _attr(retriever, "search_kwargs")
        if vs is not None and isinstance(kwargs, Mapping):  # a VectorStoreRetriever, any search type
            if "k" in kwargs:
                own = _whole(kwargs["k"])
                return (own, f"search_kwargs={dict(kwargs)!r}") if own else (None, "")
            own = _langchain_default_k(vs)
            return (own, f"search_kwargs={dict(kwargs)!r}, LangChain's default k = {own}") if own else (None, "")
        own = _whole(_attr(retriever, "k")) if kind == "langchain" else None
        return (own, f"k={own}") if own else (None, "")
    if kind == "llamaindex":
        own = _whole(_attr(retriever, "similarity_top_k")) or _whole(_attr(retriever, "_similarity_top_k"))
        return (own, f"similarity_top_k={own}") if own else (None, "")
    if kind in ("haystack-component", "haystack-pipeline"):
        component = retriever if kind == "haystack-component" else _haystack_scored_component(retriever, output)
        own = _whole(_attr(component, "top_k")) if component is not None else None
        return (own, f"top_k={own}") if own else (None, "")
    return None, ""


@dataclass
class _Depth:
    """The depth a run is evaluated at (``k``), the caller's (``asked``), the retriever's own
    (``own``) and the warning when the caller asked deeper than the retriever goes."""

    k: int
    asked: int | None
    own: int | None
    setting: str = ""
    message: str | None = None


_RAISE = {"langchain": "search_kwargs={{'k': {k}}}", "langchain-vectorstore": "search_kwargs={{'k': {k}}}",
          "llamaindex": "similarity_top_k={k}", "haystack-component": "top_k={k}", "haystack-pipeline": "top_k={k}"}


def _depth(retriever: Any, kind: str, k: int | None, output: str | None) -> _Depth:
    """The depth to evaluate at: the retriever's own (as it runs in production) unless the caller
    asked for fewer; asked deeper, its own depth and a message naming both numbers."""
    own, setting = retriever_depth(retriever, kind, output)
    if own is None:
        return _Depth(k or DEFAULT_K, k, None)
    if k is None or k <= own:
        return _Depth(k or own, k, own, setting)
    fix = _RAISE.get(kind, "its own depth").format(k=k)
    if kind == "langchain" and setting.startswith("k="):
        fix = f"k={k}"
    message = (f"asked for k = {k} chunks per question, but the retriever returns at most {own} ({setting}): "
               f"evaluated at {own}, the depth it runs at in production, not at {k}. To evaluate deeper, "
               f"configure the retriever deeper ({fix}); to silence this, leave k (--depth) unset or ask for at "
               f"most {own}.")
    return _Depth(own, k, own, setting, message)


def _settings(retriever: Any, kind: str) -> str:
    """The retriever's own settings that cap or filter its list, as the user wrote them (or "")."""
    if kind.startswith("langchain"):
        search_type = getattr(retriever, "search_type", None)
        kwargs = getattr(retriever, "search_kwargs", None)
        parts = [f"search_type={search_type!r}"] if isinstance(search_type, str) else []
        if isinstance(kwargs, Mapping) and kwargs:
            parts.append(f"search_kwargs={dict(kwargs)!r}")
        return ", ".join(parts)
    top = getattr(retriever, "similarity_top_k", None) or getattr(retriever, "_similarity_top_k", None)
    if kind == "llamaindex" and isinstance(top, int):
        return f"similarity_top_k={top}"
    top = getattr(retriever, "top_k", None)
    return f"top_k={top}" if kind.startswith("haystack") and isinstance(top, int) else ""


_SHORT_FIX = {
    "langchain": "a LangChain retriever returns what its own settings allow ('score_threshold' for "
                 "search_type='similarity_score_threshold', 'fetch_k' and 'lambda_mult' for 'mmr', a filter), "
                 "up to its search_kwargs 'k'",
    "langchain-vectorstore": "the store holds fewer chunks than k, or a 'score_threshold' in search_kwargs "
                             "drops some",
    "llamaindex": "node postprocessors or a similarity cutoff drop nodes, or the index holds fewer than "
                  "similarity_top_k",
    "haystack-pipeline": "a ranker, filter or joiner in the pipeline drops documents, or the store holds fewer "
                         "than top_k",
    "haystack-component": "a filter drops documents, or the store holds fewer than top_k",
    "callable": "the callable returned fewer items",
}


def short_list_warning(retriever: Any, kind: str, k: int, short: list[tuple[str, int]], answered: int) -> str | None:
    """One message when some questions got fewer than ``k`` chunks (``short``: case id, chunks
    returned), naming the retriever's own cap where it has one, else None.

    Example:
        >>> short_list_warning(lambda q: [], "callable", 10, [("q1", 4), ("q2", 0)], 5)[:68]
        '2 of 5 questions got fewer than k = 10 chunks (shortest: 0, case q2)'
    """
    if not short:
        return None
    rid, n = min(short, key=lambda s: (s[1], str(s[0])))
    settings = _settings(retriever, kind)
    shown = f" ({settings})" if settings else ""
    return (f"{len(short)} of {answered} question{'s' if answered != 1 else ''} got fewer than k = {k} chunks "
            f"(shortest: {n}, case {rid}); ranks past a list's end count as not relevant. The retriever"
            f"{shown} caps or filters its list: {_SHORT_FIX.get(kind, _SHORT_FIX['callable'])}.")


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)

